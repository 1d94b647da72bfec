/* The gate's decision: whether moving a namespace from one mode to another is
 * safe on a survey's evidence, with a reason per check. `status` and `mode set`
 * both decide here, so they cannot disagree. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tool/rollout/gate.h"
#include "tool/rollout/survey.h"

static const char *const check_names[LB__CLI_CHECKS] = {
    "adjacency", "control-key", "incr", "legacy-writers", "observation",
    "modern-clients", "stage-time", "empty-scan", "census", "server-calls"};

const char *lb__cli_check_name(int check) {
    return check >= 0 && check < LB__CLI_CHECKS ? check_names[check] : NULL;
}

int lb__cli_check_parse(const char *name) {
    for (int i = 0; i < LB__CLI_CHECKS; i++)
        if (strcmp(name, check_names[i]) == 0) return i == LB__CLI_CHECK_ADJACENCY ? -1 : i;
    return -1;
}

/* check < 0: a note. A blocker whose check the operator skipped stays listed,
 * marked, and no longer blocks; adjacency can never be skipped. */
__attribute__((format(printf, 4, 5))) static void reason(lb__cli_verdict *v,
                                                          const lb__cli_gateopts *o, int check,
                                                          const char *fmt, ...) {
    va_list ap;
    if (v->n >= LB__CLI_MAX_REASONS) return;
    va_start(ap, fmt);
    vsnprintf(v->reason[v->n].text, sizeof v->reason[v->n].text, fmt, ap);
    va_end(ap);
    int skipped = check > LB__CLI_CHECK_ADJACENCY && check < LB__CLI_CHECKS && o && o->override[check];
    v->reason[v->n].check = check;
    v->reason[v->n].blocker = check >= 0 && !skipped;
    v->reason[v->n].skipped = check >= 0 && skipped;
    if (check >= 0 && !skipped) v->ready = 0;
    v->n++;
}

/* "k1 (running 600000 ms), k2 (expired), ... and N more (lockbridge status ...)". */
static const char *named(const lb__cli_examples *e, uint64_t total, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < e->n && o < cap; i++) {
        int64_t r = e->key[i].remaining_ms;
        char left[48] = "";
        if (r > 0) snprintf(left, sizeof left, " (%lld ms left)", (long long)r);
        else if (r == 0) snprintf(left, sizeof left, " (expired)");
        o += (size_t)snprintf(buf + o, cap - o, "%s%s%s", i ? ", " : "", e->key[i].key, left);
    }
    if (total > (uint64_t)e->n && o < cap)
        snprintf(buf + o, cap - o, " and %llu more (lockbridge status --json lists them all)",
                 (unsigned long long)(total - (uint64_t)e->n));
    return buf;
}

/* Evidence that a legacy client still writes, or wrote within the window. */
static void legacy_writers(const lb__cli_survey *s, const lb__cli_gateopts *o,
                           lb__cli_verdict *v) {
    char keys[300];
    const int c = LB__CLI_CHECK_LEGACY;
    if (s->legacy_recent)
        reason(v, o, c, "%llu TTL-less value(s) running or expired within the window (only "
               "legacy clients write without a TTL; a value no codec reads counts as "
               "running): %s", (unsigned long long)s->legacy_recent,
               named(&s->ex[LB__CLI_EX_LEGACY], s->legacy_recent, keys, sizeof keys));
    if (s->census_legacy_recent)
        reason(v, o, c, "%llu census entr(ies) in legacy mode seen within the window "
               "(lockbridge census list)", (unsigned long long)s->census_legacy_recent);
    int64_t until = s->gate.legacy_until_ms;
    if (until >= 0 && s->now_ms <= until + s->window_ms && !s->legacy_recent) {
        char when[64];
        if (until > s->now_ms)
            snprintf(when, sizeof when, "still valid for %lld ms", (long long)(until - s->now_ms));
        else snprintf(when, sizeof when, "expired %lld ms ago", (long long)(s->now_ms - until));
        reason(v, o, c, "an earlier scan, sweep or census prune recorded a legacy writer's lock "
               "or census entry (%s), within the window", when);
    }
    if (s->observe_changed)
        reason(v, o, c, "%llu TTL-less timestamp(s) appeared or changed during %lld ms of "
               "watching: a legacy client is writing", (unsigned long long)s->observe_changed,
               (long long)s->observe_ms);
    else if (s->observe_static)
        reason(v, NULL, -1, "the TTL-less timestamps stayed unchanged over %llu more scan(s): "
               "no legacy client wrote meanwhile (a crashed holder's lock is static)",
               (unsigned long long)s->observe_passes);
    if (s->scoped_calls > 0)
        reason(v, o, c, "%lld SETNX/GETSET call(s) on keys matching '%s' during %lld ms "
               "(MONITOR): a client of the legacy protocol writes this namespace's keys",
               (long long)s->scoped_calls, s->match ? s->match : "*", (long long)s->observe_ms);
    if (s->other_calls > 0)
        reason(v, NULL, -1, "%lld SETNX/GETSET call(s) on other keys during %lld ms (another "
               "namespace or application): not this namespace's evidence",
               (long long)s->other_calls, (long long)s->observe_ms);
    if (s->scoped_calls < 0 && s->legacy_calls > 0)
        reason(v, o, LB__CLI_CHECK_SERVER_CALLS, "%lld SETNX/GETSET call(s) on the server during "
               "%lld ms, on keys that could not be told (MONITOR refused, or a cluster): a "
               "client of the legacy protocol is active (compat and modern clients send "
               "neither); --override server-calls if it is another namespace's, the per-key "
               "evidence is still checked", (long long)s->legacy_calls, (long long)s->observe_ms);
}

/* The observation must have been made; a count that cannot be read or went
 * backwards (CONFIG RESETSTAT, a restart, a failover) proves nothing. */
static void observation(const lb__cli_survey *s, const lb__cli_gateopts *o,
                        lb__cli_verdict *v) {
    const int c = LB__CLI_CHECK_OBSERVATION;
    if (!o || !o->observed)
        reason(v, NULL, -1, "this verdict leaves out the SETNX/GETSET observation, which "
               "`lockbridge mode set modern` makes (--observe-ms) before it sets");
    else if (s->observe_ms <= 0)
        reason(v, o, c, "the SETNX/GETSET observation was not made (--observe-ms 0)");
    else if (s->calls_backwards)
        reason(v, o, c, "the server's SETNX/GETSET counts went down while watching (stats "
               "reset, restart or failover): legacy activity not checked");
    else if (s->legacy_calls < 0)
        reason(v, o, c, "INFO commandstats could not be read (an ACL?): legacy activity "
               "not checked");
}

/* Stepping back to legacy: legacy clients cannot read tokens, and a client
 * still in modern (it has not re-read the mode yet) would write them. */
static void modern_clients(const lb__cli_survey *s, const lb__cli_gateopts *o,
                           lb__cli_verdict *v) {
    char keys[300];
    const int c = LB__CLI_CHECK_MODERN;
    uint64_t tokens = s->per_format[LB_FORMAT_TOKEN];
    if (tokens)
        reason(v, o, c, "%llu token value(s) still held, the last lapsing in %lld ms: legacy "
               "clients cannot read them: %s", (unsigned long long)tokens,
               (long long)s->token_max_pttl_ms,
               named(&s->ex[LB__CLI_EX_TOKEN], tokens, keys, sizeof keys));
    if (s->census_live[LB_MODE_MODERN])
        reason(v, o, c, "%llu live census entr(ies) in modern mode: clients that write tokens "
               "(lockbridge census list)", (unsigned long long)s->census_live[LB_MODE_MODERN]);
    int64_t until = s->gate.modern_until_ms;
    if (!tokens && until >= 0 && s->now_ms <= until)
        reason(v, o, c, "a token value or modern client was seen live until %lld ms from now",
               (long long)(until - s->now_ms));
}

/* A stage lasts until every follower has seen it and its earlier locks have
 * lapsed. Stepping back to compat is exempt: it is the step toward safety a
 * legacy writer in modern calls for, and every mode shares keys with compat. */
static void stage_time(const lb__cli_survey *s, lb_mode to, const lb__cli_gateopts *o,
                       lb__cli_verdict *v) {
    if (to == LB_MODE_COMPAT && (s->mode == LB_MODE_MODERN || !s->mode_found)) return;
    if (!s->mode_found && s->gate.since_ms < 0) return; /* no stage has ever been set */
    int64_t need = lb__cli_gate_stage_ms(&s->gate), since = s->gate.since_ms;
    if (since < 0)
        reason(v, o, LB__CLI_CHECK_STAGE_TIME, "when the %s stage began is not recorded: "
               "followers may not all have seen it", lb_mode_name(s->mode));
    else if (s->now_ms - since < need)
        reason(v, o, LB__CLI_CHECK_STAGE_TIME, "the %s stage began %lld ms ago; every "
               "follower has seen it and its earlier locks have lapsed only after %lld ms "
               "(refresh %lld ms + validity %lld ms)", lb_mode_name(s->mode),
               (long long)(s->now_ms - since), (long long)need,
               (long long)lb__cli_gate_value(&s->gate, LB__CLI_VAL_REFRESH),
               (long long)lb__cli_gate_value(&s->gate, LB__CLI_VAL_TTL));
}

/* A scan that matched nothing proves nothing, unless this very pattern has
 * found lock keys before (all released now): a mistyped one never has. */
static void empty_scan(const lb__cli_survey *s, const lb__cli_gateopts *o, lb__cli_verdict *v) {
    if (s->match && s->gate.matched_ms >= 0 && strcmp(s->gate.matched, s->match) == 0) {
        reason(v, NULL, -1, "no lock key matches now; the pattern found keys %lld ms ago",
               (long long)(s->now_ms - s->gate.matched_ms));
        return;
    }
    reason(v, o, LB__CLI_CHECK_EMPTY_SCAN, "the scan matched no lock key, and no scan of this "
           "pattern ever has: a pattern that matches nothing proves nothing (check --match)");
}

/* No control key: a follower that read a mode keeps it, others use their
 * configured one, so the change is judged as from every mode: only compat is
 * adjacent to all of them. */
static int from_unknown(const lb__cli_survey *s) {
    return s->mode_rc == LB_OK && !s->mode_found;
}

static void blockers(const lb__cli_survey *s, lb_mode from, lb_mode to,
                     const lb__cli_gateopts *o, lb__cli_verdict *v) {
    char keys[300];
    int any = from_unknown(s);
    if (any)
        reason(v, NULL, -1, "no control key: followers may be in any mode, so this change is "
               "checked as from each of them");
    if (any && to != LB_MODE_COMPAT)
        reason(v, o, LB__CLI_CHECK_ADJACENCY, "followers may still be in %s, which is not "
               "adjacent to %s: set compat first (every mode shares keys with it)",
               lb_mode_name(to == LB_MODE_LEGACY ? LB_MODE_MODERN : LB_MODE_LEGACY),
               lb_mode_name(to));
    else if (!any && ((from == LB_MODE_LEGACY && to == LB_MODE_MODERN) ||
                      (from == LB_MODE_MODERN && to == LB_MODE_LEGACY)))
        reason(v, o, LB__CLI_CHECK_ADJACENCY, "%s and %s are not adjacent: go through compat",
               lb_mode_name(from), lb_mode_name(to));
    if (s->mode_rc == LB_EFOREIGN || s->mode_rc == LB_EWRONGTYPE)
        reason(v, o, LB__CLI_CHECK_CONTROL_KEY, "the control key holds something other than a "
               "mode name: `lockbridge mode set MODE --ns NS` cannot replace it; delete it "
               "after checking what wrote it");
    if (s->gate_unreadable)
        reason(v, o, LB__CLI_CHECK_CONTROL_KEY, "the gate record ({ns}:lb-gate) is not a hash");
    else if (s->gate.corrupt[0])
        reason(v, o, LB__CLI_CHECK_CONTROL_KEY, "the gate record's field %s holds no number: "
               "what it recorded (evidence, a stage's start, a stored value) is unknown; "
               "check what wrote it", s->gate.corrupt);
    if (s->census_unreadable) reason(v, o, LB__CLI_CHECK_CENSUS, "the census key is not a hash");
    if ((to > from || (any && to != LB_MODE_LEGACY)) && s->per_format[LB_FORMAT_INCR])
        reason(v, o, LB__CLI_CHECK_INCR, "%llu INCR counter(s): INCR lockers can share keys "
               "with no other protocol: %s", (unsigned long long)s->per_format[LB_FORMAT_INCR],
               named(&s->ex[LB__CLI_EX_INCR], s->per_format[LB_FORMAT_INCR], keys, sizeof keys));
    if (to == LB_MODE_MODERN) {
        legacy_writers(s, o, v);
        observation(s, o, v);
        if (s->keys == 0) empty_scan(s, o, v);
    }
    if (to == LB_MODE_LEGACY) modern_clients(s, o, v);
    stage_time(s, to, o, v);
}

static void notes(const lb__cli_survey *s, lb_mode from, lb_mode to, lb__cli_verdict *v) {
    if (to < from && to != LB_MODE_LEGACY && s->per_format[LB_FORMAT_TOKEN])
        reason(v, NULL, -1, "%llu token value(s) still held, the last lapsing in %lld ms",
               (unsigned long long)s->per_format[LB_FORMAT_TOKEN], (long long)s->token_max_pttl_ms);
    if (s->legacy_expired)
        reason(v, NULL, -1, "%llu expired TTL-less legacy lock(s) still present: `lockbridge "
               "sweep` removes them", (unsigned long long)s->legacy_expired);
    if (s->per_format[LB_FORMAT_UNKNOWN])
        reason(v, NULL, -1, "%llu value(s) in no known format: left alone by every mode; check "
               "the --codec list", (unsigned long long)s->per_format[LB_FORMAT_UNKNOWN]);
    if (s->per_format[LB_FORMAT_AMBIGUOUS])
        reason(v, NULL, -1, "%llu value(s) the codecs read implausibly or differently: left "
               "alone by every lock and by sweep", (unsigned long long)s->per_format[LB_FORMAT_AMBIGUOUS]);
    if (s->mono)
        reason(v, NULL, -1, "%llu value(s) on a monotonic clock: judged on this host only",
               (unsigned long long)s->mono);
    /* A timestamp further ahead than the fleet's stored validity: some client
     * writes a longer one, and a wire takeover that loses the race to it would
     * shorten it unless lockbridge's wire clients know (docs/legacy-protocol.md). */
    int64_t ttl = s->gate.val[LB__CLI_VAL_TTL];
    if (ttl > 0 && s->ahead_max_ms > ttl + 1000)
        reason(v, NULL, -1, "a timestamp runs %lld ms ahead, more than the namespace's "
               "validity %lld ms: a client writes a longer one; give lockbridge's wire "
               "clients --fleet-max-ttl-ms %lld and `mode config --ttl-ms` that value",
               (long long)s->ahead_max_ms, (long long)ttl, (long long)s->ahead_max_ms);
    if (s->census_invalid)
        reason(v, NULL, -1, "%llu census field(s) that are not census entries",
               (unsigned long long)s->census_invalid);
}

void lb__cli_survey_verdict(const lb__cli_survey *s, lb_mode from, lb_mode to,
                            const lb__cli_gateopts *o, lb__cli_verdict *v) {
    memset(v, 0, sizeof *v);
    v->ready = 1;
    snprintf(v->judged_by, sizeof v->judged_by, "%s", s->judged_by);
    if (from == to && !from_unknown(s)) return;
    blockers(s, from, to, o, v);
    notes(s, from, to, v);
}
