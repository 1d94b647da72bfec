/* The Sentinel driver: asks sentinels where the primary is, checks that it is
 * one (ROLE), keeps one connection to it, and finds it again after a
 * failover. */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "lockbridge/sentinel.h"
#include "core/cluster_internal.h"

#define SENTINELS_MAX 16

struct lb_sentinel {
    lb_sentinel_options opts;
    char *name, *username, *password;
    lb__addr sentinels[SENTINELS_MAX];
    int n;
    int next; /* the sentinel asked first next time: the last one that answered */
    lb__addr primary;
    int known; /* `primary` holds an address */
    int64_t asked_ms; /* monotonic ms when a sentinel last named the primary */
    redisContext *c;
    redisContext *last; /* `c` when it gave send_cmd's last reply */
    redisContext *sub; /* a sentinel connection subscribed to +switch-master */
    lb_sentinel_stats stats;
    char errstr[LB__ERRSTR_CAP];
};

void lb_sentinel_options_init(lb_sentinel_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 1000;
    o->retry_ms = 5000;
    o->retry_backoff_ms = 100;
    o->recheck_ms = 1000;
    o->subscribe = 1;
}

static void set_err(lb_sentinel *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(lb_sentinel *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errstr, sizeof s->errstr, fmt, ap);
    va_end(ap);
}

/* A connection to a sentinel (no AUTH) or, with auth set, to a primary. */
static redisContext *connect_to(lb_sentinel *s, const lb__addr *a, int auth) {
    lb__conn_opts o = {a->host, a->port, s->opts.connect_timeout_ms,
                       s->opts.command_timeout_ms, auth ? s->username : NULL,
                       auth ? s->password : NULL, 0, NULL};
    return lb__connect(&o, NULL, s->errstr, sizeof s->errstr);
}

static void drop(lb_sentinel *s) {
    if (s->last == s->c) s->last = NULL;
    if (s->c) redisFree(s->c);
    s->c = NULL;
}

/* Asks sentinel `a` where the primary is: 0 and *out, or -1. A nil answer
 * means this sentinel does not monitor `name`. */
static int ask_sentinel(lb_sentinel *s, const lb__addr *a, lb__addr *out) {
    redisContext *c = connect_to(s, a, 0);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", s->name);
    int rc = -1;
    if (!r) {
        set_err(s, "sentinel %s:%d: %s", a->host, a->port, c->errstr);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING) {
        char addr[LB__HOST_CAP + 8];
        int n = snprintf(addr, sizeof addr, "%.*s:%.*s", (int)r->element[0]->len,
                         r->element[0]->str, (int)r->element[1]->len, r->element[1]->str);
        if (n > 0 && (size_t)n < sizeof addr &&
            r->element[0]->len > 0 && !memchr(r->element[0]->str, '\0', r->element[0]->len) &&
            lb__addr_parse(addr, (size_t)n, NULL, out) == LB_OK)
            rc = 0;
        else
            set_err(s, "sentinel %s:%d: unreadable address for %s", a->host, a->port, s->name);
    } else if (r->type == REDIS_REPLY_NIL) {
        set_err(s, "sentinel %s:%d does not know a primary named %s", a->host, a->port, s->name);
    } else {
        set_err(s, "sentinel %s:%d: unexpected reply to get-master-addr-by-name", a->host, a->port);
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* ROLE on a candidate primary: 0 when it says it is a master. A
 * sentinel may still name a primary that has just been demoted. */
static int verify(lb_sentinel *s, redisContext *c, const lb__addr *a) {
    redisReply *r = redisCommand(c, "ROLE");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
             r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len == 6 &&
             memcmp(r->element[0]->str, "master", 6) == 0;
    if (!ok) set_err(s, "%s:%d, named by the sentinels, is not a primary", a->host, a->port);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Subscribes to +switch-master on sentinel i, so a failover is known the
 * moment the sentinels announce it, not at the next recheck. Best effort:
 * without a subscription the recheck still bounds the delay. */
static void subscribe(lb_sentinel *s, int i) {
    if (s->sub || !s->opts.subscribe) return;
    redisContext *c = connect_to(s, &s->sentinels[i], 0);
    if (!c) return;
    redisReply *r = redisCommand(c, "SUBSCRIBE +switch-master");
    if (r && r->type == REDIS_REPLY_ARRAY) s->sub = c;
    else redisFree(c);
    if (r) freeReplyObject(r);
}

/* One pass over the sentinels: 0 with a verified connection in s->c. */
static int resolve_once(lb_sentinel *s) {
    s->stats.resolves++;
    for (int k = 0; k < s->n; k++) {
        int i = (s->next + k) % s->n;
        lb__addr p;
        if (ask_sentinel(s, &s->sentinels[i], &p) != 0) continue;
        s->next = i;
        redisContext *c = connect_to(s, &p, 1);
        if (!c) continue;
        if (verify(s, c, &p) != 0) {
            redisFree(c);
            continue;
        }
        if (s->known && !lb__addr_equal(&s->primary, &p)) s->stats.switches++;
        s->primary = p;
        s->known = 1;
        s->c = c;
        s->asked_ms = lb__mono_ms();
        subscribe(s, i);
        s->errstr[0] = '\0';
        return 0;
    }
    return -1;
}

/* Whether `r` is a +switch-master message about our primary:
 * ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]. */
static int is_our_switch(const lb_sentinel *s, const redisReply *r) {
    size_t n = strlen(s->name);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return 0;
    const redisReply *m = r->element[2];
    return m->type == REDIS_REPLY_STRING && (size_t)m->len > n && m->str[n] == ' ' &&
           memcmp(m->str, s->name, n) == 0;
}

/* Reads, without waiting, what the subscription has received; forgets the
 * primary if the sentinels announced that ours was replaced. */
static void poll_switch(lb_sentinel *s) {
    if (!s->sub) return;
    struct pollfd p = {s->sub->fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return;
    void *r = NULL;
    if (redisBufferRead(s->sub) != REDIS_OK) {
        redisFree(s->sub); /* subscribed again at the next resolve */
        s->sub = NULL;
        return;
    }
    while (redisGetReplyFromReader(s->sub, &r) == REDIS_OK && r) {
        if (is_our_switch(s, r)) {
            s->stats.announced++;
            drop(s);
        }
        freeReplyObject(r);
        r = NULL;
    }
}

/* When recheck_ms has passed, asks one sentinel whether the primary is still
 * where we think, and forgets it if not. An unreachable sentinel changes
 * nothing: the next sentinel is asked next time. */
static void recheck(lb_sentinel *s) {
    if (!s->c || lb__mono_ms() - s->asked_ms < s->opts.recheck_ms) return;
    lb__addr p;
    int i = s->next;
    s->next = (s->next + 1) % s->n;
    if (ask_sentinel(s, &s->sentinels[i], &p) != 0) return;
    s->next = i;
    s->asked_ms = lb__mono_ms();
    if (!lb__addr_equal(&p, &s->primary)) drop(s);
}

/* The primary's connection, found again while `deadline` (monotonic ms)
 * allows; NULL if none. */
static redisContext *primary_until(lb_sentinel *s, int64_t deadline) {
    poll_switch(s);
    recheck(s);
    if (s->c && !s->c->err) return s->c;
    drop(s);
    for (;;) {
        if (resolve_once(s) == 0) return s->c;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return NULL;
        s->stats.retries++;
        lb__sleep_ms(s->opts.retry_backoff_ms < left ? s->opts.retry_backoff_ms : left);
    }
}

redisContext *lb_sentinel_primary(lb_sentinel *s) {
    return s ? primary_until(s, lb__deadline_ms(s->opts.retry_ms)) : NULL;
}

static char *copy_str(const lb_allocator *a, const char *str) {
    if (!str) return NULL;
    size_t n = strlen(str) + 1;
    char *d = lb__alloc(a, n);
    if (d) memcpy(d, str, n);
    return d;
}

int lb_sentinel_new(lb_sentinel **out, const char *const *sentinels, int n, const char *name,
                    const lb_sentinel_options *o) {
    lb_sentinel_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!o) {
        lb_sentinel_options_init(&defaults);
        o = &defaults;
    }
    if (!sentinels || n < 1 || n > SENTINELS_MAX || !name || !name[0] ||
        o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0 || o->retry_ms < 0 ||
        o->retry_backoff_ms < 0 || o->recheck_ms < 0 || (o->subscribe != 0 && o->subscribe != 1) ||
        (o->username && !o->password))
        return LB_EINVAL;
    lb_sentinel *s = lb__alloc(o->allocator, sizeof *s);
    if (!s) return LB_ENOMEM;
    memset(s, 0, sizeof *s);
    s->opts = *o;
    int rc = LB_EINVAL;
    for (int i = 0; i < n; i++)
        if (!sentinels[i] ||
            lb__addr_parse(sentinels[i], strlen(sentinels[i]), NULL, &s->sentinels[i]) != LB_OK)
            goto fail;
    s->n = n;
    rc = LB_ENOMEM;
    s->name = copy_str(o->allocator, name);
    s->username = copy_str(o->allocator, o->username);
    s->password = copy_str(o->allocator, o->password);
    if (!s->name || (o->username && !s->username) || (o->password && !s->password)) goto fail;
    rc = LB_EIO;
    if (!lb_sentinel_primary(s)) goto fail;
    *out = s;
    return LB_OK;
fail:
    lb_sentinel_free(s);
    return rc;
}

int lb__sentinel_copy(const lb_sentinel *src, int64_t timeout_ms, lb_sentinel **out) {
    *out = NULL;
    lb_sentinel_options o = src->opts;
    o.username = src->username;
    o.password = src->password;
    if (o.connect_timeout_ms > timeout_ms) o.connect_timeout_ms = timeout_ms;
    if (o.command_timeout_ms > timeout_ms) o.command_timeout_ms = timeout_ms;
    if (o.retry_ms > timeout_ms) o.retry_ms = timeout_ms;
    static const size_t cap = LB__HOST_CAP + 8;
    char *text = lb__alloc(o.allocator, (size_t)src->n * cap);
    if (!text) return LB_ENOMEM;
    const char *addrs[SENTINELS_MAX];
    for (int i = 0; i < src->n; i++) {
        snprintf(text + (size_t)i * cap, cap, "%s:%d", src->sentinels[i].host,
                 src->sentinels[i].port);
        addrs[i] = text + (size_t)i * cap;
    }
    int rc = lb_sentinel_new(out, addrs, src->n, src->name, &o);
    lb__free(o.allocator, text);
    return rc;
}

void lb_sentinel_free(lb_sentinel *s) {
    if (!s) return;
    const lb_allocator *a = s->opts.allocator;
    drop(s);
    if (s->sub) redisFree(s->sub);
    if (s->password) memset(s->password, 0, strlen(s->password));
    lb__free(a, s->name);
    lb__free(a, s->username);
    lb__free(a, s->password);
    lb__free(a, s);
}

static int is_readonly(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 && memcmp(r->str, "READONLY", 8) == 0;
}

/* Sends one command to the primary and returns the reply the machine should
 * see, or NULL for a transport failure. */
static redisReply *send_cmd(lb_sentinel *s, const lb_cmd *cmd) {
    int64_t deadline = lb__deadline_ms(s->opts.retry_ms);
    const char *argv[LB_CMD_MAX_ARGS];
    redisReply *readonly = NULL; /* the last READONLY answer, kept to say why */
    for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
    for (;;) {
        redisContext *c = primary_until(s, deadline);
        if (!c) return readonly; /* nothing was sent (again) */
        redisReply *r = redisCommandArgv(c, cmd->argc, argv, cmd->argvlen);
        s->last = r && !is_readonly(r) ? c : NULL;
        if (readonly) freeReplyObject(readonly);
        readonly = NULL;
        if (!r) {
            set_err(s, "%s:%d: %s", s->primary.host, s->primary.port, c->errstr);
            drop(s);
            return NULL; /* the command may have run: never sent again */
        }
        if (!is_readonly(r)) return r;
        /* A demoted primary refuses writes without running them: find the
         * new one and send the command there. */
        s->stats.readonly++;
        drop(s);
        readonly = r;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return readonly;
        s->stats.retries++;
        lb__sleep_ms(s->opts.retry_backoff_ms < left ? s->opts.retry_backoff_ms : left);
    }
}

redisReply *lb__sentinel_send(lb_sentinel *s, const lb_cmd *cmd) {
    s->errstr[0] = '\0';
    s->last = NULL;
    return send_cmd(s, cmd);
}

redisContext *lb__sentinel_conn(lb_sentinel *s, int answered) {
    return answered ? s->last : s->c;
}

int lb_sentinel_stats_get(const lb_sentinel *s, lb_sentinel_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!s || !out) return LB_EINVAL;
    *out = s->stats;
    return LB_OK;
}

int lb_sentinel_primary_addr(const lb_sentinel *s, char *buf, size_t cap) {
    if (buf && cap) buf[0] = '\0';
    if (!s || !buf) return LB_EINVAL;
    if (!s->known) return LB_ESTATE;
    int n = snprintf(buf, cap, "%s:%d", s->primary.host, s->primary.port);
    return n >= 0 && (size_t)n < cap ? n : LB_EINVAL;
}

const char *lb_sentinel_errstr(const lb_sentinel *s) { return s ? s->errstr : ""; }
