/* A cancellable sleep hook for blocking acquires in tests (see cancel.h). */
#include "harness/cancel.h"

#include <string.h>
#include <time.h>

void lbt_canceller_init(lbt_canceller *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->clock.sleep_ms = lbt_cancellable_sleep;
    c->clock.ud = c;
}

void lbt_canceller_destroy(lbt_canceller *c) {
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

void lbt_cancel(lbt_canceller *c) {
    pthread_mutex_lock(&c->mu);
    c->cancelled = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

int lbt_cancellable_sleep(void *ud, int64_t ms) {
    lbt_canceller *c = ud;
    /* pthread_cond_timedwait takes a CLOCK_REALTIME instant. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->cancelled && ms > 0 && pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0) {
    }
    int cancelled = c->cancelled;
    pthread_mutex_unlock(&c->mu);
    return cancelled;
}
