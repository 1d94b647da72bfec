/* A client outside the fair queue and the baton tells them it is there, so
 * that fair releases leave it a turn (modern_note_outsider.lua): a wait with
 * fair mode off refused for a while, a fair try refused, or a fair wait that
 * found the key held by a value that is no lockbridge token (`saw`). */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"

#define LOCK_OF(m) ((lb_lock *)(void *)(m))

enum { N_START, N_SCRIPT };

/* The note changes nothing a wait depends on: its reply is only checked for
 * shape, and an error reply (an ACL without EVALSHA, a hash in another's
 * hands) is the wait's to ignore. */
static int note_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    if (l->state == N_START) {
        lb__cmd_script(m, &lb__script_modern_note_outsider, "3");
        for (int i = 0; i < 3; i++) lb__cmd_arg(&m->cmd, l->note_keys[i], l->note_keylens[i]);
        snprintf(l->ms_arg, sizeof l->ms_arg, "%d", LB__OUTSIDER_SEEN_MS);
        lb__cmd_argz(&m->cmd, l->ms_arg);
        lb__cmd_argz(&m->cmd, l->note_saw ? "1" : "0");
        l->state = N_SCRIPT;
        return LB_STEP_SEND;
    }
    if (!r) return lb__fail(m, LB_EIO, "connection failed during the outsider note");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(m, r, "outsider note script");
    if (r->type != REDIS_REPLY_INTEGER) return lb__fail(m, LB_EPROTO, "outsider note: unexpected reply");
    l->note_found_queue = r->integer == 1;
    l->noted_ns = now->mono_ns;
    return LB_OK;
}

int lb__lock_note_outsider(lb_lock *l, lb_target t, int saw) {
    static const char *const suffix[3] = {"fair", "outsider", "bwait"};
    if (lb__machine_in_flight(&l->m)) return LB_ESTATE;
    for (int i = 0; i < 3; i++) {
        if (l->note_keys[i]) continue;
        int rc = lb__lock_companion(l, suffix[i], &l->note_keys[i], &l->note_keylens[i]);
        if (rc != LB_OK) return rc;
    }
    lb__machine_begin(&l->m, note_step);
    l->state = N_START;
    l->note_saw = saw;
    l->note_found_queue = 0;
    return lb_target_run(t, &l->m, l->opts.clock);
}

/* At most once per LB__OUTSIDER_NOTE_MS per handle; the caller's error text
 * stays as it was, and so does its result. */
void lb__lock_note_due(lb_lock *l, lb_target t, int saw) {
    int64_t now = lb_clock_now(l->opts.clock).mono_ns;
    if (l->next_note_ns && now < l->next_note_ns) return;
    l->next_note_ns = now + (int64_t)LB__OUTSIDER_NOTE_MS * 1000000;
    char why[sizeof l->errstr];
    memcpy(why, l->errstr, sizeof why);
    (void)lb__lock_note_outsider(l, t, saw);
    memcpy(l->errstr, why, sizeof why);
}

int lb__value_foreign(const char *v, size_t len) {
    if (len != LB_TOKEN_LEN) return 1;
    for (size_t i = 0; i < len; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f') ||
              (v[i] >= 'A' && v[i] <= 'F')))
            return 1;
    return 0;
}
