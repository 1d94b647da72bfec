/* Unit tests of the names a lock may take: every constructor refuses a name
 * that lb_companion_of recognises, and says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "lockbridge/lockbridge.h"

/* Companion names of "w:n" (wrapped) and of "{id}:lock" (tagged), one for
 * each companion lockbridge keeps. */
static const char *const companions[] = {
    "{w:n}:bwait", "{w:n}:baton", "{w:n}:queue",     "{w:n}:fair",
    "{w:n}:fence", "{w:n}:lb-mode", "{w:n}:lb-census", "{w:n}:lb-gate",
    "{id}:lock:bwait", "{id}:lock:fence",
};

/* Names that only look like companions, and plain ones. */
static const char *const lock_names[] = {"w:n", "{w:n}:lock", "{id}:lock", "x:bwait", "{w:n}:bwaits"};

typedef int (*make_fn)(const char *key, redisContext *c);

static int plain(const char *key, redisContext *c) {
    (void)c;
    lb_lock *l = NULL;
    int rc = lb_lock_new(&l, key, strlen(key), NULL);
    lb_lock_free(l);
    return rc;
}

static int fair(const char *key, redisContext *c) {
    (void)c;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    lb_lock *l = NULL;
    int rc = lb_lock_new(&l, key, strlen(key), &o);
    lb_lock_free(l);
    return rc;
}

static int fenced(const char *key, redisContext *c) {
    (void)c;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fencing = 1;
    lb_lock *l = NULL;
    int rc = lb_lock_new(&l, key, strlen(key), &o);
    lb_lock_free(l);
    return rc;
}

static int legacy(const char *key, redisContext *c) {
    (void)c;
    lb_legacy_lock *l = NULL;
    int rc = lb_legacy_lock_new(&l, key, strlen(key), NULL);
    lb_legacy_lock_free(l);
    return rc;
}

static int compat(const char *key, redisContext *c) {
    (void)c;
    lb_mlock *l = NULL;
    int rc = lb_mlock_new(&l, key, strlen(key), NULL);
    lb_mlock_free(l);
    return rc;
}

static int quorum(const char *key, redisContext *c) {
    lb_quorum *q = NULL;
    int rc = lb_quorum_new(&q, key, strlen(key), &c, 1, NULL);
    lb_quorum_free(q);
    return rc;
}

static const struct {
    const char *kind;
    make_fn make;
} kinds[] = {{"plain", plain}, {"fair", fair}, {"fencing", fenced},
             {"legacy", legacy}, {"compat", compat}, {"quorum", quorum}};

/* A lock named like a companion would share its key with that companion: a
 * fair wait on the base writes its mark there, a release its baton, and two
 * clients could hold the one key at once. No kind of lock takes such a name,
 * and lb_lock_name_refused says why; other names are taken. */
static void test_no_kind_of_lock_takes_a_companions_name(void **state) {
    (void)state;
    /* A context that never connected: quorum keeps it, and sends nothing
     * here. */
    redisContext *c = redisConnect("127.0.0.1", 1);
    assert_non_null(c);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (size_t i = 0; i < sizeof companions / sizeof companions[0]; i++) {
            int rc = kinds[k].make(companions[i], c);
            if (rc != LB_EINVAL) fail_msg("%s %s: %s", kinds[k].kind, companions[i], lb_err_name(rc));
        }
        for (size_t i = 0; i < sizeof lock_names / sizeof lock_names[0]; i++) {
            int rc = kinds[k].make(lock_names[i], c);
            if (rc != LB_OK) fail_msg("%s %s: %s", kinds[k].kind, lock_names[i], lb_err_name(rc));
        }
    }
    for (size_t i = 0; i < sizeof companions / sizeof companions[0]; i++) {
        const char *why = lb_lock_name_refused(companions[i], strlen(companions[i]));
        assert_non_null(why);
        assert_non_null(strstr(why, "companion"));
    }
    for (size_t i = 0; i < sizeof lock_names / sizeof lock_names[0]; i++)
        assert_null(lb_lock_name_refused(lock_names[i], strlen(lock_names[i])));
    redisFree(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_kind_of_lock_takes_a_companions_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
