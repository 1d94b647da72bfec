/* `lockbridge race --search` against the project's Java lockers: from a seed
 * alone, random schedules find the known races, shrink them, and the line
 * printed replays as a caught row. Each schedule starts processes, so those
 * tests run under `make explore` (LB_EXPLORE_DEPTH set), not in `make test`;
 * the refusals, which start none, run in both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "harness/proc.h"
#include "harness/redis_server.h"

#define KEY "race:lock"
#define COUNTER "race:counter"
#define SCHEDULES "200" /* the search's budget: found within it, or the test fails */
#define MAX_SHRUNK 8    /* tokens of the shrunk line, at most */

static lbt_redis server;
static char port[16];
static char java_cp[512];
static int have_java, exploring;

/* A client line of the Java lockers, validity `ttl` ms, the read timeout its
 * default (5 s): the search's pauses are at most 3.1T past the start. */
static void client_line(char name, const char *kind, int ttl, char *out, size_t cap) {
    snprintf(out, cap,
             "%c=exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp %s LegacyLockers "
             "contend --kind %s --key " KEY " --counter-key " COUNTER
             " --port {port} --clients 1 --seconds 120 --timeout-ms %d",
             name, java_cp, kind, ttl);
}

typedef struct found {
    int code;
    cJSON *ev; /* the race_search line */
} found;

/* The last line of `event` in the tool's JSON lines (a search prints one per
 * run, more than lbt_parse keeps). */
static cJSON *last_event(const lbt_proc *p, const char *event) {
    cJSON *got = NULL;
    char *copy = strdup(p->out), *save = NULL;
    assert_non_null(copy);
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(l);
        if (!o) fail_msg("not JSON: %s", l);
        if (strcmp(lbt_str_of(o, "event"), event) == 0) {
            cJSON_Delete(got);
            got = o;
        } else {
            cJSON_Delete(o);
        }
    }
    free(copy);
    return got;
}

/* Searches with two clients of `kind` from `seed`. */
static void search(const char *kind, int ttl, const char *seed, found *f) {
    char a[1024], b[1024], ttls[16];
    client_line('A', kind, ttl, a, sizeof a);
    client_line('B', kind, ttl, b, sizeof b);
    snprintf(ttls, sizeof ttls, "%d", ttl);
    const char *args[] = {"-p", port, "race", "--search", SCHEDULES, "--seed", seed,
                          "--ttl-ms", ttls, "--key", KEY, "--counter-key", COUNTER,
                          "--json", "--client", a, "--client", b, NULL};
    lbt_proc p;
    f->code = lbt_run(&p, args);
    f->ev = last_event(&p, "race_search");
    assert_non_null(f->ev);
    printf("  %s seed %s: %d schedules, %s: %s\n    drawn  %s\n    shrunk %s (%d runs)\n", kind,
           seed, (int)lbt_num_of(f->ev, "tried"), lbt_str_of(f->ev, "kind"),
           lbt_str_of(f->ev, "detail"), lbt_str_of(f->ev, "drawn"),
           lbt_str_of(f->ev, "schedule"), (int)lbt_num_of(f->ev, "shrink_runs"));
}

/* What every search that finds must show: caught within the budget, shrunk
 * to a short line that the search itself replayed as printed, and exit 6. */
static void expect_found(const found *f, const char *kind) {
    assert_int_equal(f->code, 6);
    assert_true(lbt_bool_of(f->ev, "found"));
    assert_string_equal(lbt_str_of(f->ev, "kind"), kind);
    assert_true(lbt_num_of(f->ev, "tried") <= atoi(SCHEDULES));
    assert_true(lbt_num_of(f->ev, "tokens") <= MAX_SHRUNK);
    assert_true(lbt_bool_of(f->ev, "replayed"));
}

/* The line printed, replayed by `race --schedule` as a team would keep it,
 * under replay's own judge: caught with the same kind. */
static void expect_replays_caught(const char *kind, int ttl, const char *line,
                                  const char *want_kind) {
    char a[1024], b[1024], ttls[16];
    client_line('A', kind, ttl, a, sizeof a);
    client_line('B', kind, ttl, b, sizeof b);
    snprintf(ttls, sizeof ttls, "%d", ttl);
    const char *args[] = {"-p", port, "race", "--schedule", line, "--ttl-ms", ttls,
                          "--key", KEY, "--counter-key", COUNTER, "--json",
                          "--client", a, "--client", b, NULL};
    lbt_proc p;
    int code = lbt_run(&p, args);
    cJSON *r = last_event(&p, "race_result");
    assert_non_null(r);
    printf("    replayed: %s %s\n", lbt_str_of(r, "verdict"), lbt_str_of(r, "kind"));
    assert_string_equal(lbt_str_of(r, "verdict"), "caught");
    assert_string_equal(lbt_str_of(r, "kind"), want_kind);
    assert_int_equal(code, 6); /* no --locker: every schedule was expected to pass */
    cJSON_Delete(r);
}

static int skipped(void) {
    if (!exploring) {
        printf("race search: runs under make explore (LB_EXPLORE_DEPTH); skipped\n");
        return 1;
    }
    if (have_java) return 0;
    printf("race search: java or the Java lockers are missing; skipped\n");
    return 1;
}

/* L1 after a nil GET deletes the key (its catch-all handler), which the other
 * client holds by then. No schedule is given: the seed draws it. */
static void test_search_finds_l1s_catch_all_del_from_a_seed(void **state) {
    (void)state;
    if (skipped()) skip();
    found f;
    search("L1", 300, "1", &f);
    expect_found(&f, "deleted");
    /* The deleting client's own GET found nothing just before: the catch-all,
     * not the owner's late release. */
    const char *detail = lbt_str_of(f.ev, "detail"), *trace = lbt_str_of(f.ev, "trace");
    char nil_get[64], del[32];
    snprintf(nil_get, sizeof nil_get, "%c -> GET " KEY "\n  %c <- nil\n", detail[0], detail[0]);
    snprintf(del, sizeof del, "%c -> DEL " KEY, detail[0]);
    const char *at = strstr(trace, nil_get);
    if (!at) fail_msg("no nil GET by %c in:\n%s", detail[0], trace);
    assert_non_null(strstr(at, del));
    expect_replays_caught("L1", 300, lbt_str_of(f.ev, "schedule"), "deleted");
    cJSON_Delete(f.ev);
}

/* L1's first INCR generation: a client that crashes between its INCR and its
 * EXPIRE leaves a key with no TTL, and the other never acquires again. */
static void test_search_finds_an_incr_lockers_crash_before_expire(void **state) {
    (void)state;
    if (skipped()) skip();
    found f;
    search("L1-INCR", 1000, "1", &f);
    expect_found(&f, "liveness");
    /* The crashed client's last step was its INCR: it never sent its EXPIRE. */
    const char *line = lbt_str_of(f.ev, "schedule"), *bang = strchr(line, '!');
    assert_non_null(bang);
    char last[16];
    snprintf(last, sizeof last, "%c:INCR %c!", bang[-1], bang[-1]);
    if (!strstr(line, last)) fail_msg("the crash is not right after an INCR: %s", line);
    char expire[16];
    snprintf(expire, sizeof expire, "%c:EXPIRE", bang[-1]);
    assert_null(strstr(line, expire));
    expect_replays_caught("L1-INCR", 1000, line, "liveness");
    cJSON_Delete(f.ev);
}

/* The draws of a search, each reduced to its skeleton: who steps, pauses,
 * crashes and checks, without the commands the steps turned out to be. */
static void draws(const lbt_proc *p, char *out, size_t cap) {
    char *copy = strdup(p->out), *save = NULL;
    size_t o = 0;
    assert_non_null(copy);
    out[0] = '\0';
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *e = cJSON_Parse(l);
        if (!e) fail_msg("not JSON: %s", l);
        if (strcmp(lbt_str_of(e, "event"), "race_search_run") == 0 &&
            strcmp(lbt_str_of(e, "phase"), "draw") == 0) {
            for (const char *c = lbt_str_of(e, "schedule"); *c && o + 2 < cap; c++) {
                if (*c == ':')
                    while (c[1] && c[1] != ' ') c++;
                else out[o++] = *c;
            }
            if (o + 2 < cap) out[o++] = '|';
            out[o] = '\0';
        }
        cJSON_Delete(e);
    }
    free(copy);
}

/* A seed draws the same schedules: what a team reruns is what failed. The
 * clients are lockbridge's own (no JVM), which pass every draw. */
static void test_a_seed_draws_the_same_schedules(void **state) {
    (void)state;
    if (!exploring) {
        printf("race search: runs under make explore (LB_EXPLORE_DEPTH); skipped\n");
        skip();
    }
    char cl[2][512], got[2][8192];
    for (int i = 0; i < 2; i++)
        snprintf(cl[i], sizeof cl[i],
                 "%c=while :; do %s hold " KEY " -p {port} --ttl-ms 300 --release-margin-ms 60 "
                 "--wait-ms 60000 --hold-ms 0 >/dev/null 2>&1; done",
                 'A' + i, lbt_tool());
    for (int run = 0; run < 2; run++) {
        const char *args[] = {"-p", port, "race", "--search", "4", "--seed", "7",
                              "--ttl-ms", "300", "--key", KEY, "--json",
                              "--client", cl[0], "--client", cl[1], NULL};
        lbt_proc p;
        int code = lbt_run(&p, args);
        draws(&p, got[run], sizeof got[run]);
        cJSON *ev = last_event(&p, "race_search");
        assert_non_null(ev);
        printf("  seed 7, run %d: %s\n", run + 1, got[run]);
        assert_int_equal(code, 0); /* lockbridge's lock passes them all */
        assert_false(lbt_bool_of(ev, "found"));
        assert_int_equal((int)lbt_num_of(ev, "tried"), 4);
        cJSON_Delete(ev);
    }
    assert_true(strchr(got[0], 'A') && strchr(got[0], 'B'));
    assert_string_equal(got[0], got[1]);
}

/* What the search cannot use is refused before anything starts. */
static void test_the_search_refuses_what_it_cannot_use(void **state) {
    (void)state;
    static const struct {
        const char *extra[4];
        const char *says;
    } cases[] = {
        {{"--ttl-ms", "300", NULL}, "needs two --client"},
        {{"--client", "B=true", NULL}, "needs --ttl-ms"},
        {{"--client", "C=true", "--ttl-ms", "300"}, "B has no --client"},
        {{"--client", "B=true", "--ttl-ms", "300"}, NULL}, /* + --junit below */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16] = {"-p", port, "race", "--search", "3", "--client", "A=true"};
        int n = 7;
        for (int k = 0; k < 4 && cases[i].extra[k]; k++) args[n++] = cases[i].extra[k];
        if (!cases[i].says) args[n++] = "--junit", args[n++] = "/dev/null";
        lbt_proc p;
        assert_int_equal(lbt_run(&p, args), 1);
        const char *says = cases[i].says ? cases[i].says : "takes no --schedule, --file";
        if (!strstr(p.err, says)) fail_msg("expected '%s' in: %s", says, p.err);
    }
}

/* A client that records nothing ends the search at once, naming the cause. */
static void test_a_client_that_records_nothing_is_named(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--search", "200", "--ttl-ms", "300",
                          "--key", KEY, "--json", "--client", "A=echo gone >&2; exit 3",
                          "--client", "B=exit 3", NULL};
    lbt_proc p;
    int code = lbt_run(&p, args);
    cJSON *ev = last_event(&p, "race_search");
    assert_non_null(ev);
    assert_int_equal(code, 6);
    assert_false(lbt_bool_of(ev, "found"));
    const char *d = lbt_str_of(ev, "detail");
    if (!strstr(d, "A: nothing recorded: A's process exited with status 3; its stderr ends: gone"))
        fail_msg("detail: %s", d);
    cJSON_Delete(ev);
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_race_search") != 0) return -1;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    snprintf(port, sizeof port, "%d", server.port);
    const char *build = getenv("BUILD");
    char cls[600];
    snprintf(java_cp, sizeof java_cp, "%s/java", build && *build ? build : "build");
    snprintf(cls, sizeof cls, "%s/LegacyLockers.class", java_cp);
    have_java = system("java -version >/dev/null 2>&1") == 0 && access(cls, R_OK) == 0;
    exploring = getenv("LB_EXPLORE_DEPTH") != NULL;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_finds_l1s_catch_all_del_from_a_seed),
        cmocka_unit_test(test_search_finds_an_incr_lockers_crash_before_expire),
        cmocka_unit_test(test_a_seed_draws_the_same_schedules),
        cmocka_unit_test(test_the_search_refuses_what_it_cannot_use),
        cmocka_unit_test(test_a_client_that_records_nothing_is_named),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
