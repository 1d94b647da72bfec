/* Command-line parsing for every command: global connection options anywhere,
 * the command's own options, positionals, strict numbers and usage errors. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tool/common/cli.h"

enum {
    G_HOST, G_PORT, G_SOCKET, G_PASSWORD, G_USER, G_DB, G_HELP, G_VERSION, G_JSON, G_SENTINEL,
    G_MASTER, G_COUNT
};

static const lb__cli_optdef globals[G_COUNT + 1] = {
    {"-h", 1}, {"-p", 1}, {"-s", 1}, {"-a", 1}, {"--user", 1}, {"-n", 1},
    {"--help", 0}, {"--version", 0}, {"--json", 0}, {"--sentinel", 1}, {"--master", 1},
    {NULL, 0}};

void lb__cli_args_init(lb__cli_args *a, const char *prog) {
    memset(a, 0, sizeof *a);
    a->prog = prog;
    a->conn.host = "127.0.0.1";
    a->conn.port = 6379;
    a->conn.db = -1;
}

int lb__cli_usage(const lb__cli_args *a, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see '%s --help')\n", a->prog, msg, a->prog);
    return LB__CLI_EXIT_USAGE;
}

/* Digits only after an optional '-': no spaces, no '+', no base prefixes, and
 * overflow is detected while accumulating rather than after. */
int lb__cli_parse_i64(const char *s, size_t len, int64_t *out) {
    size_t i = len > 0 && s[0] == '-';
    int neg = (int)i;
    int64_t v = 0;
    *out = 0;
    if (i == len) return -1;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        int d = s[i] - '0';
        /* Accumulating negatively reaches INT64_MIN, which has no positive twin. */
        if (v < (INT64_MIN + d) / 10) return -1;
        v = v * 10 - d;
    }
    if (!neg && v == INT64_MIN) return -1;
    *out = neg ? v : -v;
    return 0;
}

int lb__cli_int(const lb__cli_args *a, const char *what, const char *s, int64_t min,
                int64_t max, int64_t *out) {
    char shown[64];
    int64_t v;
    *out = 0;
    lb__escape(shown, sizeof shown, s, strlen(s));
    if (lb__cli_parse_i64(s, strlen(s), &v) != 0 || v < min || v > max) {
        lb__cli_usage(a, "%s expects a whole number from %lld to %lld, got \"%s\"", what,
                      (long long)min, (long long)max, shown);
        return -1;
    }
    *out = v;
    return 0;
}

int lb__cli_conn_given(const lb__cli_args *a) {
    return (a->seen_globals & ((1u << G_HOST) | (1u << G_PORT) | (1u << G_SOCKET))) != 0 ||
           a->nsentinels > 0;
}

int lb__cli_opt_index(const lb__cli_optdef *opts, const char *name) {
    for (int i = 0; opts && opts[i].name; i++)
        if (strcmp(opts[i].name, name) == 0) return i;
    return -1;
}

const char *lb__cli_opt(const lb__cli_args *a, const lb__cli_optdef *opts, const char *name) {
    int i = lb__cli_opt_index(opts, name);
    return i >= 0 && i < LB__CLI_MAX_OPTS ? a->opt[i] : NULL;
}

int lb__cli_opt_all(const lb__cli_args *a, const lb__cli_optdef *opts, const char *name,
                    const char **out, int cap) {
    int i = lb__cli_opt_index(opts, name), n = 0;
    if (i < 0 || i >= LB__CLI_MAX_OPTS || !a->opt[i] || cap < 1) return 0;
    out[n++] = a->opt[i];
    for (int r = 0; r < a->nrep && n < cap; r++)
        if (a->rep[r].index == i) out[n++] = a->rep[r].value;
    return n;
}

static int find(const lb__cli_optdef *opts, const char *name, size_t len) {
    for (int i = 0; opts && opts[i].name; i++)
        if (strlen(opts[i].name) == len && memcmp(opts[i].name, name, len) == 0) return i;
    return -1;
}

static int set_global(lb__cli_args *a, int g, const char *v) {
    int64_t n;
    switch (g) {
    case G_HOST: a->conn.host = v, a->addr_given = 1; return 0;
    case G_SOCKET: a->conn.socket = v; return 0;
    case G_PASSWORD: a->conn.password = v; return 0;
    case G_USER: a->conn.user = v; return 0;
    case G_PORT:
        if (lb__cli_int(a, "-p (port)", v, 1, 65535, &n) != 0) return -1;
        a->conn.port = (int)n;
        a->addr_given = 1;
        return 0;
    case G_DB:
        if (lb__cli_int(a, "-n (database)", v, 0, INT_MAX, &n) != 0) return -1;
        a->conn.db = (int)n;
        return 0;
    case G_HELP: a->help = 1; return 0;
    case G_VERSION: a->version = 1; return 0;
    case G_JSON: a->json = 1; return 0;
    case G_SENTINEL:
        if (a->nsentinels >= LB__CLI_MAX_SENTINELS)
            return lb__cli_usage(a, "--sentinel given more than %d times",
                                 LB__CLI_MAX_SENTINELS), -1;
        a->sentinel[a->nsentinels++] = v;
        return 0;
    case G_MASTER: a->master = v; return 0;
    default: return -1;
    }
}

/* One option at argv[*i]: finds it among the globals or the command's options,
 * takes its value ("--name=value" or the next argument) and stores it. */
static int take_option(lb__cli_args *a, int argc, char **argv, int *i,
                       const lb__cli_optdef *opts) {
    const char *s = argv[*i], *eq = s[1] == '-' ? strchr(s, '=') : NULL;
    size_t len = eq ? (size_t)(eq - s) : strlen(s);
    char shown[64];
    lb__escape(shown, sizeof shown, s, len);
    int g = find(globals, s, len), c = g >= 0 ? -1 : find(opts, s, len);
    if (g < 0 && c < 0) return lb__cli_usage(a, "unknown option \"%s\"", shown), -1;
    int has_value = g >= 0 ? globals[g].has_value : opts[c].has_value;
    const char *v = "";
    if (has_value && eq) v = eq + 1;
    else if (has_value && *i + 1 < argc) v = argv[++*i];
    else if (has_value) return lb__cli_usage(a, "%s needs a value", shown), -1;
    else if (eq) return lb__cli_usage(a, "%s takes no value", shown), -1;
    if (g >= 0) {
        if ((a->seen_globals & (1u << g)) && g != G_SENTINEL)
            return lb__cli_usage(a, "%s given twice", shown), -1;
        a->seen_globals |= 1u << g;
        return set_global(a, g, v);
    }
    if (c >= LB__CLI_MAX_OPTS) return lb__cli_usage(a, "too many options defined"), -1;
    if (a->opt[c] && opts[c].has_value != LB__CLI_REPEAT) return lb__cli_usage(a, "%s given twice", shown), -1;
    if (!a->opt[c]) {
        a->opt[c] = v;
        return 0;
    }
    if (a->nrep >= LB__CLI_MAX_REPEATS)
        return lb__cli_usage(a, "%s given more than %d times", shown, LB__CLI_MAX_REPEATS), -1;
    a->rep[a->nrep].index = c;
    a->rep[a->nrep++].value = v;
    return 0;
}

int lb__cli_parse(lb__cli_args *a, int argc, char **argv, const lb__cli_optdef *opts,
                  int max_pos, int stop_at_pos, int *used) {
    int i = 0, only_pos = 0;
    if (used) *used = 0;
    if (max_pos > LB__CLI_MAX_POS) max_pos = LB__CLI_MAX_POS;
    for (; i < argc; i++) {
        const char *s = argv[i];
        if (!only_pos && strcmp(s, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (only_pos || s[0] != '-' || s[1] == '\0') {
            if (stop_at_pos) break;
            if (a->npos >= max_pos) {
                char shown[64];
                lb__escape(shown, sizeof shown, s, strlen(s));
                return lb__cli_usage(a, "unexpected argument \"%s\"", shown), -1;
            }
            a->pos[a->npos++] = s;
            continue;
        }
        if (take_option(a, argc, argv, &i, opts) != 0) return -1;
    }
    if (used) *used = i;
    return 0;
}
