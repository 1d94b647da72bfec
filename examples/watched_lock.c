/* A job longer than its lock's TTL: a token lock that renews itself, reports a loss,
 * and fences each write (the resource refuses a number below the highest it saw).
 * Build: cc -o watched_lock watched_lock.c $(pkg-config --cflags --libs lockbridge)
 * Run:   ./watched_lock [PORT]      (a redis-server on 127.0.0.1, default 6379) */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>
#define FENCED_SET "if tonumber(redis.call('HGET', KEYS[1], 'fence') or 0) > tonumber(ARGV[1]) " \
                   "then return 0 end return redis.call('HSET', KEYS[1], 'fence', ARGV[1])"

static void lost(const lb_lock *l, lb_watch_reason why, const char *detail, void *ud) {
    fprintf(stderr, "%s lost: %s: %s\n", (char *)ud, lb_watch_reason_name(why), detail), (void)l;
}

int main(int argc, char **argv) {
    redisContext *c = redisConnect("127.0.0.1", argc > 1 ? atoi(argv[1]) : 6379);
    if (!c || c->err) return fprintf(stderr, "cannot connect\n"), redisFree(c), 1;
    lb_watchdog *wd = NULL;             /* one per process renews every lock naming it, */
    lb_lock *lock = NULL;               /* through its own copy of the target */
    int rc = lb_watchdog_new_on(&wd, lb_on_conn(c), lost, "report:7");
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 1000;                    /* renewed at a third of it */
    o.fencing = 1;
    o.watchdog = wd;
    if (rc == LB_OK) rc = lb_lock_new(&lock, LB_KEY("report:7"), &o);
    if (rc == LB_OK) rc = lb_lock_acquire(lock, lb_on_conn(c), 10000);
    for (int step = 0; rc == LB_OK && step < 6; step++, usleep(400000)) /* 2.4 s of work */
        if (!lb_lock_info_of(lock).held) rc = LB_ELOST; /* checked before each write */
        else freeReplyObject(redisCommand(c, "EVAL %s 1 report:7:data %lld", FENCED_SET,
                                          (long long)lb_lock_info_of(lock).fence));
    if (rc == LB_OK) rc = lb_lock_release(lock, lb_on_conn(c));
    printf("report:7: %s %s\n", lb_err_name(rc), lock ? lb_lock_info_of(lock).errstr : "");
    lb_lock_free(lock);
    lb_watchdog_free(wd);
    redisFree(c);
    return rc != LB_OK;
}
