/* Internal declarations of the modern (token) lock shared between its files. */
#ifndef LOCKBRIDGE_MODERN_INTERNAL_H
#define LOCKBRIDGE_MODERN_INTERNAL_H

#include "lockbridge/modern.h"
#include "core/internal.h"

extern const lb_script lb__script_modern_acquire_fenced;
extern const lb_script lb__script_modern_release;
extern const lb_script lb__script_modern_extend;
extern const lb_script lb__script_modern_check;
extern const lb_script lb__script_modern_fair_acquire;
extern const lb_script lb__script_modern_fair_release;

struct lb_lock {
    lb_machine m; /* first: the machine's address is the lock's */
    lb_lock_options opts;
    char *key, *fence_key, *channel;
    size_t keylen, fence_keylen, channellen;
    int state;
    int held;
    int fixed_token;    /* acquire reuses `token` (set by a quorum) */
    char token[LB__TOKEN_CAP];
    char ttl_arg[24];   /* decimal argument buffers for the running command */
    char ms_arg[24];
    int64_t fence;
    int64_t holder_ttl_ms;
    int64_t deadline_ns;
    int64_t sent_ns;    /* monotonic time the running command was prepared */
    int64_t extend_ms;
    lb_extend_mode extend_mode;
    int64_t check_ttl_ms;
    uint64_t commands;
    uint64_t rng;
    char errstr[LB__ERRSTR_CAP];
    struct lb__watch *watch; /* set while a watchdog renews the lock */
    struct lb__fair *fair;   /* fair mode's queue keys (modern/fair.c), or NULL */
};

/* Makes the next acquisitions of `l` use `token` rather than fresh ones. */
void lb__lock_fix_token(lb_lock *l, const char *token);
/* Ends the watch of `l` (modern/watchdog.c), waiting for a renewal in flight:
 * release and free call it first, so no renewal runs during or after them. */
void lb__watch_detach(lb_lock *l);

/* Fair mode (modern/fair.c). The step functions replace acquire's and
 * release's when l->fair is set; the mode says what the next attempt does. */
typedef struct lb__fair lb__fair;
enum { LB__FAIR_TRY, LB__FAIR_WAIT, LB__FAIR_LEAVE };
int lb__fair_valid(const lb_lock_options *o); /* the fair_* options make sense */
int lb__fair_new(lb_lock *l);
void lb__fair_free(lb_lock *l);
int lb__fair_acquire_step(lb_machine *m, const struct redisReply *r, const lb_now *now);
int lb__fair_release_step(lb_machine *m, const struct redisReply *r, const lb_now *now);
int lb__fair_begin_wait(lb_lock *l); /* a fresh token kept until lb__fair_end_wait */
void lb__fair_set_mode(lb_lock *l, int mode);
void lb__fair_end_wait(lb_lock *l);
/* The inbox the next attempts name for a hand-off (NULL: the lock's channel). */
#define LB__INBOX_PREFIX_MAX 64                             /* bytes */
#define LB__INBOX_MAX (LB__INBOX_PREFIX_MAX + LB_TOKEN_LEN) /* bytes */
void lb__fair_set_inbox(lb_lock *l, const char *inbox, size_t len);
/* A hand-off message granted queue place `place` (-1: none named): LB_OK
 * when that is the place our attempts have kept us in, else LB_EBUSY (to be
 * checked by an attempt). */
int lb__fair_handed(lb_lock *l, int64_t place, int64_t fence);
int64_t lb__fair_lease_ms(const lb_lock *l);

/* The waiter (modern/waiter.c) as lb_lock_acquire_wait uses it. A thread
 * watches a channel for the length of one wait; a fair wait registers its
 * token in `rec` so that a hand-off message reaches it alone. */
struct lb_waiter;
typedef struct lb__wchan lb__wchan;
typedef struct lb__wrec {
    struct lb__wrec *next;
    char token[LB__TOKEN_CAP]; /* "" when not fair */
    int handed;                /* set by the waiter's thread under its lock */
    int64_t place, fence;      /* from the message; -1 when it had none */
    int64_t got_place, got_fence; /* the wait's own: what lb__waiter_wait took */
} lb__wrec;
/* READY: subscribed; QUIET: subscribed since the peek, and nothing the wait
 * could have missed was read since; PENDING: SUBSCRIBE on its way; DOWN. */
enum { LB__WATCH_READY, LB__WATCH_QUIET, LB__WATCH_PENDING, LB__WATCH_DOWN };
/* EVENT: a subscription confirmed (a release may have passed unheard);
 * RELEASE: a release message (and maybe a confirmation) read. */
enum { LB__WAKE_TIMEOUT, LB__WAKE_EVENT, LB__WAKE_RELEASE, LB__WAKE_HANDED };
/* What a channel stood at before an attempt. */
typedef struct lb__wpeek {
    int on;             /* subscribed */
    uint64_t gen;       /* event count */
    uint64_t unclaimed; /* hand-offs that named no watching wait */
    uint64_t inbox_unclaimed; /* the same, read on the waiter's inbox */
} lb__wpeek;
void lb__waiter_peek(struct lb_waiter *w, const char *ch, size_t len, lb__wpeek *p);
/* NULL when out of memory (the wait then backs off without waking). *gen is
 * the channel's event count; *ready one of LB__WATCH_*, judged against
 * `since` (may be NULL). */
lb__wchan *lb__waiter_watch(struct lb_waiter *w, const char *ch, size_t len, lb__wrec *rec,
                            const lb__wpeek *since, uint64_t *gen, int *ready);
/* Sleeps until the event count differs from *gen (updated; not when deaf),
 * `rec` is handed the lock, or `ms` pass. Returns one of LB__WAKE_*; on
 * LB__WAKE_HANDED the hand-off is taken: moved to rec->got_*, so that the
 * next one wakes the wait again. */
int lb__waiter_wait(struct lb_waiter *w, lb__wchan *c, lb__wrec *rec, uint64_t *gen, int64_t ms,
                    int deaf);
uint64_t lb__waiter_gen(struct lb_waiter *w, lb__wchan *c);
/* Whether the channel's subscription is confirmed: no message can pass
 * unheard until an event (a drop is followed by one when it is back). */
int lb__waiter_listening(struct lb_waiter *w, lb__wchan *c);
void lb__waiter_unwatch(struct lb_waiter *w, lb__wchan *c, lb__wrec *rec);
/* A blocking acquire through a waiter (modern/wait_loop.c): the caller sets
 * everything above `ch`; lb__wait_run peeks, attempts, watches the channel
 * when busy, and sleeps between attempts until one ends the wait. */
typedef struct lb__wait {
    struct lb_waiter *w;    /* NULL: back-off only */
    const char *channel;    /* the lock's release channel */
    size_t channellen;
    lb__wrec *rec;          /* a fair wait's token record, or NULL */
    int64_t deadline;       /* monotonic ms (lb__deadline_ms) */
    int deaf_after_loss;    /* sleep a step deaf after losing a race to a release */
    void *ud;
    int (*attempt)(void *ud);                   /* a status; LB_EBUSY: wait on */
    int64_t (*sleep_ms)(void *ud, int listening); /* the next sleep, ms */
    int (*out_of_time)(void *ud);               /* the status at the deadline */
    int (*handed)(void *ud); /* `rec` was handed the lock: a status, or LB_EBUSY to attempt */
    lb__wchan *ch;           /* the engine's from here */
    uint64_t gen;
    lb__wpeek before;
} lb__wait;
int lb__wait_run(lb__wait *s);

/* The waiter's inbox channel, where fair releases hand it locks; the first
 * call subscribes it. Its length, and *name, once the subscription is
 * confirmed; 0 and NULL until then (the hand-off then comes on the lock's
 * channel). The name lives as long as the waiter. */
size_t lb__waiter_inbox(struct lb_waiter *w, const char **name);

#endif
