/* The lock options every lock command shares: mode, codec, variant, ttl, wait,
 * clock offset and release margin, checked before any connection is made. */
#include <string.h>

#include "migrate/cli/cli.h"

const char *lb__cli_variant_name(lb_legacy_variant v) {
    return v == LB_LEGACY_SCRIPTED ? "scripted" : "wire";
}

static const char *value_of(const lb__cli_args *a, const lb__cli_optdef *opts,
                            const char *name) {
    int i = lb__cli_opt_index(opts, name);
    return i >= 0 ? a->opt[i] : NULL;
}

/* Only the legacy protocol exists in this version; the other modes are named so
 * that a script written for a later version fails with a clear message. */
static int read_mode(const lb__cli_args *a, const char *mode) {
    char shown[64];
    if (!mode || strcmp(mode, "legacy") == 0) return 0;
    lb__cli_printable(shown, sizeof shown, mode, strlen(mode));
    if (strcmp(mode, "compat") == 0 || strcmp(mode, "modern") == 0)
        lb__cli_usage(a, "--mode %s is not available in this version (only legacy)", shown);
    else
        lb__cli_usage(a, "unknown --mode \"%s\" (this version has legacy only)", shown);
    return -1;
}

static int read_codec(lb__cli_lockopts *out, const lb__cli_args *a, const char *spec) {
    char shown[160];
    if (!spec) spec = "ms";
    if (lb_codec_parse(&out->legacy.codec, spec) != LB_OK ||
        lb_codec_format(&out->legacy.codec, out->codec_spec, sizeof out->codec_spec) !=
            LB_OK) {
        lb__cli_printable(shown, sizeof shown, spec, strlen(spec));
        lb__cli_usage(a, "unknown --codec \"%s\" (ms, s, float, json or "
                      "json:field=NAME,unit=ns|us|ms|s,clock=epoch|mono)", shown);
        return -1;
    }
    return 0;
}

static int read_variant(lb__cli_lockopts *out, const lb__cli_args *a, const char *v) {
    char shown[64];
    if (!v || strcmp(v, "wire") == 0) out->legacy.variant = LB_LEGACY_WIRE;
    else if (strcmp(v, "scripted") == 0) out->legacy.variant = LB_LEGACY_SCRIPTED;
    else {
        lb__cli_printable(shown, sizeof shown, v, strlen(v));
        lb__cli_usage(a, "unknown --variant \"%s\" (wire or scripted)", shown);
        return -1;
    }
    return 0;
}

/* Reads an optional duration in milliseconds; absent leaves *out unchanged. */
static int read_ms(const lb__cli_args *a, const char *name, const char *v, int64_t min,
                   int64_t *out) {
    return v ? lb__cli_int(a, name, v, min, LB__CLI_MS_MAX, out) : 0;
}

int lb__cli_lockopts_read(lb__cli_lockopts *out, const lb__cli_args *a,
                          const lb__cli_optdef *opts, int64_t wait_ms) {
    memset(out, 0, sizeof *out);
    lb_legacy_options_init(&out->legacy);
    out->wait_ms = wait_ms;
    if (read_mode(a, value_of(a, opts, "--mode")) != 0 ||
        read_codec(out, a, value_of(a, opts, "--codec")) != 0 ||
        read_variant(out, a, value_of(a, opts, "--variant")) != 0 ||
        read_ms(a, "--ttl-ms", value_of(a, opts, "--ttl-ms"), 1, &out->legacy.ttl_ms) != 0 ||
        read_ms(a, "--wait-ms", value_of(a, opts, "--wait-ms"), 0, &out->wait_ms) != 0 ||
        read_ms(a, "--release-margin-ms", value_of(a, opts, "--release-margin-ms"), 0,
                &out->legacy.release_margin_ms) != 0)
        return -1;
    const char *offset = value_of(a, opts, "--clock-offset-ms");
    if (offset && lb__cli_int(a, "--clock-offset-ms", offset, -LB__CLI_MS_MAX,
                              LB__CLI_MS_MAX, &out->clock.offset_ms) != 0)
        return -1;
    out->legacy.clock = &out->clock;
    return 0;
}
