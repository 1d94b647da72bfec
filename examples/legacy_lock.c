/* A lock beside a fleet of Java timestamp lockers (SETNX/GETSET, epoch ms, 15 min
 * validity): taken as they take it, released only if it is still ours.
 * Build: cc -o legacy_lock legacy_lock.c $(pkg-config --cflags --libs lockbridge)
 * Run:   ./legacy_lock [PORT]       (a redis-server on 127.0.0.1, default 6379) */
#include <stdio.h>
#include <stdlib.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>

int main(int argc, char **argv) {
    redisContext *c = redisConnect("127.0.0.1", argc > 1 ? atoi(argv[1]) : 6379);
    if (!c || c->err) return fprintf(stderr, "cannot connect\n"), redisFree(c), 1;
    lb_legacy_options o;
    lb_legacy_options_init(&o);         /* epoch-ms values, the fleet's codec */
    o.ttl_ms = 15 * 60 * 1000;          /* the validity the fleet's lockers write */
    o.variant = LB_LEGACY_SCRIPTED;     /* the server runs scripts (README.md, variants) */
    lb_legacy_lock *lock = NULL;
    int rc = lb_legacy_lock_new(&lock, LB_KEY("orders:42"), &o);
    if (rc == LB_OK && (rc = lb_legacy_acquire(lock, lb_on_conn(c), 5000)) == LB_OK)
        rc = lb_legacy_release(lock, lb_on_conn(c)); /* after the work; LB_ELOST: taken over */
    printf("orders:42: %s %s\n", lb_err_name(rc), lock ? lb_legacy_info_of(lock).errstr : "");
    lb_legacy_lock_free(lock);
    redisFree(c);
    return rc != LB_OK;
}
