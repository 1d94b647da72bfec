/* Events on stdout, built with cJSON and written as JSON lines or as text for
 * people. Byte strings and 64-bit integers are added as raw JSON text, since
 * cJSON would pass invalid UTF-8 through and store numbers as doubles (a
 * nanosecond instant does not fit in 53 bits). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/cli.h"

static int json_output;

void lb__cli_set_json(int json) { json_output = json; }
int lb__cli_is_json(void) { return json_output; }

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

/* ---- Text for people -------------------------------------------------------------- */
static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A string added by quote_bytes, back to its bytes (each \u00XX is one byte),
 * then shown with lb__escape. */
static void show_raw_string(FILE *f, const char *raw) {
    size_t n = strlen(raw), o = 0;
    char *bytes = malloc(n + 1), *shown = NULL;
    if (bytes) {
        for (size_t i = 1; i + 1 < n; i++) {
            if (raw[i] == '\\' && raw[i + 1] == 'u' && i + 5 < n) {
                bytes[o++] = (char)(hexval(raw[i + 4]) * 16 + hexval(raw[i + 5]));
                i += 5;
            } else if (raw[i] == '\\') {
                bytes[o++] = raw[++i];
            } else {
                bytes[o++] = raw[i];
            }
        }
        shown = malloc(o * 4 + 6);
    }
    if (shown) lb__escape(shown, o * 4 + 6, bytes, o);
    fputs(shown ? shown : raw, f);
    free(shown);
    free(bytes);
}

static void show_value(FILE *f, const cJSON *v) {
    const cJSON *it;
    if (cJSON_IsRaw(v) && v->valuestring[0] == '"') show_raw_string(f, v->valuestring);
    else if (cJSON_IsRaw(v)) fputs(v->valuestring, f);
    else if (cJSON_IsString(v)) fputs(v->valuestring, f);
    else if (cJSON_IsBool(v)) fputs(cJSON_IsTrue(v) ? "yes" : "no", f);
    else if (cJSON_IsNull(v)) fputs("-", f);
    else if (cJSON_IsNumber(v)) fprintf(f, "%.15g", v->valuedouble);
    else if (cJSON_IsArray(v)) {
        cJSON_ArrayForEach(it, v) {
            show_value(f, it);
            if (it->next) fputs(", ", f);
        }
    }
}

/* One "name  value" row per field; members of nested objects as "outer.inner". */
static void show_fields(FILE *f, const cJSON *o, const char *prefix) {
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        char name[96];
        snprintf(name, sizeof name, "%s%s", prefix, it->string ? it->string : "");
        if (!prefix[0] && strcmp(name, "event") == 0) continue;
        if (cJSON_IsObject(it)) {
            char sub[100];
            snprintf(sub, sizeof sub, "%s.", name);
            show_fields(f, it, sub);
            continue;
        }
        fprintf(f, "  %-26s ", name);
        show_value(f, it);
        fputc('\n', f);
    }
}

int lb__cli_emit(cJSON *o) {
    if (o && !json_output) {
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
        printf("%s\n", cJSON_IsString(ev) ? ev->valuestring : "result");
        show_fields(stdout, o, "");
        cJSON_Delete(o);
        return ferror(stdout) || fflush(stdout) != 0 ? -1 : 0;
    }
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
    lb__escape(shown, sizeof shown, detail, strlen(detail));
    fprintf(stderr, "%s: %s\n", a->prog, shown);
    if (!json_output) return LB__CLI_EXIT_REDIS; /* people read stderr */
    cJSON *o = lb__cli_event("error");
    if (o && key) lb__cli_add_str(o, "key", key);
    if (o) lb__cli_add_str(o, "status", lb_err_name(status));
    if (o) lb__cli_add_str(o, "detail", detail);
    lb__cli_emit(o);
    return LB__CLI_EXIT_REDIS;
}
