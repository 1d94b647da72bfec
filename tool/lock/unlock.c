/* `lockbridge unlock KEY --expect VALUE`: an operator frees a stuck lock on
 * purpose, by compare-and-delete in one script: only the exact value named. */
#include <stdio.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"

/* Deletes KEYS[1] only if it is a string holding exactly ARGV[1]; otherwise
 * says what is there: {1} deleted; {0, type, value or false, pttl}. */
static const char unlock_script[] =
    "local t = redis.call('TYPE', KEYS[1])['ok']\n"
    "if t == 'string' then\n"
    "  local v = redis.call('GET', KEYS[1])\n"
    "  if v == ARGV[1] then redis.call('DEL', KEYS[1]) return {1} end\n"
    "  return {0, t, string.sub(v, 1, 4097), redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "return {0, t, false, redis.call('PTTL', KEYS[1])}\n";

static const lb__cli_optdef opts[] = {{"--expect", 1}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge unlock KEY --expect VALUE [--json]\n"
    "\n"
    "Deletes KEY only if it still holds exactly VALUE, compared and deleted in one\n"
    "script: a lock taken over, renewed or released since VALUE was read is left\n"
    "alone, and what KEY holds instead is printed. For a crashed holder whose\n"
    "validity is far away (sweep waits for its timestamp): read the value with\n"
    "`lockbridge inspect KEY`, make sure its holder is gone, then unlock it.\n"
    "Without --expect nothing is sent: there is no way to delete whatever a key\n"
    "holds. VALUE is taken byte for byte; \\xHH stands for one byte, \\\\ for a\n"
    "backslash (as inspect prints them).\n"
    "\n"
    "  --expect VALUE  the exact value the key must hold (required)\n"
    "  --json          one \"unlock\" JSON line\n"
    "\n"
    "Exit: 0 deleted; 1 usage; 3 the key holds something else, or is absent\n"
    "(left alone); 4 connection or Redis error.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

/* \xHH and \\ as inspect prints them; 0, or -1 for a malformed escape. */
static int unescape(const char *in, char *out, size_t cap, size_t *len) {
    size_t o = 0;
    for (const char *p = in; *p; p++) {
        if (o + 1 >= cap) return -1;
        if (*p != '\\') {
            out[o++] = *p;
            continue;
        }
        if (p[1] == '\\') {
            out[o++] = '\\';
            p++;
            continue;
        }
        unsigned v;
        if (p[1] != 'x' || sscanf(p + 2, "%2x", &v) != 1 || !p[2] || !p[3]) return -1;
        out[o++] = (char)v;
        p += 3;
    }
    *len = o;
    return 0;
}

static int report(const lb__cli_args *a, const char *key, const char *value, size_t vlen,
                  const redisReply *r) {
    int deleted = r->element[0]->integer == 1;
    cJSON *o = lb__cli_event("unlock");
    if (o) {
        lb__cli_add_bytes(o, "key", key, strlen(key));
        lb__cli_add_bool(o, "deleted", deleted);
        lb__cli_add_bytes(o, deleted ? "removed" : "expected", value, vlen);
    }
    if (!deleted && r->elements == 4) {
        const redisReply *t = r->element[1], *v = r->element[2], *p = r->element[3];
        if (o && t->type == REDIS_REPLY_STRING) lb__cli_add_str(o, "type", t->str);
        if (o && v->type == REDIS_REPLY_STRING) lb__cli_add_bytes(o, "found", v->str, (size_t)v->len);
        if (o && p->type == REDIS_REPLY_INTEGER) lb__cli_add_i64(o, "pttl_ms", p->integer);
    }
    int absent = !deleted && r->elements == 4 && r->element[1]->type == REDIS_REPLY_STRING &&
                 strcmp(r->element[1]->str, "none") == 0;
    if (o) lb__cli_add_str(o, "outcome", deleted ? "deleted"
                                         : absent ? "left alone: the key is absent"
                                                  : "left alone: it holds something else");
    lb__cli_emit(o);
    if (!deleted) fprintf(stderr, "%s: %s does not hold the expected value; nothing deleted\n",
                          a->prog, key);
    return deleted ? LB__CLI_EXIT_OK : LB__CLI_EXIT_FOREIGN;
}

static int unlock_key(const lb__cli_args *a, redisContext *c, const char *key,
                      const char *value, size_t vlen) {
    const char *argv[] = {"EVAL", unlock_script, "1", key, value};
    size_t lens[] = {4, strlen(unlock_script), 1, strlen(key), vlen};
    redisReply *r = redisCommandArgv(c, 5, argv, lens);
    if (!r) return lb__cli_error(a, key, LB_EIO, c->errstr);
    int code;
    if (r->type == REDIS_REPLY_ERROR) code = lb__cli_error(a, key, LB_EREDIS, r->str);
    else if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
             r->element[0]->type != REDIS_REPLY_INTEGER)
        code = lb__cli_error(a, key, LB_EPROTO, "unexpected reply to the unlock script");
    else code = report(a, key, value, vlen, r);
    freeReplyObject(r);
    return code;
}

static int run(const lb__cli_args *a) {
    char value[LB__CLI_VALUE_PREFIX + 1], err[512];
    size_t vlen;
    if (a->npos != 1) return lb__cli_usage(a, "expects exactly one KEY");
    const char *key = a->pos[0], *expect = lb__cli_opt(a, opts, "--expect");
    if (key[0] == '\0') return lb__cli_usage(a, "KEY must not be empty");
    if (!expect)
        return lb__cli_usage(a, "--expect VALUE is required: unlock deletes only the value "
                                "named (read it with `lockbridge inspect KEY`)");
    if (unescape(expect, value, sizeof value, &vlen) != 0)
        return lb__cli_usage(a, "--expect: a malformed \\x escape, or longer than %d bytes",
                             LB__CLI_VALUE_PREFIX);
    redisContext *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) return lb__cli_error(a, key, LB_EIO, err);
    lb__cli_topo t;
    int code;
    if (lb__cli_topo_read(&t, c, &a->conn, err, sizeof err) != 0) {
        code = lb__cli_error(a, key, LB_EREDIS, err);
    } else {
        redisContext *kc = lb__cli_connect_key(&t, c, key, strlen(key), err, sizeof err);
        code = kc ? unlock_key(a, kc, key, value, vlen) : lb__cli_error(a, key, LB_EIO, err);
        lb__cli_ns_done(kc, c);
        lb__cli_topo_clear(&t);
    }
    redisFree(c);
    return code;
}

const lb__cli_command lb__cli_cmd_unlock = {
    "unlock", "delete a stuck lock only if it holds exactly the value named", help, opts, 1,
    run, 0};
