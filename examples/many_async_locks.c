/* 10 000 token locks, two per key, on one connection and one libevent loop: each waits, holds, releases.
 * Build: cc -o many_async_locks many_async_locks.c $(pkg-config --cflags --libs lockbridge libevent)
 * Run:   ./many_async_locks [PORT]        (a redis-server on 127.0.0.1, default 6379) */
#include <stdio.h>
#include <stdlib.h>
#include <hiredis/adapters/libevent.h>
#include <lockbridge/adapters/libevent.h>

static int pending = 10000, failed;

static void released(lb_async_lock *l, int status, void *ac) {
    failed += status != LB_OK;
    lb_async_lock_free(l);
    if (--pending == 0) redisAsyncDisconnect(ac); /* the loop then ends */
}

static void acquired(lb_async_lock *l, int status, void *ac) {
    int rc = status == LB_OK ? lb_async_lock_release(l, released, ac) : status;
    if (rc != LB_OK) released(l, rc, ac);
}

int main(int argc, char **argv) {
    struct event_base *base = event_base_new();
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", argc > 1 ? atoi(argv[1]) : 6379);
    if (!base || !ac || ac->err || redisLibeventAttach(ac, base) != REDIS_OK) return 1;
    lb_async *a;
    if (lb_libevent_async_new(&a, ac, base) != LB_OK) return 1;
    for (int i = 0; i < 10000; i++) {
        char key[32];
        lb_async_lock *l;
        snprintf(key, sizeof key, "many:%d", i / 2);
        if (lb_async_lock_new(&l, a, LB_KEY(key), NULL) != LB_OK) return 1;
        if (lb_async_lock_acquire(l, 10000, acquired, ac) != LB_OK) released(l, LB_EINVAL, ac);
    }
    event_base_dispatch(base); /* until the last release disconnects */
    lb_async_free(a);
    event_base_free(base);
    printf("10000 locks taken and released, %d failed\n", failed);
    return failed != 0;
}
