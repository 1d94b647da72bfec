/* The blocking waits that honour the clock's sleep hook (lb_clock.sleep_ms):
 * every sleep of the wait goes through it, so the application can end the
 * wait from another thread with LB_ECANCELED. */
#ifndef LOCKBRIDGE_CORE_WAIT_CANCEL_H
#define LOCKBRIDGE_CORE_WAIT_CANCEL_H

#include "core/internal.h"

/* Longest a wait on a waiter blocks between two asks of the hook (a call
 * with 0 ms), in milliseconds: the bound on how late a cancel is seen there. */
#define LB__CANCEL_SLICE_MS LB_CANCEL_SLICE_MS

/* lb__wait_run and lb__poll_run with the clock whose hook they sleep through
 * (NULL or no hook: as those). A wait the hook cancels returns LB_ECANCELED
 * and holds nothing (a fair wait's caller leaves the queue). */
int lb__wait_run_clock(lb__wait *s, const lb_clock *clock);
int lb__poll_run_clock(lb__poll *p, struct lb_waiter *w, const char *channel,
                       size_t channellen, int64_t wait_ms, const lb_clock *clock);

#endif
