/* The plausibility window: which decoded instants are timestamps of their codec,
 * and which other codec of the same form reads an implausible one plausibly. */
#include <string.h>

#include "core/internal.h"
#include "legacy/internal.h"

/* The instant's bounds in codec units at `now`: [*lo, *hi]. */
static void window_of(const lb_codec *c, const lb_now *now, int64_t *lo, int64_t *hi) {
    int64_t ahead, min;
    /* Both conversions fit in 64 bits for every unit (ns included): checked
     * by the unit tests, saturated here all the same. */
    if (lb_codec_ms_to_units(c, LB_PLAUSIBLE_AHEAD_MS, &ahead) != LB_OK) ahead = INT64_MAX;
    if (lb__add64(lb_codec_now(c, now), ahead, hi)) *hi = INT64_MAX;
    *lo = 0;
    if (lb__codec_clock(c) == LB_CLOCK_EPOCH &&
        lb_codec_ms_to_units(c, LB_PLAUSIBLE_EPOCH_MIN_MS, &min) == LB_OK)
        *lo = min;
}

int lb_codec_plausible(const lb_codec *c, int64_t t, const lb_now *now) {
    int64_t lo, hi;
    if (!c || !now) return 0;
    window_of(c, now, &lo, &hi);
    return t >= lo && t <= hi;
}

/* The codecs of `c`'s form that might read its values: the decimal forms for
 * a decimal codec; for JSON, the same field on each clock, epoch first (its
 * window is narrow, so a plausible epoch reading says more than a plausible
 * monotonic one), `c`'s own unit first on each. Returns how many were
 * written to `out` (10 at most). */
static int candidates(const lb_codec *c, lb_codec out[10]) {
    const lb_unit units[] = {c->unit, LB_UNIT_MS, LB_UNIT_S, LB_UNIT_US, LB_UNIT_NS};
    int n = 0;
    memset(out, 0, 10 * sizeof out[0]);
    if (c->kind != LB_CODEC_JSON) {
        out[n++].kind = LB_CODEC_MS;
        out[n++].kind = LB_CODEC_SECONDS;
        out[n++].kind = LB_CODEC_FLOAT_SECONDS;
        return n;
    }
    for (int clock = LB_CLOCK_EPOCH; clock <= LB_CLOCK_MONOTONIC; clock++)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            out[n] = *c;
            out[n].unit = units[u];
            out[n++].clock = (lb_clock_kind)clock;
        }
    return n;
}

int lb_codec_suggest(const lb_codec *c, const char *s, size_t len, const lb_now *now,
                     lb_codec *out) {
    lb_codec cand[10];
    if (out) memset(out, 0, sizeof *out);
    if (!c || !now || !out || (!s && len)) return LB_EINVAL;
    int n = candidates(c, cand);
    for (int i = 0; i < n; i++) {
        int64_t t;
        if (lb_codec_decode(&cand[i], s, len, &t) == LB_OK && lb_codec_plausible(&cand[i], t, now)) {
            *out = cand[i];
            return LB_OK;
        }
    }
    return LB_EFOREIGN;
}
