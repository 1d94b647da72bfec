/* `lockbridge clock`: this host's wall clock against the server's TIME, sampled
 * several times, with a verdict against a threshold: legacy locks are only as
 * safe as the agreement of the clocks of every host that takes them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/server.h"

#define SAMPLES_DEFAULT 7
#define SAMPLES_MAX 1000
#define THRESHOLD_MS_DEFAULT 1000 /* milliseconds */
#define INTERVAL_MS_DEFAULT 10    /* between samples, milliseconds */
#define INTERVAL_MS_MAX 60000     /* milliseconds */

static const lb__cli_optdef opts[] = {
    {"--samples", 1}, {"--threshold-ms", 1}, {"--interval-ms", 1}, {"--clock-offset-ms", 1},
    {NULL, 0}};

static const char help[] =
    "usage: lockbridge clock [--samples N] [--threshold-ms N] [--interval-ms N]\n"
    "                        [--clock-offset-ms N] [--json]\n"
    "\n"
    "Compares this host's wall clock with the server's TIME. Each sample reads the\n"
    "local clock, sends TIME and times the round trip; the offset is the server's\n"
    "time minus the local time at the middle of the round trip (positive: the\n"
    "server is ahead), known to within half the round trip. The verdict compares\n"
    "the median offset, widened by that uncertainty, with the threshold: legacy\n"
    "timestamp locks are safe only while every host's clock agrees this closely.\n"
    "\n"
    "  --samples N         TIME round trips, 1..1000 (default 7)\n"
    "  --threshold-ms N    largest acceptable offset, ms, 0..10^12 (default 1000)\n"
    "  --interval-ms N     pause between samples, ms, 0..60000 (default 10)\n"
    "  --clock-offset-ms N shift this host's clock first, as the lock commands do\n"
    "  --json              one \"clock\" JSON line instead of a table\n"
    "\n"
    "Exit: 0 verdict ok (|offset| + uncertainty <= threshold); 6 verdict skewed\n"
    "(|offset| - uncertainty > threshold) or uncertain (the threshold lies within\n"
    "the uncertainty); 1 usage; 4 connection or Redis error, or a TIME reply that\n"
    "is not two decimal integers.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

typedef struct sample {
    double offset_ms; /* server minus local, at the middle of the round trip */
    double rtt_ms;
} sample;

/* Reads TIME's reply strictly: two strings of decimal digits, seconds and
 * microseconds below a million. */
static int server_us(const redisReply *r, int64_t *us) {
    int64_t sec, usec;
    *us = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
    for (int i = 0; i < 2; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) return -1;
    if (lb__cli_parse_i64(r->element[0]->str, r->element[0]->len, &sec) != 0 ||
        lb__cli_parse_i64(r->element[1]->str, r->element[1]->len, &usec) != 0 || sec < 0 ||
        sec > INT64_MAX / 1000000 - 1 || usec < 0 || usec > 999999)
        return -1;
    *us = sec * 1000000 + usec;
    return 0;
}

static int take_sample(redisContext *c, const lb_clock *clock, sample *s, char *err,
                       size_t cap) {
    lb_now before = lb_clock_now(clock);
    double m0 = lb__cli_mono_ms();
    redisReply *r = redisCommand(c, "TIME");
    double m1 = lb__cli_mono_ms();
    int64_t server;
    int rc = server_us(r, &server);
    if (!r) snprintf(err, cap, "TIME: %s", c->errstr);
    else if (r->type == REDIS_REPLY_ERROR) {
        char msg[128];
        lb__escape(msg, sizeof msg, r->str, (size_t)r->len);
        snprintf(err, cap, "TIME refused: %s", msg);
    } else if (rc != 0) snprintf(err, cap, "TIME: the reply is not two decimal integers");
    if (r) freeReplyObject(r);
    if (!r || rc != 0) return -1;
    s->rtt_ms = m1 - m0;
    /* The wall clock is read once and moved on by the monotonic half round
     * trip, so a wall clock step during the sample cannot skew it further. */
    s->offset_ms = (double)(server - before.wall_us) / 1000.0 - s->rtt_ms / 2.0;
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

typedef struct verdict {
    double offset_ms, uncertainty_ms, rtt_min, rtt_median, rtt_max;
    const char *name; /* "ok", "skewed", "uncertain" */
} verdict;

/* Every sample's true offset lies within half its round trip of the measured
 * one, so the median lies within half the longest round trip of the truth. */
static void judge(const sample *s, int n, int64_t threshold_ms, verdict *v) {
    double *off = malloc((size_t)n * sizeof *off), *rtt = malloc((size_t)n * sizeof *rtt);
    memset(v, 0, sizeof *v);
    v->name = "uncertain";
    if (!off || !rtt) goto out;
    for (int i = 0; i < n; i++) off[i] = s[i].offset_ms, rtt[i] = s[i].rtt_ms;
    v->offset_ms = median(off, n);
    v->rtt_median = median(rtt, n);
    v->rtt_min = rtt[0];
    v->rtt_max = rtt[n - 1];
    v->uncertainty_ms = v->rtt_max / 2.0;
    double far = fabs(v->offset_ms) + v->uncertainty_ms;
    double near = fabs(v->offset_ms) - v->uncertainty_ms;
    v->name = far <= (double)threshold_ms ? "ok" : near > (double)threshold_ms ? "skewed"
                                                                               : "uncertain";
out:
    free(off);
    free(rtt);
}

static void show_text(const char *where, const sample *s, int n, int64_t threshold_ms,
                      const verdict *v) {
    printf("clock of %s against this host, %d sample%s\n\n", where, n, n == 1 ? "" : "s");
    printf("  %6s  %14s  %10s\n", "sample", "offset_ms", "rtt_ms");
    for (int i = 0; i < n; i++)
        printf("  %6d  %+14.3f  %10.3f\n", i + 1, s[i].offset_ms, s[i].rtt_ms);
    printf("\n  median offset   %+.3f ms (%s)\n", v->offset_ms,
           v->offset_ms >= 0 ? "server ahead of this host" : "server behind this host");
    printf("  uncertainty     +/- %.3f ms (half the longest round trip)\n",
           v->uncertainty_ms);
    printf("  round trips     min %.3f, median %.3f, max %.3f ms\n", v->rtt_min,
           v->rtt_median, v->rtt_max);
    printf("  threshold       %lld ms\n", (long long)threshold_ms);
    printf("  verdict         %s\n", v->name);
}

static void show_json(const char *where, const sample *s, int n, int64_t threshold_ms,
                      const verdict *v) {
    cJSON *o = lb__cli_event("clock"), *arr, *rtt;
    if (o) {
        lb__cli_add_str(o, "server", where);
        if ((arr = cJSON_AddArrayToObject(o, "samples")) != NULL)
            for (int i = 0; i < n; i++) {
                cJSON *e = cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(arr, e)) {
                    cJSON_Delete(e);
                    break;
                }
                lb__cli_add_ms(e, "offset_ms", s[i].offset_ms);
                lb__cli_add_ms(e, "rtt_ms", s[i].rtt_ms);
            }
        lb__cli_add_ms(o, "offset_ms", v->offset_ms);
        lb__cli_add_ms(o, "uncertainty_ms", v->uncertainty_ms);
        if ((rtt = cJSON_AddObjectToObject(o, "rtt_ms")) != NULL) {
            lb__cli_add_ms(rtt, "min", v->rtt_min);
            lb__cli_add_ms(rtt, "median", v->rtt_median);
            lb__cli_add_ms(rtt, "max", v->rtt_max);
        }
        lb__cli_add_i64(o, "threshold_ms", threshold_ms);
        lb__cli_add_str(o, "verdict", v->name);
    }
    lb__cli_emit(o);
}

static int measure(const lb__cli_args *a, redisContext *c, const lb_clock *clock,
                   int64_t n, int64_t interval_ms, int64_t threshold_ms) {
    char err[256], where[300];
    sample *s = calloc((size_t)n, sizeof *s);
    if (!s) return lb__cli_error(a, NULL, LB_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (i > 0 && interval_ms > 0) lb__cli_sleep_ms(interval_ms);
        if (take_sample(c, clock, &s[i], err, sizeof err) != 0) {
            free(s);
            return lb__cli_error(a, NULL, LB_EREDIS, err);
        }
    }
    verdict v;
    judge(s, (int)n, threshold_ms, &v);
    lb__cli_endpoint(&a->conn, where, sizeof where);
    if (lb__cli_is_json()) show_json(where, s, (int)n, threshold_ms, &v);
    else show_text(where, s, (int)n, threshold_ms, &v);
    free(s);
    return strcmp(v.name, "ok") == 0 ? LB__CLI_EXIT_OK : LB__CLI_EXIT_UNSAFE;
}

static int run(const lb__cli_args *a) {
    int64_t n = SAMPLES_DEFAULT, threshold = THRESHOLD_MS_DEFAULT;
    int64_t interval = INTERVAL_MS_DEFAULT;
    lb_clock clock;
    const char *v;
    memset(&clock, 0, sizeof clock);
    if (a->npos != 0) return lb__cli_usage(a, "takes no arguments");
    if (((v = a->opt[0]) && lb__cli_int(a, "--samples", v, 1, SAMPLES_MAX, &n) != 0) ||
        ((v = a->opt[1]) &&
         lb__cli_int(a, "--threshold-ms", v, 0, LB__CLI_MS_MAX, &threshold) != 0) ||
        ((v = a->opt[2]) &&
         lb__cli_int(a, "--interval-ms", v, 0, INTERVAL_MS_MAX, &interval) != 0) ||
        ((v = a->opt[3]) && lb__cli_int(a, "--clock-offset-ms", v, -LB__CLI_MS_MAX,
                                        LB__CLI_MS_MAX, &clock.offset_ms) != 0))
        return LB__CLI_EXIT_USAGE;
    char err[512];
    redisContext *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) return lb__cli_error(a, NULL, LB_EIO, err);
    int code = measure(a, c, &clock, n, interval, threshold);
    redisFree(c);
    return code;
}

const lb__cli_command lb__cli_cmd_clock = {
    "clock", "compare this host's clock with the server's TIME; verdict", help, opts, 0,
    run, 0};
