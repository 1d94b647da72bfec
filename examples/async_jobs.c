/* One thread, one connection, one libevent loop: six jobs on three keys each take
 * a token lock without blocking, work on a timer, and release; a job that finds
 * its key busy tries again on a timer, no later than the holder's TTL runs out.
 * Build: cc -o async_jobs async_jobs.c $(pkg-config --cflags --libs lockbridge libevent)
 * Run:   ./async_jobs [PORT]        (a redis-server on 127.0.0.1, default 6379) */
#include <stdio.h>
#include <stdlib.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>

#define JOBS 6        /* two jobs per key, so every key is contended */
#define KEYS 3
#define TTL_MS 5000   /* each lock's TTL */
#define WORK_MS 100   /* each job's work, on a timer */
#define RETRY_MAX_MS 50 /* a busy job tries again after at most this */

typedef struct job {
    int id;
    char key[16];
    lb_lock *lock;
    struct event *timer; /* work, or the next attempt */
    int working;         /* the timer ends the work (else it retries) */
    int attempts;
} job;

static redisAsyncContext *ac;
static int pending = JOBS; /* jobs not finished */
static int failures;

static void start_attempt(job *j);

static void finish(job *j, int status) {
    printf("job %d: %s after %d attempt(s)\n", j->id, lb_err_name(status), j->attempts);
    if (status != LB_OK) failures++;
    /* The last job closes the connection; the loop then has nothing left to
     * wait for and returns. */
    if (--pending == 0) redisAsyncDisconnect(ac);
}

static void after_ms(job *j, long ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(j->timer, &tv);
}

static void on_released(lb_machine *m, int status, void *ud) {
    (void)m;
    finish(ud, status);
}

static void on_acquired(lb_machine *m, int status, void *ud) {
    job *j = ud;
    (void)m;
    if (status == LB_OK) {
        printf("job %d: holding %s (token %.8s...)\n", j->id, j->key, lb_lock_info_of(j->lock).token);
        j->working = 1;
        after_ms(j, WORK_MS);
    } else if (status == LB_EBUSY) {
        /* Held by the other job: the holder's TTL bounds how long to wait. */
        long ttl = (long)lb_lock_info_of(j->lock).holder_ttl_ms;
        after_ms(j, ttl >= 0 && ttl < RETRY_MAX_MS ? ttl + 1 : RETRY_MAX_MS);
    } else {
        finish(j, status);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *ud) {
    job *j = ud;
    (void)fd;
    (void)what;
    if (!j->working) {
        start_attempt(j);
        return;
    }
    j->working = 0;
    int rc = lb_async_run(ac, lb_lock_machine(j->lock, LB_OP_RELEASE, 0), NULL, on_released, j);
    if (rc != LB_OK) finish(j, rc);
}

static void start_attempt(job *j) {
    j->attempts++;
    /* on_acquired is called once, with the attempt's status (LB_EIO if the
     * connection is lost meanwhile); an error here means it is not called. */
    int rc = lb_async_run(ac, lb_lock_machine(j->lock, LB_OP_TRY_ACQUIRE, 0), NULL, on_acquired, j);
    if (rc != LB_OK) finish(j, rc);
}

int main(int argc, char **argv) {
    struct event_base *base = event_base_new();
    if (!base) return 1;
    ac = redisAsyncConnect("127.0.0.1", argc > 1 ? atoi(argv[1]) : 6379);
    if (!ac || ac->err || redisLibeventAttach(ac, base) != REDIS_OK) {
        fprintf(stderr, "cannot connect: %s\n", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        event_base_free(base);
        return 1;
    }
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = TTL_MS;
    job jobs[JOBS] = {{0}};
    int made = 0;
    for (; made < JOBS; made++) {
        job *j = &jobs[made];
        int n = snprintf(j->key, sizeof j->key, "batch:%d", made % KEYS);
        j->id = made;
        j->timer = evtimer_new(base, on_timer, j);
        if (!j->timer || lb_lock_new(&j->lock, j->key, (size_t)n, &o) != LB_OK) break;
    }
    if (made < JOBS) {
        fprintf(stderr, "out of memory\n");
        pending = 0;
        redisAsyncFree(ac);
    } else {
        for (int i = 0; i < JOBS; i++) start_attempt(&jobs[i]);
        event_base_dispatch(base); /* until the last job disconnects */
    }
    for (int i = 0; i < JOBS; i++) {
        if (jobs[i].timer) event_free(jobs[i].timer);
        lb_lock_free(jobs[i].lock);
    }
    event_base_free(base);
    printf("%d jobs, %d failed\n", JOBS, failures);
    return made == JOBS && failures == 0 ? 0 : 1;
}
