/* The lock options every lock command shares: mode, codec, variant, ttl, wait,
 * clock offset, release margin and fencing, checked before any connection is made. */
#include <string.h>

#include "tool/lock/lockopts.h"

const char *lb__cli_variant_name(lb_legacy_variant v) {
    return v == LB_LEGACY_SCRIPTED ? "scripted" : "wire";
}

static const char *value_of(const lb__cli_args *a, const lb__cli_optdef *opts,
                            const char *name) {
    int i = lb__cli_opt_index(opts, name);
    return i >= 0 ? a->opt[i] : NULL;
}

static const char *const mode_names[] = {"legacy", "compat", "modern"};

const char *lb__cli_mode_name(lb__cli_mode m) {
    return (unsigned)m < 3 ? mode_names[m] : "unknown";
}

int lb__cli_mode_parse(const char *s, lb__cli_mode *out) {
    for (int i = 0; i < 3; i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *out = (lb__cli_mode)i;
            return 0;
        }
    return -1;
}

static int read_mode(lb__cli_lockopts *out, const lb__cli_args *a, const char *mode) {
    char shown[64];
    if (!mode) mode = "legacy";
    lb__escape(shown, sizeof shown, mode, strlen(mode));
    if (lb__cli_mode_parse(mode, &out->mode) != 0) {
        lb__cli_usage(a, "unknown --mode \"%s\" (legacy, compat or modern)", shown);
        return -1;
    }
    return 0;
}

static int read_codec(lb__cli_lockopts *out, const lb__cli_args *a, const char *spec) {
    char shown[160];
    if (!spec) spec = "ms";
    if (lb_codec_parse(&out->legacy.codec, spec) != LB_OK ||
        lb_codec_format(&out->legacy.codec, out->codec_spec, sizeof out->codec_spec) !=
            LB_OK) {
        lb__escape(shown, sizeof shown, spec, strlen(spec));
        lb__cli_usage(a, "unknown --codec \"%s\" (ms, s, float, json or "
                      "json:field=NAME,unit=ns|us|ms|s,clock=epoch|mono)", shown);
        return -1;
    }
    return 0;
}

static int read_variant(lb__cli_lockopts *out, const lb__cli_args *a, const char *v) {
    char shown[64];
    if (!v || strcmp(v, "wire") == 0) out->legacy.variant = LB_LEGACY_WIRE;
    else if (strcmp(v, "scripted") == 0) out->legacy.variant = LB_LEGACY_SCRIPTED;
    else {
        lb__escape(shown, sizeof shown, v, strlen(v));
        lb__cli_usage(a, "unknown --variant \"%s\" (wire or scripted)", shown);
        return -1;
    }
    return 0;
}

/* Reads an optional duration in milliseconds; absent leaves *out unchanged. */
static int read_ms(const lb__cli_args *a, const char *name, const char *v, int64_t min,
                   int64_t *out) {
    return v ? lb__cli_int(a, name, v, min, LB__CLI_MS_MAX, out) : 0;
}

/* Options that mean something in some modes only are refused in the others
 * rather than ignored: a user who asks for fencing on a timestamp lock would
 * otherwise believe they have it. With --ns the mode follows the namespace, so
 * the timestamp options apply, and the token lock's extras do not (the
 * mode-following lock has none of them). */
static int check_mode_options(const lb__cli_lockopts *out, const lb__cli_args *a,
                              const lb__cli_optdef *opts) {
    static const struct {
        const char *name;
        unsigned modes; /* bit per lb__cli_mode; bit 3: allowed with --ns */
    } rules[] = {
        {"--codec", 1u | 2u | 8u},     {"--variant", 1u | 8u}, {"--release-margin-ms", 1u | 8u},
        {"--grace-ms", 2u | 8u},       {"--fencing", 4u},      {"--watchdog", 4u},
        {"--fair", 4u},                {"--fleet-max-ttl-ms", 1u | 8u},
    };
    int ns = value_of(a, opts, "--ns") != NULL;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (!value_of(a, opts, rules[i].name)) continue;
        if (ns ? !(rules[i].modes & 8u) : !(rules[i].modes & (1u << out->mode)))
            return lb__cli_usage(a, "%s does not apply to --mode %s%s", rules[i].name,
                                 lb__cli_mode_name(out->mode), ns ? " with --ns" : ""), -1;
    }
    /* The library refuses such a wire lock; saying so here names the options. */
    if ((out->mode == LB__CLI_MODE_LEGACY || ns) && out->legacy.variant == LB_LEGACY_WIRE &&
        out->legacy.ttl_ms <= out->legacy.release_margin_ms)
        return lb__cli_usage(a, "--ttl-ms %lld must be above --release-margin-ms %lld with "
                             "--variant wire (every release would be refused)",
                             (long long)out->legacy.ttl_ms,
                             (long long)out->legacy.release_margin_ms), -1;
    return 0;
}

/* The mode-following lock: compat always; any mode when --ns names the
 * namespace whose control key it follows (and whose census it joins). */
static int read_following(lb__cli_lockopts *out, const lb__cli_args *a,
                          const lb__cli_optdef *opts) {
    lb_mlock_options *m = &out->mlock;
    const char *ns = value_of(a, opts, "--ns"), *grace = value_of(a, opts, "--grace-ms");
    lb_ns_keys k;
    char shown[80];
    lb_mlock_options_init(m);
    out->following = ns || out->mode == LB__CLI_MODE_COMPAT;
    if (ns && lb_ns_keys_init(&k, ns, strlen(ns)) != LB_OK) {
        lb__escape(shown, sizeof shown, ns, strlen(ns));
        return lb__cli_usage(a, "bad --ns \"%s\": empty, too long, or a '}' without a hash "
                             "tag", shown), -1;
    }
    if (grace && lb__cli_int(a, "--grace-ms", grace, 0, LB__CLI_MS_MAX, &m->grace_ms) != 0)
        return -1;
    m->ns = ns;
    m->follow = ns != NULL;
    m->mode = (lb_mode)out->mode;
    m->codec = out->legacy.codec;
    m->ttl_ms = out->legacy.ttl_ms;
    m->legacy_variant = out->legacy.variant;
    m->release_margin_ms = out->legacy.release_margin_ms;
    m->fleet_max_ttl_ms = out->legacy.fleet_max_ttl_ms;
    m->clock = &out->clock;
    return 0;
}

int lb__cli_lockopts_read(lb__cli_lockopts *out, const lb__cli_args *a,
                          const lb__cli_optdef *opts, int64_t wait_ms) {
    memset(out, 0, sizeof *out);
    lb_legacy_options_init(&out->legacy);
    lb_lock_options_init(&out->modern);
    out->wait_ms = wait_ms;
    if (read_mode(out, a, value_of(a, opts, "--mode")) != 0 ||
        read_codec(out, a, value_of(a, opts, "--codec")) != 0 ||
        read_variant(out, a, value_of(a, opts, "--variant")) != 0 ||
        read_ms(a, "--ttl-ms", value_of(a, opts, "--ttl-ms"), 1, &out->legacy.ttl_ms) != 0 ||
        read_ms(a, "--wait-ms", value_of(a, opts, "--wait-ms"), 0, &out->wait_ms) != 0 ||
        read_ms(a, "--release-margin-ms", value_of(a, opts, "--release-margin-ms"), 0,
                &out->legacy.release_margin_ms) != 0 ||
        read_ms(a, "--fleet-max-ttl-ms", value_of(a, opts, "--fleet-max-ttl-ms"), 0,
                &out->legacy.fleet_max_ttl_ms) != 0)
        return -1;
    const char *offset = value_of(a, opts, "--clock-offset-ms");
    if (offset && lb__cli_int(a, "--clock-offset-ms", offset, -LB__CLI_MS_MAX,
                              LB__CLI_MS_MAX, &out->clock.offset_ms) != 0)
        return -1;
    out->legacy.clock = &out->clock;
    out->modern.clock = &out->clock;
    out->modern.ttl_ms = out->legacy.ttl_ms;
    out->modern.fencing = value_of(a, opts, "--fencing") != NULL;
    out->modern.fair = value_of(a, opts, "--fair") != NULL;
    out->watchdog = value_of(a, opts, "--watchdog") != NULL;
    out->mode_given = value_of(a, opts, "--mode") != NULL;
    if (check_mode_options(out, a, opts) != 0) return -1;
    return read_following(out, a, opts);
}
