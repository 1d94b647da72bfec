/* What a lock's value seen in a race says of its expiry: the number of a
 * timestamp value, bare or as the one field of a legacy JSON value. */
#include "tool/race/race.h"

#include <stdlib.h>
#include <string.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alnum(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Only a number standing alone counts: at the start of the value or after
 * a JSON colon or a space, digits with an optional fraction, and nothing
 * word-like after it. Digits inside a string or an identifier (M1's
 * {"uid":"<uuid4>"}) are no expiry: read as one, a uuid's "5e12abcd" gave a
 * random instant, and with it a random verdict for the same schedule. */
int lb__race_value_expiry(const char *v, size_t n, double *out) {
    size_t i = 0;
    while (i < n && !is_digit(v[i])) i++;
    if (i == n || (i > 0 && v[i - 1] != ':' && v[i - 1] != ' ')) return -1;
    size_t start = i;
    while (i < n && is_digit(v[i])) i++;
    if (i + 1 < n && v[i] == '.' && is_digit(v[i + 1]))
        for (i++; i < n && is_digit(v[i]);) i++;
    if (i < n && (is_alnum(v[i]) || v[i] == '.' || v[i] == '"')) return -1;
    char tmp[64];
    if (i - start >= sizeof tmp) return -1;
    memcpy(tmp, v + start, i - start);
    tmp[i - start] = '\0';
    *out = strtod(tmp, NULL);
    return 0;
}
