/* Two processes, one token lock: the holder holds it for a while; the waiter
 * sleeps until the holder's release is published and takes the lock at once,
 * instead of polling Redis at a short interval.
 * Build: cc -o wait_for_release wait_for_release.c $(pkg-config --cflags --libs lockbridge)
 * Run:   ./wait_for_release hold [PORT [HOLD_MS]] &  ./wait_for_release wait [PORT] */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>

#define LOCK_KEY "jobs:42"
#define TTL_MS 30000 /* the lock's TTL: longer than the holder's work */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Takes the lock, holds it hold_ms, releases it (the release script publishes
 * on {jobs:42}:released, which wakes the waiters). */
static int hold(redisContext *c, lb_lock *lock, long hold_ms) {
    int rc = lb_lock_acquire(lock, lb_on_conn(c), 10000);
    if (rc != LB_OK) return rc;
    printf("holder: holding %s for %ld ms\n", LOCK_KEY, hold_ms);
    fflush(stdout);
    sleep_ms(hold_ms);
    printf("holder: releasing\n");
    return lb_lock_release(lock, lb_on_conn(c));
}

/* Waits for the lock through a waiter: one subscriber connection per process,
 * read by a thread of its own, serving every lock the process waits for. */
static int wait_for(redisContext *c, lb_lock *lock, int port) {
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.host = "127.0.0.1";
    wo.port = port;
    lb_waiter *w;
    int rc = lb_waiter_new(&w, &wo);
    if (rc != LB_OK) return rc;
    double t0 = now_ms();
    rc = lb_lock_acquire_wait(lock, lb_on_conn(c), w, 60000); /* up to a minute */
    if (rc == LB_OK) {
        lb_waiter_stats st;
        lb_waiter_stats_get(w, &st);
        printf("waiter: acquired %s after %.0f ms; release messages heard: %llu, "
               "commands sent: %llu\n",
               LOCK_KEY, now_ms() - t0, (unsigned long long)st.messages,
               (unsigned long long)lb_lock_info_of(lock).commands);
        /* ... critical section ... */
        rc = lb_lock_release(lock, lb_on_conn(c));
    }
    lb_waiter_free(w); /* no wait is running any more */
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "hold") != 0 && strcmp(argv[1], "wait") != 0)) {
        fprintf(stderr, "usage: %s hold|wait [PORT [HOLD_MS]]\n", argv[0]);
        return 2;
    }
    int port = argc > 2 ? atoi(argv[2]) : 6379;
    long hold_ms = argc > 3 ? atol(argv[3]) : 2000;
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect: %s\n", c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = TTL_MS;
    /* Releases wake the waiter, so its back-off can be long: it only bounds how
     * late a release that publishes nothing (a bare DEL, an expiry) is seen. */
    o.backoff_min_ms = 1000;
    o.backoff_max_ms = 5000;
    lb_lock *lock;
    int rc = lb_lock_new(&lock, LB_KEY(LOCK_KEY), &o);
    if (rc == LB_OK)
        rc = strcmp(argv[1], "hold") == 0 ? hold(c, lock, hold_ms) : wait_for(c, lock, port);
    if (rc != LB_OK)
        fprintf(stderr, "%s: %s: %s\n", argv[1], lb_err_name(rc), lock ? lb_lock_info_of(lock).errstr : "");
    lb_lock_free(lock);
    redisFree(c);
    return rc == LB_OK ? 0 : 1;
}
