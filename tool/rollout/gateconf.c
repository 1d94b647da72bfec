/* The values a namespace's gate judges by: its stored configuration (the gate
 * record), else the defaults; a value given to a command may only tighten
 * them. Shared by status, mode set, mode config and sweep. */
#include <stdio.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/rollout/gate.h"

/* Each value, its option, its field in the record, what it is, its default
 * and bounds (ms). A larger value is always the stricter one: a longer
 * validity, refresh, window, census life or watch. */
static const struct {
    const char *opt, *name, *field, *what;
    int64_t def, min, max;
} vals[LB__CLI_VALS] = {
    {"--ttl-ms", "ttl-ms", "ttl_ms", "validity", INT64_C(30000), 0, LB__CLI_MS_MAX},
    {"--refresh-ms", "refresh-ms", "refresh_ms", "refresh", INT64_C(1000), 0, LB__CLI_MS_MAX},
    {"--window-ms", "window-ms", "window_ms", "window", INT64_C(3600000), 0, LB__CLI_MS_MAX},
    {"--stale-ms", "stale-ms", "stale_ms", "stale", INT64_C(30000), 1, LB__CLI_MS_MAX},
    {"--observe-ms", "observe-ms", "observe_ms", "observe", INT64_C(5000), 0, INT64_C(3600000)},
};

const char *lb__cli_val_name(int i) { return i >= 0 && i < LB__CLI_VALS ? vals[i].name : NULL; }
const char *lb__cli_val_field(int i) { return i >= 0 && i < LB__CLI_VALS ? vals[i].field : NULL; }

int64_t lb__cli_gate_value(const lb__cli_gate *g, int i) {
    return g->val[i] >= 0 ? g->val[i] : vals[i].def;
}

int lb__cli_gateconf_given(const lb__cli_args *a, const lb__cli_optdef *opts,
                           lb__cli_gateconf *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < LB__CLI_VALS; i++) {
        const char *v = lb__cli_opt(a, opts, vals[i].opt);
        if (!v) continue;
        c->given[i] = 1;
        if (lb__cli_int(a, vals[i].opt, v, vals[i].min, vals[i].max, &c->cmdline[i]) != 0)
            return -1;
    }
    return 0;
}

int lb__cli_gateconf_resolve(const lb__cli_args *a, const char *ns, const lb__cli_gate *g,
                             lb__cli_gateconf *c) {
    for (int i = 0; i < LB__CLI_VALS; i++) {
        int64_t base = lb__cli_gate_value(g, i);
        c->stored[i] = g->val[i] >= 0;
        c->v[i] = base;
        if (!c->given[i]) continue;
        if (c->cmdline[i] < base)
            return lb__cli_usage(a, "%s %lld is looser than namespace %s's %s %lld ms (%s): a "
                                 "command may only tighten it; `lockbridge mode config --ns %s "
                                 "%s %lld --override %s` loosens it for every command",
                                 vals[i].opt, (long long)c->cmdline[i], ns, vals[i].what,
                                 (long long)base, c->stored[i] ? "stored" : "default", ns,
                                 vals[i].opt, (long long)c->cmdline[i], vals[i].name), -1;
        c->v[i] = c->cmdline[i];
    }
    return 0;
}

/* A pattern or codec list given must be the stored one: another pattern
 * would judge other keys, other codecs other values. */
int lb__cli_gateconf_scan(const lb__cli_args *a, const lb__cli_optdef *opts, const char *ns,
                          const lb__cli_gate *g, lb__cli_codecs *cs, lb__cli_scanopts *so) {
    char joined[512];
    int given_match = lb__cli_opt(a, opts, "--match") != NULL;
    int given_codecs = lb__cli_opt(a, opts, "--codec") != NULL;
    if (g->have_match) {
        if (given_match && strcmp(so->match, g->match) != 0)
            return lb__cli_usage(a, "namespace %s scans --match '%s' (stored): a command may "
                                 "not judge it by other keys; `lockbridge mode config --ns %s "
                                 "--match ... --override match` changes it", ns, g->match, ns),
                   -1;
        so->match = g->match;
    }
    if (g->have_codecs) {
        if (given_codecs && (lb__cli_codecs_join(cs, joined, sizeof joined) != 0 ||
                             strcmp(joined, g->codecs) != 0))
            return lb__cli_usage(a, "namespace %s reads --codec '%s' (stored); `lockbridge "
                                 "mode config --ns %s --codec ... --override codec` changes it",
                                 ns, g->codecs, ns), -1;
        if (lb__cli_codecs_parse_list(cs, g->codecs) != 0)
            return lb__cli_usage(a, "the stored codecs of %s do not parse: '%s'", ns, g->codecs),
                   -1;
    }
    return 0;
}

void lb__cli_gateconf_say(const lb__cli_gateconf *c, const char *match,
                          const lb__cli_codecs *cs, int upto, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "judged by");
    for (int i = 0; i < upto && i < LB__CLI_VALS && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s %s %lld ms (%s)", i ? "," : "",
                              vals[i].what, (long long)c->v[i],
                              c->given[i] ? "given" : c->stored[i] ? "stored" : "default");
    char joined[512] = "?";
    if (o < cap) lb__cli_codecs_join(cs, joined, sizeof joined);
    if (o < cap) snprintf(buf + o, cap - o, ", --match '%s', --codec '%s'", match, joined);
}
