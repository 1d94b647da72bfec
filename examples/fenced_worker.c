/* A worker whose job outlasts its lock's TTL: a token lock with a fencing number,
 * that renews itself through a watchdog, and a resource that refuses writes from
 * an older holder.
 * Build: cc -o fenced_worker fenced_worker.c $(pkg-config --cflags --libs lockbridge)
 * Run:   ./fenced_worker [PORT]     (a redis-server on 127.0.0.1, default 6379) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>

#define LOCK_KEY "report:7"
#define RESOURCE_KEY "report:7:data" /* the resource the lock protects */
#define TTL_MS 1000                  /* the lock's TTL; the watchdog renews it */
#define STEPS 6                      /* steps of work ... */
#define STEP_MS 400                  /* ... of this long each: 2.4 s in all */

/* The resource's side of fencing. The resource remembers the highest fencing
 * number that wrote to it and refuses a write carrying a lower one: a holder
 * that was paused past its lease (its lock expired and was taken by the next
 * holder, who got a higher number) cannot overwrite the newer holder's work.
 * Here the resource is a Redis hash, checked and written in one script; in a
 * database it is a fence column: UPDATE ... SET fence = :f WHERE fence <= :f. */
static const char fenced_write_lua[] =
    "local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')\n"
    "if tonumber(ARGV[1]) < last then return 0 end\n"
    "redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'body', ARGV[2])\n"
    "return 1\n";

/* 1: written; 0: refused (an older fence); -1: Redis error. */
static int fenced_write(redisContext *c, long long fence, const char *body) {
    redisReply *r = redisCommand(c, "EVAL %s 1 %s %lld %s", fenced_write_lua, RESOURCE_KEY,
                                 fence, body);
    int rc = (r && r->type == REDIS_REPLY_INTEGER) ? (int)r->integer : -1;
    if (rc < 0) fprintf(stderr, "write: %s\n", r ? r->str : c->errstr);
    freeReplyObject(r);
    return rc;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The job: STEPS writes. Before each, the lock is checked (no round trip: it
 * reads 0 once the watchdog reported a loss); a pause between that check and
 * the write is what the fencing number covers. Returns 0 when every step was
 * written. */
static int work(redisContext *c, const lb_lock *lock) {
    long long fence = lb_lock_info_of(lock).fence;
    for (int step = 1; step <= STEPS; step++) {
        sleep_ms(STEP_MS);
        if (!lb_lock_info_of(lock).held) {
            fprintf(stderr, "lock lost: stopping before step %d\n", step);
            return 1;
        }
        char body[32];
        snprintf(body, sizeof body, "step %d of %d", step, STEPS);
        if (fenced_write(c, fence, body) != 1) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 6379;
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect: %s\n", c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }

    /* One watchdog per process renews every lock that names it (at a third of
     * the TTL), through its own copy of the target the locks are acquired on. */
    lb_watchdog_options wo;
    lb_watchdog_options_init(&wo);
    wo.target = lb_on_conn(c);
    lb_watchdog *wd = NULL;
    lb_lock *lock = NULL;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = TTL_MS;
    o.fencing = 1;     /* the acquiring script also takes the next {report:7}:fence */

    int rc = lb_watchdog_new(&wd, &wo);
    o.watchdog = wd;   /* the lock renews itself from its acquire to its release */
    if (rc == LB_OK) rc = lb_lock_new(&lock, LB_KEY(LOCK_KEY), &o);
    if (rc == LB_OK) rc = lb_lock_acquire(lock, lb_on_conn(c), 10000); /* wait up to 10 s */
    if (rc != LB_OK) {
        fprintf(stderr, "%s: %s\n", lb_err_name(rc), lock ? lb_lock_info_of(lock).errstr : "");
        lb_lock_free(lock);
        lb_watchdog_free(wd);
        redisFree(c);
        return 1;
    }
    long long fence = lb_lock_info_of(lock).fence;
    printf("holding %s with fencing number %lld\n", LOCK_KEY, fence);
    int failed = work(c, lock) != 0;

    lb_watchdog_stats st;
    lb_watchdog_stats_get(wd, &st);
    printf("worked %d ms on a %d ms lock; the watchdog renewed it %llu times\n",
           STEPS * STEP_MS, TTL_MS, (unsigned long long)st.renewals);
    rc = lb_lock_release(lock, lb_on_conn(c)); /* ends the watch first; LB_ELOST: not ours */
    printf("release: %s\n", lb_err_name(rc));
    failed |= rc != LB_OK;

    /* A holder from before ours, waking up late, tries to write: refused. */
    int late = fenced_write(c, fence - 1, "a late write");
    printf("a write with fencing number %lld: %s\n", fence - 1,
           late == 0 ? "refused by the resource" : "ACCEPTED");
    failed |= late != 0;

    lb_lock_free(lock);
    lb_watchdog_free(wd);
    redisFree(c);
    return failed ? 1 : 0;
}
