/* Internal declarations of the modern (token) lock shared between its files. */
#ifndef LOCKBRIDGE_MODERN_INTERNAL_H
#define LOCKBRIDGE_MODERN_INTERNAL_H

#include "lockbridge/modern.h"
#include "core/internal.h"

extern const lb_script lb__script_modern_acquire_fenced;
extern const lb_script lb__script_modern_release;
extern const lb_script lb__script_modern_release_many;
extern const lb_script lb__script_modern_extend;
extern const lb_script lb__script_modern_check;
extern const lb_script lb__script_modern_fair_acquire;
extern const lb_script lb__script_modern_fair_release;
extern const lb_script lb__script_modern_fair_push;
extern const lb_script lb__script_modern_fair_mark;
extern const lb_script lb__script_modern_note_outsider;

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
    uint64_t rng;
    char errstr[LB__ERRSTR_CAP];
    struct lb__watch *watch; /* set while a watchdog renews the lock */
    struct lb__fair *fair;   /* fair mode's queue keys (modern/fair.c), or NULL */
    struct lb__fair *courtesy; /* the same names for a release outside fair mode
                                * beside fair clients (lb__fair_courteous), made
                                * at the first, or NULL */
    char *note_keys[3];      /* what an outsider note names (modern/outsider.c):
                              * the fair state, the outsider note, the baton
                              * mark; made at the first note */
    size_t note_keylens[3];
    int note_saw;            /* the running note saw an outside holder itself */
    int set_get_refused;     /* the server refused SET NX with GET (< 7.0) */
    int64_t outsider_ns;     /* monotonic time our attempt last found the key
                              * held by a value that is no lockbridge token */
    int64_t outsider_held_ns; /* the same, seen by a plain attempt's own SET NX GET
                               * (not passed on by a note or a release) */
    int64_t next_note_ns;    /* a refused fair try notes itself again from here */
    int note_found_queue;    /* the last note found a fair queue there (0: no
                              * note yet, or it failed) */
    int64_t released_ns;     /* monotonic time (the lock's clock) our last
                              * release was answered; 0: none */
    int64_t noted_ns;        /* the same for the last note that found a queue */
    int heard_release;       /* our last release's message reached listeners */
};

/* Allocates the companion name "suffix" of the lock's key into *out (see
 * lb_companion_key), freed with the lock's allocator. */
int lb__lock_companion(lb_lock *l, const char *suffix, char **out, size_t *len);
/* Makes the next acquisitions of `l` use `token` rather than fresh ones. */
void lb__lock_fix_token(lb_lock *l, const char *token);
/* Ends the watch of `l` (modern/watchdog.c), waiting for a renewal in flight:
 * release and free call it first, so no renewal runs during or after them. */
void lb__watch_detach(lb_lock *l);
/* The end of a watched lock's lease as its renewals moved it (l->watch set;
 * called by the lock's owner). */
int64_t lb__watch_deadline_ns(const lb_lock *l);
/* 1 once the watch of `l` (l->watch set) reported the lock lost. */
int lb__watch_lost(const lb_lock *l);
/* One attempt, as lb_lock_try_acquire without the watch that may follow. */
int lb__lock_try(lb_lock *l, lb_target t);
/* After a blocking acquire that returned `rc`: a lock whose options name a
 * watchdog is watched by it at once. A watch that cannot start releases the
 * lock (on `t`) and its error is returned: a lock is never held unrenewed
 * when its owner asked for renewal. */
int lb__lock_watch_acquired(lb_lock *l, lb_target t, int rc);

/* Fair mode (modern/fair.c). The step functions replace acquire's and
 * release's when l->fair is set; the mode says what the next attempt does. */
typedef struct lb__fair lb__fair;
enum { LB__FAIR_TRY, LB__FAIR_WAIT, LB__FAIR_LEAVE };
int lb__fair_valid(const lb_lock_options *o); /* the fair_* options make sense */
int lb__fair_new(lb_lock *l);
int lb__fair_name_ok(const char *key, size_t keylen); /* 0: "{K}", whose companions are K's */
void lb__fair_free(lb_lock *l);
int lb__fair_acquire_step(lb_machine *m, const struct redisReply *r, const lb_now *now);
int lb__fair_release_step(lb_machine *m, const struct redisReply *r, const lb_now *now);
/* Whether a release outside fair mode goes as a fair holder's would (passing
 * the baton to a marked waiter, handing the lock to the queue's head): the
 * lock's last note, less than LB__QUEUE_NOTED_MS before `now_ns` (the lock's
 * clock), found fair clients waiting. Makes the names at the first; 0 when
 * they cannot be made, or the lock is fair (its release is that already). */
int lb__fair_courteous(lb_lock *l, int64_t now_ns);
/* A courteous release the server refused whole (an ACL that does not cover
 * the companions, a slot moving): the plain release runs instead (ops.c). */
int lb__lock_release_plainly(lb_machine *m, const lb_now *now);
int lb__fair_begin_wait(lb_lock *l); /* a fresh token kept until lb__fair_end_wait */
void lb__fair_set_mode(lb_lock *l, int mode);
void lb__fair_end_wait(lb_lock *l);
/* The inbox the next attempts name for a hand-off (NULL: the lock's channel). */
#define LB__INBOX_MAX (LB__INBOX_PREFIX_MAX + LB_TOKEN_LEN) /* bytes */
void lb__fair_set_inbox(lb_lock *l, const char *inbox, size_t len);
/* A hand-off message granted queue place `place` (-1: none named): LB_OK
 * when that is the place our attempts have kept us in, else LB_EBUSY (to be
 * checked by an attempt). */
int lb__fair_handed(lb_lock *l, int64_t place, int64_t fence);
int64_t lb__fair_lease_ms(const lb_lock *l);
/* A wait blocked on its grant list (set the inbox to LB__FAIR_LISTS first, so
 * that attempts name it): one BLPOP of up to `ms` on `c`. LB_OK: a grant of
 * our place, the lock is ours; LB_EBUSY: something came that an attempt must
 * judge; LB_ETIMEDOUT: nothing came; LB_EREDIS: the server refused BLPOP (a
 * server before 6.0, an ACL): wait by polling instead; LB_EIO, LB_EPROTO. */
int lb__fair_block(lb_lock *l, struct redisContext *c, int64_t ms);
/* The grant list of the wait running ("{key}:grant:<token>"): its length,
 * and *name (valid until the next call on `l`). */
size_t lb__fair_own_list(lb_lock *l, const char **name);
/* Takes a grant read from that list as lb__fair_block does: LB_OK the lock
 * is ours, LB_EBUSY it grants nothing provably ours (attempt), LB_EPROTO. */
int lb__fair_take_grant(lb_lock *l, const char *g, size_t len);
/* The longest BLPOP `c` allows, ms: half its read timeout (if it has one)
 * less LB__BLPOP_LATE_MS; 0 if that is too short to block at all. */
int64_t lb__fair_block_max_ms(const struct redisContext *c);
/* How late Redis may end a BLPOP past its timeout: blocked clients' timeouts
 * are checked on the server's timer, every 1000/hz ms (hz 10 by default). */
#define LB__BLPOP_LATE_MS 100
#define LB__FAIR_LISTS "*" /* the inbox that names a grant list */
/* The baton (modern/fair.c): a blocking wait on one connection first takes
 * a free key with SET NX GET, else leaves its mark and blocks on the lock's baton
 * list for `ms`, in one write. LB_OK: the lock is ours (the baton's token is
 * now the lock's); LB_ETIMEDOUT: no baton came; LB_EREDIS: the server refused
 * a command (wait without the baton); LB_EWRONGTYPE, LB_EIO, LB_EPROTO,
 * LB_ENOMEM. */
int lb__fair_baton_wait(lb_lock *l, struct redisContext *c, int64_t ms);
/* Each step of it apart, for the race explorer: the SET NX won (sent at
 * sent_ns), or a baton popped by a BLPOP sent at sent_ns (LB_OK or
 * LB_EPROTO); the names of the baton list (its length returned) and mark. */
int lb__fair_baton_won(lb_lock *l, int64_t sent_ns);
/* Whether a wait begun at now_ns may skip its SET NX: our last release, less
 * than LB__BATON_SKIP_MS before, handed the lock on (asked once), or opened a
 * window for outsiders that is not over. */
int lb__fair_baton_skip(lb_lock *l, int64_t now_ns);
#define LB__BATON_SKIP_MS 1
int lb__fair_take_baton(lb_lock *l, const char *s, size_t len, int64_t sent_ns);
size_t lb__fair_baton_names(lb_lock *l, const char **list, const char **mark);
/* How long a baton lives in its list, ms: its receiver counts its lease from
 * its BLPOP's send less this. A lock passes or waits for a baton only with a
 * TTL of four lives or more. */
#define LB__BATON_LIFE_MS 100
/* A baton receiver whose lease has less than this left, ms, has not
 * acquired: it gives the token back and goes on waiting in the queue (a
 * lease that short would lapse before its holder could use it). */
#define LB__BATON_MARGIN_MS 100
/* How often a handle passing the baton asks for a probe window, ms (the
 * windows themselves follow one schedule in the lock's fair state). */
#define LB__PROBE_ASK_MS 1000
/* Whether the lease of the lock just taken has LB__BATON_MARGIN_MS or more
 * left on the lock's clock. */
int lb__fair_lease_usable(const lb_lock *l);
/* The last busy attempt found the key held by a token no fair grant wrote
 * (as far as the queue knows): its release hands nothing off. */
int lb__fair_holder_foreign(const lb_lock *l);


/* A wait outside fair mode notes itself in the key's fair state, if a queue
 * is there, so that fair releases open a window for it (modern/outsider.c).
 * LB_OK or the note's failure, which the wait ignores; note_found_queue says
 * whether it found a queue (kept until the next note, across waits). */
int lb__lock_note_outsider(lb_lock *l, lb_target t, int saw);
/* The same, best effort and at most once per LB__OUTSIDER_NOTE_MS: for a
 * fair try refused, and a fair wait that saw an outside holder (saw 1). */
void lb__lock_note_due(lb_lock *l, lb_target t, int saw);
/* How long an outsider note lives, ms (its companion's TTL), and how long a
 * client that found the key held by a value that is no lockbridge token (a
 * client outside the queue: another program's, or a legacy lock's)
 * remembers it. */
#define LB__OUTSIDER_SEEN_MS 2000
/* How long a client that remembers an outside holder waits after its own
 * release before it asks for the lock again, ms: a client that polls every
 * 200 ms (a common JVM locker's sleep) finds the key free in that time, the
 * round trips of both included. */
#define LB__OUTSIDER_STAND_BACK_MS 250
/* A plain wait that met the outsider holding less than this ago, ms, does not
 * stand back: the outsider is taking turns of its own (modern/blocking.c). */
#define LB__OUTSIDER_TURNS_MS 100
/* Whether `v` (len bytes), read at the lock's key, is no lockbridge token
 * (32 hex digits). */
int lb__value_foreign(const char *v, size_t len);
/* How often a refused wait outside fair mode notes itself, ms: the first note
 * once it has been refused this long, then again each time as long. */
#define LB__OUTSIDER_NOTE_MS 100
/* How long a note's finding of a fair queue is trusted, ms: beside a queue
 * an outsider is refused, and notes itself again, between the queue's
 * windows (at least 4 x 200 ms apart by default, the outsider's window
 * turns included); a client left alone after the queue has gone stops
 * standing back after this long. */
#define LB__QUEUE_NOTED_MS 1000

/* The machines behind lb_lock_machine. */
lb_machine *lb__lock_try_acquire_machine(lb_lock *l);
lb_machine *lb__lock_release_machine(lb_lock *l);
lb_machine *lb__lock_extend_machine(lb_lock *l, int64_t ms, lb_extend_mode mode);
lb_machine *lb__lock_check_machine(lb_lock *l);

#endif
