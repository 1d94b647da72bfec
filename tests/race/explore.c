/* Exhaustive exploration of interleavings: every schedule up to a bound, each
 * replayed on a fresh world, so any counterexample is a schedule that replays. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "race/race.h"

typedef struct explorer {
    const lbr_explore_config *cfg;
    lbr_explore_result *out;
    int n;        /* clients */
    int crashed;  /* bitmask */
    int crashes, jumps, reads;
    char sched[1024];
} explorer;

/* Pseudo-clients never hold the lock: the mode switch, the operator running
 * the tool, the step that deletes the control key, the program that writes at
 * the fair lock's companion names. No liveness is asked of them. */
static int is_pseudo(const char *kind) {
    return strncmp(kind, "switch-", 7) == 0 || strncmp(kind, "operator", 8) == 0 ||
           strcmp(kind, "vanish-mode") == 0 || strncmp(kind, "spoil-", 6) == 0;
}

/* Runs `full` on a fresh world and counts it (schedules, steps, pruned); a
 * violation is kept as the counterexample. lbr_run's result, or -2 when no
 * world could be made or the world broke (the reason kept as the report). */
static int run_counted(explorer *e, const char *full) {
    lbr_world *w = lbr_world_new(&e->cfg->world);
    if (!w) return -2;
    int rc = lbr_run(w, full);
    e->out->schedules++;
    for (const char *p = full; *p; p++) e->out->steps += (*p == ' ');
    e->out->steps++;
    if (rc == LBR_BAD_SCHEDULE) e->out->pruned++;
    if (rc == LBR_BROKEN) {
        snprintf(e->out->report, sizeof e->out->report, "%s", lbr_violation(w));
        lbr_world_free(w);
        return -2;
    }
    if (rc == LBR_VIOLATION) {
        e->out->violation = 1;
        snprintf(e->out->counterexample, sizeof e->out->counterexample, "%s", full);
        snprintf(e->out->report, sizeof e->out->report, "%s", lbr_violation(w));
    }
    lbr_world_free(w);
    return rc;
}

/* Replays one complete schedule and closes it with a liveness check by the
 * first client still running, after a jump past every expiry. */
static int replay(explorer *e) {
    char full[1100], finish[32] = "";
    int live = -1;
    /* In a fleet with lockbridge clients, liveness is asked of them only: a
     * token-only locker (M1) cannot take over a crashed legacy holder's lock by
     * design. A fleet of models asks its first running client. A fenced
     * client in a world whose counter cannot count (no integer, at its
     * limit, or at 2^53 - 1 and past) never acquires, also by design: it is
     * asked nothing. */
    int has_lb = 0;
    const char *fv = e->cfg->world.fence_value;
    char *end = NULL;
    long long count = fv ? strtoll(fv, &end, 10) : 0;
    /* From 2^53 - 1 on, the next number would be inexact: refused too. */
    int stuck = fv && (end == fv || *end || count >= 9007199254740991LL);
    for (int i = 0; i < e->n; i++) has_lb |= strncmp(e->cfg->world.kinds[i], "lb-", 3) == 0;
    for (int i = 0; i < e->n; i++) {
        if (e->crashed & (1 << i)) continue;
        const char *k = e->cfg->world.kinds[i];
        if (live < 0 && !is_pseudo(k) && (!has_lb || strncmp(k, "lb-", 3) == 0) &&
            !(stuck && strstr(k, "-fenced")))
            live = i;
        size_t len = strlen(finish);
        snprintf(finish + len, sizeof finish - len, " %c.", 'A' + i);
    }
    /* The closing jump passes any expiry in any codec unit (seconds round up). */
    const char *pre = e->cfg->prefix ? e->cfg->prefix : "";
    const char *sep = pre[0] && e->sched[0] ? " " : "";
    if (live < 0) snprintf(full, sizeof full, "%s%s%s", pre, sep, e->sched);
    else snprintf(full, sizeof full, "%s%s%s%s +%lld %c?", pre, sep, e->sched, finish,
                  (long long)lbr_max_ttl_ms(&e->cfg->world) * 2 + 2000, 'A' + live);
    int rc = run_counted(e, full);
    if (rc == -2) return -1;
    return rc == LBR_VIOLATION ? 1 : 0;
}

static int push(explorer *e, const char *tok, size_t *mark) {
    *mark = strlen(e->sched);
    if (*mark + strlen(tok) + 2 >= sizeof e->sched) return -1;
    snprintf(e->sched + *mark, sizeof e->sched - *mark, "%s%s", *mark ? " " : "", tok);
    return 0;
}

static int dfs(explorer *e, int steps_left, int last_was_event);

/* Events between steps: a crash of a running client, or a clock jump. Two
 * events in a row are not tried (their order does not matter). */
static int try_events(explorer *e, int steps_left) {
    char tok[32];
    size_t mark;
    int rc;
    if (e->jumps < e->cfg->max_jumps) {
        snprintf(tok, sizeof tok, "+%lld", (long long)e->cfg->jump_ms);
        if (push(e, tok, &mark) == 0) {
            e->jumps++;
            rc = dfs(e, steps_left, 1);
            e->jumps--;
            e->sched[mark] = '\0';
            if (rc) return rc;
        }
    }
    for (int i = 0; i < e->n && e->crashes < e->cfg->max_crashes; i++) {
        if (e->crashed & (1 << i)) continue;
        snprintf(tok, sizeof tok, "%c!", 'A' + i);
        if (push(e, tok, &mark) != 0) continue;
        e->crashes++;
        e->crashed |= 1 << i;
        rc = dfs(e, steps_left, 1);
        e->crashed &= ~(1 << i);
        e->crashes--;
        e->sched[mark] = '\0';
        if (rc) return rc;
    }
    return 0;
}

/* Replays the schedule so far, unclosed: 1 if it already breaks an invariant
 * (kept as the counterexample), -1 if it is outside the model, else 0. */
static int probe(explorer *e) {
    char full[1100];
    const char *pre = e->cfg->prefix ? e->cfg->prefix : "";
    snprintf(full, sizeof full, "%s%s%s", pre, pre[0] ? " " : "", e->sched);
    int rc = run_counted(e, full);
    if (rc == -2) return -2;
    return rc == LBR_VIOLATION ? 1 : rc == LBR_BAD_SCHEDULE ? -1 : 0;
}

/* A client reading one hand-off message from its inbox: a step of its own,
 * which takes none of the depth (the budget is max_reads), and may close the
 * schedule. Most places have no message waiting: before more steps follow,
 * the schedule up to the read is replayed, and a read with nothing to read
 * prunes everything after it in one replay. */
static int try_read(explorer *e, int i, int steps_left) {
    char tok[4] = {(char)('A' + i), '@', '\0'};
    size_t mark;
    if (e->reads >= e->cfg->max_reads || (e->crashed & (1 << i)) ||
        !lbr_kind_reads_inbox(e->cfg->world.kinds[i]) || push(e, tok, &mark) != 0)
        return 0;
    int rc = steps_left > 0 ? probe(e) : 0;
    if (rc == 0) {
        e->reads++;
        rc = dfs(e, steps_left, 0);
        e->reads--;
    }
    e->sched[mark] = '\0';
    return rc == -1 ? 0 : rc;
}

static int dfs(explorer *e, int steps_left, int last_was_event) {
    int any = 0, rc;
    if (steps_left == 0) {
        if ((rc = replay(e)) != 0) return rc;
        for (int i = 0; i < e->n; i++)
            if ((rc = try_read(e, i, 0)) != 0) return rc;
        return 0;
    }
    for (int i = 0; i < e->n; i++) {
        char tok[4] = {(char)('A' + i), '\0'};
        size_t mark;
        if (e->crashed & (1 << i)) continue;
        any = 1;
        if (push(e, tok, &mark) != 0) continue;
        rc = dfs(e, steps_left - 1, 0);
        e->sched[mark] = '\0';
        if (rc) return rc;
        if ((rc = try_read(e, i, steps_left)) != 0) return rc;
    }
    if (!any) return replay(e); /* everyone crashed: nothing more can happen */
    if (!last_was_event) return try_events(e, steps_left);
    return 0;
}

int lbr_explore(const lbr_explore_config *cfg, lbr_explore_result *out) {
    explorer e;
    memset(out, 0, sizeof *out);
    memset(&e, 0, sizeof e);
    e.cfg = cfg;
    e.out = out;
    while (e.n < LBR_MAX_CLIENTS && cfg->world.kinds[e.n]) e.n++;
    if (e.n == 0 || cfg->depth < 0) return -1;
    /* Clients the prefix crashed take no part in the search. */
    for (const char *p = cfg->prefix; p && *p; p++)
        if (p[0] >= 'A' && p[0] < 'A' + e.n && p[1] == '!' &&
            (p == cfg->prefix || p[-1] == ' '))
            e.crashed |= 1 << (p[0] - 'A');
    int rc = try_events(&e, cfg->depth);
    if (rc == 0) rc = dfs(&e, cfg->depth, 1);
    return rc < 0 ? -1 : 0;
}
