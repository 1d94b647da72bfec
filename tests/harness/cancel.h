/* Test harness: an application's cancel of a blocking acquire, a condition
 * variable behind lb_clock.sleep_ms that another thread signals. */
#ifndef LBT_CANCEL_H
#define LBT_CANCEL_H

#include <pthread.h>
#include <stdint.h>

#include "lockbridge/lockbridge.h"

typedef struct lbt_canceller {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int cancelled;
    lb_clock clock; /* sleeps through lbt_cancellable_sleep on this canceller */
} lbt_canceller;

void lbt_canceller_init(lbt_canceller *c);
void lbt_canceller_destroy(lbt_canceller *c);

/* Ends every sleep of the canceller's clock, now and later. */
void lbt_cancel(lbt_canceller *c);

/* lb_clock.sleep_ms on an lbt_canceller (ud): sleeps up to `ms` milliseconds
 * or until cancelled; nonzero once cancelled. */
int lbt_cancellable_sleep(void *ud, int64_t ms);

#endif
