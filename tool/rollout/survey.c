/* The survey behind `status` and `mode set`: a scan of the lock keys counted by
 * format, the namespace's mode, census and gate record, and the evidence that
 * decides whether a change of stage is safe (the verdict is in verdict.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"
#include "tool/rollout/gate.h"
#include "tool/rollout/survey.h"

/* A timestamp's expiry in epoch ms by its codec, or -1 when its clock cannot be
 * judged from here (a monotonic clock, an ambiguous value). */
static int64_t expiry_ms(const lb__cli_survey *s, const lb_class *cl) {
    int64_t at;
    if (cl->format != LB_FORMAT_LEGACY && cl->format != LB_FORMAT_COMPAT) return -1;
    if (lb__cli_is_mono(s->cs, cl)) return -1;
    if (lb__cli_expiry_epoch_ms(&s->cs->codec[cl->codec], cl->expiry, &at) != 0) return -1;
    return at;
}

static void example(lb__cli_examples *e, const lb__cli_key *k, int64_t remaining_ms) {
    if (e->n >= LB__CLI_EXAMPLES) return;
    lb__escape(e->key[e->n].key, sizeof e->key[0].key, k->key, k->keylen);
    e->key[e->n++].remaining_ms = remaining_ms;
}

/* Only legacy clients write without a TTL (compat clients always set one,
 * and GETSET clears it): a TTL-less string that is a timestamp, or that no
 * codec reads (a format the codec list leaves out), or reads differently, is
 * a legacy writer's. */
int lb__cli_legacy_written(const lb__cli_key *k, const lb_class *cl) {
    if (k->pttl_ms != -1 || strcmp(k->type, "string") != 0) return 0;
    return cl->format == LB_FORMAT_LEGACY || cl->format == LB_FORMAT_AMBIGUOUS ||
           cl->format == LB_FORMAT_UNKNOWN;
}

/* A legacy writer's value counts as recent while it runs and for window_ms
 * after it expired; one whose clock cannot be judged (a monotonic clock, a
 * value the codecs read differently or not at all) counts as running. */
static void count_timestamp(lb__cli_survey *s, const lb__cli_key *k, const lb_class *cl,
                            int64_t now_ms) {
    if (k->pttl_ms != -1 || !lb__cli_legacy_written(k, cl)) return;
    int64_t at = cl->format == LB_FORMAT_LEGACY ? expiry_ms(s, cl) : -1;
    if (cl->format == LB_FORMAT_LEGACY && cl->expired) s->legacy_expired++;
    if (cl->format == LB_FORMAT_LEGACY && lb__cli_is_mono(s->cs, cl)) s->mono++;
    int live = at < 0 ? 1 : at > now_ms;
    if (live) s->legacy_live++;
    if (at < 0 || now_ms - at <= s->window_ms) {
        s->legacy_recent++;
        example(&s->ex[LB__CLI_EX_LEGACY], k, at < 0 ? -1 : (live ? at - now_ms : 0));
    }
    int64_t until = at < 0 ? now_ms : at;
    if (until > s->legacy_until_ms) s->legacy_until_ms = until;
    if (at > now_ms && at - now_ms > s->ahead_max_ms) s->ahead_max_ms = at - now_ms;
}

/* The observation's later scans: a TTL-less timestamp whose (key, value) was
 * not seen before appeared or changed, so a legacy client wrote it meanwhile;
 * one seen again unchanged proves nothing (a crashed holder's lock is static). */
static int track(lb__cli_survey *s, const lb__cli_key *k, const lb_class *cl) {
    if (!lb__cli_legacy_written(k, cl)) return 0;
    int added = lb__cli_seen_add(&s->seen, lb__cli_fingerprint(k->key, k->keylen, k->value,
                                                               k->valuelen));
    if (added < 0) return -1;
    if (s->track == 2) {
        if (added) s->observe_changed++;
        else s->observe_static++;
    }
    return 0;
}

/* Expiry and windows are judged by the server's clock (read once per survey,
 * so a long scan judges later keys a little early: stricter, never looser);
 * only a monotonic-clock value is judged by this host's, the one it means. */
static lb_now server_now(const lb__cli_survey *s) {
    lb_now now = lb_clock_now(NULL);
    now.wall_us = s->now_ms * 1000;
    return now;
}

static int on_key(const lb__cli_key *k, void *ud) {
    lb__cli_survey *s = ud;
    lb_class cl;
    if (lb__cli_is_companion(k)) {
        s->companions++;
        return 0;
    }
    lb_now now = server_now(s);
    if (lb__cli_classify(s->cs, k, &now, &cl) != LB_OK) return -1;
    s->keys++;
    if ((unsigned)cl.format < LB__CLI_FORMATS) s->per_format[cl.format]++;
    if (cl.format != LB_FORMAT_ABSENT && k->pttl_ms == -1) s->ttl_less++;
    count_timestamp(s, k, &cl, now.wall_us / 1000);
    if (s->track && track(s, k, &cl) != 0) return -1;
    if (cl.format == LB_FORMAT_INCR) example(&s->ex[LB__CLI_EX_INCR], k, k->pttl_ms);
    if (cl.format == LB_FORMAT_TOKEN) {
        example(&s->ex[LB__CLI_EX_TOKEN], k, cl.pttl_ms);
        if (cl.pttl_ms > s->token_max_pttl_ms) s->token_max_pttl_ms = cl.pttl_ms;
    }
    return s->row ? s->row(k, &cl, s->row_ud) : 0;
}

int lb__cli_survey_keys(lb__cli_survey *s, const lb__cli_topo *t, redisContext *c,
                        const lb__cli_scanopts *o, char *err, size_t cap) {
    uint64_t scanned = 0;
    s->token_max_pttl_ms = -1;
    s->legacy_until_ms = -1;
    s->cluster = t->cluster;
    s->match = o->match;
    if (s->now_ms <= 0 && (s->now_ms = lb__cli_server_ms(c)) < 0)
        return snprintf(err, cap, "the server's clock (TIME) cannot be read: the gate judges "
                        "by no other clock"), -1;
    double t0 = lb__cli_mono_ms();
    int rc = lb__cli_scan_each(t, c, o, on_key, NULL, s, &scanned, &s->servers, err, cap);
    s->scan_ms = lb__cli_mono_ms() - t0;
    s->scanned = scanned;
    if (rc == 1) snprintf(err, cap, "the scan was stopped");
    return rc == 0 ? 0 : -1;
}

static int census(lb__cli_survey *s, redisContext *c, const char *ns, char *err, size_t cap) {
    lb_now now = server_now(s);
    lb_census_entry *e = NULL;
    size_t n = 0;
    int rc = lb_census_list(lb_on_conn(c), ns, strlen(ns), &now, s->stale_ms, NULL, &e, &n);
    if (rc == LB_EWRONGTYPE) return s->census_unreadable = 1, 0;
    if (rc != LB_OK) return snprintf(err, cap, "reading the census: %s", lb_strerror(rc)), -1;
    for (size_t i = 0; i < n; i++) {
        if (!e[i].valid) {
            s->census_invalid++;
            continue;
        }
        if ((unsigned)e[i].mode > 2) continue;
        if (e[i].stale) s->census_stale[e[i].mode]++;
        else s->census_live[e[i].mode]++;
        if (e[i].mode != LB_MODE_LEGACY) continue;
        if (e[i].age_ms <= s->window_ms) s->census_legacy_recent++;
        if (e[i].seen_ms > s->census_legacy_seen_ms) s->census_legacy_seen_ms = e[i].seen_ms;
    }
    lb_census_free(NULL, e);
    return 0;
}

int lb__cli_survey_ns(lb__cli_survey *s, redisContext *c, const char *ns, char *err,
                      size_t cap) {
    s->census_legacy_seen_ms = -1;
    s->now_ms = lb__cli_server_ms(c);
    if (s->now_ms < 0)
        return snprintf(err, cap, "the server's clock (TIME) cannot be read: the gate judges "
                        "by no other clock"), -1;
    s->mode_rc = lb_mode_get(lb_on_conn(c), ns, strlen(ns), &s->mode, &s->mode_found);
    if (s->mode_rc != LB_OK && s->mode_rc != LB_EFOREIGN && s->mode_rc != LB_EWRONGTYPE)
        return snprintf(err, cap, "reading the mode: %s", lb_strerror(s->mode_rc)), -1;
    if (lb__cli_gate_read(c, ns, &s->gate, err, cap) != 0) {
        if (!strstr(err, "WRONGTYPE")) return -1;
        s->gate_unreadable = 1;
    }
    return census(s, c, ns, err, cap);
}

int lb__cli_survey_remember(const lb__cli_survey *s, redisContext *c, const char *ns,
                            char *err, size_t cap) {
    if (s->gate_unreadable) return 0;
    int64_t legacy = s->legacy_until_ms > s->census_legacy_seen_ms ? s->legacy_until_ms
                                                                   : s->census_legacy_seen_ms;
    if ((s->observe_changed || s->scoped_calls > 0) && s->now_ms > legacy) legacy = s->now_ms;
    int64_t modern = -1;
    if (s->token_max_pttl_ms >= 0) modern = s->now_ms + s->token_max_pttl_ms;
    if (s->census_live[LB_MODE_MODERN] && s->now_ms > modern) modern = s->now_ms;
    if (s->keys && s->match && lb__cli_gate_matched(c, ns, s->match, s->now_ms, err, cap) != 0)
        return -1;
    if (lb__cli_gate_note(c, ns, "legacy_until_ms", legacy, err, cap) != 0) return -1;
    return lb__cli_gate_note(c, ns, "modern_until_ms", modern, err, cap);
}

void lb__cli_survey_clear(lb__cli_survey *s) {
    lb__cli_seen_clear(&s->seen);
}

