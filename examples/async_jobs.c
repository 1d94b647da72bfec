/* One thread, one connection, one libevent loop: six jobs on three keys each wait
 * for a token lock, work on a timer for longer than the lock's TTL (it renews
 * itself meanwhile), check it is still theirs, and release it.
 * Build: cc -o async_jobs async_jobs.c $(pkg-config --cflags --libs lockbridge libevent)
 * Run:   ./async_jobs [PORT]        (a redis-server on 127.0.0.1, default 6379) */
#include <stdio.h>
#include <stdlib.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <lockbridge/adapters/libevent.h>
#include <lockbridge/lockbridge.h>

#define JOBS 6          /* two jobs per key, so every key is contended */
#define TTL_MS 300      /* each lock's TTL, renewed at a third of it */
#define WORK_MS 500     /* each job's work, on a timer: longer than the TTL */
#define WAIT_MS 10000   /* how long a job waits for its key */

typedef struct job {
    int id;
    lb_async_lock *lock;
    struct event *work; /* ends the job's work */
} job;

static redisAsyncContext *ac;
static int pending = JOBS, failures;

static void finish(lb_async_lock *l, int status, void *ud) {
    job *j = ud;
    printf("job %d: %s %s\n", j->id, lb_err_name(status), lb_async_lock_info_of(l).errstr);
    failures += status != LB_OK;
    if (--pending == 0) redisAsyncDisconnect(ac); /* the loop then ends */
}

static void lost(lb_async_lock *l, lb_watch_reason reason, const char *detail, void *ud) {
    (void)l;
    printf("job %d: lost its lock (%s: %s)\n", ((job *)ud)->id, lb_watch_reason_name(reason), detail);
}

static void work_done(evutil_socket_t fd, short what, void *ud) {
    job *j = ud;
    (void)fd, (void)what;
    /* A loss is reported as it is found: check before each write to what the lock guards. */
    int rc = lb_async_lock_info_of(j->lock).held ? lb_async_lock_release(j->lock, finish, j)
                                                 : LB_ELOST;
    if (rc != LB_OK) finish(j->lock, rc, j);
}

static void acquired(lb_async_lock *l, int status, void *ud) {
    job *j = ud;
    if (status != LB_OK) {
        finish(l, status, j);
        return;
    }
    printf("job %d: holding (token %.8s...)\n", j->id, lb_async_lock_info_of(l).token);
    struct timeval tv = {WORK_MS / 1000, WORK_MS % 1000 * 1000};
    evtimer_add(j->work, &tv);
}

int main(int argc, char **argv) {
    struct event_base *base = event_base_new();
    ac = redisAsyncConnect("127.0.0.1", argc > 1 ? atoi(argv[1]) : 6379);
    if (!base || !ac || ac->err || redisLibeventAttach(ac, base) != REDIS_OK) return 1;
    lb_async *a;
    if (lb_libevent_async_new(&a, ac, base) != LB_OK) return 1;
    job jobs[JOBS] = {{0}};
    for (int i = 0; i < JOBS; i++) {
        char key[16];
        snprintf(key, sizeof key, "batch:%d", i % 3);
        lb_async_lock_options o;
        lb_async_lock_options_init(&o);
        o.lock.ttl_ms = TTL_MS;
        o.lost = lost;
        o.lost_ud = &jobs[i];
        jobs[i].id = i;
        jobs[i].work = evtimer_new(base, work_done, &jobs[i]);
        if (!jobs[i].work || lb_async_lock_new(&jobs[i].lock, a, LB_KEY(key), &o) != LB_OK) return 1;
        int rc = lb_async_lock_acquire(jobs[i].lock, WAIT_MS, acquired, &jobs[i]);
        if (rc != LB_OK) finish(jobs[i].lock, rc, &jobs[i]);
    }
    event_base_dispatch(base); /* until the last job disconnects */
    for (int i = 0; i < JOBS; i++) {
        event_free(jobs[i].work);
        lb_async_lock_free(jobs[i].lock);
    }
    lb_async_free(a);
    event_base_free(base);
    printf("%d jobs, %d failed\n", JOBS, failures);
    return failures == 0 ? 0 : 1;
}
