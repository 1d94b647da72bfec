/* Bytes shown to people: every byte outside printable ASCII, and the backslash,
 * written as \xHH, so that a value or a server's message prints on one line. */
#include <stddef.h>

#include "core/escape.h"

void lb__escape(char *out, size_t cap, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap == 0) return;
    /* Room for one escaped byte (4) and the terminating NUL. */
    for (size_t i = 0; i < len && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}
