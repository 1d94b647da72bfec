/* Lock tokens: 128 bits from the OS random source, as 32 lowercase hex digits. */
#include <errno.h>
#include <sys/random.h>

#include "core/internal.h"

int lb__token(char out[LB__TOKEN_CAP]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16];
    size_t got = 0;
    /* A token must be unguessable and unique across the fleet: no fallback to
     * a weaker source. getrandom blocks only before the pool is initialised. */
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return LB_EIO;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * sizeof raw] = '\0';
    return LB_OK;
}
