/* lockbridge beside a client that does not queue, against a real redis-server:
 * 2 threads of a JVM token locker (M1: SET NX PX with a JSON token, 200 ms
 * between attempts, a retake at once after its own release) and 2 lockbridge
 * threads on one key, polling or fair. The outsider gets a share: its
 * acquisitions per client at least a quarter of lockbridge's. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/spawn_into.h"
#include "lockbridge/lockbridge.h"

enum {
    CLIENTS = 2,    /* on each side */
    RUN_S = 6,      /* the JVM side's run, seconds: past the first probe window
                     * of a fair lock (about 3 s into its busy life) */
    OUT_MAX = 8192, /* bytes of the JVM side's summary read back */
};

static lbt_redis server;
static redisContext *conn;
static char java_cp[512];
static int have_java;

typedef struct side {
    const char *key;
    int fair, *stop, *inside, *overlap;
    int got;
} side;

/* One lockbridge client: acquire, a critical section of two commands (as the
 * JVM side's GET and SET of its counter), release, again until told to stop. */
static void *lockbridge_client(void *arg) {
    side *s = arg;
    redisContext *c = lbt_redis_connect(&server);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = s->fair;
    /* Windows of 400 ms: a client polling every 200 ms surely asks in one. */
    o.fair_yield_ms = 400;
    lb_lock *l = NULL;
    if (c && lb_lock_new(&l, s->key, strlen(s->key), &o) == LB_OK) {
        while (!__atomic_load_n(s->stop, __ATOMIC_ACQUIRE)) {
            int rc = lb_lock_acquire(l, lb_on_conn(c), 500);
            if (rc == LB_ETIMEDOUT) continue;
            if (rc != LB_OK) break;
            if (__atomic_fetch_add(s->inside, 1, __ATOMIC_ACQ_REL) != 0)
                __atomic_store_n(s->overlap, 1, __ATOMIC_RELEASE);
            freeReplyObject(redisCommand(c, "GET %s:lbc", s->key));
            freeReplyObject(redisCommand(c, "INCR %s:lbc", s->key));
            __atomic_fetch_sub(s->inside, 1, __ATOMIC_ACQ_REL);
            s->got++;
            if (lb_lock_release(l, lb_on_conn(c)) != LB_OK) break;
        }
    }
    lb_lock_free(l);
    if (c) redisFree(c);
    return NULL;
}

static pid_t spawn_m1(const char *key, char *out) {
    char port[24], clients[24], secs[24], counter[128];
    snprintf(port, sizeof port, "%d", server.port);
    snprintf(clients, sizeof clients, "%d", CLIENTS);
    snprintf(secs, sizeof secs, "%d", RUN_S);
    snprintf(counter, sizeof counter, "%s:jc", key);
    char *argv[] = {"java", "-XX:+UseSerialGC", "-cp", java_cp, "LegacyLockers", "contend",
                    "--kind", "M1", "--port", port, "--key", (char *)key, "--counter-key",
                    counter, "--clients", clients, "--seconds", secs, "--timeout-ms", "30000",
                    NULL};
    snprintf(out, 64, "/tmp/lb-outsiders-XXXXXX");
    return lbt_spawn_into(argv, out);
}

/* The JVM side's acquisitions, from the summary line it printed; -1: none. */
static long long m1_acquisitions(const char *path) {
    static char buf[OUT_MAX];
    FILE *f = fopen(path, "r");
    long long n = -1;
    if (!f) return -1;
    while (fgets(buf, sizeof buf, f)) {
        cJSON *o = cJSON_Parse(buf);
        const cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "acquisitions") : NULL;
        if (cJSON_IsNumber(a)) n = (long long)a->valuedouble;
        cJSON_Delete(o);
    }
    fclose(f);
    unlink(path);
    return n;
}

/* The JVM side starts first, and lockbridge once the key holds its value
 * (which lockbridge may or may not see: the JVM side leaves the key free for
 * a moment between its release and its retake). A fair client that never
 * sees it passes the baton on and on until the first probe window (about
 * 3 s in, docs/modern-lock.md), which the run outlasts. Lockbridge stops
 * when the JVM side has finished. */
static int pairing(const char *key, int fair) {
    char out[64];
    pid_t pid = spawn_m1(key, out);
    assert_true(pid > 0);
    for (int tries = 0; tries < 3000; tries++) {
        const char *v = lbt_get(conn, key);
        if (v && v[0] == '{') break;
        lbt_sleep_ms(5);
    }
    int stop = 0, inside = 0, overlap = 0;
    side s[CLIENTS];
    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        s[i] = (side){.key = key, .fair = fair, .stop = &stop, .inside = &inside, .overlap = &overlap};
        assert_int_equal(pthread_create(&t[i], NULL, lockbridge_client, &s[i]), 0);
    }
    int st = 0;
    pid_t done = waitpid(pid, &st, 0);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    long long lb = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        lb += s[i].got;
    }
    long long m1 = m1_acquisitions(out);
    printf("outsiders %s: M1 %lld, lockbridge %lld (both sides %d clients)\n",
           fair ? "fair" : "polling", m1, lb, CLIENTS);
    assert_int_equal(done, pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_false(overlap);
    return m1 > 0 && m1 * 4 >= lb;
}

/* The share is judged on one run of a JVM on a shared machine, where it can
 * be left without a core for seconds (in one CI run the JVM side made 1717
 * acquisitions in 6 s against its usual 12000 to 16000, lockbridge 30737):
 * no lock can give a share to a process that does not run. A run that misses
 * the share is made once more; a lock that shuts the JVM out misses it every
 * time (before the outsider rules, 22 acquisitions against 3897, run after
 * run). Exclusion is checked in every run. */
static void share_in_one_of_two_runs(const char *key, int fair) {
    if (!have_java) {
        printf("outsiders: java or its classes are missing; skipped\n");
        skip();
    }
    if (pairing(key, fair)) return;
    printf("outsiders %s: the share was missed; once more\n", fair ? "fair" : "polling");
    lbt_cmd_ok(conn, "DEL %s", key);
    assert_true(pairing(key, fair));
}

static void test_a_polling_client_leaves_a_jvm_locker_a_share(void **state) {
    (void)state;
    share_in_one_of_two_runs("out:polling", 0);
}

static void test_a_fair_client_leaves_a_jvm_locker_a_share(void **state) {
    (void)state;
    share_in_one_of_two_runs("out:fair", 1);
}

static int setup(void **state) {
    (void)state;
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cls[600];
    snprintf(java_cp, sizeof java_cp, "%s/java", build);
    snprintf(cls, sizeof cls, "%s/LegacyLockers.class", java_cp);
    have_java = system("java -version >/dev/null 2>&1") == 0 && access(cls, R_OK) == 0;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    conn = lbt_redis_connect(&server);
    return conn ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (conn) redisFree(conn);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_polling_client_leaves_a_jvm_locker_a_share),
        cmocka_unit_test(test_a_fair_client_leaves_a_jvm_locker_a_share),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
