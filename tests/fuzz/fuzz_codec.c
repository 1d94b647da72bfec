/* Fuzz target for the legacy value codecs and codec specs: every value is
 * decoded by every codec, and whatever decodes must encode back to a value
 * that decodes to the same instant (byte for byte for the decimal forms);
 * every spec that parses must format to a spec that parses the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lockbridge/lockbridge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the run: libFuzzer keeps the input, a replaying test crashes on it. */
#define CHECK(cond) \
    do {            \
        if (!(cond)) abort(); \
    } while (0)

static const char *const specs[] = {
    "ms", "s", "float", "json", "json:unit=ms,clock=epoch", "json:field=expiry,unit=s",
};

static void round_trip(const lb_codec *c, const char *s, size_t len) {
    int64_t t = -1;
    int rc = lb_codec_decode(c, s, len, &t);
    CHECK(rc == LB_OK || rc == LB_EFOREIGN || rc == LB_EINVAL);
    if (rc != LB_OK) {
        CHECK(t == 0); /* reset on entry, never half-written */
        return;
    }
    CHECK(t >= 0);
    char buf[LB_VALUE_MAX];
    size_t n = 0;
    if (lb_codec_encode(c, t, buf, sizeof buf, &n) != LB_OK) return; /* a long JSON field */
    CHECK(n == strlen(buf));
    int64_t again = -1;
    CHECK(lb_codec_decode(c, buf, n, &again) == LB_OK && again == t);
    if (c->kind == LB_CODEC_MS || c->kind == LB_CODEC_SECONDS)
        CHECK(n == len && memcmp(buf, s, n) == 0);
}

static void spec(const uint8_t *data, size_t size) {
    char s[256], out[256], out2[256];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    lb_codec c, c2;
    if (lb_codec_parse(&c, s) != LB_OK) return;
    CHECK(lb_codec_format(&c, out, sizeof out) == LB_OK);
    CHECK(lb_codec_parse(&c2, out) == LB_OK);
    CHECK(lb_codec_format(&c2, out2, sizeof out2) == LB_OK);
    CHECK(strcmp(out, out2) == 0);
    round_trip(&c, (const char *)data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        lb_codec c;
        CHECK(lb_codec_parse(&c, specs[i]) == LB_OK);
        round_trip(&c, (const char *)data, size);
    }
    spec(data, size);
    return 0;
}
