/* The one escape of bytes for messages, shared by the library and the tool:
 * printable ASCII as is, every other byte and the backslash as \xHH. */
#ifndef LOCKBRIDGE_CORE_ESCAPE_H
#define LOCKBRIDGE_CORE_ESCAPE_H

#include <stddef.h>

/* Writes `len` bytes of `s` escaped into `out`, always NUL-terminated within
 * `cap`; bytes that do not fit whole are left out. */
void lb__escape(char *out, size_t cap, const char *s, size_t len);

#endif
