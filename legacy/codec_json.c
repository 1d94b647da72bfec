/* The JSON legacy value {"expiryTime":N}: written by hand (the field name is
 * validated), read by a small strict reader that keeps N exact in 64 bits. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "legacy/internal.h"

/* Nesting levels allowed in the other fields of a value; deeper values are
 * foreign (and never recursed into without bound). */
#define JSON_DEPTH_MAX 32

const char *lb__json_field(const lb_codec *c) {
    return c->field[0] ? c->field : "expiryTime";
}

int lb__json_encode(const lb_codec *c, int64_t t, char *buf, size_t cap, size_t *len) {
    if (!memchr(c->field, '\0', sizeof c->field)) return LB_EINVAL; /* set by hand, unterminated */
    int n = snprintf(buf, cap, "{\"%s\":%lld}", lb__json_field(c), (long long)t);
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0) buf[0] = '\0';
        return LB_EINVAL;
    }
    *len = (size_t)n;
    return LB_OK;
}

/* The reader works on untrusted bytes with an explicit end; it never reads
 * past `end` and allocates nothing. A double-based JSON parser would round
 * the nanosecond instants of a host up for more than 104 days (past 2^53),
 * so the field's number is kept as text and parsed as an exact integer. */
typedef struct reader {
    const char *p, *end;
    const char *name; /* the field sought */
    int count;        /* times it appeared at the top level */
    const char *num;  /* its value's text */
    size_t numlen;
} reader;

static int read_value(reader *r, int depth);

static void skip_ws(reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int eat(reader *r, char ch) {
    skip_ws(r);
    if (r->p < r->end && *r->p == ch) {
        r->p++;
        return 1;
    }
    return 0;
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* One character of a string body (after the opening quote): its code unit in
 * *cp, escapes decoded. Returns -1 on a malformed or control character. */
static int read_char(reader *r, unsigned *cp) {
    static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    unsigned char ch = (unsigned char)*r->p++;
    if (ch < 0x20) return -1;
    if (ch != '\\') {
        *cp = ch;
        return 0;
    }
    if (r->p >= r->end) return -1;
    char e = *r->p++;
    if (e == 'u') {
        if (r->end - r->p < 4) return -1;
        *cp = 0;
        for (int i = 0; i < 4; i++) {
            int d = hex_digit(*r->p++);
            if (d < 0) return -1;
            *cp = *cp * 16 + (unsigned)d;
        }
        return 0;
    }
    for (size_t i = 0; i + 1 < sizeof simple; i += 2) {
        if (simple[i] == e) {
            *cp = (unsigned char)simple[i + 1];
            return 0;
        }
    }
    return -1;
}

/* A string at r->p; *is_name says whether its decoded text is `name` (an
 * escaped spelling of the field's name is the name, as any JSON reader sees). */
static int read_string(reader *r, const char *name, int *is_name) {
    size_t matched = 0;
    int same = name != NULL;
    if (r->p >= r->end || *r->p != '"') return -1;
    r->p++;
    while (r->p < r->end) {
        unsigned cp;
        if (*r->p == '"') {
            r->p++;
            if (is_name) *is_name = same && name[matched] == '\0';
            return 0;
        }
        if (read_char(r, &cp)) return -1;
        if (same && name[matched] != '\0' && cp == (unsigned char)name[matched]) matched++;
        else same = 0;
    }
    return -1;
}

static int read_digits(reader *r) {
    const char *from = r->p;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    return r->p > from ? 0 : -1;
}

/* JSON's number grammar; whether the field's number is an integer we accept
 * is decided later, on its text. */
static int read_number(reader *r) {
    if (r->p < r->end && *r->p == '-') r->p++;
    if (r->p < r->end && *r->p == '0') r->p++;
    else if (read_digits(r)) return -1;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (read_digits(r)) return -1;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        if (read_digits(r)) return -1;
    }
    return 0;
}

static int read_literal(reader *r, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return -1;
    r->p += n;
    return 0;
}

/* An object at r->p. At depth 1 (the value itself) the members named like the
 * field are counted and the last one's value text kept. */
static int read_object(reader *r, int depth) {
    if (depth > JSON_DEPTH_MAX) return -1;
    r->p++;
    if (eat(r, '}')) return 0;
    do {
        int is_name = 0;
        skip_ws(r);
        if (read_string(r, depth == 1 ? r->name : NULL, &is_name) || !eat(r, ':')) return -1;
        skip_ws(r);
        const char *from = r->p;
        if (read_value(r, depth)) return -1;
        if (is_name) {
            r->count++;
            r->num = from;
            r->numlen = (size_t)(r->p - from);
        }
    } while (eat(r, ','));
    return eat(r, '}') ? 0 : -1;
}

static int read_array(reader *r, int depth) {
    if (depth > JSON_DEPTH_MAX) return -1;
    r->p++;
    if (eat(r, ']')) return 0;
    do {
        if (read_value(r, depth)) return -1;
    } while (eat(r, ','));
    return eat(r, ']') ? 0 : -1;
}

static int read_value(reader *r, int depth) {
    skip_ws(r);
    if (r->p >= r->end) return -1;
    switch (*r->p) {
    case '"': return read_string(r, NULL, NULL);
    case '{': return read_object(r, depth + 1);
    case '[': return read_array(r, depth + 1);
    case 't': return read_literal(r, "true");
    case 'f': return read_literal(r, "false");
    case 'n': return read_literal(r, "null");
    default: return read_number(r);
    }
}

/* The value must be one JSON object (insignificant whitespace and other
 * members allowed, as the JVM lockers' readers allow them) in which the field
 * appears exactly once, as a non-negative integer written plainly: no sign,
 * fraction, exponent or leading zero. With duplicates, which one a reader
 * honours depends on its parser, so the value's meaning is not ours to decide. */
int lb__json_decode(const lb_codec *c, const char *s, size_t len, int64_t *t) {
    if (!memchr(c->field, '\0', sizeof c->field)) return LB_EINVAL;
    reader r = {s, s + len, lb__json_field(c), 0, NULL, 0};
    skip_ws(&r);
    if (r.p >= r.end || *r.p != '{' || read_object(&r, 1)) return LB_EFOREIGN;
    skip_ws(&r);
    if (r.p != r.end || r.count != 1) return LB_EFOREIGN;
    return lb__parse_decimal(r.num, r.numlen, t);
}
