/* `lockbridge race --search`: random schedules drawn from each client's recorded
 * commands, run through the proxy until one is caught, then shrunk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/race/race.h"
#include "tool/race/search.h"

#define BODY_MIN 3 /* steps of a drawn schedule, before its crash tail */
#define BODY_MAX 12
#define REC_STEPS 8 /* lock-key commands recorded per client */
/* Pauses a schedule may draw, in thousandths of the validity T; the tail
 * after a crash draws only those past it, so that the lock could expire. */
static const int64_t pauses[] = {500, 1000, 1500, 2000, 3100};
#define NPAUSES ((int)(sizeof pauses / sizeof pauses[0]))
#define PAUSE_MIN 100 /* shrinking stops shortening a pause here, 0.1T */

/* ---- A seeded generator: the same seed, the same schedules -------------------------- */

static uint64_t next(uint64_t *st) { /* splitmix64 */
    uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int below(uint64_t *st, int n) { return (int)(next(st) % (uint64_t)n); }

/* ---- Tokens as text ----------------------------------------------------------------- */

static void tok_text(const lb__race_tok *k, const char *named, char *out, size_t cap) {
    char c = (char)('A' + k->client);
    switch (k->kind) {
    case LB__RACE_PAUSE: {
        int64_t w = k->per_mille_t / 1000, f = k->per_mille_t % 1000;
        if (!k->per_mille_t) snprintf(out, cap, "+%lld", (long long)k->ms);
        else if (f == 0) snprintf(out, cap, "+%lldT", (long long)w);
        else if (f % 100 == 0) snprintf(out, cap, "+%lld.%lldT", (long long)w, (long long)f / 100);
        else if (f % 10 == 0) snprintf(out, cap, "+%lld.%02lldT", (long long)w, (long long)f / 10);
        else snprintf(out, cap, "+%lld.%03lldT", (long long)w, (long long)f);
        return;
    }
    case LB__RACE_CRASH: snprintf(out, cap, "%c!", c); return;
    case LB__RACE_LIVE: snprintf(out, cap, "%c?", c); return;
    case LB__RACE_FINISH: snprintf(out, cap, "%c.", c); return;
    default: break;
    }
    const char *cmd = k->cmd[0] ? k->cmd : named ? named : "";
    snprintf(out, cap, "%c%s%s", c, cmd[0] ? ":" : "", cmd);
}

/* The schedule as a line; with `p`, each bare step named after the command
 * it let through in the proxy's last run. */
static void sched_text(const lb__race_sched *s, const lb__race_proxy *p, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < s->n && o < cap; i++) {
        char t[64];
        tok_text(&s->tok[i], p ? lb__race_proxy_named(p, i) : NULL, t, sizeof t);
        int w = snprintf(out + o, cap - o, "%s%s", i ? " " : "", t);
        if (w < 0) break;
        o += (size_t)w;
    }
}

static void add_tok(lb__race_sched *s, lb__race_tok_kind kind, int client, int64_t per_mille) {
    if (s->n >= LB__RACE_MAX_TOKENS) return;
    lb__race_tok *k = &s->tok[s->n++];
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->client = client;
    k->per_mille_t = per_mille;
    if (per_mille) s->scaled = 1;
    if (kind != LB__RACE_PAUSE && client + 1 > s->clients) s->clients = client + 1;
}

/* ---- Drawing a schedule -------------------------------------------------------------- */

typedef struct recorded {
    int n;
    char cmd[REC_STEPS][24];
} recorded;

static int is_attempt(const char *name) {
    return strcmp(name, "SETNX") == 0 || strcmp(name, "INCR") == 0 ||
           strcmp(name, "GETSET") == 0 || strcmp(name, "SET") == 0;
}

/* A live client at random; after a step of `prev`, mostly another one:
 * races are between clients. */
static int pick(uint64_t *st, const int *alive, int nalive, int n, int prev) {
    int c = below(st, n);
    while (!alive[c]) c = (c + 1) % n;
    if (c == prev && nalive > 1 && below(st, 4) != 0)
        do c = (c + 1) % n; while (!alive[c]);
    return c;
}

/* Bare steps (`A`: whatever A sends next), so that a client's path may leave
 * its lone sequence (a failed SETNX is followed by a GET the lone run never
 * showed). The recording says where a client is in its protocol: a crash is
 * drawn just after a step its sequence says is an acquisition attempt, the
 * window between acquiring and finishing the acquisition; after it, a pause
 * past the validity and a liveness check of a client still alive. Pauses
 * elsewhere, now and then. */
static void draw(uint64_t *st, const recorded *rec, int nclients, lb__race_sched *s) {
    int alive[LB__RACE_MAX_CLIENTS], pos[LB__RACE_MAX_CLIENTS] = {0}, nalive = 0, crashed = 0;
    memset(s, 0, sizeof *s);
    for (int c = 0; c < nclients; c++) alive[c] = rec[c].n > 0, nalive += alive[c];
    int len = BODY_MIN + below(st, BODY_MAX - BODY_MIN + 1), c = -1;
    for (int i = 0; i < len && nalive > 0; i++) {
        c = pick(st, alive, nalive, nclients, c);
        add_tok(s, LB__RACE_STEP, c, 0);
        const char *cmd = rec[c].cmd[pos[c]++ % rec[c].n];
        if (!crashed && nalive > 1 && is_attempt(cmd) && below(st, 4) == 0) {
            add_tok(s, LB__RACE_CRASH, c, 0);
            alive[c] = 0;
            nalive--;
            crashed = 1;
        } else if (below(st, 8) == 0) {
            add_tok(s, LB__RACE_PAUSE, 0, pauses[below(st, NPAUSES)]);
        }
    }
    if (!crashed) return;
    add_tok(s, LB__RACE_PAUSE, 0, pauses[2 + below(st, NPAUSES - 2)]);
    c = below(st, nclients);
    while (!alive[c]) c = (c + 1) % nclients;
    add_tok(s, LB__RACE_LIVE, c, 0);
}

/* ---- Running one schedule ------------------------------------------------------------- */

static void reset_keys(const lb__race_search *se) {
    redisReply *r = redisCommand(se->ctl, "DEL %s", se->cfg->key);
    if (r) freeReplyObject(r);
    if (se->cfg->counter_key) {
        r = redisCommand(se->ctl, "DEL %s", se->cfg->counter_key);
        if (r) freeReplyObject(r);
    }
}

static void err_path(const lb__race_search *se, int c, char *out, size_t cap) {
    if (se->dir && se->dir[0]) snprintf(out, cap, "%s/%c.err", se->dir, 'A' + c);
    else out[0] = '\0';
}

/* Every client started afresh, the schedule run, every client killed: one
 * schedule is one replay. */
static lb__race_verdict run_once(const lb__race_search *se, const lb__race_sched *s) {
    pid_t pids[LB__RACE_MAX_CLIENTS] = {0};
    char errp[320];
    reset_keys(se);
    lb__race_proxy_reset(se->proxy);
    for (int c = 0; c < se->cfg->nclients; c++)
        if (se->client_cmd[c]) {
            err_path(se, c, errp, sizeof errp);
            pids[c] = lb__race_spawn(se->client_cmd[c], se->ports[c], errp[0] ? errp : NULL);
            lb__race_proxy_set_pid(se->proxy, c, pids[c], errp[0] ? errp : NULL);
        }
    lb__race_verdict v = lb__race_proxy_run(se->proxy, s, se->start_timeout_ms);
    for (int c = 0; c < se->cfg->nclients; c++) lb__race_kill(pids[c]);
    return v;
}

/* The same, told to the caller as it goes: a search is long and the line
 * says what it is doing. */
static lb__race_verdict run_one(const lb__race_search *se, const lb__race_sched *s,
                                const char *phase, int n) {
    lb__race_verdict v = run_once(se, s);
    if (se->progress) {
        char line[LB__RACE_SCHED_MAX];
        sched_text(s, se->proxy, line, sizeof line);
        se->progress(phase, n, v, lb__race_proxy_kind(se->proxy), line);
    }
    return v;
}

/* Each client alone, once: its natural sequence of lock-key commands. */
static int record_all(const lb__race_search *se, recorded *rec, lb__race_found *f) {
    for (int c = 0; c < se->cfg->nclients; c++) {
        char text[LB__RACE_SCHED_MAX], errp[320];
        memset(&rec[c], 0, sizeof rec[c]);
        if (!se->client_cmd[c]) continue;
        reset_keys(se);
        lb__race_proxy_reset(se->proxy);
        err_path(se, c, errp, sizeof errp);
        pid_t pid = lb__race_spawn(se->client_cmd[c], se->ports[c], errp[0] ? errp : NULL);
        lb__race_proxy_set_pid(se->proxy, c, pid, errp[0] ? errp : NULL);
        int n = lb__race_proxy_record(se->proxy, c, REC_STEPS, se->start_timeout_ms, text,
                                      sizeof text);
        lb__race_kill(pid);
        if (n <= 0) {
            snprintf(f->detail, sizeof f->detail, "%c: nothing recorded: %s", 'A' + c,
                     lb__race_proxy_detail(se->proxy));
            return -1;
        }
        size_t o = strlen(f->recorded);
        snprintf(f->recorded + o, sizeof f->recorded - o, "%s%s", o ? " | " : "", text);
        char *save = NULL;
        for (char *t = strtok_r(text, " ", &save); t && rec[c].n < REC_STEPS;
             t = strtok_r(NULL, " ", &save))
            snprintf(rec[c].cmd[rec[c].n++], sizeof rec[c].cmd[0], "%s", t + 2);
    }
    return 0;
}

/* ---- Shrinking ----------------------------------------------------------------------- */

/* Whether the schedule is worth a run: a crashed client takes no step after
 * its crash, and a liveness violation needs a liveness check. */
static int plausible(const lb__race_sched *s, const char *kind) {
    int crashed[LB__RACE_MAX_CLIENTS] = {0}, steps = 0, lives = 0;
    for (int i = 0; i < s->n; i++) {
        const lb__race_tok *k = &s->tok[i];
        if (k->kind == LB__RACE_PAUSE) continue;
        if (crashed[k->client]) return 0;
        crashed[k->client] = k->kind == LB__RACE_CRASH;
        steps += k->kind == LB__RACE_STEP;
        lives += k->kind == LB__RACE_LIVE;
    }
    return steps > 0 && (strcmp(kind, "liveness") != 0 || lives > 0);
}

static void recount(lb__race_sched *s) {
    s->clients = s->scaled = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->tok[i].kind != LB__RACE_PAUSE && s->tok[i].client + 1 > s->clients)
            s->clients = s->tok[i].client + 1;
        if (s->tok[i].per_mille_t) s->scaled = 1;
    }
}

/* One shrinking run: caught with the violation's kind. */
static int caught_again(const lb__race_search *se, const lb__race_sched *cand, lb__race_found *f) {
    if (f->shrink_runs >= se->shrink_tries || lb__race_stop_signal) return 0;
    f->shrink_runs++;
    lb__race_verdict v = run_one(se, cand, "shrink", f->shrink_runs);
    return v == LB__RACE_CAUGHT && strcmp(lb__race_proxy_kind(se->proxy), f->kind) == 0;
}

/* Runs a candidate; when it is caught with the same kind twice running, it
 * becomes the current schedule, cut after the token that caught it, and its
 * named line is kept. Twice: a candidate caught once by the luck of timing
 * (a pause at the edge of the validity) would be printed as a row that does
 * not fail when replayed. */
static int still_fails(const lb__race_search *se, lb__race_sched *cur, const lb__race_sched *cand,
                       lb__race_found *f) {
    if (!caught_again(se, cand, f) || !caught_again(se, cand, f)) return 0;
    *cur = *cand;
    cur->n = lb__race_proxy_followed(se->proxy);
    recount(cur);
    sched_text(cur, se->proxy, f->schedule, sizeof f->schedule);
    snprintf(f->detail, sizeof f->detail, "%s", lb__race_proxy_detail(se->proxy));
    return 1;
}

/* Deletes runs of tokens, halving their length down to one (delta
 * debugging's complement step), and shortens pauses, while the violation
 * persists; bounded by --shrink-tries runs in all. */
static void shrink(const lb__race_search *se, lb__race_sched *cur, lb__race_found *f) {
    for (int changed = 1; changed && f->shrink_runs < se->shrink_tries;) {
        changed = 0;
        for (int size = cur->n / 2 > 0 ? cur->n / 2 : 1; size >= 1; size /= 2)
            for (int at = 0; at + size <= cur->n;) {
                lb__race_sched cand = *cur;
                memmove(&cand.tok[at], &cand.tok[at + size],
                        (size_t)(cand.n - at - size) * sizeof cand.tok[0]);
                cand.n -= size;
                recount(&cand);
                if (plausible(&cand, f->kind) && still_fails(se, cur, &cand, f)) changed = 1;
                else at += size;
                if (f->shrink_runs >= se->shrink_tries) return;
            }
        for (int i = 0; i < cur->n; i++) {
            lb__race_sched cand = *cur;
            lb__race_tok *k = &cand.tok[i];
            if (k->kind != LB__RACE_PAUSE || k->per_mille_t <= PAUSE_MIN) continue;
            k->per_mille_t = k->per_mille_t / 2 >= PAUSE_MIN ? k->per_mille_t / 2 : PAUSE_MIN;
            k->per_mille_t -= k->per_mille_t % 100; /* one decimal is enough for a pause */
            if (still_fails(se, cur, &cand, f)) changed = 1;
        }
    }
}

/* ---- The search ------------------------------------------------------------------------ */

lb__race_verdict lb__race_search_run(const lb__race_search *se, lb__race_found *f) {
    recorded rec[LB__RACE_MAX_CLIENTS];
    uint64_t st = se->seed;
    memset(f, 0, sizeof *f);
    if (record_all(se, rec, f) != 0)
        return lb__race_stop_signal || !lb__race_proxy_detail(se->proxy)[0] ? LB__RACE_ERROR
                                                                             : LB__RACE_NOT_FOLLOWED;
    if (se->progress) se->progress("record", 0, LB__RACE_PASSED, "", f->recorded);
    for (int i = 1; i <= se->schedules && !lb__race_stop_signal; i++) {
        lb__race_sched s;
        f->tried = i;
        draw(&st, rec, se->cfg->nclients, &s);
        lb__race_verdict v = run_one(se, &s, "draw", i);
        if (v == LB__RACE_ERROR) {
            snprintf(f->detail, sizeof f->detail, "%s", lb__race_proxy_detail(se->proxy));
            return v;
        }
        if (v != LB__RACE_CAUGHT) continue;
        f->found = 1;
        snprintf(f->kind, sizeof f->kind, "%s", lb__race_proxy_kind(se->proxy));
        snprintf(f->detail, sizeof f->detail, "%s", lb__race_proxy_detail(se->proxy));
        s.n = lb__race_proxy_followed(se->proxy);
        recount(&s);
        sched_text(&s, se->proxy, f->first, sizeof f->first);
        snprintf(f->schedule, sizeof f->schedule, "%s", f->first);
        shrink(se, &s, f);
        /* The line printed is replayed as written, named steps and all: what
         * a team keeps must fail by itself. */
        lb__race_sched named;
        char why[200];
        f->replayed = lb__race_parse(f->schedule, &named, why, sizeof why) == 0 &&
                      run_one(se, &named, "replay", 1) == LB__RACE_CAUGHT &&
                      strcmp(lb__race_proxy_kind(se->proxy), f->kind) == 0;
        f->tokens = named.n;
        f->trace = strdup(lb__race_proxy_trace(se->proxy));
        return LB__RACE_CAUGHT;
    }
    return LB__RACE_PASSED;
}
