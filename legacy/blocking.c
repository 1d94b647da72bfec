/* Blocking legacy acquire: attempts spaced by the core back-off until a
 * deadline, never sleeping past the holder's timestamp. Real time is read in
 * the core loop, never inside the step machine. */
#include "legacy/internal.h"

static int try_once(void *lock, lb_target t) { return lb_legacy_try_acquire(lock, t); }

/* Milliseconds until the holder's timestamp passes, or -1 when unknown. The
 * observed expiry is whatever a value said (up to INT64_MAX) and a clock
 * offset can push `now` anywhere: overflow means "far away". */
static int64_t holder_left_ms(void *lock) {
    lb_legacy_lock *l = lock;
    int64_t left;
    lb_now now = lb_clock_now(l->opts.clock);
    if (!l->has_observed_expiry ||
        lb__sub64(l->observed_expiry, lb_codec_now(&l->codec, &now), &left) != 0)
        return -1;
    int64_t ms = lb__codec_units_to_ms(&l->codec, left);
    return ms < 0 ? 0 : ms;
}

int lb_legacy_acquire(lb_legacy_lock *l, lb_target t, int64_t wait_ms) {
    if (!l) return LB_EINVAL;
    l->errstr[0] = '\0';
    if (!t.handle) return lb__refuse(l->errstr, LB_EINVAL, LB__NO_TARGET);
    if (wait_ms < 0) return lb__refuse(l->errstr, LB_EINVAL, LB__NEGATIVE_WAIT);
    lb__poll p = {.lock = l, .t = t, .try_once = try_once, .holder_left_ms = holder_left_ms,
                  .clock = l->opts.clock, .foreign_fails = l->opts.foreign_fails_at_once};
    lb__backoff_init(&p.backoff, l->opts.backoff_min_ms, l->opts.backoff_max_ms, &l->rng);
    return lb__poll_run(&p, NULL, NULL, 0, wait_ms);
}
