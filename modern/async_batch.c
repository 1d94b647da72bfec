/* Releases batched on an event loop: the releases asked for during one loop
 * turn go as one call of modern_release_many.lua at the next, and each lock
 * is answered from its own entry of the reply, as its own release would be. */
#include <stdio.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "modern/async_internal.h"

/* Releases sent in one call at most, count of keys: the script runs about
 * 4 us a key on the server, which serves nobody else meanwhile, so a batch
 * holds it for half a millisecond at most. */
#define BATCH_MAX 128
/* The call's arguments before its keys: EVALSHA, the script, numkeys. */
#define FIXED_ARGS 3

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* The lock's release, taken out of the batch and run on its own. */
static void run_alone(lb_async_lock *al, redisAsyncContext *ac) {
    lb_lock *l = al->lock;
    l->m.ac = NULL;
    lb_machine *m = lb__lock_release_machine(l);
    if (!m || lb_async_run(ac, m, l->opts.clock, lb__al_released, al) != LB_OK)
        lb__al_released(&l->m, LB_EIO, al); /* cannot happen: nothing in flight */
}

/* The lock's release ends with `r`, its own entry of the reply (NULL: the
 * connection failed), read by the release's own step. */
static void answer(lb_async_lock *al, const redisReply *r) {
    lb_machine *m = &al->lock->m;
    m->ac = NULL;
    m->script = NULL; /* an entry is the script's answer, never a reason to resend */
    lb_now now = lb_clock_now(al->lock->opts.clock);
    int rc = lb_machine_step(m, r, &now);
    if (rc == LB_STEP_SEND) rc = lb__fail(m, LB_EPROTO, "release: unexpected reply");
    m->running = 0;
    lb__al_released(m, rc, al);
}

/* The context went before the release was sent. */
static void unsent(lb_async_lock *al) {
    lb_machine *m = &al->lock->m;
    m->ac = NULL;
    m->running = 0;
    lb__al_released(m, lb__fail(m, LB_EIO, "connection failed during release"), al);
}

/* The reply is no answer of the script's: each release fails as its own
 * would have on a reply it could not read. */
static void unreadable(lb_async_lock *al) {
    lb_machine *m = &al->lock->m;
    m->ac = NULL;
    m->running = 0;
    lb__al_released(m, lb__fail(m, LB_EPROTO, "release: unexpected reply"), al);
}

/* Detaches the list's first lock; the rest stay in flight, so a callback that
 * frees one of them only marks it. */
static lb_async_lock *pop(lb_async_lock **head) {
    lb_async_lock *al = *head;
    *head = al->batch_next;
    al->batch_next = NULL;
    al->batch_eval = 0;
    return al;
}

static int send_batch(redisAsyncContext *ac, lb_async_lock *head, int eval) {
    const char *argv[FIXED_ARGS + 3 * BATCH_MAX];
    size_t len[FIXED_ARGS + 3 * BATCH_MAX];
    const lb_script *s = &lb__script_modern_release_many;
    char numkeys[16];
    int n = 0;
    for (lb_async_lock *al = head; al; al = al->batch_next) n++;
    snprintf(numkeys, sizeof numkeys, "%d", n);
    argv[0] = eval ? "EVAL" : "EVALSHA";
    argv[1] = eval ? s->body : s->sha1;
    argv[2] = numkeys;
    int i = 0;
    for (lb_async_lock *al = head; al; al = al->batch_next, i++) {
        lb_lock *l = al->lock;
        int key = FIXED_ARGS + i, token = FIXED_ARGS + n + 2 * i, channel = token + 1;
        argv[key] = l->key;
        len[key] = l->keylen;
        argv[token] = l->token;
        len[token] = LB_TOKEN_LEN;
        argv[channel] = l->channel;
        len[channel] = l->channellen;
    }
    for (int k = 0; k < FIXED_ARGS; k++) len[k] = strlen(argv[k]);
    head->batch_eval = eval;
    return redisAsyncCommandArgv(ac, on_reply, head, FIXED_ARGS + 3 * n, argv, len);
}

static int is_error(const redisReply *r, const char *prefix) {
    size_t n = strlen(prefix);
    return r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

/* A whole call refused (keys in several Cluster slots, a key the user may not
 * write, a busy server): each release is sent again on its own and gets its
 * own answer; without a connection, the refusal. */
static void refused(lb_async_lock *head, const redisReply *r) {
    if (is_error(r, "CROSSSLOT") && head->a) head->a->batch_off = 1;
    while (head) {
        lb_async_lock *al = pop(&head);
        redisAsyncContext *ac = lb__al_conn(al);
        if (ac) run_alone(al, ac);
        else answer(al, r);
    }
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    lb_async_lock *head = privdata;
    const redisReply *r = reply;
    if (!head) return; /* a batch is sent with one release at least */
    size_t n = 0;
    for (lb_async_lock *al = head; al; al = al->batch_next) n++;
    /* The server forgot the script (restart, SCRIPT FLUSH): its body once. */
    if (r && !head->batch_eval && is_error(r, "NOSCRIPT")) {
        if (send_batch(ac, head, 1) == REDIS_OK) return;
        r = NULL;
    }
    if (r && r->type == REDIS_REPLY_ERROR) {
        refused(head, r);
        return;
    }
    int entries = r && r->type == REDIS_REPLY_ARRAY && r->elements == n;
    for (size_t i = 0; head; i++) {
        lb_async_lock *al = pop(&head);
        if (!r) answer(al, NULL);
        else if (entries) answer(al, r->element[i]);
        else unreadable(al);
    }
}

/* Sends the releases waiting in the driver: one alone as it always ran, more
 * in one call; with the context gone, each ends as if the connection failed. */
static void flush(lb_async *a) {
    lb_async_lock *head = a->batch_head;
    int n = a->batch_n;
    a->batch_head = a->batch_tail = NULL;
    a->batch_n = 0;
    if (!head) return;
    redisAsyncContext *ac = lb__async_conn(a);
    if (!ac || n == 1) {
        while (head) {
            lb_async_lock *al = pop(&head);
            if (ac) run_alone(al, ac);
            else unsent(al);
        }
        return;
    }
    /* Each lock's release builds and counts its own command; the batch sends
     * their arguments together. */
    lb_now now;
    for (lb_async_lock *al = head; al; al = al->batch_next) {
        now = lb_clock_now(al->lock->opts.clock);
        lb_machine_step(&al->lock->m, NULL, &now); /* held: it sends */
    }
    if (send_batch(ac, head, 0) != REDIS_OK) {
        while (head) answer(pop(&head), NULL);
    }
}

static void on_timer(void *arg) { flush(arg); }

/* The driver is freed or its context goes: what waits is sent (or ends, the
 * context gone), and the timer goes. */
static void end_batch(lb_async *a) {
    flush(a);
    if (a->batch_timer) a->opts.timers.destroy(a->batch_timer);
    a->batch_timer = NULL;
    a->batch_end = NULL;
}

int lb__al_batch_release(lb_async_lock *al) {
    lb_async *a = al->a;
    redisAsyncContext *ac = lb__al_conn(al);
    if (!a || !ac || a->batch_off || !al->lock->held) return LB_ESTATE;
    if (!a->batch_timer) {
        a->batch_timer = a->opts.timers.create(a->opts.timers.loop, on_timer, a);
        if (!a->batch_timer) return LB_ENOMEM;
        a->batch_end = end_batch;
    }
    /* A zero timer fires once the loop has run what is ready now: the
     * replies read in this turn all add their releases first. */
    if (a->batch_n == 0 && a->opts.timers.arm(a->batch_timer, 0) != 0) return LB_ENOMEM;
    al->lock->m.ac = ac; /* in flight: a free keeps the handle until its answer */
    al->batch_next = NULL;
    if (a->batch_tail) a->batch_tail->batch_next = al;
    else a->batch_head = al;
    a->batch_tail = al;
    if (++a->batch_n >= BATCH_MAX) {
        a->opts.timers.disarm(a->batch_timer);
        flush(a);
    }
    return LB_OK;
}
