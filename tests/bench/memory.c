/* lockbridge-bench: memory of held locks: bytes per handle counted by an
 * allocator hook, and this process's resident size with many locks held
 * (acquired through the asynchronous driver, all at once on one connection). */
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "lockbridge/lockbridge.h"

#define WINDOW 1024 /* acquisitions in flight at once, count */

/* Counts live bytes; each block carries its size in a header, so free knows it. */
typedef struct counter {
    int64_t live;
    uint64_t calls;
} counter;

typedef union header {
    size_t size;
    max_align_t align;
} header;

static void *count_malloc(void *ud, size_t size) {
    counter *c = ud;
    header *h = malloc(sizeof *h + size);
    if (!h) return NULL;
    h->size = size;
    c->live += (int64_t)size;
    c->calls++;
    return h + 1;
}

static void count_free(void *ud, void *p) {
    counter *c = ud;
    if (!p) return;
    header *h = (header *)p - 1;
    c->live -= (int64_t)h->size;
    free(h);
}

typedef struct mem_run {
    redisAsyncContext *ac;
    lb_lock **locks;
    int n, next, pending;
    uint64_t acquired, errors;
    char error[160];
} mem_run;

static void issue(mem_run *run);

static void on_acquired(lb_machine *m, int status, void *ud) {
    mem_run *run = ud;
    run->pending--;
    if (status == LB_OK) run->acquired++;
    else if (run->errors++ == 0)
        snprintf(run->error, sizeof run->error, "acquire: %s (%s)", lb_err_name(status),
                 lb_machine_errstr(m));
    issue(run);
}

/* Keeps WINDOW acquisitions in flight; closes the connection after the last. */
static void issue(mem_run *run) {
    while (run->pending < WINDOW && run->next < run->n) {
        lb_lock *l = run->locks[run->next++];
        run->pending++;
        if (lb_async_run(run->ac, lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), NULL, on_acquired, run) != LB_OK) {
            run->pending--;
            run->errors++;
        }
    }
    if (run->pending == 0 && run->next == run->n) redisAsyncDisconnect(run->ac);
}

static int acquire_all(const lbt_redis *server, mem_run *run) {
    struct event_base *base = event_base_new();
    if (!base) return -1;
    run->ac = redisAsyncConnect("127.0.0.1", server->port);
    int ok = run->ac && !run->ac->err && redisLibeventAttach(run->ac, base) == REDIS_OK;
    if (ok) {
        issue(run);
        event_base_dispatch(base);
    } else if (run->ac) {
        redisAsyncFree(run->ac);
    }
    run->ac = NULL;
    event_base_free(base);
    return ok ? 0 : -1;
}

int run_memory(const lbt_redis *server, int locks, memory_result *res) {
    memset(res, 0, sizeof *res);
    res->locks = locks;
    counter cnt = {0, 0};
    lb_allocator alloc = {count_malloc, count_free, &cnt};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.allocator = &alloc;
    mem_run run;
    memset(&run, 0, sizeof run);
    redisContext *ctl = lbt_redis_connect(server);
    run.locks = calloc((size_t)locks, sizeof *run.locks);
    int ok = ctl && run.locks;
    if (ok) {
        redisReply *r = redisCommand(ctl, "FLUSHALL");
        if (r) freeReplyObject(r);
        res->redis_before = server_info_int(ctl, "memory", "used_memory");
    }
    res->rss_before = self_rss_bytes();
    for (int i = 0; ok && i < locks; i++) {
        char key[48];
        int n = snprintf(key, sizeof key, "bench:held:%d", i);
        ok = lb_lock_new(&run.locks[i], key, (size_t)n, &o) == LB_OK;
    }
    run.n = ok ? locks : 0;
    if (ok) ok = acquire_all(server, &run) == 0;
    res->bytes_per_lock = locks ? (double)cnt.live / locks : 0.0;
    res->allocations = cnt.calls;
    res->rss_held = self_rss_bytes();
    if (ctl) res->redis_held = server_info_int(ctl, "memory", "used_memory");
    res->acquired = run.acquired;
    res->errors = run.errors + (ok ? 0 : 1);
    snprintf(res->error, sizeof res->error, "%s", ok ? run.error : "setup failed");
    for (int i = 0; run.locks && i < locks; i++) lb_lock_free(run.locks[i]);
    free(run.locks);
    if (ctl) {
        redisReply *r = redisCommand(ctl, "FLUSHALL");
        if (r) freeReplyObject(r);
        redisFree(ctl);
    }
    return ok && res->errors == 0 && cnt.live == 0 ? 0 : -1;
}
