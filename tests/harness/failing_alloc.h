/* Test harness: an lb_allocator that fails one chosen allocation and counts
 * the blocks still live, so that a leak on any failure path shows. */
#ifndef LBT_FAILING_ALLOC_H
#define LBT_FAILING_ALLOC_H

#include "lockbridge/lockbridge.h"

typedef struct lbt_failing_alloc {
    int fail_at; /* this allocation (1-based) fails; 0: none */
    int calls;   /* allocations attempted */
    int live;    /* blocks not yet freed */
} lbt_failing_alloc;

/* An allocator over `f` (its counts set to zero) that fails the fail_at-th
 * allocation. The counts are updated atomically (a waiter's thread allocates
 * too); read them once the handles' threads are done. */
lb_allocator lbt_failing_allocator(lbt_failing_alloc *f, int fail_at);

#endif
