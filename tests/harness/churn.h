/* Test harness: a sleep hook (lb_clock.sleep_ms) that records the longest
 * sleep a wait asked for, and may act after each sleep (renew a holder's
 * lock, so that the wait's next attempt meets a holder just begun, as beside
 * a lock turned over fast). */
#ifndef LBT_CHURN_H
#define LBT_CHURN_H

#include <stdint.h>

typedef struct lbt_sleeps {
    int64_t longest_ms; /* the longest sleep asked for */
    int64_t calls;
    int (*after)(void *ud); /* NULL, or called after each sleep: 0 when it did its part */
    void *after_ud;
    int64_t after_failures;
} lbt_sleeps;
/* What an `after` hook that writes a holder afresh needs: a connection of
 * its own and the key. */
struct redisContext;
typedef struct lbt_holder {
    struct redisContext *c;
    const char *key;
} lbt_holder;
/* Sleeps as asked, never cancels. */
int lbt_sleeps_record(void *ud, int64_t ms);

#endif
