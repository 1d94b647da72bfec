/* Fair mode of the token lock: acquire and release step machines over a queue
 * of waiters kept beside the lock, so that a release hands the lock straight
 * to the oldest live waiter (scripts in modern/scripts/modern_fair_*.lua). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"

/* F_START is 0, the first state the machine builders of acquire.c and ops.c
 * set before handing over to these step functions. */
enum { F_START, F_SCRIPT, F_PUSH };

/* A grant on a grant list: "token place fence next", at most this long. */
#define GRANT_MAX (2 * LB_TOKEN_LEN + 2 * 21 + 4)

struct lb__fair {
    char *queue, *state;     /* companion keys: "queue" (zset), "fair" (hash) */
    size_t queuelen, statelen;
    int mode;                /* LB__FAIR_TRY, _WAIT or _LEAVE: the next attempt's */
    int keep_token;          /* a blocking wait keeps one token in the queue */
    int64_t place;           /* our queue place (ticket), as the wait attempt
                              * that queued us reported it; 0: none known */
    const char *inbox;       /* the waiter's inbox for hand-offs, or NULL */
    size_t inboxlen;
    char *arg;               /* the packed script argument */
    size_t argcap, arglen;
    /* Grant lists, "{key}:grant:<token>": ours (while a wait blocks on it)
     * and the one a release names (its successor's, or the grantee's the
     * script returned); both start with the prefix, prefixlen bytes. */
    char *own, *other;
    size_t prefixlen;
    char succ[LB__TOKEN_CAP]; /* queued behind us when granted; "": unknown */
    int foreign;             /* the last busy attempt found a holder that may
                              * not be fair: its release may hand nothing off */
    char grant[GRANT_MAX + 1]; /* a grant the release script left us to push */
    size_t grantlen;
    /* The baton: "{key}:baton" (list) and "{key}:bwait" (the mark of the
     * waiter that blocked last, its token). */
    char *baton, *mark, *outsider; /* and "{key}:outsider", the outsider note */
    size_t batonlen, marklen, outsiderlen;
    char marked[LB__TOKEN_CAP]; /* the mark our wait left; "": none */
    int handed;              /* our last release handed the lock on, */
    int64_t handed_ns;       /* when its reply came (the lock's monotonic clock) */
    int64_t window_end_ns;   /* our last release opened a window for outsiders
                              * beside the baton, until then (same clock) */
    char barg[2 * LB__TOKEN_CAP + 2 * 21 + 6]; /* "[o][p]fresh marked ttl life " */
    int64_t probe_ns;        /* when this handle next asks for a probe window */
};

#define LOCK_OF(m) ((lb_lock *)(void *)(m))
/* The names a release uses: a fair lock's own, or those of a courteous
 * release outside fair mode. */
#define FAIR(l) ((l)->fair ? (l)->fair : (l)->courtesy)

static const char *mode_name[] = {"try", "wait", "leave"};

/* Bounds keep the scripts' arithmetic (Lua numbers) exact. */
#define FAIR_MS_MAX 1000000000000LL /* about 31 years */

int lb__fair_valid(const lb_lock_options *o) {
    if (o->fair != 0 && o->fair != 1) return 0;
    if (o->fair_lease_ms < 0 || o->fair_yield_every < 0 || o->fair_yield_ms < 0 ||
        o->fair_baton_ms < 0)
        return 0;
    if (!o->fair) return 1;
    if (o->ttl_ms > FAIR_MS_MAX || o->backoff_max_ms > FAIR_MS_MAX ||
        o->fair_lease_ms > FAIR_MS_MAX || o->fair_yield_ms > FAIR_MS_MAX ||
        o->fair_yield_every > FAIR_MS_MAX || o->fair_baton_ms > FAIR_MS_MAX)
        return 0;
    /* A queued waiter refreshes its place every third of its lease, but
     * never more often than once per back-off step: the lease must be longer. */
    if (o->fair_lease_ms > 0 && o->fair_lease_ms <= o->backoff_max_ms) return 0;
    return o->fair_yield_every == 0 || o->fair_yield_ms > 0;
}

/* A key that is a hash tag alone, "{K}", has the companions of the key K
 * ("{K}:queue" is both's): two fair locks by those names would share their
 * queue, grant lists and baton, and a release of one would hand a waiter of
 * the other a lock it wrote at its own key. A fair lock may not be named so. */
int lb__fair_name_ok(const char *key, size_t keylen) {
    if (keylen < 2 || key[0] != '{' || key[keylen - 1] != '}') return 1;
    return memchr(key + 1, '}', keylen - 2) != NULL;
}

/* The names a fair release uses, in *out (partly made on failure: freed by
 * drop). */
static int make(lb_lock *l, lb__fair **out) {
    lb__fair *f = lb__alloc(l->opts.allocator, sizeof *f);
    if (!f) return LB_ENOMEM;
    memset(f, 0, sizeof *f);
    *out = f;
    int rc = lb__lock_companion(l, "queue", &f->queue, &f->queuelen);
    if (rc == LB_OK) rc = lb__lock_companion(l, "fair", &f->state, &f->statelen);
    if (rc == LB_OK) rc = lb__lock_companion(l, "baton", &f->baton, &f->batonlen);
    if (rc == LB_OK) rc = lb__lock_companion(l, "bwait", &f->mark, &f->marklen);
    if (rc == LB_OK) rc = lb__lock_companion(l, "outsider", &f->outsider, &f->outsiderlen);
    if (rc != LB_OK) return rc; /* lb__fair_free, called by lb_lock_free, cleans up */
    /* Token, two numbers and a channel (the release's, beside a successor's
     * token) or an inbox (a wait's). */
    size_t chan = l->channellen > LB__INBOX_MAX ? l->channellen : LB__INBOX_MAX;
    f->argcap = 6 + 2 * LB_TOKEN_LEN + 2 * 21 + chan + 6 + sizeof f->barg;
    f->arg = lb__alloc(l->opts.allocator, f->argcap);
    if (!f->arg) return LB_ENOMEM;
    char *prefix = NULL;
    if ((rc = lb__lock_companion(l, "grant:", &prefix, &f->prefixlen)) != LB_OK) {
        lb__free(l->opts.allocator, prefix);
        return rc;
    }
    f->own = lb__alloc(l->opts.allocator, f->prefixlen + LB__TOKEN_CAP);
    f->other = lb__alloc(l->opts.allocator, f->prefixlen + LB__TOKEN_CAP);
    if (f->own) memcpy(f->own, prefix, f->prefixlen);
    if (f->other) memcpy(f->other, prefix, f->prefixlen);
    lb__free(l->opts.allocator, prefix);
    return f->own && f->other ? LB_OK : LB_ENOMEM;
}

int lb__fair_new(lb_lock *l) { return make(l, &l->fair); }

static void drop(lb_lock *l, lb__fair **p) {
    lb__fair *f = *p;
    if (!f) return;
    lb__free(l->opts.allocator, f->queue);
    lb__free(l->opts.allocator, f->state);
    lb__free(l->opts.allocator, f->baton);
    lb__free(l->opts.allocator, f->mark);
    lb__free(l->opts.allocator, f->outsider);
    lb__free(l->opts.allocator, f->arg);
    lb__free(l->opts.allocator, f->own);
    lb__free(l->opts.allocator, f->other);
    lb__free(l->opts.allocator, f);
    *p = NULL;
}

void lb__fair_free(lb_lock *l) {
    drop(l, &l->fair);
    drop(l, &l->courtesy);
}

/* A client outside fair mode that takes the key between fair waiters (in a
 * window, or when the queue has just emptied) and releases it plainly
 * frees it under waiters blocked on the baton or on grant lists, who hear
 * nothing of it and wait out their blocks, while it, asking again at once,
 * takes the key turn after turn. Its release goes as a fair holder's while
 * its last note found fair clients there: the note ran on the same
 * companions, so the server let this user touch them. */
int lb__fair_courteous(lb_lock *l, int64_t now_ns) {
    if (l->fair || !l->note_found_queue ||
        now_ns - l->noted_ns > (int64_t)LB__QUEUE_NOTED_MS * 1000000)
        return 0;
    /* Outside fair mode the window options were never checked. */
    const lb_lock_options *o = &l->opts;
    if (o->fair_yield_every < 0 || o->fair_yield_every > FAIR_MS_MAX || o->fair_yield_ms < 0 ||
        o->fair_yield_ms > FAIR_MS_MAX || (o->fair_yield_every > 0 && o->fair_yield_ms == 0))
        return 0;
    if (l->courtesy) return 1;
    if (make(l, &l->courtesy) == LB_OK) return 1;
    drop(l, &l->courtesy);
    return 0;
}

int64_t lb__fair_lease_ms(const lb_lock *l) {
    if (l->opts.fair_lease_ms > 0) return l->opts.fair_lease_ms;
    int64_t ms = 2 * l->opts.backoff_max_ms;
    return ms < 1000 ? 1000 : ms;
}

int lb__fair_begin_wait(lb_lock *l) {
    if (!l->fixed_token && lb__token(l->token) != LB_OK) return LB_EIO;
    l->fair->keep_token = 1;
    l->fair->marked[0] = '\0';
    l->fair->mode = LB__FAIR_WAIT;
    l->fair->place = 0;
    return LB_OK;
}

void lb__fair_set_mode(lb_lock *l, int mode) { l->fair->mode = mode; }

void lb__fair_set_inbox(lb_lock *l, const char *inbox, size_t len) {
    l->fair->inbox = len <= LB__INBOX_MAX ? inbox : NULL;
    l->fair->inboxlen = l->fair->inbox ? len : 0;
}

void lb__fair_end_wait(lb_lock *l) {
    l->fair->keep_token = 0;
    l->fair->mode = LB__FAIR_TRY;
    l->fair->place = 0;
    lb__fair_set_inbox(l, NULL, 0);
}

/* The lease runs from the attempt's send for `left_ms`, what the key had
 * left when the script read it: a hand-off's PX started at the release,
 * which may be a back-off step or more before this attempt, so counting our
 * whole TTL from the send would over-estimate it. Never more than our TTL;
 * -1 (a key without TTL, which never lapses) counts as our TTL. */
static int acquired(lb_lock *l, int64_t fence, int64_t left_ms) {
    l->held = 1;
    l->fence = fence;
    l->holder_ttl_ms = -1;
    int64_t ms = left_ms < 0 || left_ms > l->opts.ttl_ms ? l->opts.ttl_ms : left_ms;
    l->deadline_ns = lb__lease_end_ns(l->sent_ns, ms);
    return LB_OK;
}

/* A hand-off told by message. The token alone does not prove it ours: a
 * grant of an earlier place of our token may have lapsed before we read it,
 * the token having queued again since. A grant of the place we hold now is:
 * our last attempt, busy, found the key without our token and kept us in
 * that place, so the release wrote it after that attempt was sent, and our
 * whole TTL counted from that send is a safe under-estimate. Any other grant
 * (an older place, or none named) is checked by an attempt. */
int lb__fair_handed(lb_lock *l, int64_t place, int64_t fence) {
    if (place <= 0 || place != l->fair->place) return LB_EBUSY;
    return acquired(l, fence, l->opts.ttl_ms);
}

static void keys(lb_lock *l) {
    lb__fair *f = l->fair;
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, f->queue, f->queuelen);
    lb__cmd_arg(&l->m.cmd, f->state, f->statelen);
    if (l->opts.fencing) lb__cmd_arg(&l->m.cmd, l->fence_key, l->fence_keylen);
}

static int acquire_start(lb_lock *l, const lb_now *now) {
    lb__fair *f = l->fair;
    if (l->held) return lb__fail(&l->m, LB_ESTATE, "already held by this handle");
    if (!l->fixed_token && !f->keep_token && lb__token(l->token) != LB_OK)
        return lb__fail(&l->m, LB_EIO, "the OS random source failed");
    l->sent_ns = now->mono_ns;
    l->fence = 0;
    int n = snprintf(f->arg, f->argcap, "%s %s %lld %lld", mode_name[f->mode], l->token,
                     (long long)l->opts.ttl_ms, (long long)lb__fair_lease_ms(l));
    f->arglen = (size_t)n;
    if (f->inbox && f->mode == LB__FAIR_WAIT) {
        f->arg[f->arglen++] = ' ';
        memcpy(f->arg + f->arglen, f->inbox, f->inboxlen);
        f->arglen += f->inboxlen;
    }
    lb__cmd_script(&l->m, &lb__script_modern_fair_acquire, l->opts.fencing ? "4" : "3");
    keys(l);
    lb__cmd_arg(&l->m.cmd, f->arg, f->arglen);
    l->state = F_SCRIPT;
    return LB_STEP_SEND;
}

static int acquire_reply(lb_lock *l, const redisReply *r) {
    if (!r)
        return lb__fail(&l->m, LB_EIO, "connection failed during acquire; a lock or a "
                        "queue place we may have got lapses with its TTL or lease");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "fair acquire script");
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements > 4)
        return lb__fail(&l->m, LB_EPROTO, "fair acquire script: unexpected reply");
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return lb__fail(&l->m, LB_EPROTO, "fair acquire script: unexpected reply");
    long long ok = r->element[0]->integer, v = r->element[1]->integer, x = r->element[2]->integer;
    if (ok == 1 && r->elements == 3 && v >= 0 && (v > 0 || !l->opts.fencing) && x >= -1)
        return acquired(l, l->opts.fencing ? v : 0, x);
    long long foreign = r->elements == 4 ? r->element[3]->integer : 0;
    if (ok != 0 || v < -2 || v > FAIR_MS_MAX || x < 0 || foreign < 0 || foreign > 2)
        return lb__fail(&l->m, LB_EPROTO, "fair acquire script: unexpected values");
    l->fair->foreign = foreign != 0;
    /* 2: the holder's value is no lockbridge token (see modern/outsider.c). */
    if (foreign == 2) l->outsider_ns = lb_clock_now(l->opts.clock).mono_ns;
    /* A new place when this attempt queued us; 0: we kept ours. */
    if (l->fair->mode == LB__FAIR_WAIT && x > 0) l->fair->place = x;
    /* Leaving learns nothing of the holder: keep what the last attempt saw. */
    if (l->fair->mode == LB__FAIR_LEAVE) return lb__fail(&l->m, LB_EBUSY, "left the queue");
    l->holder_ttl_ms = v == -2 ? 0 : v;
    if (v == -1) return lb__fail(&l->m, LB_EBUSY, "held by a key without TTL");
    return lb__fail(&l->m, LB_EBUSY, "held or promised for %lld ms more", (long long)l->holder_ttl_ms);
}

int lb__fair_acquire_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    if (l->state == F_START) return acquire_start(l, now);
    return acquire_reply(l, r);
}

static int is_token(const char *s, size_t len) {
    if (len != LB_TOKEN_LEN) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return 0;
    return 1;
}

/* Names in `f->other` the grant list of `token` (LB_TOKEN_LEN bytes). */
static size_t name_list(lb__fair *f, char *buf, const char *token) {
    memcpy(buf + f->prefixlen, token, LB_TOKEN_LEN);
    buf[f->prefixlen + LB_TOKEN_LEN] = '\0';
    return f->prefixlen + LB_TOKEN_LEN;
}

/* A client that does not queue is seen only while it holds the key, which
 * it never gets while the baton passes on and on: a release asks, at most
 * once per LB__PROBE_ASK_MS per handle, for a probe window, which the
 * script opens only when due on the schedule all clients share (see the
 * release script: windows 2 s apart at first, doubling up to 64 s while no
 * outsider is noted). */
static int probe_asked(lb_lock *l) {
    int64_t now = lb_clock_now(l->opts.clock).mono_ns;
    if (now < FAIR(l)->probe_ns) return 0;
    int first = FAIR(l)->probe_ns == 0;
    FAIR(l)->probe_ns = now + (int64_t)LB__PROBE_ASK_MS * 1000000;
    return !first;
}

/* A release without fencing may pass the lock on as a baton to a waiter
 * blocked on the baton list: it names a fresh token for it (written at the
 * key only then), the mark our own wait left, its TTL and the baton's life
 * (LB__BATON_LIFE_MS). No baton from a lock with fencing (its number would
 * need counting in the release), nor from a TTL under four lives, which a
 * baton wait needs of its own (a shorter baton could reach its receiver with
 * no lease left); neither kind of lock ever holds by a baton, so no mark of
 * its own goes unnamed. None either when the random source fails: the
 * release goes on without. */
static int baton_arg(lb_lock *l) {
    lb__fair *f = FAIR(l);
    char fresh[LB__TOKEN_CAP];
    if (l->opts.fencing || l->opts.ttl_ms < (int64_t)4 * LB__BATON_LIFE_MS || lb__token(fresh) != LB_OK)
        return 0;
    snprintf(f->barg, sizeof f->barg, "%s%s%s %s %lld %lld ", l->fair ? "" : "o",
             probe_asked(l) ? "p" : "", fresh,
             f->marked[0] ? f->marked : "-", (long long)l->opts.ttl_ms, (long long)LB__BATON_LIFE_MS);
    return 1;
}

/* The release names its successor's grant list when a grant told it who that
 * is, so the script can push the next grant to a declared key; without one
 * it names its own (an unused list) and pushes nothing itself. */
static int release_start(lb_lock *l) {
    lb__fair *f = FAIR(l);
    if (!l->held) return lb__fail(&l->m, LB_ESTATE, "not held by this handle");
    const char *succ = f->succ[0] ? f->succ : "-";
    int baton = baton_arg(l);
    int n = snprintf(f->arg, f->argcap, "%s %lld %lld %s %s", l->token,
                     (long long)l->opts.fair_yield_every, (long long)l->opts.fair_yield_ms, succ,
                     baton ? f->barg : "");
    memcpy(f->arg + n, l->channel, l->channellen);
    f->arglen = (size_t)n + l->channellen;
    size_t listlen = name_list(f, f->other, f->succ[0] ? f->succ : l->token);
    lb__cmd_script(&l->m, &lb__script_modern_fair_release,
                   baton ? "7" : l->opts.fencing ? "5" : "4");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, f->queue, f->queuelen);
    lb__cmd_arg(&l->m.cmd, f->state, f->statelen);
    lb__cmd_arg(&l->m.cmd, f->other, listlen);
    if (baton) {
        lb__cmd_arg(&l->m.cmd, f->baton, f->batonlen);
        lb__cmd_arg(&l->m.cmd, f->mark, f->marklen);
        lb__cmd_arg(&l->m.cmd, f->outsider, f->outsiderlen);
    }
    if (l->opts.fencing) lb__cmd_arg(&l->m.cmd, l->fence_key, l->fence_keylen);
    lb__cmd_arg(&l->m.cmd, f->arg, f->arglen);
    f->succ[0] = '\0';
    l->state = F_SCRIPT;
    return LB_STEP_SEND;
}

/* The script handed the lock to a waiter blocked on a grant list other than
 * the one we named: the lock is released; the grant is pushed to its list by
 * a script that gives the list its TTL in the same step, so that a dead
 * grantee's list goes even if we stop right after. Should the push fail, the
 * grantee finds the lock its own at its next attempt. */
static int push_grant(lb_lock *l, const redisReply *r) {
    lb__fair *f = FAIR(l);
    if (r->len > GRANT_MAX || !is_token(r->str, r->len > LB_TOKEN_LEN ? LB_TOKEN_LEN : r->len) ||
        (r->len > LB_TOKEN_LEN && r->str[LB_TOKEN_LEN] != ' '))
        return lb__fail(&l->m, LB_EPROTO, "fair release script: unexpected grant");
    memcpy(f->grant, r->str, r->len);
    f->grantlen = r->len;
    size_t listlen = name_list(f, f->other, r->str);
    snprintf(l->ms_arg, sizeof l->ms_arg, "%lld", (long long)l->opts.ttl_ms);
    lb__cmd_script(&l->m, &lb__script_modern_fair_push, "2");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, f->other, listlen);
    lb__cmd_arg(&l->m.cmd, f->grant, f->grantlen);
    lb__cmd_argz(&l->m.cmd, l->ms_arg);
    l->state = F_PUSH;
    return LB_STEP_SEND;
}

int lb__fair_release_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    if (l->state == F_START) return release_start(l);
    if (!r) {
        if (l->state != F_SCRIPT) return LB_OK; /* released; the push is best effort */
        return lb__fail(m, LB_EIO, "connection failed during release");
    }
    if (l->state == F_PUSH) return LB_OK; /* best effort, as above */
    /* The script refused changes nothing; a courteous release goes plainly. */
    if (r->type == REDIS_REPLY_ERROR && !l->fair) return lb__lock_release_plainly(m, now);
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(m, r, "fair release script");
    if (r->type == REDIS_REPLY_STRING) {
        /* A string comes only once the script gave the lock up (handed it
         * over, or opened a window): ours no longer, whatever it says. */
        l->held = 0;
        FAIR(l)->marked[0] = '\0';
        return push_grant(l, r);
    }
    /* 6 answers only a caller outside fair mode (its 'o'). */
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer > 6 ||
        (r->integer == 6 && l->fair))
        return lb__fail(m, LB_EPROTO, "fair release script: unexpected reply");
    /* Not before: a release that failed keeps the lock, and its retry must
     * still name the mark our wait left (see the release script). */
    l->held = 0;
    FAIR(l)->marked[0] = '\0';
    FAIR(l)->handed = r->integer == 2 || r->integer == 4;
    /* Outside fair mode, a polling wait stands back after a hand-off as it
     * does when its release reached listeners (modern/blocking.c); and a
     * hand-off shows fair clients there as a note does, so that a client
     * that takes the key at once after each release, never refused and so
     * never noting itself, goes on handing it over. */
    /* So does a release into a window open for outsiders (6) with fair
     * waiters blocked: the other outsiders get a turn in it. */
    if (!l->fair && (FAIR(l)->handed || r->integer == 6)) {
        l->heard_release = 1;
        l->noted_ns = now->mono_ns;
    } else if (!l->fair) {
        l->heard_release = 0;
    }
    /* An outsider noted by another client: we stand back as if we had met
     * it (see stand_back in modern/blocking.c). */
    if (r->integer >= 3 && l->fair) l->outsider_ns = now->mono_ns;
    FAIR(l)->handed_ns = now->mono_ns;
    l->released_ns = now->mono_ns;
    /* A window for outsiders: our next wait keeps off the free key as
     * queued waiters do (the script set ~open for as long). */
    if (r->integer == 3) FAIR(l)->window_end_ns = now->mono_ns + l->opts.fair_yield_ms * 1000000;
    if (r->integer == 0) return lb__fail(m, LB_ELOST, "the key no longer holds our token; nothing changed");
    return LB_OK;
}

/* ---- Waiting on our grant list ------------------------------------------------ */

/* A socket read timeout set on the connection (redisSetTimeout), ms; 0: none.
 * A BLPOP must end well within it, or hiredis would call the connection
 * broken. */
static int64_t read_timeout_ms(const redisContext *c) {
    struct timeval tv;
    socklen_t len = sizeof tv;
    if (getsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) != 0) return 0;
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

int lb__fair_holder_foreign(const lb_lock *l) { return l->fair->foreign; }

int64_t lb__fair_block_max_ms(const redisContext *c) {
    int64_t t = read_timeout_ms(c);
    if (t <= 0) return INT64_MAX;
    int64_t ms = t / 2 - LB__BLPOP_LATE_MS;
    return ms >= LB_CANCEL_SLICE_MS ? ms : 0;
}

/* A grant read from our list: "token place fence next". Ours if it names our
 * token and our queue place (an earlier place's grant, read late, may have
 * lapsed: the next attempt decides). Its lease counts from the send of our
 * last attempt, which found us queued and not granted: the release that
 * wrote the key came after it, so the TTL counted from there ends no later
 * than the key's. */
static int take_grant(lb_lock *l, const char *g, size_t len) {
    char buf[GRANT_MAX + 1];
    if (len > GRANT_MAX) return lb__fail(&l->m, LB_EPROTO, "grant list: unexpected grant");
    memcpy(buf, g, len);
    buf[len] = '\0';
    char *save = NULL, *tok = strtok_r(buf, " ", &save), *place = strtok_r(NULL, " ", &save),
         *fence = strtok_r(NULL, " ", &save), *next = strtok_r(NULL, " ", &save);
    char *end1 = NULL, *end2 = NULL;
    long long p = place ? strtoll(place, &end1, 10) : -1;
    long long fn = fence ? strtoll(fence, &end2, 10) : -1;
    if (!tok || !next || strtok_r(NULL, " ", &save) || !end1 || *end1 || !end2 || *end2 ||
        p < 0 || fn < 0 || (strcmp(next, "-") != 0 && !is_token(next, strlen(next))))
        return lb__fail(&l->m, LB_EPROTO, "grant list: unexpected grant");
    if (strcmp(tok, l->token) != 0 || p == 0 || p != l->fair->place ||
        (l->opts.fencing && fn <= 0))
        return LB_EBUSY; /* a wake-up (place 0), or not provably ours: attempt */
    acquired(l, l->opts.fencing ? fn : 0, l->opts.ttl_ms);
    if (strcmp(next, "-") != 0) memcpy(l->fair->succ, next, LB__TOKEN_CAP);
    return LB_OK;
}

size_t lb__fair_own_list(lb_lock *l, const char **name) {
    size_t len = name_list(l->fair, l->fair->own, l->token);
    *name = l->fair->own;
    return len;
}

int lb__fair_take_grant(lb_lock *l, const char *g, size_t len) {
    int rc = take_grant(l, g, len);
    if (rc == LB_EPROTO) memcpy(l->errstr, l->m.errstr, sizeof l->errstr);
    return rc;
}

int lb__fair_block(lb_lock *l, redisContext *c, int64_t ms) {
    lb__fair *f = l->fair;
    char secs[32];
    if (ms < 1) ms = 1;
    snprintf(secs, sizeof secs, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
    const char *argv[3] = {"BLPOP", f->own, secs};
    size_t argvlen[3] = {5, name_list(f, f->own, l->token), strlen(secs)};
    l->m.total++;
    redisReply *r = redisCommandArgv(c, 3, argv, argvlen);
    if (!r) {
        snprintf(l->errstr, sizeof l->errstr, "connection failed while blocked on the grant list: %.60s",
                 c->errstr);
        return LB_EIO;
    }
    int rc;
    if (r->type == REDIS_REPLY_NIL) rc = LB_ETIMEDOUT;
    else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(l->errstr, sizeof l->errstr, "BLPOP on the grant list: %.80s", r->str);
        rc = LB_EREDIS;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[1]->type == REDIS_REPLY_STRING) {
        rc = lb__fair_take_grant(l, r->element[1]->str, r->element[1]->len);
    } else {
        snprintf(l->errstr, sizeof l->errstr, "BLPOP on the grant list: unexpected reply");
        rc = LB_EPROTO;
    }
    freeReplyObject(r);
    return rc;
}

/* ---- The baton ------------------------------------------------------------------ */

/* A wait that took a free key with its own SET NX: its whole TTL from the
 * SET's send, as a plain acquire counts it. */
int lb__fair_baton_won(lb_lock *l, int64_t sent_ns) {
    l->fair->marked[0] = '\0';
    l->sent_ns = sent_ns;
    return acquired(l, 0, l->opts.ttl_ms);
}

/* A baton "token ttl life" popped off the list. The release wrote the token
 * at the key with its own TTL when it pushed the baton; the pop came at most
 * the baton's life after the push (the list lapses then), and no earlier than
 * the BLPOP's send less that life: the shorter of the two TTLs counted from
 * there never runs past the key's end. The token becomes ours; the mark our
 * wait left is remembered, so that our release does not take it for another
 * waiter's. */
int lb__fair_take_baton(lb_lock *l, const char *s, size_t len, int64_t sent_ns) {
    char buf[LB__TOKEN_CAP + 2 * 21 + 2];
    if (len >= sizeof buf) return lb__fail(&l->m, LB_EPROTO, "baton list: unexpected element");
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *save = NULL, *tok = strtok_r(buf, " ", &save), *ttl = strtok_r(NULL, " ", &save),
         *life = strtok_r(NULL, " ", &save);
    char *end1 = NULL, *end2 = NULL;
    long long t = ttl ? strtoll(ttl, &end1, 10) : -1, f = life ? strtoll(life, &end2, 10) : -1;
    if (!tok || !is_token(tok, strlen(tok)) || strtok_r(NULL, " ", &save) || !end1 || *end1 ||
        !end2 || *end2 || t < 1 || t > FAIR_MS_MAX || f < 1 || f > t / 4)
        return lb__fail(&l->m, LB_EPROTO, "baton list: unexpected element");
    memcpy(l->fair->marked, l->token, LB__TOKEN_CAP);
    memcpy(l->token, tok, LB__TOKEN_CAP);
    l->sent_ns = sent_ns - f * 1000000;
    return acquired(l, 0, t);
}

int lb__fair_lease_usable(const lb_lock *l) {
    int64_t now = lb_clock_now(l->opts.clock).mono_ns;
    return l->deadline_ns - now >= (int64_t)LB__BATON_MARGIN_MS * 1000000;
}

size_t lb__fair_baton_names(lb_lock *l, const char **list, const char **mark) {
    *list = l->fair->baton;
    *mark = l->fair->mark;
    return l->fair->batonlen;
}

/* Our TTL as SET PX takes it; a block's length as BLPOP and SET PX take it. */
static void ms_args(int64_t ms, char px[24], char secs[32]) {
    snprintf(px, 24, "%lld", (long long)ms);
    snprintf(secs, 32, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
}

static int blpop_reply(lb_lock *l, redisReply *r, int64_t sent_ns) {
    if (r->type == REDIS_REPLY_NIL) return LB_ETIMEDOUT;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(l->errstr, sizeof l->errstr, "BLPOP on the baton list: %.80s", r->str);
        return LB_EREDIS;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(l->errstr, sizeof l->errstr, "BLPOP on the baton list: unexpected reply");
        return LB_EPROTO;
    }
    int rc = lb__fair_take_baton(l, r->element[1]->str, r->element[1]->len, sent_ns);
    if (rc == LB_EPROTO) memcpy(l->errstr, l->m.errstr, sizeof l->errstr);
    return rc;
}

/* A BLPOP that ended before its time without a baton (an error, CLIENT
 * UNBLOCK, a baton we could not read) leaves our mark alive: a release within
 * its TTL would pass the lock to a wait that no longer blocks, and the key
 * would stay held for a whole TTL. It goes if it is still ours (best effort;
 * should another waiter mark in between, it waits out its block and queues). */
static void drop_mark(lb_lock *l, redisContext *c) {
    lb__fair *f = l->fair;
    const char *get[] = {"GET", f->mark};
    size_t getlen[] = {3, f->marklen};
    l->m.total++;
    redisReply *r = redisCommandArgv(c, 2, get, getlen);
    int ours = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, l->token) == 0;
    freeReplyObject(r);
    if (!ours) return;
    const char *del[] = {"DEL", f->mark};
    l->m.total++;
    freeReplyObject(redisCommandArgv(c, 2, del, getlen));
}

/* The mark (our token, for as long as we block) and the BLPOP go in one
 * write, which Redis runs without another client's command in between: the
 * mark left last is the waiter that blocked last. The mark lapses before the
 * BLPOP ends empty, so a release never passes a baton on the strength of the
 * mark of a wait that has stopped blocking (unless it died while blocked: its
 * baton then lapses, and the key with the releaser's TTL). The mark is
 * written by a script that leaves a value of another kind at its name as it
 * was (see modern_fair_mark.lua), sent whole (EVAL): a script the server
 * lost would otherwise leave the wait blocked without its mark. */
static int block_on_baton(lb_lock *l, redisContext *c, int64_t ms) {
    lb__fair *f = l->fair;
    char px[24], secs[32];
    ms_args(ms, px, secs);
    const char *body = lb__script_modern_fair_mark.body;
    const char *mark[] = {"EVAL", body, "1", f->mark, l->token, px};
    size_t marklen[] = {4, strlen(body), 1, f->marklen, strlen(l->token), strlen(px)};
    const char *pop[] = {"BLPOP", f->baton, secs};
    size_t poplen[] = {5, f->batonlen, strlen(secs)};
    int64_t sent = lb_clock_now(l->opts.clock).mono_ns, began_ms = lb__mono_ms();
    l->m.total += 2;
    if (redisAppendCommandArgv(c, 6, mark, marklen) != REDIS_OK ||
        redisAppendCommandArgv(c, 3, pop, poplen) != REDIS_OK)
        return LB_ENOMEM;
    void *r1 = NULL, *r2 = NULL;
    int ok = redisGetReply(c, &r1) == REDIS_OK && redisGetReply(c, &r2) == REDIS_OK;
    freeReplyObject(r1);
    if (!ok || !r2) {
        freeReplyObject(r2);
        snprintf(l->errstr, sizeof l->errstr, "connection failed while blocked on the baton list: %.60s",
                 c->errstr);
        return LB_EIO;
    }
    int rc = blpop_reply(l, r2, sent);
    freeReplyObject(r2);
    if (rc == LB_EREDIS || rc == LB_EPROTO || (rc == LB_ETIMEDOUT && lb__mono_ms() - began_ms < ms))
        drop_mark(l, c);
    return rc;
}

/* A wait begun within LB__BATON_SKIP_MS of our release that handed the lock
 * on (a client that locks in a loop) knows the key is held: it needs no
 * SET NX, only its mark and its block. Should the new holder release before
 * the mark lands, with no other waiter marked, the key is freed under a
 * blocked wait: it waits out its block (fair_baton_ms) and queues, or gets
 * the baton from the next holder. Asked once per hand-off. A wait begun
 * while a window our release opened for outsiders lasts skips it too: the
 * free key is theirs until the window ends, and then the queue's. */
int lb__fair_baton_skip(lb_lock *l, int64_t now_ns) {
    lb__fair *f = l->fair;
    int skip = f->handed && now_ns - f->handed_ns <= (int64_t)LB__BATON_SKIP_MS * 1000000;
    f->handed = 0;
    return skip || now_ns < f->window_end_ns;
}

/* SET NX with GET (Redis >= 7.0): nil when it wrote our token (the key was
 * free), the holder's value when not, and WRONGTYPE for a key of another
 * type, which no wait changes. An older server refuses the combination:
 * LB_EREDIS, and the wait queues. */
int lb__fair_baton_wait(lb_lock *l, redisContext *c, int64_t ms) {
    if (lb__fair_baton_skip(l, lb_clock_now(l->opts.clock).mono_ns))
        return ms >= 1 ? block_on_baton(l, c, ms) : LB_ETIMEDOUT;
    char px[24], secs[32];
    ms_args(l->opts.ttl_ms, px, secs);
    const char *set[] = {"SET", l->key, l->token, "NX", "PX", px, "GET"};
    size_t setlen[] = {3, l->keylen, strlen(l->token), 2, 2, strlen(px), 3};
    int64_t sent = lb_clock_now(l->opts.clock).mono_ns;
    l->m.total++;
    redisReply *r = redisCommandArgv(c, 7, set, setlen);
    if (!r) {
        snprintf(l->errstr, sizeof l->errstr, "connection failed during acquire: %.60s", c->errstr);
        return LB_EIO;
    }
    int type = r->type, wrongtype = type == REDIS_REPLY_ERROR && strstr(r->str, "WRONGTYPE");
    if (type == REDIS_REPLY_ERROR) snprintf(l->errstr, sizeof l->errstr, "SET NX GET: %.80s", r->str);
    if (type == REDIS_REPLY_STRING && lb__value_foreign(r->str, r->len)) l->outsider_ns = sent;
    freeReplyObject(r);
    if (type == REDIS_REPLY_NIL) return lb__fair_baton_won(l, sent);
    if (wrongtype) return LB_EWRONGTYPE;
    if (type == REDIS_REPLY_ERROR) return LB_EREDIS;
    if (type != REDIS_REPLY_STRING) {
        snprintf(l->errstr, sizeof l->errstr, "SET NX GET: unexpected reply");
        return LB_EPROTO;
    }
    return ms >= 1 ? block_on_baton(l, c, ms) : LB_ETIMEDOUT;
}
