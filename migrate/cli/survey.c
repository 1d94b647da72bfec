/* The survey behind `status` and `mode set`: a scan of the lock keys counted by
 * format, the namespace's mode and census, and the evidence that decides
 * whether the next migration stage is safe. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate/cli/cli.h"

/* How long ago (ms, >= 0) a timestamp expired, by this host's wall clock; 0
 * when it has not, -1 when its clock cannot be judged from here. */
static int64_t expired_for_ms(const lb__cli_survey *s, const lb_class *cl, const lb_now *now) {
    int64_t at;
    if (!cl->expired) return 0;
    if (lb__cli_expiry_epoch_ms(&s->cs->codec[cl->codec], cl->expiry, &at) != 0) return -1;
    int64_t now_ms = now->wall_us / 1000;
    return now_ms > at ? now_ms - at : 0;
}

/* A TTL-less timestamp is a legacy client's write (compat clients always set a
 * TTL, and GETSET clears it). It counts as recent while it runs and for
 * window_ms after it expired; one whose clock cannot be judged counts too. */
static void count_timestamp(lb__cli_survey *s, const lb_class *cl, const lb_now *now) {
    /* A TTL-less ambiguous value is a legacy client's write whose expiry no
     * codec can judge: recent, as one on another host's clock is. */
    if (cl->format == LB_FORMAT_AMBIGUOUS && cl->pttl_ms == -1) s->legacy_recent++;
    if (cl->format != LB_FORMAT_LEGACY) return;
    int64_t ago = expired_for_ms(s, cl, now);
    if (cl->expired) s->legacy_expired++;
    if (ago < 0 || ago <= s->window_ms) s->legacy_recent++;
    if (lb__cli_is_mono(s->cs, cl)) s->mono++;
}

static int on_key(const lb__cli_key *k, void *ud) {
    lb__cli_survey *s = ud;
    lb_class cl;
    if (lb__cli_is_companion(k->key, k->keylen)) {
        s->companions++;
        return 0;
    }
    lb_now now = lb_clock_now(NULL);
    if (lb__cli_classify(s->cs, k, &now, &cl) != LB_OK) return -1;
    s->keys++;
    if ((unsigned)cl.format < LB__CLI_FORMATS) s->per_format[cl.format]++;
    if (cl.format != LB_FORMAT_ABSENT && k->pttl_ms == -1) s->ttl_less++;
    count_timestamp(s, &cl, &now);
    if (cl.format == LB_FORMAT_TOKEN && cl.pttl_ms > s->token_max_pttl_ms)
        s->token_max_pttl_ms = cl.pttl_ms;
    return s->row ? s->row(k, &cl, s->row_ud) : 0;
}

int lb__cli_survey_keys(lb__cli_survey *s, const lb__cli_topo *t, redisContext *c,
                        const lb__cli_scanopts *o, char *err, size_t cap) {
    uint64_t scanned = 0;
    s->token_max_pttl_ms = -1;
    s->cluster = t->cluster;
    double t0 = lb__cli_mono_ms();
    int rc = lb__cli_scan_each(t, c, o, on_key, NULL, s, &scanned, &s->servers, err, cap);
    s->scan_ms = lb__cli_mono_ms() - t0;
    s->scanned = scanned;
    if (rc == 1) snprintf(err, cap, "the scan was stopped");
    return rc == 0 ? 0 : -1;
}

int lb__cli_survey_ns(lb__cli_survey *s, redisContext *c, const char *ns, char *err,
                      size_t cap) {
    lb_now now = lb_clock_now(NULL);
    size_t nslen = strlen(ns);
    s->mode_rc = lb_mode_get(c, ns, nslen, &s->mode, &s->mode_found);
    if (s->mode_rc != LB_OK && s->mode_rc != LB_EFOREIGN && s->mode_rc != LB_EWRONGTYPE) {
        snprintf(err, cap, "reading the mode: %s", lb_strerror(s->mode_rc));
        return -1;
    }
    lb_census_entry *e = NULL;
    size_t n = 0;
    int rc = lb_census_list(c, ns, nslen, &now, s->stale_ms, NULL, &e, &n);
    if (rc == LB_EWRONGTYPE) {
        s->census_unreadable = 1;
        return 0;
    }
    if (rc != LB_OK) {
        snprintf(err, cap, "reading the census: %s", lb_strerror(rc));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!e[i].valid) {
            s->census_invalid++;
            continue;
        }
        if ((unsigned)e[i].mode > 2) continue;
        if (e[i].stale) s->census_stale[e[i].mode]++;
        else s->census_live[e[i].mode]++;
        if (e[i].mode == LB_MODE_LEGACY && e[i].age_ms <= s->window_ms) s->census_legacy_recent++;
    }
    lb_census_free(NULL, e);
    return 0;
}

/* The calls= figure of one command in an INFO commandstats reply; 0 when the
 * command never ran (no line), -1 when the line cannot be read. */
static int64_t calls_of(const char *info, const char *cmd) {
    char needle[48];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, needle);
    if (!p) return 0;
    p += strlen(needle);
    char *end;
    long long v = strtoll(p, &end, 10);
    return end == p || v < 0 ? -1 : (int64_t)v;
}

int64_t lb__cli_legacy_calls(redisContext *c) {
    redisReply *r = redisCommand(c, "INFO commandstats");
    int64_t total = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        int64_t a = calls_of(r->str, "setnx"), b = calls_of(r->str, "getset");
        if (a >= 0 && b >= 0) total = a + b;
    }
    if (r) freeReplyObject(r);
    return total;
}

/* ---- The verdict --------------------------------------------------------------------- */
__attribute__((format(printf, 3, 4))) static void reason(lb__cli_verdict *v, int blocker,
                                                          const char *fmt, ...) {
    va_list ap;
    if (v->n >= LB__CLI_MAX_REASONS) return;
    va_start(ap, fmt);
    vsnprintf(v->reason[v->n].text, sizeof v->reason[v->n].text, fmt, ap);
    va_end(ap);
    v->reason[v->n++].blocker = blocker;
    if (blocker) v->ready = 0;
}

/* Evidence that a legacy client still writes: TTL-less timestamps that are
 * live or recent, and legacy-mode census entries seen within the window. */
static void legacy_writers(const lb__cli_survey *s, lb__cli_verdict *v) {
    if (s->legacy_recent)
        reason(v, 1, "%llu TTL-less timestamp(s) running or expired within the window: "
                     "a legacy client wrote them", (unsigned long long)s->legacy_recent);
    if (s->census_legacy_recent)
        reason(v, 1, "%llu census entr(ies) in legacy mode seen within the window",
               (unsigned long long)s->census_legacy_recent);
    if (s->observe_legacy)
        reason(v, 1, "%llu TTL-less timestamp(s) seen by %llu more scan(s) over %lld ms: a "
               "legacy client is writing", (unsigned long long)s->observe_legacy,
               (unsigned long long)s->observe_passes, (long long)s->observe_ms);
    if (s->legacy_calls > 0)
        reason(v, 1, "%lld SETNX/GETSET call(s) on the server during %lld ms: a client of "
               "the legacy protocol is active (compat and modern clients send neither; "
               "if another application's SETNX, --force)", (long long)s->legacy_calls,
               (long long)s->observe_ms);
    else if (s->observe_ms > 0 && s->legacy_calls < 0)
        reason(v, 0, "INFO commandstats could not be read: SETNX/GETSET activity not checked");
}

void lb__cli_survey_verdict(const lb__cli_survey *s, lb_mode from, lb_mode to,
                            lb__cli_verdict *v) {
    memset(v, 0, sizeof *v);
    v->ready = 1;
    if (s->mode_rc == LB_EFOREIGN || s->mode_rc == LB_EWRONGTYPE)
        reason(v, 1, "the control key holds something other than a mode name");
    if (s->per_format[LB_FORMAT_INCR])
        reason(v, 1, "%llu INCR counter(s): INCR lockers can share keys with no other "
                     "protocol", (unsigned long long)s->per_format[LB_FORMAT_INCR]);
    if (to == LB_MODE_MODERN) legacy_writers(s, v);
    if (to == LB_MODE_MODERN && from == LB_MODE_LEGACY)
        reason(v, 1, "legacy and modern are not adjacent: step through compat first");
    if (to < from && s->per_format[LB_FORMAT_TOKEN])
        reason(v, 0, "%llu token value(s) still held, the last lapsing in %lld ms: legacy "
               "clients cannot read them", (unsigned long long)s->per_format[LB_FORMAT_TOKEN],
               (long long)s->token_max_pttl_ms);
    if (s->legacy_expired)
        reason(v, 0, "%llu expired TTL-less legacy lock(s) still present: `lockbridge sweep` "
                     "gives them a TTL or removes them", (unsigned long long)s->legacy_expired);
    if (s->per_format[LB_FORMAT_UNKNOWN])
        reason(v, 0, "%llu value(s) in no known format: left alone by every mode; check the "
                     "--codec list", (unsigned long long)s->per_format[LB_FORMAT_UNKNOWN]);
    if (s->mono)
        reason(v, 0, "%llu value(s) on a monotonic clock: judged on this host only",
               (unsigned long long)s->mono);
    if (s->census_unreadable) reason(v, 1, "the census key is not a hash");
    if (s->census_invalid)
        reason(v, 0, "%llu census field(s) that are not census entries",
               (unsigned long long)s->census_invalid);
}
