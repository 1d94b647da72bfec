/* Small shared helpers: allocation through a handle's allocator, checked
 * arithmetic and seeds for jitter. */
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "core/internal.h"

void *lb__alloc(const lb_allocator *a, size_t size) {
    if (a && a->malloc_fn) return a->malloc_fn(a->ud, size);
    return malloc(size);
}

void lb__free(const lb_allocator *a, void *p) {
    if (!p) return;
    if (a && a->free_fn) a->free_fn(a->ud, p);
    else free(p);
}

int lb__add64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

int lb__sub64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_sub_overflow(a, b, out) ? -1 : 0;
}

int64_t lb__lease_end_ns(int64_t start_ns, int64_t ms) {
    int64_t ns, end;
    if (lb__mul64(ms, 1000000, &ns) || lb__add64(start_ns, ns, &end)) return start_ns;
    return end;
}

int lb__mul64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

uint64_t lb__random_seed(void) {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    }
    return seed ? seed : 0x2545F4914F6CDD1Dull;
}

uint64_t lb__xorshift(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}
