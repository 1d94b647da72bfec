/* Internal declarations of the driver of one asynchronous context (core/async.c),
 * shared with the handles that run on it. */
#ifndef LOCKBRIDGE_CORE_ASYNC_INTERNAL_H
#define LOCKBRIDGE_CORE_ASYNC_INTERNAL_H

#include "lockbridge/async.h"
#include "core/internal.h"

struct redisAsyncContext;

/* A handle on a driver: told once, by `closed`, that the context is gone or
 * the driver freed (its `a` must then be forgotten). */
typedef struct lb__async_member {
    struct lb__async_member *prev, *next;
    void (*closed)(struct lb__async_member *mb);
} lb__async_member;

struct lb_async {
    struct redisAsyncContext *ac; /* NULL once the context is gone */
    int closing;                  /* a reply said the context is going: send nothing */
    lb_async_options opts;
    /* The context's disconnect and connect callbacks before ours, called
     * after ours. */
    void (*chained)(const struct redisAsyncContext *ac, int status);
    void (*chained_connect)(const struct redisAsyncContext *ac, int status);
    lb__async_member *members;
    lb__async_member *cursor;     /* the next member a sweep tells */
    int sweeping;
    int free_after_sweep;         /* lb_async_free called by a member's callback */
    struct lb_async *next_live;   /* the drivers whose context may disconnect */
    /* Releases asked for during this loop turn, sent as one command at the
     * next (modern/async_batch.c): a list through the locks, its length, the
     * timer that sends it (made at the first), and what sends or ends them
     * when the driver is freed or the context goes. */
    lb_async_lock *batch_head, *batch_tail;
    int batch_n;
    int batch_off;                /* the server refused keys together (Cluster) */
    void *batch_timer;
    void (*batch_end)(struct lb_async *a);
};

void lb__async_join(lb_async *a, lb__async_member *mb);
void lb__async_leave(lb_async *a, lb__async_member *mb);
/* The context, or NULL when nothing may be sent on it any more. */
struct redisAsyncContext *lb__async_conn(const lb_async *a);
/* After an LB_EIO from the context: if hiredis is tearing it down, nothing
 * more is sent on it (its disconnect callback, if any, then tells every
 * member). */
void lb__async_note_eio(lb_async *a);

#endif
