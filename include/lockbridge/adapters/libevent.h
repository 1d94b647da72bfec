/* lockbridge on libevent: the timers an lb_async driver needs, from an
 * event_base. Header only, as hiredis's adapters are: the library does not
 * link libevent, the program that includes this does. It includes
 * lockbridge/async.h, and through it the token lock's API. */
#ifndef LOCKBRIDGE_ADAPTERS_LIBEVENT_H
#define LOCKBRIDGE_ADAPTERS_LIBEVENT_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>

#include <event2/event.h>

#include "lockbridge/async.h"

typedef struct lb_libevent_timer {
    struct event *ev;
    lb_timer_fn fire;
    void *arg;
} lb_libevent_timer;

static inline void lb_libevent_timer_fired(evutil_socket_t fd, short what, void *arg) {
    lb_libevent_timer *t = (lb_libevent_timer *)arg;
    (void)fd;
    (void)what;
    t->fire(t->arg);
}

static inline void *lb_libevent_timer_create(void *loop, lb_timer_fn fire, void *arg) {
    lb_libevent_timer *t = (lb_libevent_timer *)malloc(sizeof *t);
    if (!t) return NULL;
    t->fire = fire;
    t->arg = arg;
    t->ev = evtimer_new((struct event_base *)loop, lb_libevent_timer_fired, t);
    if (!t->ev) {
        free(t);
        return NULL;
    }
    return t;
}

static inline int lb_libevent_timer_arm(void *timer, int64_t ms) {
    lb_libevent_timer *t = (lb_libevent_timer *)timer;
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000 * 1000);
    return evtimer_add(t->ev, &tv);
}

static inline void lb_libevent_timer_disarm(void *timer) {
    evtimer_del(((lb_libevent_timer *)timer)->ev);
}

static inline void lb_libevent_timer_destroy(void *timer) {
    lb_libevent_timer *t = (lb_libevent_timer *)timer;
    event_free(t->ev);
    free(t);
}

/* The timers of `base` for lb_async_options.timers. */
static inline lb_timers lb_libevent_timers(struct event_base *base) {
    lb_timers t;
    t.create = lb_libevent_timer_create;
    t.arm = lb_libevent_timer_arm;
    t.disarm = lb_libevent_timer_disarm;
    t.destroy = lb_libevent_timer_destroy;
    t.loop = base;
    return t;
}

/* lb_async_new on `ac` (attached to `base`, as by redisLibeventAttach) with
 * base's timers and the default allocator: the usual case in one call. */
static inline int lb_libevent_async_new(lb_async **out, struct redisAsyncContext *ac,
                                        struct event_base *base) {
    lb_async_options o;
    lb_async_options_init(&o);
    o.timers = lb_libevent_timers(base);
    return lb_async_new(out, ac, &o);
}

#endif
