/* `lockbridge inspect KEY`: what one key holds, read in one script call and
 * judged by the library's format classifier. Read-only. */
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"

#define MAX_BYTES_DEFAULT 256 /* bytes of the value shown */

static const lb__cli_optdef opts[] = {
    {"--codec", LB__CLI_REPEAT}, {"--ttl-ms", 1}, {"--max-bytes", 1}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge inspect KEY [--codec SPEC]... [--ttl-ms N] [--max-bytes N] [--json]\n"
    "\n"
    "Reads KEY's type, value, length and PTTL in one script call (nothing is\n"
    "written) and says what it is: a legacy timestamp (no TTL) and in which codec,\n"
    "a compat timestamp (with a TTL), a token (lockbridge, M1's {\"uid\":...} or\n"
    "another), an INCR locker's counter, a string in no known format, a key of\n"
    "another type, or an ambiguous value: one that the codecs read only as an\n"
    "instant before 2000 or more than 10 years ahead (the codec that reads it\n"
    "plausibly is named), or that two codecs read as different instants.\n"
    "\n"
    "  --codec SPEC   a codec the fleet writes; repeat for several (default ms).\n"
    "                 Every codec reads the value; name the fleet's codecs.\n"
    "  --ttl-ms N     the fleet's lock validity, ms: gives the holder's age\n"
    "  --max-bytes N  bytes of the value shown, 0..4097 (default 256)\n"
    "  --json         one \"inspect\" JSON line instead of a table\n"
    "\n"
    "Exit: 0 the key was read (absent included: format \"absent\"); 1 usage;\n"
    "4 connection or Redis error.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

typedef struct seen {
    const lb__cli_codecs *cs;
    int64_t ttl_ms, max_bytes;
    lb_now now;
} seen;

static void add_value(cJSON *o, const lb__cli_key *k, int64_t max_bytes) {
    if (!k->value) return;
    size_t shown = k->valuelen < (size_t)max_bytes ? k->valuelen : (size_t)max_bytes;
    lb__cli_add_bytes(o, "value", k->value, shown);
    lb__cli_add_i64(o, "length", k->len);
    lb__cli_add_bool(o, "truncated", (int64_t)shown < k->len);
}

static int report(const lb__cli_key *k, void *ud) {
    seen *s = ud;
    lb_class cl;
    cJSON *o = lb__cli_event("inspect");
    if (!o) return lb__cli_emit(o), -1;
    s->now = lb_clock_now(NULL); /* as the reply arrived */
    if (lb__cli_classify(s->cs, k, &s->now, &cl) != LB_OK) memset(&cl, 0, sizeof cl);
    lb__cli_add_bytes(o, "key", k->key, k->keylen);
    lb__cli_add_str(o, "type", k->type);
    add_value(o, k, s->max_bytes);
    lb__cli_add_class(o, s->cs, &cl, s->ttl_ms);
    int64_t at;
    if ((cl.format == LB_FORMAT_LEGACY || cl.format == LB_FORMAT_COMPAT) &&
        lb__cli_expiry_epoch_ms(&s->cs->codec[cl.codec], cl.expiry, &at) == 0)
        lb__cli_add_i64(o, "expiry_epoch_ms", at);
    if (lb__cli_is_companion(k)) lb__cli_add_bool(o, "companion_key", 1);
    return lb__cli_emit(o) == 0 ? 0 : -1;
}

static int run(const lb__cli_args *a) {
    lb__cli_codecs cs;
    seen s;
    const char *v;
    memset(&s, 0, sizeof s);
    s.max_bytes = MAX_BYTES_DEFAULT;
    if (a->npos != 1) return lb__cli_usage(a, "expects exactly one KEY");
    if (a->pos[0][0] == '\0') return lb__cli_usage(a, "KEY must not be empty");
    if (lb__cli_codecs_read(&cs, a, opts) != 0) return LB__CLI_EXIT_USAGE;
    if (((v = lb__cli_opt(a, opts, "--ttl-ms")) &&
         lb__cli_int(a, "--ttl-ms", v, 1, LB__CLI_MS_MAX, &s.ttl_ms) != 0) ||
        ((v = lb__cli_opt(a, opts, "--max-bytes")) &&
         lb__cli_int(a, "--max-bytes", v, 0, LB__CLI_VALUE_PREFIX, &s.max_bytes) != 0))
        return LB__CLI_EXIT_USAGE;
    s.cs = &cs;
    char err[512];
    redisContext *c0 = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c0) return lb__cli_error(a, a->pos[0], LB_EIO, err);
    /* On a Cluster node the key is read on its slot's primary. */
    lb__cli_topo t;
    redisContext *c = NULL;
    if (lb__cli_topo_read(&t, c0, &a->conn, err, sizeof err) == 0) {
        c = lb__cli_connect_key(&t, c0, a->pos[0], strlen(a->pos[0]), err, sizeof err);
        lb__cli_topo_clear(&t);
    }
    if (!c) {
        redisFree(c0);
        return lb__cli_error(a, a->pos[0], LB_EIO, err);
    }
    lb__cli_reader *r = NULL;
    int code = LB__CLI_EXIT_OK;
    if (lb__cli_reader_new(&r, c, err, sizeof err) != 0) {
        code = lb__cli_error(a, a->pos[0], LB_EREDIS, err);
    } else {
        const char *keys[1] = {a->pos[0]};
        size_t lens[1] = {strlen(a->pos[0])};
        if (lb__cli_read_keys(r, keys, lens, 1, report, &s, err, sizeof err) != 0)
            code = lb__cli_error(a, a->pos[0], LB_EREDIS, err);
    }
    lb__cli_reader_free(r);
    lb__cli_ns_done(c, c0);
    redisFree(c0);
    return code;
}

const lb__cli_command lb__cli_cmd_inspect = {
    "inspect", "what one key holds: type, value, TTL, format (read-only)", help, opts, 1,
    run, 0};
