/* The fair token lock (lb_lock_options.fair) as a race participant: a blocking
 * wait cut into steps the explorer interleaves, each an attempt or the read of
 * one hand-off from the client's own inbox (a subscription) or grant list (the
 * wait on one connection, whose BLPOP is a non-blocking LPOP here), and the
 * pause that moves the fair lock's queue leases as it moves the lock key's TTL. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"
#include "race/race.h"

lbr_part *lbr_fair_part_new(const char *kind, const lbr_part_config *cfg);
lbr_part *lbr_spoiler_new(const char *kind, const lbr_part_config *cfg);
int lbr_fair_warp(redisContext *c, const char *key, long long ms, char *live, size_t cap);
void lbr_fair_reset(redisContext *c, const char *key);
int lbr_fair_untimed_key(redisContext *c, const char *key, char *bad, size_t cap);

#define PENDING_MAX 16 /* messages read off the socket, not yet taken; more are dropped */
#define MSG_MAX 128    /* bytes of one message kept; a grant needs about 70 */

/* A client of lb_lock_acquire_wait, one attempt per step: the wait keeps
 * one token and its queue place from its first attempt until it holds the
 * lock, and names an inbox that a subscription of its own listens to. */
typedef struct fairpart fairpart;

/* The baton's steps of a wait on one connection (modern/blocking.c's
 * baton_wait): its SET NX, its mark (the library's mark script), and its
 * BLPOP, a non-blocking pop here (a baton pushed while it would have blocked
 * is popped at the step after the push, sent later than the BLPOP was: a
 * lease counted from that send ends later, so the model errs on the unsafe
 * side). A pop that finds no baton stands for a BLPOP that ended empty, by
 * which time the mark had lapsed: it deletes the mark if still its own, in
 * the same step. A baton with less than LB__BATON_MARGIN_MS of lease left is
 * given back by the lock's own release machine, its commands further steps
 * of the same operation, and the wait goes on in the queue. */
typedef struct batonstep {
    lb_machine m; /* first: the machine's address is the step's */
    fairpart *fp;
    int state;
    int64_t sent_ns;
    char px[24];
    char key[256];
    char own[LB__TOKEN_CAP]; /* the wait's token, the lock's again after a give-back */
} batonstep;

struct fairpart {
    lbr_part part;
    lb_lock *lock;
    int baton;             /* "lb-fair-baton": each wait tries the baton first */
    int batoned;           /* the wait running has tried it */
    batonstep bs;
    int fenced;
    int lists;             /* waits on its grant list (sub then only pops it) */
    int waiting;           /* inside a wait: between its first attempt and the lock */
    /* A wait with a deadline: after this many busy attempts its next step is
     * the leave attempt (0: it waits for ever), then the wait is over. */
    int leave_after;
    int attempts;          /* attempts of the wait running, the leave's excluded */
    int left;              /* the wait running ended with its leave attempt */
    redisContext *sub;     /* subscribed to the inbox, on the world's server */
    char inbox[96];
    char pending[PENDING_MAX][MSG_MAX]; /* read off the socket, oldest first */
    size_t pending_len[PENDING_MAX];
    int npending;
};

#define FAIRPART(p) ((fairpart *)(void *)(p))

static void fair_destroy(lbr_part *p);
int lbr_fair_blocked_on_baton(const lbr_part *p, const lb_machine *running);

/* A wait that got the lock ends as lb_lock_acquire_wait ends it: the queue
 * place and the inbox are forgotten, so a late grant finds no wait to take it. */
static void settle(fairpart *fp) {
    if (fp->waiting && lb_lock_info_of(fp->lock).held) {
        lb__fair_end_wait(fp->lock);
        fp->waiting = fp->left = 0;
    }
}

enum { BS_START, BS_SETNX, BS_MARK, BS_POP, BS_GIVEBACK };

/* The mark lives as long as the wait blocks (fair_baton_ms, its default). */
#define BATON_BLOCK_MS "100"

static int baton_cmd(batonstep *b, int state, int n, const char *const *argv) {
    lb__cmd_reset(&b->m.cmd);
    for (int i = 0; i < n; i++) lb__cmd_argz(&b->m.cmd, argv[i]);
    b->state = state;
    return LB_STEP_SEND;
}

/* The pop that stands for the BLPOP: a baton, or none, and then the mark,
 * which had lapsed by the time a real BLPOP ended empty, goes if it is ours.
 * KEYS list, mark; ARGV the wait's token. */
static const char pop_script[] =
    "local v = redis.call('LPOP', KEYS[1])\n"
    "if not v and redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end\n"
    "return v\n";

static int baton_mark(batonstep *b, const char *mark, const char *token) {
    const char *argv[] = {"EVAL", lb__script_modern_fair_mark.body, "1", mark, token, BATON_BLOCK_MS};
    return baton_cmd(b, BS_MARK, 6, argv);
}

/* One step of the lock's release machine, which gives a short baton back:
 * its command is sent as the baton step's own. Once it ends, the lock is
 * not held, its token is the wait's again, and the attempt says not yet. */
static int give_back(batonstep *b, lb_lock *l, const redisReply *r, const lb_now *now) {
    lb_machine *rm = &l->m;
    int rc = lb_machine_step(rm, r, now);
    if (rc == LB_STEP_SEND) {
        b->m.cmd = rm->cmd;
        b->state = BS_GIVEBACK;
        return LB_STEP_SEND;
    }
    l->held = 0;
    memcpy(l->token, b->own, LB__TOKEN_CAP);
    if (rc != LB_OK && rc != LB_ELOST) return lb__fail(&b->m, rc, "give-back: %s", rm->errstr);
    return lb__fail(&b->m, LB_EBUSY, "a baton with no lease left, given back");
}

static int baton_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    batonstep *b = (batonstep *)(void *)m;
    lb_lock *l = b->fp->lock;
    const char *list, *mark, *token = lb_lock_info_of(l).token;
    lb__fair_baton_names(l, &list, &mark);
    if (b->state == BS_GIVEBACK) return give_back(b, l, r, now);
    if (b->state != BS_START && !r) return lb__fail(m, LB_EIO, "no reply");
    if (r && r->type == REDIS_REPLY_ERROR) return lb__fail(m, LB_EREDIS, "%s", r->str);
    switch (b->state) {
    case BS_START: {
        memcpy(b->own, token, LB__TOKEN_CAP);
        if (lb__fair_baton_skip(l, now->mono_ns)) return baton_mark(b, mark, token);
        b->sent_ns = now->mono_ns;
        const char *argv[] = {"SET", b->key, token, "NX", "PX", b->px, "GET"};
        return baton_cmd(b, BS_SETNX, 7, argv);
    }
    case BS_SETNX:
        if (r->type == REDIS_REPLY_NIL) return lb__fair_baton_won(l, b->sent_ns);
        return baton_mark(b, mark, token);
    case BS_MARK: {
        b->sent_ns = now->mono_ns;
        const char *argv[] = {"EVAL", pop_script, "2", list, mark, token};
        return baton_cmd(b, BS_POP, 6, argv);
    }
    default:
        if (r->type == REDIS_REPLY_NIL) return lb__fail(m, LB_EBUSY, "no baton");
        if (r->type != REDIS_REPLY_STRING) return lb__fail(m, LB_EPROTO, "baton: unexpected reply");
        if (lb__fair_take_baton(l, r->str, r->len, b->sent_ns) != LB_OK)
            return lb__fail(m, LB_EPROTO, "baton: unexpected element");
        if (lb__fair_lease_usable(l)) return LB_OK;
        lb_lock_machine(l, LB_OP_RELEASE, 0);
        return give_back(b, l, NULL, now);
    }
}

int lbr_fair_blocked_on_baton(const lbr_part *p, const lb_machine *running) {
    if (p->destroy != fair_destroy) return 0;
    const fairpart *fp = FAIRPART(p);
    return fp->baton && running == &fp->bs.m && fp->bs.state == BS_POP;
}

/* An attempt of the wait; the first one begins it (a fresh token) and, as
 * modern/blocking.c does once its waiter listens, names the inbox. A
 * wait out of time makes its last attempt a leave, as give_up() does, and
 * ends there unless the leave found the lock handed to it; the next step
 * begins a new wait. */
static lb_machine *fair_acq(lbr_part *p) {
    fairpart *fp = FAIRPART(p);
    settle(fp);
    if (fp->left) {
        lb__fair_end_wait(fp->lock);
        fp->waiting = fp->left = 0;
    }
    if (!fp->waiting) {
        if (lb__fair_begin_wait(fp->lock) != LB_OK) return NULL;
        fp->waiting = 1;
        fp->attempts = 0;
        fp->batoned = 0;
    }
    if (fp->lists) lb__fair_set_inbox(fp->lock, LB__FAIR_LISTS, 1);
    else lb__fair_set_inbox(fp->lock, fp->inbox, strlen(fp->inbox));
    /* As baton_wait: a TTL under four baton lives queues at once. */
    if (fp->baton && !fp->batoned && fp->lock->opts.ttl_ms >= (int64_t)4 * LB__BATON_LIFE_MS) {
        fp->batoned = 1;
        lb__machine_begin(&fp->bs.m, baton_step);
        fp->bs.state = BS_START;
        return &fp->bs.m;
    }
    if (fp->leave_after > 0 && fp->attempts == fp->leave_after) {
        lb__fair_set_mode(fp->lock, LB__FAIR_LEAVE);
        fp->left = 1;
    } else {
        fp->attempts++;
    }
    return lb_lock_machine(fp->lock, LB_OP_TRY_ACQUIRE, 0);
}

static lb_machine *fair_rel(lbr_part *p) {
    settle(FAIRPART(p));
    return lb_lock_machine(FAIRPART(p)->lock, LB_OP_RELEASE, 0);
}

static int fair_bel(const lbr_part *p) { return lb_lock_info_of(FAIRPART(p)->lock).held; }

/* Valid until the lease it computed on its own monotonic clock. */
static int fair_valid(const lbr_part *p, const lb_codec *codec, const lb_now *now) {
    (void)codec;
    return now->mono_ns <= lb_lock_info_of(FAIRPART(p)->lock).deadline_ns;
}

static const char *fair_val(const lbr_part *p, size_t *len) {
    const char *t = lb_lock_info_of(FAIRPART(p)->lock).token;
    *len = strlen(t);
    return t;
}

static int64_t fair_fence(const lbr_part *p) {
    return lb_lock_info_of(FAIRPART(p)->lock).fence;
}

static void fair_destroy(lbr_part *p) {
    fairpart *fp = FAIRPART(p);
    lb_lock_free(fp->lock);
    if (fp->sub) redisFree(fp->sub);
    free(fp);
}

/* Moves what the server has sent to the subscription into `pending`. A PING
 * on a subscribed connection is answered in order after every message
 * published before it, so the read stops at its answer and never blocks on a
 * message that may not come: which messages are pending depends on the
 * schedule alone. Returns -1 on a connection or protocol failure. */
static int drain(fairpart *fp) {
    if (redisAppendCommand(fp->sub, "PING") != REDIS_OK) return -1;
    for (;;) {
        void *rv = NULL;
        if (redisGetReply(fp->sub, &rv) != REDIS_OK || !rv) return -1;
        redisReply *r = rv;
        int pong = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                   r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "pong") == 0;
        int msg = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[0]->str, "message") == 0 &&
                  r->element[2]->type == REDIS_REPLY_STRING;
        if (msg && fp->npending < PENDING_MAX) {
            size_t len = r->element[2]->len < MSG_MAX ? r->element[2]->len : MSG_MAX - 1;
            memcpy(fp->pending[fp->npending], r->element[2]->str, len);
            fp->pending_len[fp->npending++] = len;
        }
        freeReplyObject(r);
        if (pong) return 0;
        if (!msg) return -1;
    }
}

/* The grant a release publishes, read by the library's own parser: whether
 * it is one naming `token`. */
static int grant_for(const char *s, size_t len, const char *token, int64_t *place,
                     int64_t *fence) {
    return lb__handoff_parse(s, len, place, fence) && strlen(token) == LB_TOKEN_LEN &&
           memcmp(s, token, LB_TOKEN_LEN) == 0;
}

/* A grant-list wait's read: one grant popped off its list (LPOP, where the
 * wait's BLPOP would block) and taken by the library, as lb__fair_block
 * takes it. Outside a wait the list is not read. */
static int read_list(fairpart *fp) {
    settle(fp);
    if (!fp->waiting || fp->left) return -1;
    const char *name;
    size_t len = lb__fair_own_list(fp->lock, &name);
    redisReply *r = redisCommand(fp->sub, "LPOP %b", name, len);
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        if (r) freeReplyObject(r);
        return -3;
    }
    int rc = -1;
    if (r->type == REDIS_REPLY_STRING) {
        int took = lb__fair_take_grant(fp->lock, r->str, (size_t)r->len);
        rc = took == LB_OK ? 1 : took == LB_EBUSY ? 0 : -3;
    }
    freeReplyObject(r);
    if (rc == 1) settle(fp);
    return rc;
}

int lbr_part_read_inbox(lbr_part *p) {
    if (p->destroy != fair_destroy) return -2;
    fairpart *fp = FAIRPART(p);
    if (fp->lists) return read_list(fp);
    if (drain(fp) != 0) return -3;
    if (fp->npending == 0) return -1;
    char msg[MSG_MAX];
    size_t len = fp->pending_len[0];
    memcpy(msg, fp->pending[0], len);
    fp->npending--;
    memmove(fp->pending[0], fp->pending[1], (size_t)fp->npending * MSG_MAX);
    memmove(fp->pending_len, fp->pending_len + 1, (size_t)fp->npending * sizeof(size_t));
    settle(fp);
    int64_t place, fence;
    /* Outside a wait (or after its leave), or another token's: the
     * waiter's thread drops it. */
    if (!fp->waiting || fp->left || !grant_for(msg, len, lb_lock_info_of(fp->lock).token, &place, &fence))
        return 0;
    /* As modern/blocking.c's handed(): a fenced grant without its number
     * is left to the next attempt; otherwise the library judges the place. */
    if (fp->fenced && fence <= 0) return 0;
    if (lb__fair_handed(fp->lock, place, fp->fenced ? fence : 0) != LB_OK) return 0;
    settle(fp);
    return 1;
}

/* The "-long" kind's lease, ms: four times the others' (1000 ms, the default
 * for their back-off), and under the world's closing pause, so that a wait
 * left behind lapses before the closing liveness check. */
#define LONG_LEASE_MS 4000

/* How many busy attempts a wait of the "-leave" kinds makes before it gives up. */
#define LEAVE_AFTER 2
/* The "-yield" kinds' releases leave the lock to outsiders after every
 * hand-off (fair_yield_every 1) for this long, ms (fair_yield_ms). */
#define YIELD_MS 500

int lbr_kind_reads_inbox(const char *kind) {
    static const char *const kinds[] = {"lb-fair", "lb-fair-fenced", "lb-fair-leave",
                                        "lb-fair-list", "lb-fair-list-fenced",
                                        "lb-fair-list-leave", "lb-fair-list-yield",
                                        "lb-fair-list-long", "lb-fair-baton"};
    for (size_t i = 0; kind && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kind, kinds[i]) == 0) return 1;
    return 0;
}

lbr_part *lbr_fair_part_new(const char *kind, const lbr_part_config *cfg) {
    static unsigned serial; /* inboxes of one process never share a name */
    if (!lbr_kind_reads_inbox(kind)) return NULL;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = cfg->ttl_ms;
    o.fencing = strstr(kind, "-fenced") != NULL;
    o.clock = cfg->clock;
    o.fair = 1;
    if (strstr(kind, "-long")) o.fair_lease_ms = LONG_LEASE_MS;
    if (strstr(kind, "-yield")) {
        o.fair_yield_every = 1;
        o.fair_yield_ms = YIELD_MS;
    }
    fairpart *fp = calloc(1, sizeof *fp);
    if (!fp) return NULL;
    fp->fenced = o.fencing;
    fp->baton = strcmp(kind, "lb-fair-baton") == 0;
    fp->lists = strncmp(kind, "lb-fair-list", 12) == 0 || fp->baton;
    fp->bs.fp = fp;
    snprintf(fp->bs.px, sizeof fp->bs.px, "%lld", (long long)cfg->ttl_ms);
    snprintf(fp->bs.key, sizeof fp->bs.key, "%s", cfg->key);
    fp->leave_after = strstr(kind, "-leave") ? LEAVE_AFTER : 0;
    snprintf(fp->inbox, sizeof fp->inbox, "%s:inbox:%u", cfg->key, ++serial);
    struct timeval tv = {5, 0};
    fp->sub = redisConnectWithTimeout("127.0.0.1", cfg->port, tv);
    if (!fp->sub || fp->sub->err || lb_lock_new(&fp->lock, cfg->key, strlen(cfg->key), &o) != LB_OK)
        goto fail;
    if (!fp->lists) {
        redisReply *r = redisCommand(fp->sub, "SUBSCRIBE %s", fp->inbox);
        int ok = r && r->type == REDIS_REPLY_ARRAY;
        if (r) freeReplyObject(r);
        if (!ok) goto fail;
    }
    fp->part = (lbr_part){kind, fair_acq, fair_rel, fair_bel, fair_valid, fair_val, fair_destroy,
                          o.fencing ? fair_fence : NULL};
    return &fp->part;
fail:
    lb_lock_free(fp->lock);
    if (fp->sub) redisFree(fp->sub);
    free(fp);
    return NULL;
}

/* The names of the lock's queue and state keys, and the pattern of its grant
 * lists (the world's server holds one lock: KEYS finds them); whether they fit. */
static int companions(const char *key, char *queue, char *state, char *lists, size_t cap) {
    int nq = lb_companion_key(key, strlen(key), "queue", queue, cap);
    int ns = lb_companion_key(key, strlen(key), "fair", state, cap);
    int nl = lb_companion_key(key, strlen(key), "grant:*", lists, cap);
    return nq >= 0 && (size_t)nq < cap && ns >= 0 && (size_t)ns < cap && nl >= 0 &&
           (size_t)nl < cap;
}

/* ---- another program at the fair lock's companion names -----------------------------
 * A pseudo-client whose every step writes a string, with a TTL: what an
 * operator or another program may leave at names lockbridge does not own
 * alone. "spoil-grants" writes at the grant list name of each token queued
 * that has no key there; "spoil-fair" over the state's name, then over the
 * queue's, in turn (they live as long as anyone waits: a write only where
 * none is would rarely land). "spoil-queue" deletes the queue instead (an
 * operator clearing keys), the state left as it was. It never holds the
 * lock. No lockbridge client writes a string there or deletes a queue
 * others wait in, so no other participant reaches these states. */
typedef struct spoiler {
    lb_machine m; /* first: the machine's address is the spoiler's */
    lbr_part part;
    char queue[256];
    char state[256];
    char prefix[256]; /* "{key}:grant:", the grant lists' names less the token */
    int lists;        /* spoil-grants */
    int del;          /* spoil-queue */
    int steps;        /* spoil-fair: the state on odd steps, the queue on even */
    int sent;
} spoiler;

#define SPOILER(p) ((spoiler *)(void *)((char *)(p) - offsetof(spoiler, part)))

/* The TTLs of what the spoilers write, ms. At grant lists, past the world's
 * closing jump: a waiter's next attempt, not the lapse, must get it going.
 * At the queue and state, below that jump (pauses move it, as they move the
 * queue's own TTLs): no fair attempt can succeed while the value stays, so
 * the closing liveness check needs it gone. */
#define SPOIL_LIST_TTL_MS "60000"
#define SPOIL_FAIR_TTL_MS "3000"

static const char spoil_lists_script[] =
    "local n = 0\n"
    "for _, t in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do\n"
    "  if redis.call('SET', ARGV[1] .. t, 'spoiled', 'NX', 'PX', ARGV[2]) then n = n + 1 end\n"
    "end\n"
    "return n\n";

static int spoil_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    spoiler *s = (spoiler *)(void *)m;
    (void)now;
    if (!s->sent) {
        lb__cmd_reset(&m->cmd);
        if (s->lists) {
            lb__cmd_argz(&m->cmd, "EVAL");
            lb__cmd_argz(&m->cmd, spoil_lists_script);
            lb__cmd_argz(&m->cmd, "1");
            lb__cmd_argz(&m->cmd, s->queue);
            lb__cmd_argz(&m->cmd, s->prefix);
            lb__cmd_argz(&m->cmd, SPOIL_LIST_TTL_MS);
        } else if (s->del) {
            lb__cmd_argz(&m->cmd, "DEL");
            lb__cmd_argz(&m->cmd, s->queue);
        } else {
            lb__cmd_argz(&m->cmd, "SET");
            lb__cmd_argz(&m->cmd, s->steps++ % 2 ? s->queue : s->state);
            lb__cmd_argz(&m->cmd, "spoiled");
            lb__cmd_argz(&m->cmd, "PX");
            lb__cmd_argz(&m->cmd, SPOIL_FAIR_TTL_MS);
        }
        s->sent = 1;
        return LB_STEP_SEND;
    }
    if (!r || r->type == REDIS_REPLY_ERROR) return lb__fail(m, LB_EPROTO, "spoiling failed");
    return LB_OK;
}

static lb_machine *spoil_acq(lbr_part *p) {
    spoiler *s = SPOILER(p);
    lb__machine_begin(&s->m, spoil_step);
    s->sent = 0;
    return &s->m;
}
static void spoil_destroy(lbr_part *p) { free(SPOILER(p)); }

lbr_part *lbr_spoiler_new(const char *kind, const lbr_part_config *cfg) {
    int lists = strcmp(kind, "spoil-grants") == 0, del = strcmp(kind, "spoil-queue") == 0;
    if (!lists && !del && strcmp(kind, "spoil-fair") != 0) return NULL;
    spoiler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->lists = lists;
    s->del = del;
    if (!companions(cfg->key, s->queue, s->state, s->prefix, sizeof s->queue)) {
        free(s);
        return NULL;
    }
    s->prefix[strlen(s->prefix) - 1] = '\0'; /* "{key}:grant:*" less its '*' */
    s->part = (lbr_part){kind, spoil_acq, spoil_acq, lbr_never_holds, lbr_never_valid,
                         lbr_no_value, spoil_destroy, NULL};
    return &s->part;
}

/* Redis reads the queue's leases and the release's windows on its own clock
 * (TIME), which a pause of the world does not move: the pause moves them
 * instead, by as much, with the queue's and the state's TTLs, so a waiter not
 * heard of for its lease drops out as it would have. So are the holder's
 * expiry and the end of the queue's TTLs as the state notes them (~hexp,
 * ~until), which the keys' TTLs they stand for move with. Tickets (the
 * places' names) stay as they are. The script returns the first queued
 * token whose lease outlives the pause when the queue or the state lapses
 * in it ('' otherwise): the TTLs are kept so that no live waiter loses its
 * place that way. */
static const char warp_script[] =
    "local ms = tonumber(ARGV[1])\n"
    "local h = redis.pcall('HGETALL', KEYS[2])\n"
    "if h.err then h = {} end\n"
    "for i = 1, #h, 2 do\n"
    "  local f, v = h[i], h[i + 1]\n"
    "  if f == '~open' or f == '~last' or f == '~seen' or f == '~hexp' or f == '~until' then\n"
    "    redis.call('HSET', KEYS[2], f, string.format('%.0f', (tonumber(v) or 0) - ms))\n"
    "  elseif string.sub(f, 1, 1) ~= '~' then\n"
    "    local exp, rest = string.match(v, '^(%d+)(.*)$')\n"
    "    if exp then\n"
    "      redis.call('HSET', KEYS[2], f, string.format('%.0f', math.max(0, tonumber(exp) - ms)) .. rest)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local live = ''\n"
    "local q = redis.pcall('ZRANGE', KEYS[1], 0, -1)\n"
    "if q.err then q = {} end\n"
    "for _, m in ipairs(q) do\n"
    "  local e = redis.pcall('HGET', KEYS[2], m)\n"
    "  local exp = type(e) == 'string' and tonumber(string.match(e, '^(%d+)')) or nil\n"
    "  if live == '' and exp and exp > now then live = m end\n"
    "end\n"
    "local lapsed = false\n"
    "local keys = redis.call('KEYS', ARGV[2])\n"
    "table.insert(keys, KEYS[1])\n"
    "table.insert(keys, KEYS[2])\n"
    "for _, k in ipairs(keys) do\n"
    "  local left = redis.call('PTTL', k)\n"
    "  if left > ms then redis.call('PEXPIRE', k, left - ms)\n"
    "  elseif left >= 0 then\n"
    "    redis.call('DEL', k)\n"
    "    lapsed = lapsed or k == KEYS[1] or k == KEYS[2]\n"
    "  end\n"
    "end\n"
    "if lapsed then return live end\n"
    "return ''\n";

/* Moves the fair lock's times by a pause of `ms`. 1 when the queue or the
 * state lapsed in it under a live waiter, whose token is copied to `live`;
 * 0 otherwise. */
int lbr_fair_warp(redisContext *c, const char *key, long long ms, char *live, size_t cap) {
    char queue[256], state[256], lists[256];
    if (!companions(key, queue, state, lists, sizeof queue)) return 0;
    redisReply *r =
        redisCommand(c, "EVAL %s 2 %s %s %lld %s", warp_script, queue, state, ms, lists);
    int rc = r && r->type == REDIS_REPLY_STRING && r->len > 0;
    if (rc) snprintf(live, cap, "%s", r->str);
    if (r) freeReplyObject(r);
    return rc;
}

/* The name of the first key a fair lock wrote beside its own that has no TTL
 * (its queue, its state, a grant list), copied to `bad`; 0 when every one
 * has one (or none exists), -1 when it could not be read. A key without a
 * TTL outlives every client of the lock: nothing ever deletes it. */
int lbr_fair_untimed_key(redisContext *c, const char *key, char *bad, size_t cap) {
    char queue[256], state[256], lists[256];
    if (!companions(key, queue, state, lists, sizeof queue)) return -1;
    redisReply *r = redisCommand(
        c, "EVAL %s 2 %s %s %s",
        "local keys = redis.call('KEYS', ARGV[1]) "
        "table.insert(keys, KEYS[1]) table.insert(keys, KEYS[2]) "
        "for _, k in ipairs(keys) do "
        "  if redis.call('PTTL', k) == -1 then return k end "
        "end return ''",
        queue, state, lists);
    int rc = r && r->type == REDIS_REPLY_STRING ? (r->len > 0) : -1;
    if (rc == 1) snprintf(bad, cap, "%s", r->str);
    if (r) freeReplyObject(r);
    return rc;
}

/* A fresh world starts with no queue, state or grant left by the one before. */
void lbr_fair_reset(redisContext *c, const char *key) {
    char queue[256], state[256], lists[256];
    if (!companions(key, queue, state, lists, sizeof queue)) return;
    redisReply *r = redisCommand(c, "DEL %s %s", queue, state);
    if (r) freeReplyObject(r);
    r = redisCommand(c, "EVAL %s 0 %s", "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                                        "redis.call('DEL', k) end return 0", lists);
    if (r) freeReplyObject(r);
}
