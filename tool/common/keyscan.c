/* Reading lock keys in bulk: SCAN (never KEYS) with MATCH and COUNT, and one
 * small read-only script per batch that returns each key's type, the start of
 * its value, its PTTL and its length, pipelined with the next SCAN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockbridge/cluster.h"
#include "tool/common/keys.h"

/* Read-only: never writes, so it is safe on any key, whatever it holds. A
 * value is cut at ARGV[1] bytes; its full length is returned beside it. Two
 * calls per string key (PTTL, GETRANGE), since the server's time is what bounds
 * a scan: TYPE only for the keys GETRANGE refuses, STRLEN only for values at
 * least as long as the cut. */
static const char read_script[] =
    "local n = tonumber(ARGV[1])\n"
    "local out = {}\n"
    "for i, k in ipairs(KEYS) do\n"
    "  local pttl = redis.call('PTTL', k)\n"
    "  if pttl == -2 then\n"
    "    out[i] = {'none', false, -2, -1}\n"
    "  else\n"
    "    local v = redis.pcall('GETRANGE', k, 0, n - 1)\n"
    "    if type(v) == 'table' then\n"
    "      out[i] = {redis.call('TYPE', k)['ok'], false, pttl, -1}\n"
    "    else\n"
    "      local len = #v\n"
    "      if len >= n then len = redis.call('STRLEN', k) end\n"
    "      out[i] = {'string', v, pttl, len}\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return out\n";

/* Keys a batch reads at most: a script call on 1000 keys holds the server for
 * a few milliseconds (2 to 4 us a key measured), so other clients barely wait. */
#define BATCH_MAX 1000
/* Progress lines on stderr at most this often on long scans, milliseconds. */
#define PROGRESS_EVERY_MS 1000

struct lb__cli_reader {
    redisContext *c;
    char sha[41];
    char prefix_arg[24];
};

static int load(lb__cli_reader *r, char *err, size_t cap) {
    redisReply *rep = redisCommand(r->c, "SCRIPT LOAD %s", read_script);
    int ok = rep && rep->type == REDIS_REPLY_STRING && rep->len == 40;
    if (ok) memcpy(r->sha, rep->str, 41);
    else if (!rep) snprintf(err, cap, "SCRIPT LOAD: %s", r->c->errstr);
    else if (rep->type == REDIS_REPLY_ERROR) {
        char msg[160];
        lb__escape(msg, sizeof msg, rep->str, (size_t)rep->len);
        snprintf(err, cap, "SCRIPT LOAD refused: %s", msg);
    } else snprintf(err, cap, "SCRIPT LOAD: unexpected reply");
    if (rep) freeReplyObject(rep);
    return ok ? 0 : -1;
}

int lb__cli_reader_new(lb__cli_reader **out, redisContext *c, char *err, size_t cap) {
    *out = NULL;
    lb__cli_reader *r = calloc(1, sizeof *r);
    if (!r) return snprintf(err, cap, "out of memory"), -1;
    r->c = c;
    snprintf(r->prefix_arg, sizeof r->prefix_arg, "%d", LB__CLI_VALUE_PREFIX);
    if (load(r, err, cap) != 0) {
        free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void lb__cli_reader_free(lb__cli_reader *r) { free(r); }

/* Appends EVALSHA sha n key... prefix. */
static int append_read(lb__cli_reader *r, const redisReply *const *keys, size_t n) {
    const char **argv = malloc((n + 4) * sizeof *argv);
    size_t *lens = malloc((n + 4) * sizeof *lens);
    char nkeys[24];
    int rc = -1;
    if (argv && lens) {
        snprintf(nkeys, sizeof nkeys, "%zu", n);
        argv[0] = "EVALSHA", lens[0] = 7;
        argv[1] = r->sha, lens[1] = 40;
        argv[2] = nkeys, lens[2] = strlen(nkeys);
        for (size_t i = 0; i < n; i++) argv[3 + i] = keys[i]->str, lens[3 + i] = keys[i]->len;
        argv[3 + n] = r->prefix_arg, lens[3 + n] = strlen(r->prefix_arg);
        rc = redisAppendCommandArgv(r->c, (int)(n + 4), argv, lens) == REDIS_OK ? 0 : -1;
    }
    free(argv);
    free(lens);
    return rc;
}

/* One key's entry of the script's reply: {type, value or false (nil), pttl, len}. */
static int parse_entry(const redisReply *e, const redisReply *key, lb__cli_key *k) {
    memset(k, 0, sizeof *k);
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 4) return -1;
    const redisReply *t = e->element[0], *v = e->element[1];
    if ((t->type != REDIS_REPLY_STRING && t->type != REDIS_REPLY_STATUS) ||
        e->element[2]->type != REDIS_REPLY_INTEGER || e->element[3]->type != REDIS_REPLY_INTEGER ||
        (v->type != REDIS_REPLY_STRING && v->type != REDIS_REPLY_NIL) || t->len >= 32)
        return -1;
    k->key = key->str;
    k->keylen = key->len;
    memcpy(k->type, t->str, t->len);
    k->type[t->len] = '\0';
    k->value = v->type == REDIS_REPLY_STRING ? v->str : NULL;
    k->valuelen = v->type == REDIS_REPLY_STRING ? v->len : 0;
    k->pttl_ms = e->element[2]->integer;
    k->len = e->element[3]->integer;
    return 0;
}

static int reply_error(redisContext *c, const redisReply *rep, const char *what, char *err,
                       size_t cap) {
    char msg[200];
    if (!rep) snprintf(err, cap, "%s: %s", what, c->errstr[0] ? c->errstr : "no reply");
    else if (rep->type == REDIS_REPLY_ERROR) {
        lb__escape(msg, sizeof msg, rep->str, (size_t)rep->len);
        snprintf(err, cap, "%s refused: %s", what, msg);
    } else snprintf(err, cap, "%s: unexpected reply", what);
    return -1;
}

/* Reads the reply of one batch and hands each key to `fn`. A script that
 * vanished (SCRIPT FLUSH, a restart) is loaded again and the batch re-read. */
static int take_batch(lb__cli_reader *r, const redisReply *const *keys, size_t n,
                      lb__cli_key_fn fn, void *ud, char *err, size_t cap) {
    redisReply *rep = NULL;
    if (redisGetReply(r->c, (void **)&rep) != REDIS_OK) rep = NULL;
    if (rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(rep);
        rep = NULL;
        if (load(r, err, cap) != 0) return -1;
        if (append_read(r, keys, n) != 0 || redisGetReply(r->c, (void **)&rep) != REDIS_OK)
            rep = NULL;
    }
    if (rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "CROSSSLOT", 9) == 0) {
        snprintf(err, cap, "reading keys: they lie in several hash slots of a Redis "
                           "Cluster node");
        freeReplyObject(rep);
        return -1;
    }
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        reply_error(r->c, rep, "reading keys", err, cap);
        if (rep) freeReplyObject(rep);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        lb__cli_key k;
        if (parse_entry(rep->element[i], keys[i], &k) != 0)
            rc = reply_error(r->c, rep->element[i], "reading keys", err, cap);
        else rc = fn(&k, ud) != 0 ? 1 : 0;
    }
    freeReplyObject(rep);
    return rc;
}

int lb__cli_read_keys(lb__cli_reader *r, const char *const *keys, const size_t *lens,
                      size_t n, lb__cli_key_fn fn, void *ud, char *err, size_t cap) {
    redisReply *fake = calloc(n ? n : 1, sizeof *fake);
    const redisReply **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    int rc = -1;
    if (fake && ptrs) {
        for (size_t i = 0; i < n; i++) {
            fake[i].type = REDIS_REPLY_STRING;
            fake[i].str = (char *)keys[i];
            fake[i].len = lens[i];
            ptrs[i] = &fake[i];
        }
        rc = append_read(r, ptrs, n) == 0 ? take_batch(r, ptrs, n, fn, ud, err, cap)
                                          : reply_error(r->c, NULL, "reading keys", err, cap);
    } else snprintf(err, cap, "out of memory");
    free(fake);
    free(ptrs);
    return rc;
}

/* ---- SCAN ------------------------------------------------------------------------ */
static int append_scan(redisContext *c, const char *cursor, const lb__cli_scanopts *o) {
    char count[24];
    snprintf(count, sizeof count, "%lld", (long long)o->count);
    const char *argv[] = {"SCAN", cursor, "MATCH", o->match, "COUNT", count};
    size_t lens[] = {4, strlen(cursor), 5, strlen(o->match), 5, strlen(count)};
    return redisAppendCommandArgv(c, 6, argv, lens) == REDIS_OK ? 0 : -1;
}

/* SCAN's reply: {next cursor, {keys...}}. */
static int scan_reply_ok(const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return 0;
    if (r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= 32) return 0;
    const redisReply *keys = r->element[1];
    if (keys->type != REDIS_REPLY_ARRAY) return 0;
    for (size_t i = 0; i < keys->elements; i++)
        if (keys->element[i]->type != REDIS_REPLY_STRING) return 0;
    return 1;
}

static void progress(const lb__cli_scanopts *o, uint64_t keys, double t0, double *last) {
    double now = lb__cli_mono_ms();
    if (!o->progress || now - *last < PROGRESS_EVERY_MS) return;
    *last = now;
    fprintf(stderr, "lockbridge: %s%sscanned %llu keys in %.1f s\n", o->where ? o->where : "",
            o->where ? ": " : "", (unsigned long long)keys, (now - t0) / 1000.0);
}

static int by_slot(const void *a, const void *b) {
    const redisReply *x = *(const redisReply *const *)a, *y = *(const redisReply *const *)b;
    unsigned sx = lb_cluster_keyslot(x->str, x->len), sy = lb_cluster_keyslot(y->str, y->len);
    return sx < sy ? -1 : sx > sy;
}

/* Keys of the next slice from `done`: at most BATCH_MAX, and on a cluster only
 * keys of one slot (the batch is sorted by slot first). */
static size_t slice(const lb__cli_scanopts *o, const redisReply *keys, size_t done) {
    size_t n = keys->elements - done, k = n < BATCH_MAX ? n : BATCH_MAX;
    if (!o->cluster) return k;
    const redisReply *first = keys->element[done];
    unsigned slot = lb_cluster_keyslot(first->str, first->len);
    for (size_t i = 1; i < k; i++) {
        const redisReply *e = keys->element[done + i];
        if (lb_cluster_keyslot(e->str, e->len) != slot) return i;
    }
    return k;
}

/* Each round sends the read of the batch in hand together with the next SCAN,
 * so one round trip carries both. Batches larger than BATCH_MAX (a large
 * COUNT) are read in slices, all sent before the SCAN; on a cluster node a
 * slice holds keys of one slot, as a script may touch no other. */
int lb__cli_scan(lb__cli_reader *r, const lb__cli_scanopts *o, lb__cli_key_fn fn, void *ud,
                 uint64_t *scanned, char *err, size_t cap) {
    char cursor[32] = "0";
    double t0 = lb__cli_mono_ms(), last = t0;
    redisReply *batch = NULL;
    int rc = 0;
    *scanned = 0;
    if (append_scan(r->c, cursor, o) != 0) return reply_error(r->c, NULL, "SCAN", err, cap);
    for (;;) {
        redisReply *sc = NULL;
        if (redisGetReply(r->c, (void **)&sc) != REDIS_OK) sc = NULL;
        if (!scan_reply_ok(sc)) {
            rc = reply_error(r->c, sc, "SCAN", err, cap);
            if (sc) freeReplyObject(sc);
            break;
        }
        memcpy(cursor, sc->element[0]->str, sc->element[0]->len);
        cursor[sc->element[0]->len] = '\0';
        int more = strcmp(cursor, "0") != 0;
        const redisReply *keys = sc->element[1];
        if (batch) freeReplyObject(batch);
        batch = sc;
        size_t n = keys->elements, k;
        if (o->cluster && n > 1) qsort(keys->element, n, sizeof *keys->element, by_slot);
        /* Replies come back in order: every slice's read, then the SCAN. */
        for (size_t done = 0; rc == 0 && done < n; done += k) {
            k = slice(o, keys, done);
            if (append_read(r, (const redisReply *const *)keys->element + done, k) != 0)
                rc = reply_error(r->c, NULL, "reading keys", err, cap);
        }
        if (rc == 0 && more && append_scan(r->c, cursor, o) != 0)
            rc = reply_error(r->c, NULL, "SCAN", err, cap);
        for (size_t done = 0; rc == 0 && done < n; done += k) {
            k = slice(o, keys, done);
            rc = take_batch(r, (const redisReply *const *)keys->element + done, k, fn, ud, err,
                            cap);
            *scanned += k;
        }
        progress(o, *scanned, t0, &last);
        if (rc != 0 || !more) break;
    }
    if (batch) freeReplyObject(batch);
    /* A stop asked for by `fn` (rc 1) leaves a SCAN reply in flight: the
     * connection is not reused after a scan that did not finish. */
    return rc < 0 ? -1 : rc;
}

/* ---- Patterns ------------------------------------------------------------------------ */
int lb__cli_pattern_check(const char *p, char *why, size_t cap) {
    size_t len = strlen(p);
    int in_class = 0;
    if (len == 0) return snprintf(why, cap, "the pattern is empty"), -1;
    if (len > LB__CLI_PATTERN_MAX)
        return snprintf(why, cap, "the pattern is longer than %d bytes", LB__CLI_PATTERN_MAX), -1;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\') {
            if (i + 1 == len) return snprintf(why, cap, "the pattern ends in a lone '\\'"), -1;
            i++;
        } else if (p[i] == '[' && !in_class) {
            in_class = 1;
        } else if (p[i] == ']' && in_class) {
            in_class = 0;
        }
    }
    if (in_class) return snprintf(why, cap, "the pattern has a '[' without its ']'"), -1;
    return 0;
}
