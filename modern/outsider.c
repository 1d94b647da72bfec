/* A token lock waiting outside a fair queue (fair mode off) tells the queue it
 * is there, so that fair releases leave it a turn (modern_note_outsider.lua). */
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
        lb__cmd_script(m, &lb__script_modern_note_outsider, "1");
        lb__cmd_arg(&m->cmd, l->note_key, l->note_keylen);
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

int lb__lock_note_outsider(lb_lock *l, lb_target t) {
    if (l->fair || lb__machine_in_flight(&l->m)) return LB_ESTATE;
    if (!l->note_key) {
        int rc = lb__lock_companion(l, "fair", &l->note_key, &l->note_keylen);
        if (rc != LB_OK) return rc;
    }
    lb__machine_begin(&l->m, note_step);
    l->state = N_START;
    l->note_found_queue = 0;
    return lb_target_run(t, &l->m, l->opts.clock);
}
