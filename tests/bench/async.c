/* lockbridge-bench: many distinct keys locked from one thread with the
 * event-loop token lock (lockbridge/async.h) on libevent, as
 * examples/many_async_locks.c does: each handle loops acquire, release on its
 * own key, all of them in flight at once on one connection. */
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "lockbridge/adapters/libevent.h"
#include "lockbridge/lockbridge.h"

typedef struct slot slot;

typedef struct async_run {
    redisAsyncContext *ac;
    int64_t end_ns;
    int active;   /* handles still looping */
    uint64_t locks, errors;
    char error[160];
    slot *slots;
} async_run;

struct slot {
    async_run *run;
    lb_async_lock *lock;
};

/* The acquire's wait, ms: as the example's; the keys are distinct, so the
 * first attempt always wins. */
#define ACQUIRE_WAIT_MS 10000

static void start_acquire(slot *s);

static void slot_error(slot *s, const char *what, int status) {
    if (s->run->errors++ == 0)
        snprintf(s->run->error, sizeof s->run->error, "%s: %s (%s)", what, lb_err_name(status),
                 lb_async_lock_info_of(s->lock).errstr);
}

/* The last handle to stop closes the connection, which ends the loop. */
static void slot_stop(slot *s) {
    if (--s->run->active == 0) redisAsyncDisconnect(s->run->ac);
}

static void on_released(lb_async_lock *al, int status, void *ud) {
    slot *s = ud;
    (void)al;
    if (status != LB_OK) {
        slot_error(s, "release", status);
        slot_stop(s);
        return;
    }
    s->run->locks++;
    if (bench_mono_ns() >= s->run->end_ns) slot_stop(s);
    else start_acquire(s);
}

static void on_acquired(lb_async_lock *al, int status, void *ud) {
    slot *s = ud;
    int rc = status == LB_OK ? lb_async_lock_release(al, on_released, s) : status;
    if (rc != LB_OK) {
        slot_error(s, status == LB_OK ? "release start" : "acquire", rc);
        slot_stop(s);
    }
}

static void start_acquire(slot *s) {
    int rc = lb_async_lock_acquire(s->lock, ACQUIRE_WAIT_MS, on_acquired, s);
    if (rc != LB_OK) {
        slot_error(s, "acquire start", rc);
        slot_stop(s);
    }
}

int run_async(const lbt_redis *server, double seconds, int inflight, async_result *res) {
    memset(res, 0, sizeof *res);
    res->inflight = (uint64_t)inflight;
    async_run run;
    memset(&run, 0, sizeof run);
    redisContext *ctl = lbt_redis_connect(server);
    struct event_base *base = event_base_new();
    run.slots = calloc((size_t)inflight, sizeof *run.slots);
    int ok = ctl && base && run.slots;
    lb_async *drv = NULL;
    tally before, after, delta;
    memset(&delta, 0, sizeof delta);
    if (ok) ok = server_tally(ctl, &before) == 0;
    if (ok) {
        run.ac = redisAsyncConnect("127.0.0.1", server->port);
        ok = run.ac && !run.ac->err && redisLibeventAttach(run.ac, base) == REDIS_OK &&
             lb_libevent_async_new(&drv, run.ac, base) == LB_OK;
    }
    for (int i = 0; ok && i < inflight; i++) {
        char key[48];
        int n = snprintf(key, sizeof key, "bench:async:%d", i);
        run.slots[i].run = &run;
        ok = lb_async_lock_new(&run.slots[i].lock, drv, key, (size_t)n, NULL) == LB_OK;
    }
    int64_t t0 = 0, t1 = 0;
    if (ok) {
        t0 = bench_mono_ns();
        run.end_ns = t0 + (int64_t)(seconds * 1e9);
        run.active = inflight;
        for (int i = 0; i < inflight; i++) start_acquire(&run.slots[i]);
        event_base_dispatch(base); /* returns once the connection is closed */
        t1 = bench_mono_ns();
        run.ac = NULL;             /* freed by hiredis after the disconnect */
        if (server_tally(ctl, &after) == 0) {
            tally_accumulate(&delta, &after, &before);
            res->server_calls = tally_total(&delta);
            res->server_usec = tally_usec(&delta, "set") + tally_usec(&delta, "evalsha") +
                               tally_usec(&delta, "eval");
        }
    }
    res->seconds = (double)(t1 - t0) / 1e9;
    res->locks = run.locks;
    res->errors = run.errors + (ok ? 0 : 1);
    snprintf(res->error, sizeof res->error, "%s", ok ? run.error : "setup failed");
    for (int i = 0; run.slots && i < inflight; i++) lb_async_lock_free(run.slots[i].lock);
    lb_async_free(drv); /* before a context that never ran is freed */
    if (run.ac) redisAsyncFree(run.ac);
    free(run.slots);
    if (base) event_base_free(base);
    if (ctl) redisFree(ctl);
    return ok && res->errors == 0 ? 0 : -1;
}
