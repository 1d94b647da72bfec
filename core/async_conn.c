/* The driver of one asynchronous context (lb_async): the loop's timers, the
 * handles on it, and telling them when hiredis frees the context. */
#include <pthread.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "core/async_internal.h"

/* hiredis calls a disconnect callback with the context alone, so the drivers
 * whose contexts may still disconnect are found by it here; newest first, so
 * that a context allocated where a forgotten one was finds its own driver. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static lb_async *live;

static void live_add(lb_async *a) {
    pthread_mutex_lock(&live_mu);
    a->next_live = live;
    live = a;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(lb_async *a) {
    pthread_mutex_lock(&live_mu);
    for (lb_async **p = &live; *p; p = &(*p)->next_live) {
        if (*p == a) {
            *p = a->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

static lb_async *live_find(const redisAsyncContext *ac) {
    pthread_mutex_lock(&live_mu);
    lb_async *a = live;
    while (a && a->ac != ac) a = a->next_live;
    pthread_mutex_unlock(&live_mu);
    return a;
}

static lb_async *live_take(const redisAsyncContext *ac) {
    pthread_mutex_lock(&live_mu);
    lb_async *a = NULL;
    for (lb_async **p = &live; *p; p = &(*p)->next_live) {
        if ((*p)->ac == ac) {
            a = *p;
            *p = a->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
    return a;
}

void lb_async_options_init(lb_async_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

void lb__async_join(lb_async *a, lb__async_member *mb) {
    mb->prev = NULL;
    mb->next = a->members;
    if (a->members) a->members->prev = mb;
    a->members = mb;
}

void lb__async_leave(lb_async *a, lb__async_member *mb) {
    if (a->cursor == mb) a->cursor = mb->next;
    if (mb->prev) mb->prev->next = mb->next;
    else a->members = mb->next;
    if (mb->next) mb->next->prev = mb->prev;
    mb->prev = mb->next = NULL;
}

redisAsyncContext *lb__async_conn(const lb_async *a) {
    return a && !a->closing ? a->ac : NULL;
}

void lb__async_note_eio(lb_async *a) {
    if (a && a->ac && (a->ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING))) a->closing = 1;
}

static void destroy(lb_async *a) { lb__free(a->opts.allocator, a); }

/* Tells every member, each leaving the list as it is told. A member's
 * callback may free other members (lb__async_leave moves the cursor past
 * them) or the driver (deferred to the end of the sweep). */
static void sweep(lb_async *a) {
    a->sweeping = 1;
    a->cursor = a->members;
    while (a->cursor) {
        lb__async_member *mb = a->cursor;
        lb__async_leave(a, mb);
        mb->closed(mb);
    }
    a->sweeping = 0;
}

/* The context is going: every member is told, then the driver is freed if
 * a member's callback asked for it. */
static void gone(lb_async *a) {
    a->closing = 1;
    a->sweeping = 1; /* a callback's lb_async_free meanwhile only marks it */
    if (a->batch_end) a->batch_end(a); /* releases not yet sent end with LB_EIO */
    a->ac = NULL;
    sweep(a);
    if (a->free_after_sweep) destroy(a);
}

/* hiredis is about to free the context: commands in flight were answered
 * NULL already (their operations ended with LB_EIO); the members that sleep
 * on a timer are told now, then the callback the application had set. */
static void on_disconnect(const redisAsyncContext *ac, int status) {
    lb_async *a = live_take(ac);
    if (!a) return;
    void (*chained)(const redisAsyncContext *, int) = a->chained;
    gone(a);
    if (chained) chained(ac, status);
}

/* A connection that fails is freed by hiredis without a disconnect: the
 * connect callback is the last word about it. */
static void on_connect(const redisAsyncContext *ac, int status) {
    lb_async *a = status == REDIS_OK ? NULL : live_take(ac);
    void (*chained)(const redisAsyncContext *, int) = NULL;
    if (a) {
        chained = a->chained_connect;
        gone(a);
    } else {
        lb_async *found = live_find(ac);
        chained = found ? found->chained_connect : NULL;
    }
    if (chained) chained(ac, status);
}

int lb_async_new(lb_async **out, redisAsyncContext *ac, const lb_async_options *o) {
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!ac || !o) return LB_EINVAL;
    const lb_timers *t = &o->timers;
    if (!t->create || !t->arm || !t->disarm || !t->destroy) return LB_EINVAL;
    lb_async *a = lb__alloc(o->allocator, sizeof *a);
    if (!a) return LB_ENOMEM;
    memset(a, 0, sizeof *a);
    a->ac = ac;
    a->opts = *o;
    /* hiredis keeps one connect and one disconnect callback and will not
     * replace them: ours are written in their place and call those found. */
    a->chained = ac->onDisconnect;
    ac->onDisconnect = on_disconnect;
    a->chained_connect = ac->onConnect;
    ac->onConnect = on_connect;
    live_add(a);
    *out = a;
    return LB_OK;
}

void lb_async_free(lb_async *a) {
    if (!a) return;
    if (a->sweeping) {
        a->free_after_sweep = 1;
        return;
    }
    a->sweeping = 1;
    if (a->batch_end) a->batch_end(a); /* releases asked for are sent */
    a->sweeping = 0;
    live_remove(a);
    /* A context hiredis is tearing down may be freed memory already; one
     * still there gets its own callback back. */
    if (a->ac && !a->closing) {
        a->ac->onDisconnect = a->chained;
        a->ac->onConnect = a->chained_connect;
    }
    a->ac = NULL;
    sweep(a); /* a member's lb_async_free meanwhile only marks it */
    destroy(a);
}
