/* The JSON legacy value {"expiryTime":N}: written by hand (the field name is
 * validated, the number exact), read with cJSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/internal.h"
#include "legacy/internal.h"

/* cJSON reads numbers as doubles, exact only up to 2^53. Values beyond that
 * cannot be compared safely and are reported as foreign. */
#define JSON_EXACT_MAX 9007199254740992.0

const char *lb__json_field(const lb_codec *c) {
    return c->field[0] ? c->field : "expiryTime";
}

int lb__json_encode(const lb_codec *c, int64_t t, char *buf, size_t cap, size_t *len) {
    if ((double)t > JSON_EXACT_MAX) return LB_EINVAL;
    int n = snprintf(buf, cap, "{\"%s\":%lld}", lb__json_field(c), (long long)t);
    if (n < 0 || (size_t)n >= cap) return LB_EINVAL;
    *len = (size_t)n;
    return LB_OK;
}

/* A field may appear once: with duplicates, which one a reader honours depends
 * on its parser, so the value's meaning is not ours to decide. */
static int count_fields(const cJSON *obj, const char *name) {
    int n = 0;
    for (const cJSON *it = obj->child; it; it = it->next)
        if (it->string && strcmp(it->string, name) == 0) n++;
    return n;
}

int lb__json_decode(const lb_codec *c, const char *s, size_t len, int64_t *t) {
    /* cJSON stops at a NUL; a value with an embedded NUL is not JSON text. */
    if (len == 0 || memchr(s, '\0', len)) return LB_EFOREIGN;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(s, len, &end, 0);
    int rc = LB_EFOREIGN;
    if (!root) return LB_EFOREIGN;
    if (end != s + len) goto out; /* trailing bytes */
    if (!cJSON_IsObject(root)) goto out;
    const char *name = lb__json_field(c);
    if (count_fields(root, name) != 1) goto out;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!cJSON_IsNumber(f)) goto out;
    double d = f->valuedouble;
    if (!(d >= 0 && d <= JSON_EXACT_MAX) || floor(d) != d) goto out;
    *t = (int64_t)d;
    rc = LB_OK;
out:
    cJSON_Delete(root);
    return rc;
}
