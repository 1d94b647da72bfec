/* Blocking legacy acquire: attempts spaced by the core back-off until a
 * deadline. Real time is read in the core loop, never inside the step machine. */
#include "legacy/internal.h"

typedef struct poll_state {
    lb_legacy_lock *l;
    lb_target t;
    lb__backoff backoff;
    int foreign; /* the last attempt met a value left alone */
} poll_state;

/* A value left alone (LB_EFOREIGN) is waited out like a busy lock: its
 * writer may replace it with one we understand. */
static int attempt(void *ud) {
    poll_state *s = ud;
    int rc = lb_legacy_try_acquire(s->l, s->t);
    s->foreign = rc == LB_EFOREIGN;
    return s->foreign ? LB_EBUSY : rc;
}

/* Milliseconds until the holder's timestamp passes, or -1 when unknown. The
 * observed expiry is whatever a value said (up to INT64_MAX) and a clock
 * offset can push `now` anywhere: overflow means "far away". */
static int64_t holder_left_ms(lb_legacy_lock *l) {
    int64_t left;
    lb_now now = lb_clock_now(l->opts.clock);
    if (!l->has_observed_expiry ||
        lb__sub64(l->observed_expiry, lb_codec_now(&l->codec, &now), &left) != 0)
        return -1;
    int64_t ms = lb__codec_units_to_ms(&l->codec, left);
    return ms < 0 ? 0 : ms;
}

static int64_t sleep_ms(void *ud, int listening) {
    poll_state *s = ud;
    (void)listening;
    return lb__backoff_next(&s->backoff, holder_left_ms(s->l));
}

static int out_of_time(void *ud) { return ((poll_state *)ud)->foreign ? LB_EFOREIGN : LB_ETIMEDOUT; }

int lb_legacy_acquire(lb_legacy_lock *l, lb_target t, int64_t wait_ms) {
    if (!l || !t.handle || wait_ms < 0) return LB_EINVAL;
    poll_state s = {.l = l, .t = t};
    lb__backoff_init(&s.backoff, l->opts.backoff_min_ms, l->opts.backoff_max_ms, &l->rng);
    lb__wait run = {.deadline = lb__deadline_ms(wait_ms), .ud = &s, .attempt = attempt,
                    .sleep_ms = sleep_ms, .out_of_time = out_of_time,
                    .handed = lb__no_hand_off};
    return lb__wait_run(&run);
}
