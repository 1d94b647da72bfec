/* Test harness: `lockbridge race` from the tests' side: its clients' command
 * lines, its output read back, and the test itself as a client of its proxy. */
#ifndef LBT_RACE_CLIENT_H
#define LBT_RACE_CLIENT_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "harness/proc.h"

/* One client command line per locker kind, on key race:lock (and counter
 * race:counter for the Java lockers, classes in `java_cp`), with validity
 * `ttl` ms (L3's unit makes 1000 of its own one millisecond), shorter than the
 * Java client's 5 s read timeout. The mixed-fleet rows also use "L1-10s" (L1
 * with a 10 s validity), "lockbridge-hold-fleet-max" (a wire takeover writes
 * now + 10 s) and "lb-modern" (the token lock). */
void lbt_client_line(const char *java_cp, const char *locker, int ttl, char *out, size_t cap);

/* Every line of the tool's output that is a race_result, in order, at most
 * `cap` into `out` (the caller deletes them); fails the test at a line that is
 * not JSON. Returns how many. */
int lbt_results_of(const lbt_proc *p, cJSON **out, int cap);

/* The file's text (at most 64 KiB kept) in a static buffer the next call
 * overwrites; fails the test when it cannot be opened. */
char *lbt_read_file(const char *path);

/* The port the tool printed for `client`, from its race_port lines. */
int lbt_port_of(const lbt_proc *p, char client);

/* A connection to the proxy's port `p` on loopback; fails the test if none. */
redisContext *lbt_client_conn(int p);

/* Sends one command (hiredis format) on `c` without reading its reply. */
void lbt_send_cmd(redisContext *c, const char *fmt, ...);

/* Reads the next reply on `c`: it must be the integer `want`. */
void lbt_expect_reply_int(redisContext *c, long long want);

/* Reads the next reply on `c`, whatever it is. */
void lbt_expect_reply_any(redisContext *c);

/* Fails the test unless `want` is in `text`. */
void lbt_expect_in(const char *text, const char *want);

#endif
