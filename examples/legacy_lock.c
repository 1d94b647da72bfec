/* Takes a lock the way the fleet's Java lockers do (a SETNX/GETSET timestamp),
 * holds it for a critical section, and releases it only if it is still ours.
 * Build: cc -o legacy_lock legacy_lock.c $(pkg-config --cflags --libs lockbridge)
 * Run:   ./legacy_lock [PORT]       (a redis-server on 127.0.0.1, default 6379) */
#include <stdio.h>
#include <stdlib.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>

int main(int argc, char **argv) {
    redisContext *c = redisConnect("127.0.0.1", argc > 1 ? atoi(argv[1]) : 6379);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect: %s\n", c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }

    lb_legacy_options o;
    lb_legacy_options_init(&o);          /* epoch-ms values (the fleet's codec) */
    o.ttl_ms = 15 * 60 * 1000;           /* the validity the fleet's lockers write */
    o.variant = LB_LEGACY_SCRIPTED;      /* the server runs scripts (README.md, variants) */

    lb_legacy_lock *lock;
    int rc = lb_legacy_lock_new(&lock, LB_KEY("orders:42"), &o);
    if (rc != LB_OK) {
        fprintf(stderr, "%s\n", lb_strerror(rc));
        redisFree(c);
        return 1;
    }

    rc = lb_legacy_acquire(lock, lb_on_conn(c), 5000);       /* wait up to 5 s */
    if (rc == LB_OK) {
        printf("holding orders:42 until %lld\n", (long long)lb_legacy_info_of(lock).expiry);
        /* ... critical section ... */
        rc = lb_legacy_release(lock, lb_on_conn(c));         /* LB_ELOST: someone took it over */
    }
    if (rc != LB_OK)
        fprintf(stderr, "%s: %s\n", lb_err_name(rc), lb_legacy_info_of(lock).errstr);
    else
        printf("released\n");
    lb_legacy_lock_free(lock);
    redisFree(c);
    return rc == LB_OK ? 0 : 1;
}
