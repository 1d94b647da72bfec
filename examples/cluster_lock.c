/* A token lock on a Redis Cluster: each command goes to the primary that owns the
 * key's slot, following MOVED and ASK; any nodes of the cluster serve as seeds.
 * Build: cc -o cluster_lock cluster_lock.c $(pkg-config --cflags --libs lockbridge)
 * Run:   ./cluster_lock HOST:PORT...     (one or more nodes of a running Cluster) */
#include <stdio.h>
#include <lockbridge/lockbridge.h>

int main(int argc, char **argv) {
    lb_cluster *cl = NULL;
    lb_lock *lock = NULL;
    int rc = lb_cluster_new(&cl, (const char *const *)argv + 1, argc - 1, NULL);
    if (rc != LB_OK) fprintf(stderr, "%s\n", cl ? lb_cluster_errstr(cl) : "bad seeds");
    if (rc == LB_OK) rc = lb_lock_new(&lock, LB_KEY("orders:{42}"), NULL);
    if (rc == LB_OK && (rc = lb_lock_acquire(lock, lb_on_cluster(cl), 5000)) == LB_OK) {
        char owner[64];  /* the primary that owns the key's slot */
        lb_cluster_slot_owner(cl, lb_cluster_keyslot(LB_KEY("orders:{42}")), owner, sizeof owner);
        printf("holding orders:{42} on %s\n", owner); /* ... the work ... */
        rc = lb_lock_release(lock, lb_on_cluster(cl));
    }
    printf("orders:{42}: %s %s\n", lb_err_name(rc), lock ? lb_lock_info_of(lock).errstr : "");
    lb_lock_free(lock);
    lb_cluster_free(cl);
    return rc != LB_OK;
}
