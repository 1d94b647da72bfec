/* Internal declarations of the modern (token) lock shared between its files. */
#ifndef LOCKBRIDGE_MODERN_INTERNAL_H
#define LOCKBRIDGE_MODERN_INTERNAL_H

#include "lockbridge/modern.h"
#include "core/internal.h"

extern const lb_script lb__script_modern_acquire_fenced;
extern const lb_script lb__script_modern_release;
extern const lb_script lb__script_modern_extend;
extern const lb_script lb__script_modern_check;

struct lb_lock {
    lb_machine m; /* first: the machine's address is the lock's */
    lb_lock_options opts;
    char *key, *fence_key, *channel;
    size_t keylen, fence_keylen, channellen;
    int state;
    int held;
    int fixed_token;    /* acquire reuses `token` (set by a quorum) */
    char token[LB__TOKEN_CAP];
    char ttl_arg[24];   /* decimal argument buffers for the running command */
    char ms_arg[24];
    int64_t fence;
    int64_t holder_ttl_ms;
    int64_t deadline_ns;
    int64_t sent_ns;    /* monotonic time the running command was prepared */
    int64_t extend_ms;
    lb_extend_mode extend_mode;
    int64_t check_ttl_ms;
    uint64_t commands;
    uint64_t rng;
    char errstr[LB__ERRSTR_CAP];
    struct lb__watch *watch; /* set while a watchdog renews the lock */
};

/* Makes the next acquisitions of `l` use `token` rather than fresh ones. */
void lb__lock_fix_token(lb_lock *l, const char *token);
/* Ends the watch of `l` (modern/watchdog.c), waiting for a renewal in flight:
 * release and free call it first, so no renewal runs during or after them. */
void lb__watch_detach(lb_lock *l);

#endif
