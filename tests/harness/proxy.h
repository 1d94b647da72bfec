/* Test harness: a loopback TCP proxy between a client and redis-server that a
 * test steers to pass bytes, cut, delay, black-hole or drop one reply. */
#ifndef LOCKBRIDGE_TEST_PROXY_H
#define LOCKBRIDGE_TEST_PROXY_H

#include <stdint.h>

/* The proxy runs on its own thread; every control call takes effect before it
 * returns, and applies to connections open now and to those accepted later. */
typedef struct lbt_proxy lbt_proxy;

/* Listens on a free loopback port and forwards each accepted connection to
 * 127.0.0.1:target_port. NULL on failure. */
lbt_proxy *lbt_proxy_start(int target_port);
/* Closes every connection and stops the thread; NULL is a no-op. */
void lbt_proxy_stop(lbt_proxy *p);
/* The port clients connect to. */
int lbt_proxy_port(const lbt_proxy *p);

/* Bytes flow both ways as they arrive (the initial mode). Clears the other
 * modes, including a pending drop or cut. */
void lbt_proxy_pass(lbt_proxy *p);
/* Closes both sides of every open connection now; bytes not yet forwarded are
 * discarded. Later connections are accepted and served in the current mode.
 * A client that connected but has sent nothing may still wait in the listen
 * backlog, not yet accepted, and is then not cut: lbt_proxy_accepted says. */
void lbt_proxy_cut(lbt_proxy *p);
/* Holds every byte, either way, for `ms` milliseconds before forwarding it
 * (0: no delay). Order is kept. */
void lbt_proxy_delay(lbt_proxy *p, int64_t ms);
/* 1: accepts and reads from both sides but forwards nothing (what was read is
 * discarded), like a peer that vanished without a reset. 0: back to passing. */
void lbt_proxy_blackhole(lbt_proxy *p, int on);
/* The server's reply to the next command a client sends is read and thrown
 * away; replies after it pass. The command itself reaches the server. */
void lbt_proxy_drop_next_reply(lbt_proxy *p);
/* The next command a client sends cuts its connection (both sides): before it
 * reaches the server (`forwarded` 0) or after it did, its reply never
 * delivered (`forwarded` 1). */
void lbt_proxy_cut_next(lbt_proxy *p, int forwarded);
/* Connections accepted since the start. */
int lbt_proxy_accepted(const lbt_proxy *p);

#endif
