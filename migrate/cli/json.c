/* JSON event lines on stdout, built with cJSON. Byte strings and 64-bit integers
 * are added as raw JSON text, since cJSON would pass invalid UTF-8 through and
 * store numbers as doubles (a nanosecond instant does not fit in 53 bits). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate/cli/cli.h"

cJSON *lb__cli_event(const char *event) {
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "event", event)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* A quoted JSON string for arbitrary bytes. Every byte outside printable ASCII
 * becomes \u00XX, even when it is part of valid UTF-8: the output is then always
 * valid JSON and the mapping is reversible byte for byte (code point = byte). */
static char *quote_bytes(const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    if (len > (SIZE_MAX - 3) / 6) return NULL;
    char *out = malloc(len * 6 + 3), *p = out;
    if (!out) return NULL;
    *p++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            *p++ = (char)c;
        } else if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else {
            memcpy(p, "\\u00", 4);
            p[4] = hex[c >> 4];
            p[5] = hex[c & 15];
            p += 6;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

int lb__cli_add_bytes(cJSON *o, const char *name, const char *s, size_t len) {
    char *raw = quote_bytes(s, len);
    if (!raw) return -1;
    int rc = cJSON_AddRawToObject(o, name, raw) ? 0 : -1;
    free(raw);
    return rc;
}

int lb__cli_add_str(cJSON *o, const char *name, const char *s) {
    return lb__cli_add_bytes(o, name, s, strlen(s));
}

int lb__cli_add_i64(cJSON *o, const char *name, int64_t v) {
    char raw[24];
    snprintf(raw, sizeof raw, "%" PRId64, v);
    return cJSON_AddRawToObject(o, name, raw) ? 0 : -1;
}

/* Milliseconds rounded to the microsecond, so that lines stay short. */
int lb__cli_add_ms(cJSON *o, const char *name, double ms) {
    return cJSON_AddNumberToObject(o, name, round(ms * 1000.0) / 1000.0) ? 0 : -1;
}

int lb__cli_add_bool(cJSON *o, const char *name, int v) {
    return cJSON_AddBoolToObject(o, name, v) ? 0 : -1;
}

int lb__cli_emit(cJSON *o) {
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "lockbridge: out of memory while writing output\n");
        return -1;
    }
    int rc = printf("%s\n", text) < 0 || fflush(stdout) != 0 ? -1 : 0;
    free(text);
    return rc;
}

int lb__cli_error(const lb__cli_args *a, const char *key, int status, const char *detail) {
    char shown[512];
    lb__cli_printable(shown, sizeof shown, detail, strlen(detail));
    fprintf(stderr, "%s: %s\n", a->prog, shown);
    cJSON *o = lb__cli_event("error");
    if (o && key) lb__cli_add_str(o, "key", key);
    if (o) lb__cli_add_str(o, "status", lb_err_name(status));
    if (o) lb__cli_add_str(o, "detail", detail);
    lb__cli_emit(o);
    return LB__CLI_EXIT_REDIS;
}
