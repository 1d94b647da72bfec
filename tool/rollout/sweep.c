/* `lockbridge sweep`: TTL-less legacy locks past their timestamp get a TTL
 * ending at their timestamp + grace, and those past that are removed, each by a
 * script that acts only if the key still holds the value judged, still without
 * TTL; what it found is first recorded in the namespace's gate record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"
#include "tool/rollout/gate.h"
#include "tool/rollout/survey.h"

#define GRACE_MS_DEFAULT INT64_C(60000) /* milliseconds */
#define PIPELINE 500                    /* scripts in flight at once */

/* Compare-then-act on one key: any change since the scan (another value, a
 * TTL, another type, the key gone) leaves it alone and returns 0. */
static const char sweep_script[] =
    "if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then return 0 end\n"
    "if redis.call('PTTL', KEYS[1]) ~= -1 then return 0 end\n"
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "if ARGV[2] == 'del' then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "else\n"
    "  redis.call('PEXPIREAT', KEYS[1], ARGV[3])\n"
    "end\n"
    "return 1\n";

static const lb__cli_optdef opts[] = {
    {"--ns", 1},       {"--match", 1},   {"--count", 1}, {"--codec", LB__CLI_REPEAT},
    {"--grace-ms", 1}, {"--dry-run", 0}, {"--expire-live", 0}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge sweep --ns NS [--match PATTERN] [--count N] [--codec SPEC]...\n"
    "                        [--grace-ms N] [--expire-live] [--dry-run] [--json]\n"
    "\n"
    "Scans namespace NS's lock keys for legacy locks without a TTL (a crashed\n"
    "legacy holder's lock stays forever otherwise). Each whose timestamp has passed\n"
    "but whose timestamp + grace is still ahead gets that instant as its expiry\n"
    "(PEXPIREAT); each already past timestamp + grace is deleted. Locks whose\n"
    "timestamp is still ahead are left alone (--expire-live gives them a TTL too).\n"
    "Every instant is judged by the server's clock (TIME), the clock that applies\n"
    "the TTL, so a sweeping host whose clock runs ahead deletes nothing early.\n"
    "Every action is one script that first checks the key still holds the value\n"
    "judged, as a string without TTL: a lock taken over meanwhile is left alone.\n"
    "Before acting, the latest timestamp found is recorded in the namespace's gate\n"
    "record ({NS}:lb-gate), and in that of every other namespace on the server\n"
    "whose stored pattern matches one of the keys, so the gate still counts these\n"
    "legacy writers after their locks got a TTL or were removed. A --match or\n"
    "--codec other than the namespace's stored ones is refused.\n"
    "Values in no known format, INCR counters, tokens, compat values, keys of other\n"
    "types, timestamps on a monotonic clock and ambiguous values (read only as an\n"
    "instant before 2000 or more than 10 years ahead, or as two different instants\n"
    "by two codecs) are never touched.\n"
    "On a Redis Cluster node, every primary of the slot map is scanned, and each\n"
    "script runs on the primary that holds its key.\n"
    "\n"
    "  --ns NS          the namespace (required): its stored pattern and codecs are\n"
    "                   the defaults, and its gate record keeps the evidence\n"
    "  --match PATTERN  SCAN MATCH glob of the lock keys (default: stored, else *)\n"
    "  --count N        SCAN COUNT hint, 1..100000 (default 1000)\n"
    "  --codec SPEC     a codec the fleet writes; repeat for several (default:\n"
    "                   stored, else ms). A seconds value read as milliseconds\n"
    "                   (1970) is ambiguous and left alone: name the fleet's codecs.\n"
    "  --grace-ms N     added to each timestamp, ms, 0..10^12 (default 60000): room\n"
    "                   for legacy hosts whose clocks run behind the server's\n"
    "  --expire-live    also give locks whose timestamp is still ahead a TTL at\n"
    "                   timestamp + grace (longer than any compat TTL)\n"
    "  --dry-run        say what would be done; write nothing\n"
    "  --json           one \"sweep\" JSON line per lock, then a \"sweep_summary\"\n"
    "\n"
    "Exit: 0 done (or dry run); 1 usage (also a --match or --codec other than the\n"
    "stored ones); 4 connection or Redis error.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

typedef struct item {
    char *key, *value;
    size_t keylen, valuelen;
    int del;             /* 1: delete; 0: PEXPIREAT deadline */
    int64_t deadline_ms; /* timestamp + grace, epoch ms */
    int codec;
    int64_t expiry;
    int done;            /* the script acted */
} item;

typedef struct sweep {
    const lb__cli_codecs *cs;
    int64_t grace_ms;
    int64_t now_ms;       /* the server's clock at the start, epoch ms */
    int expire_live;      /* --expire-live */
    uint64_t live;        /* TTL-less locks still running, left alone */
    int64_t legacy_until_ms; /* the latest timestamp found, epoch ms; -1 */
    item *items;
    size_t n, cap;
    uint64_t skipped_mono, left_alone[LB__CLI_FORMATS], acted, changed;
    int oom;
    int dry;
    size_t from;  /* items before this one were acted on by an earlier server */
    int cluster, servers;
    /* Every TTL-less legacy lock found (acted on or not): evidence for every
     * namespace whose pattern matches its key, not only this one. */
    struct evidence {
        char *key;
        size_t keylen;
        int64_t at;
    } *ev;
    size_t nev, capev;
    lb__cli_nslist others; /* the namespaces on the server and their patterns */
} sweep;

static int witness(sweep *s, const lb__cli_key *k, int64_t at) {
    if (s->nev == s->capev) {
        size_t cap = s->capev ? s->capev * 2 : 64;
        struct evidence *grown = realloc(s->ev, cap * sizeof *grown);
        if (!grown) return s->oom = 1, -1;
        s->ev = grown;
        s->capev = cap;
    }
    char *key = malloc(k->keylen ? k->keylen : 1);
    if (!key) return s->oom = 1, -1;
    memcpy(key, k->key, k->keylen);
    s->ev[s->nev].key = key;
    s->ev[s->nev].keylen = k->keylen;
    s->ev[s->nev++].at = at;
    return 0;
}

static int push(sweep *s, const lb__cli_key *k, const lb_class *cl, int64_t deadline,
                int del) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        item *grown = realloc(s->items, cap * sizeof *grown);
        if (!grown) return s->oom = 1, -1;
        s->items = grown;
        s->cap = cap;
    }
    item *it = &s->items[s->n];
    memset(it, 0, sizeof *it);
    it->key = malloc(k->keylen + 1);
    it->value = malloc(k->valuelen + 1);
    if (!it->key || !it->value) {
        free(it->key);
        free(it->value);
        return s->oom = 1, -1;
    }
    memcpy(it->key, k->key, k->keylen);
    memcpy(it->value, k->value, k->valuelen);
    it->keylen = k->keylen;
    it->valuelen = k->valuelen;
    it->del = del;
    it->deadline_ms = deadline;
    it->codec = cl->codec;
    it->expiry = cl->expiry;
    s->n++;
    return 0;
}

static int on_key(const lb__cli_key *k, void *ud) {
    sweep *s = ud;
    lb_class cl;
    int64_t at;
    if (lb__cli_is_companion(k)) return 0;
    lb_now now = lb_clock_now(NULL);
    now.wall_us = s->now_ms * 1000; /* the server's clock judges, as below */
    if (lb__cli_classify(s->cs, k, &now, &cl) != LB_OK) return -1;
    if (cl.format != LB_FORMAT_LEGACY || k->pttl_ms != -1 || !k->value) {
        if ((unsigned)cl.format < LB__CLI_FORMATS && cl.format != LB_FORMAT_ABSENT)
            s->left_alone[cl.format]++;
        return 0;
    }
    if (lb__cli_expiry_epoch_ms(&s->cs->codec[cl.codec], cl.expiry, &at) != 0) {
        s->skipped_mono++;
        return 0;
    }
    if (at > s->legacy_until_ms) s->legacy_until_ms = at;
    if (!s->dry && witness(s, k, at) != 0) return -1;
    if (at > s->now_ms && !s->expire_live) {
        s->live++;
        return 0;
    }
    int64_t deadline = at > INT64_MAX - s->grace_ms ? INT64_MAX : at + s->grace_ms;
    return push(s, k, &cl, deadline, deadline <= s->now_ms);
}

/* ---- Acting ------------------------------------------------------------------------ */
static int load(redisContext *c, char sha[41], char *err, size_t cap) {
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", sweep_script);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) memcpy(sha, r->str, 41);
    else snprintf(err, cap, "SCRIPT LOAD: %s", r ? "refused" : c->errstr);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static int append(redisContext *c, const char *sha, const item *it) {
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)it->deadline_ms);
    const char *argv[] = {"EVALSHA", sha, "1", it->key, it->value, it->del ? "del" : "expire",
                          at};
    size_t lens[] = {7, 40, 1, it->keylen, it->valuelen, it->del ? 3 : 6, strlen(at)};
    return redisAppendCommandArgv(c, 7, argv, lens) == REDIS_OK ? 0 : -1;
}

/* Sends the scripts PIPELINE at a time; a NOSCRIPT (a flush meanwhile) loads
 * the script again and retries that one. Called at the end of each server's
 * scan with the items that scan found, so that each script goes to the node
 * that holds its key. */
static int act(redisContext *c, void *ud, char *err, size_t cap) {
    sweep *s = ud;
    char sha[41];
    size_t from = s->from;
    s->from = s->n;
    if (s->dry || from == s->n) return 0;
    if (load(c, sha, err, cap) != 0) return -1;
    for (size_t base = from; base < s->n; base += PIPELINE) {
        size_t end = base + PIPELINE < s->n ? base + PIPELINE : s->n;
        for (size_t i = base; i < end; i++)
            if (append(c, sha, &s->items[i]) != 0) return snprintf(err, cap, "out of memory"), -1;
        for (size_t i = base; i < end; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK) r = NULL;
            if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
                freeReplyObject(r);
                r = NULL;
                if (load(c, sha, err, cap) == 0 && append(c, sha, &s->items[i]) == 0 &&
                    redisGetReply(c, (void **)&r) != REDIS_OK)
                    r = NULL;
            }
            if (!r || r->type != REDIS_REPLY_INTEGER) {
                snprintf(err, cap, "sweep script: %s",
                         !r ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
                if (r) freeReplyObject(r);
                return -1;
            }
            s->items[i].done = r->integer == 1;
            if (r->integer == 1) s->acted++;
            else s->changed++;
            freeReplyObject(r);
        }
    }
    return 0;
}

/* ---- Output ---------------------------------------------------------------------- */
static void show_items(const sweep *s, int dry) {
    for (size_t i = 0; i < s->n; i++) {
        const item *it = &s->items[i];
        const char *what = it->del ? "delete" : "expire";
        const char *outcome = dry ? "dry run" : it->done ? "done" : "changed meanwhile: left";
        if (!lb__cli_is_json()) {
            char key[64];
            lb__escape(key, sizeof key, it->key, it->keylen);
            if (i == 0) printf("%-40s %-7s %15s  %s\n", "KEY", "ACTION", "AT_EPOCH_MS", "OUTCOME");
            printf("%-40s %-7s %15lld  %s\n", key, what, (long long)it->deadline_ms, outcome);
            continue;
        }
        cJSON *o = lb__cli_event("sweep");
        if (o) {
            lb__cli_add_bytes(o, "key", it->key, it->keylen);
            lb__cli_add_str(o, "action", what);
            lb__cli_add_str(o, "codec", s->cs->spec[it->codec]);
            lb__cli_add_i64(o, "expiry", it->expiry);
            lb__cli_add_i64(o, it->del ? "deadline_epoch_ms" : "expire_at_epoch_ms",
                            it->deadline_ms);
            lb__cli_add_bool(o, "dry_run", dry);
            if (!dry) lb__cli_add_bool(o, "done", it->done);
        }
        lb__cli_emit(o);
    }
}

static void show_summary(const sweep *s, uint64_t scanned, int dry) {
    uint64_t del = 0;
    for (size_t i = 0; i < s->n; i++) del += s->items[i].del;
    if (!lb__cli_is_json()) {
        char on[48] = "";
        if (s->cluster) snprintf(on, sizeof on, " on %d cluster primaries", s->servers);
        printf("\nscanned %llu keys%s; %zu TTL-less legacy lock(s): %llu to delete, %llu to "
               "expire%s\n", (unsigned long long)scanned, on, s->n, (unsigned long long)del,
               (unsigned long long)(s->n - del), dry ? " (dry run: nothing written)" : "");
        if (!dry)
            printf("acted on %llu; %llu changed meanwhile and were left alone\n",
                   (unsigned long long)s->acted, (unsigned long long)s->changed);
        printf("left alone: still running %llu%s, monotonic-clock %llu",
               (unsigned long long)s->live, s->live ? " (--expire-live)" : "",
               (unsigned long long)s->skipped_mono);
        for (int f = 1; f < LB__CLI_FORMATS; f++)
            if (s->left_alone[f])
                printf(", %s %llu", lb_format_name((lb_format)f),
                       (unsigned long long)s->left_alone[f]);
        printf("\n");
        return;
    }
    cJSON *o = lb__cli_event("sweep_summary"), *l;
    if (!o) return (void)lb__cli_emit(o);
    lb__cli_add_i64(o, "scanned", (int64_t)scanned);
    lb__cli_add_bool(o, "cluster", s->cluster);
    lb__cli_add_i64(o, "primaries_scanned", s->servers);
    lb__cli_add_i64(o, "candidates", (int64_t)s->n);
    lb__cli_add_i64(o, "to_delete", (int64_t)del);
    lb__cli_add_i64(o, "to_expire", (int64_t)(s->n - del));
    lb__cli_add_bool(o, "dry_run", dry);
    lb__cli_add_i64(o, "acted", (int64_t)s->acted);
    lb__cli_add_i64(o, "changed_meanwhile", (int64_t)s->changed);
    lb__cli_add_i64(o, "skipped_mono", (int64_t)s->skipped_mono);
    lb__cli_add_i64(o, "live_left_alone", (int64_t)s->live);
    lb__cli_add_i64(o, "server_now_ms", s->now_ms);
    if ((l = cJSON_AddObjectToObject(o, "left_alone")) != NULL)
        for (int f = 1; f < LB__CLI_FORMATS; f++)
            lb__cli_add_i64(l, lb_format_name((lb_format)f), (int64_t)s->left_alone[f]);
    lb__cli_emit(o);
}

static void sweep_free(sweep *s) {
    for (size_t i = 0; i < s->n; i++) {
        free(s->items[i].key);
        free(s->items[i].value);
    }
    free(s->items);
    for (size_t i = 0; i < s->nev; i++) free(s->ev[i].key);
    free(s->ev);
    lb__cli_nslist_free(&s->others);
}

/* The namespace's gate record: the stored pattern and codecs stand in for
 * options not given (given ones must be those), and the server's clock is
 * read from the same connection. 0, 1 usage, or -1 with `err`. */
static int prepare(const lb__cli_args *a, redisContext *nc, const char *ns, sweep *s,
                   lb__cli_codecs *cs, lb__cli_scanopts *so, lb__cli_gate *g, char *err,
                   size_t cap) {
    if (lb__cli_gate_read(nc, ns, g, err, cap) != 0) return -1;
    /* Another pattern would file other keys' evidence under this namespace. */
    if (lb__cli_gateconf_scan(a, opts, ns, g, cs, so) != 0) return 1;
    s->now_ms = lb__cli_server_ms(nc);
    if (s->now_ms < 0) return snprintf(err, cap, "reading the server's TIME: %s", nc->errstr), -1;
    return 0;
}

static int note(const lb__cli_args *a, const lb__cli_topo *t, const char *ns, int64_t at,
                char *err, size_t cap) {
    redisContext *w = t->cluster ? lb__cli_connect_ns(t, NULL, ns, err, cap)
                                 : lb__cli_connect(&a->conn, err, cap);
    if (!w) return -1;
    int rc = lb__cli_gate_note(w, ns, "legacy_until_ms", at, err, cap);
    redisFree(w);
    return rc;
}

/* Recorded before any key is touched: the gate keeps counting these legacy
 * writers after their locks got a TTL or were removed, in this namespace and
 * in every other whose pattern matches one of their keys. */
static int remember(const lb__cli_args *a, const lb__cli_topo *t, const char *ns,
                    const sweep *s, char *err, size_t cap) {
    if (s->dry || s->legacy_until_ms < 0) return 0;
    if (note(a, t, ns, s->legacy_until_ms, err, cap) != 0) return -1;
    for (size_t i = 0; i < s->others.n; i++) {
        const lb__cli_nsmatch *m = &s->others.v[i];
        int64_t until = -1;
        if (strcmp(m->ns, ns) == 0) continue;
        for (size_t j = 0; j < s->nev; j++)
            if (s->ev[j].at > until &&
                lb__cli_glob(m->match, strlen(m->match), s->ev[j].key, s->ev[j].keylen))
                until = s->ev[j].at;
        if (until >= 0 && note(a, t, m->ns, until, err, cap) != 0) return -1;
    }
    return 0;
}

/* The scan collects; each server's scripts run when its scan ends, after the
 * evidence found so far is recorded. */
typedef struct run_ctx {
    sweep *s;
    const lb__cli_args *a;
    const lb__cli_topo *t;
    const char *ns;
} run_ctx;

static int act_after_noting(redisContext *c, void *ud, char *err, size_t cap) {
    run_ctx *r = ud;
    if (remember(r->a, r->t, r->ns, r->s, err, cap) != 0) return -1;
    return act(c, r->s, err, cap);
}

static int on_key_ctx(const lb__cli_key *k, void *ud) { return on_key(k, ((run_ctx *)ud)->s); }

static int execute(const lb__cli_args *a, const char *ns, sweep *s, lb__cli_codecs *cs,
                   lb__cli_scanopts *so, int dry) {
    char err[512];
    uint64_t scanned = 0;
    lb__cli_topo t;
    lb__cli_gate g;
    redisContext *nc = NULL, *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) return lb__cli_error(a, NULL, LB_EIO, err);
    s->dry = dry;
    int rc = lb__cli_topo_read(&t, c, &a->conn, err, sizeof err);
    s->cluster = t.cluster;
    if (rc == 0 && !(nc = lb__cli_connect_ns(&t, c, ns, err, sizeof err))) rc = -1;
    if (rc == 0) rc = prepare(a, nc, ns, s, cs, so, &g, err, sizeof err);
    if (rc == 0 && !dry && lb__cli_nslist_read(a, &t, &s->others, err, sizeof err) != 0) rc = -1;
    if (rc > 0) {
        lb__cli_ns_done(nc, c);
        lb__cli_topo_clear(&t);
        redisFree(c);
        return LB__CLI_EXIT_USAGE;
    }
    run_ctx r = {s, a, &t, ns};
    if (rc == 0)
        rc = lb__cli_scan_each(&t, c, so, on_key_ctx, act_after_noting, &r, &scanned,
                               &s->servers, err, sizeof err);
    if (rc != 0 && s->oom) snprintf(err, sizeof err, "out of memory");
    if (nc) lb__cli_ns_done(nc, c);
    lb__cli_topo_clear(&t);
    redisFree(c);
    if (rc != 0) return lb__cli_error(a, NULL, LB_EREDIS, err);
    show_items(s, dry);
    show_summary(s, scanned, dry);
    return LB__CLI_EXIT_OK;
}

static int run(const lb__cli_args *a) {
    lb__cli_codecs cs;
    lb__cli_scanopts so;
    sweep s;
    const char *v, *ns;
    memset(&s, 0, sizeof s);
    s.grace_ms = GRACE_MS_DEFAULT;
    s.legacy_until_ms = -1;
    s.expire_live = lb__cli_opt(a, opts, "--expire-live") != NULL;
    if (a->npos != 0) return lb__cli_usage(a, "takes no arguments (the keys are --match)");
    if (lb__cli_ns_read(a, opts, &ns) != 0 || lb__cli_codecs_read(&cs, a, opts) != 0 ||
        lb__cli_scanopts_read(&so, a, opts) != 0 ||
        ((v = lb__cli_opt(a, opts, "--grace-ms")) &&
         lb__cli_int(a, "--grace-ms", v, 0, LB__CLI_MS_MAX, &s.grace_ms) != 0))
        return LB__CLI_EXIT_USAGE;
    s.cs = &cs;
    int code = execute(a, ns, &s, &cs, &so, lb__cli_opt(a, opts, "--dry-run") != NULL);
    sweep_free(&s);
    return code;
}

const lb__cli_command lb__cli_cmd_sweep = {
    "sweep", "give TTL-less legacy locks a TTL, or remove those long expired", help, opts, 0,
    run, 0};
