/* Codec specs: the text form of a codec used by options files and the tool,
 * "ms", "s", "float", "json" or "json:field=NAME,unit=U,clock=C". */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "legacy/internal.h"

static const char *const unit_names[] = {"ms", "ns", "us", "s"};
static const char *const clock_names[] = {"epoch", "mono"};

static int lookup(const char *const *names, int n, const char *s, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return i;
    return -1;
}

/* JSON field names are limited to [A-Za-z0-9_] so the encoder can write them
 * without escaping and no spec can inject JSON. */
static int valid_field(const char *s, size_t len) {
    if (len == 0 || len >= LB_CODEC_FIELD_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_'))
            return 0;
    }
    return 1;
}

/* One "key=value" option. `seen` collects the keys met so far: a repeated key
 * is refused, since which of two settings wins would be a guess. */
static int parse_json_option(lb_codec *c, const char *opt, size_t len, unsigned *seen) {
    const char *eq = memchr(opt, '=', len);
    if (!eq) return LB_EINVAL;
    size_t klen = (size_t)(eq - opt), vlen = len - klen - 1;
    const char *v = eq + 1;
    int idx;
    unsigned bit = klen == 5 && memcmp(opt, "field", 5) == 0   ? 1u
                   : klen == 4 && memcmp(opt, "unit", 4) == 0  ? 2u
                   : klen == 5 && memcmp(opt, "clock", 5) == 0 ? 4u
                                                               : 0u;
    if (!bit || (*seen & bit)) return LB_EINVAL;
    *seen |= bit;
    if (bit == 1u) {
        if (!valid_field(v, vlen)) return LB_EINVAL;
        memcpy(c->field, v, vlen);
        c->field[vlen] = '\0';
    } else if (bit == 2u) {
        if ((idx = lookup(unit_names, 4, v, vlen)) < 0) return LB_EINVAL;
        c->unit = (lb_unit)idx;
    } else {
        if ((idx = lookup(clock_names, 2, v, vlen)) < 0) return LB_EINVAL;
        c->clock = (lb_clock_kind)idx;
    }
    return LB_OK;
}

int lb_codec_parse(lb_codec *out, const char *spec) {
    lb_codec c;
    if (!out || !spec) return LB_EINVAL;
    memset(out, 0, sizeof *out);
    memset(&c, 0, sizeof c);
    if (strcmp(spec, "ms") == 0) c.kind = LB_CODEC_MS;
    else if (strcmp(spec, "s") == 0) c.kind = LB_CODEC_SECONDS;
    else if (strcmp(spec, "float") == 0) c.kind = LB_CODEC_FLOAT_SECONDS;
    else if (strncmp(spec, "json", 4) == 0 && (spec[4] == '\0' || spec[4] == ':')) {
        c.kind = LB_CODEC_JSON;
        c.unit = LB_UNIT_NS;
        c.clock = LB_CLOCK_MONOTONIC;
        const char *p = spec[4] ? spec + 5 : spec + 4;
        unsigned seen = 0;
        if (spec[4] == ':' && !*p) return LB_EINVAL; /* "json:" with no option */
        while (*p) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (parse_json_option(&c, p, len, &seen) != LB_OK) return LB_EINVAL;
            p += len + (comma ? 1 : 0);
            if (comma && !*p) return LB_EINVAL; /* trailing comma */
        }
    } else {
        return LB_EINVAL;
    }
    *out = c;
    return LB_OK;
}

int lb_codec_format(const lb_codec *c, char *buf, size_t cap) {
    int n;
    if (!c || !buf) return LB_EINVAL;
    if (cap > 0) buf[0] = '\0';
    switch (c->kind) {
    case LB_CODEC_MS: n = snprintf(buf, cap, "ms"); break;
    case LB_CODEC_SECONDS: n = snprintf(buf, cap, "s"); break;
    case LB_CODEC_FLOAT_SECONDS: n = snprintf(buf, cap, "float"); break;
    case LB_CODEC_JSON:
        /* A field name set by hand may lack its terminator: never read past it. */
        if ((unsigned)c->unit > LB_UNIT_S || (unsigned)c->clock > LB_CLOCK_MONOTONIC ||
            !memchr(c->field, '\0', sizeof c->field))
            return LB_EINVAL;
        n = snprintf(buf, cap, "json:field=%s,unit=%s,clock=%s", lb__json_field(c),
                     unit_names[c->unit], clock_names[c->clock]);
        break;
    default: return LB_EINVAL;
    }
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0) buf[0] = '\0';
        return LB_EINVAL;
    }
    return LB_OK;
}
