/* The renewal of a token lock held on an event loop: the extend script on the
 * handle's timer, at a fraction of the TTL, and the loss reported when the
 * key no longer holds our token or the lease runs out unrenewed. */
#include <stdio.h>
#include <string.h>

#include <hiredis/async.h>

#include "modern/async_internal.h"

#define NS_PER_MS INT64_C(1000000)
/* First delay before retrying a renewal that got no answer about the lock
 * (an error reply), ms; it doubles up to the renewal interval. */
#define RETRY_MIN_MS 10

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

void lb__al_lost(lb_async_lock *al, lb_watch_reason reason, const char *detail) {
    char text[LB__ERRSTR_CAP];
    if (detail && detail[0])
        snprintf(text, sizeof text, "%s", detail);
    else
        snprintf(text, sizeof text, "%s",
                 reason == LB_WATCH_REFUSED ? "the key no longer holds our token"
                                            : "the lease ran out before a renewal was answered");
    al->gen++; /* a renewal in flight is now stale */
    lb__al_disarm(al);
    al->lock->held = 0;
    al->phase = AL_IDLE;
    lb__refuse(al->lock->errstr, LB_ELOST, "lost: %s", text);
    if (al->opts.lost) al->opts.lost(al, reason, text, al->opts.lost_ud); /* may free al */
}

/* The next renewal is due when renew_every has passed since the lease began
 * (its end less the TTL), as if each acquire were a renewal. */
static void schedule_next(lb_async_lock *al) {
    lb_lock *l = al->lock;
    int64_t due = l->deadline_ns - l->opts.ttl_ms * NS_PER_MS + al->renew_every_ns;
    if (lb__al_arm(al, due - lb__al_now_ns(al)) != LB_OK)
        lb__al_lost(al, LB_WATCH_UNREACHABLE, "the event loop could not arm the renewal's timer");
}

void lb__al_renew_start(lb_async_lock *al) {
    al->gen++;
    if (!al->shadow) return;
    lb_lock *l = al->lock;
    double every = (double)l->opts.ttl_ms * (double)NS_PER_MS * al->opts.renew_fraction;
    al->renew_every_ns = every < (double)NS_PER_MS ? NS_PER_MS : (int64_t)every;
    al->retry_ns = RETRY_MIN_MS * NS_PER_MS;
    schedule_next(al);
}

/* A renewal that got no answer about the lock is tried again, sooner at
 * first, never past the lease's end, where the loss is reported. */
static void retry(lb_async_lock *al) {
    int64_t wait = min64(al->retry_ns, al->renew_every_ns);
    al->retry_ns = min64(al->retry_ns * 2, al->renew_every_ns);
    wait = min64(wait, al->lock->deadline_ns - lb__al_now_ns(al));
    if (lb__al_arm(al, wait) != LB_OK)
        lb__al_lost(al, LB_WATCH_UNREACHABLE, "the event loop could not arm the renewal's timer");
}

static void on_renewed(lb_machine *m, int rc, void *ud) {
    lb_async_lock *al = ud;
    if (rc == LB_EIO) lb__async_note_eio(al->a);
    if (lb__al_reap(al)) return;
    if (al->phase != AL_HELD || al->renew_gen != al->gen) return; /* its acquisition ended */
    if (rc == LB_OK) {
        al->lock->deadline_ns = al->shadow->deadline_ns;
        al->retry_ns = RETRY_MIN_MS * NS_PER_MS;
        schedule_next(al);
    } else if (rc == LB_ELOST || rc == LB_EWRONGTYPE) {
        lb__al_lost(al, LB_WATCH_REFUSED, m->errstr);
    } else if (!lb__al_conn(al)) {
        lb__al_lost(al, LB_WATCH_UNREACHABLE,
                    "the connection closed: the lock is no longer renewed and lapses with its TTL");
    } else {
        retry(al);
    }
}

/* The timer of a held lock: the lease's end (lost), a renewal due, or, with
 * a renewal of an earlier acquisition still in flight, a look again soon. */
void lb__al_renew_timer(lb_async_lock *al) {
    lb_lock *l = al->lock;
    int64_t now = lb__al_now_ns(al);
    if (!al->shadow) return;
    if (now >= l->deadline_ns) {
        lb__al_lost(al, LB_WATCH_UNREACHABLE, al->shadow->m.errstr);
        return;
    }
    if (lb__machine_in_flight(&al->shadow->m)) {
        int64_t wait = al->renew_gen == al->gen ? l->deadline_ns - now
                                                : min64(RETRY_MIN_MS * NS_PER_MS, l->deadline_ns - now);
        if (lb__al_arm(al, wait) != LB_OK)
            lb__al_lost(al, LB_WATCH_UNREACHABLE, "the event loop could not arm the renewal's timer");
        return;
    }
    redisAsyncContext *ac = lb__al_conn(al);
    if (!ac) {
        lb__al_lost(al, LB_WATCH_UNREACHABLE,
                    "the connection closed: the lock is no longer renewed and lapses with its TTL");
        return;
    }
    /* The renewing handle takes the current acquisition's token here, not
     * when it was won: a stale renewal's answer may have changed its state. */
    lb__lock_fix_token(al->shadow, l->token);
    al->shadow->held = 1;
    lb_machine *m = lb__lock_extend_machine(al->shadow, l->opts.ttl_ms, LB_EXTEND_REPLACE);
    al->renew_gen = al->gen;
    /* Should the answer not come, the lease's end reports the loss. */
    if (lb__al_arm(al, l->deadline_ns - now) != LB_OK) {
        lb__al_lost(al, LB_WATCH_UNREACHABLE, "the event loop could not arm the renewal's timer");
        return;
    }
    lb_async_run(ac, m, l->opts.clock, on_renewed, al); /* may call on_renewed at once */
}
