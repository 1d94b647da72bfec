/* A wait through a waiter tells releases it listens: the listeners' mark
 * "{key}:listen", written by modern_listen.lua, without which a release
 * publishes nothing. */
#include <stdio.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"

#define LOCK_OF(m) ((lb_lock *)(void *)(m))

enum { L_START, L_SCRIPT };

/* The mark changes nothing a wait depends on: its reply is only checked for
 * shape, and an error (an ACL without EVALSHA) is the wait's to ignore. */
static int listen_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    (void)now;
    lb_lock *l = LOCK_OF(m);
    if (l->state == L_START) {
        lb__cmd_script(m, &lb__script_modern_listen, "1");
        lb__cmd_arg(&m->cmd, l->listen_key, l->listen_keylen);
        lb__cmd_argz(&m->cmd, l->ms_arg);
        l->state = L_SCRIPT;
        return LB_STEP_SEND;
    }
    if (!r) return lb__fail(m, LB_EIO, "connection failed while marking the key listened to");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(m, r, "listen mark script");
    if (r->type != REDIS_REPLY_INTEGER) return lb__fail(m, LB_EPROTO, "listen mark: unexpected reply");
    return LB_OK;
}

int lb__lock_mark_listening(lb_lock *l, lb_target t) {
    if (lb__machine_in_flight(&l->m)) return LB_ESTATE;
    snprintf(l->ms_arg, sizeof l->ms_arg, "%d", LB__LISTEN_MARK_MS);
    lb__machine_begin(&l->m, listen_step);
    l->state = L_START;
    return lb_target_run(t, &l->m, l->opts.clock);
}
