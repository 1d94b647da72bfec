/* Test harness: an allocator that fails on request and counts (see failing_alloc.h). */
#include <stdlib.h>

#include "harness/failing_alloc.h"

static void *failing_malloc(void *ud, size_t n) {
    lbt_failing_alloc *f = ud;
    if (__atomic_add_fetch(&f->calls, 1, __ATOMIC_RELAXED) == f->fail_at) return NULL;
    void *p = malloc(n);
    if (p) __atomic_fetch_add(&f->live, 1, __ATOMIC_RELAXED);
    return p;
}

static void failing_free(void *ud, void *p) {
    lbt_failing_alloc *f = ud;
    if (p) __atomic_fetch_sub(&f->live, 1, __ATOMIC_RELAXED);
    free(p);
}

lb_allocator lbt_failing_allocator(lbt_failing_alloc *f, int fail_at) {
    f->fail_at = fail_at;
    f->calls = 0;
    f->live = 0;
    lb_allocator a = {failing_malloc, failing_free, f};
    return a;
}
