/* The deterministic race harness: several clients' step machines driven against
 * one real redis-server in a chosen interleaving, with invariants checked after
 * every step. Schedules are text, e.g. "A:SETNX B:SETNX B:GET +31000 A:DEL". */
#ifndef LOCKBRIDGE_TEST_RACE_H
#define LOCKBRIDGE_TEST_RACE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "lockbridge/lockbridge.h"

/* ---- Participants -------------------------------------------------------------
 * Anything that locks through step machines: lockbridge's clients and the
 * reference models of the deployed lockers. */
typedef struct lbr_part lbr_part;
struct lbr_part {
    const char *kind;
    lb_machine *(*acquire)(lbr_part *p);
    lb_machine *(*release)(lbr_part *p);
    int (*believes)(const lbr_part *p);   /* it thinks it holds the lock */
    /* Its lock has not expired by its own rules and its own clock. */
    int (*valid)(const lbr_part *p, const lb_codec *codec, const lb_now *now);
    const char *(*value)(const lbr_part *p, size_t *len); /* what it wrote */
    void (*destroy)(lbr_part *p);
    /* The fencing number of its current acquisition; NULL for a client that
     * takes none. */
    int64_t (*fence)(const lbr_part *p);
};

typedef struct lbr_part_config {
    const char *key;
    lb_codec codec;
    int64_t ttl_ms;
    const lb_clock *clock; /* the world's clock for this client */
    int64_t fleet_max_ttl_ms; /* lockbridge legacy clients' lb_legacy_options field */
    int port;              /* the world's redis-server (the operator's tool uses it) */
} lbr_part_config;

/* Creates a participant of `kind`: "lb-wire", "lb-scripted" (lockbridge legacy),
 * "lb-modern", "lb-modern-fenced" (lockbridge's token lock),
 * "L1", "L2", "L3", "L4", "L5", "R", "M1" (reference models of the deployed
 * lockers; M1's expiry is its PX ttl, read on its own clock), "naive-del-takeover", "naive-unconditional-del",
 * "naive-incr-expire", "naive-fence-first" (M1 with a fencing number INCRed
 * before its SET), "naive-queue-forever" (M1 that first joins the fair queue
 * with a bare ZADD): naive lockers the harness must catch, "L1-incr2" (the
 * double-INCR generation of L1), "lb-compat", "lb-migrate-modern" (the
 * mode-following lock fixed in a mode), "lb-follow-legacy", "lb-follow-compat"
 * (following the control key of the namespace named by the key, from that
 * mode), "switch-legacy-compat", "switch-compat-modern" (a pseudo-client that
 * sets the namespace's mode, alternately the first and the second, each in two
 * steps: an EVAL that reads the stage (the control key and when it began),
 * then mode_set as a compare-and-set on the stage read, refused when another
 * change came in between; it checks nothing else and never holds the lock),
 * "lb-fair", "lb-fair-fenced" (lockbridge's fair
 * token lock in a blocking wait, tests/race/fair_parts.c: each step is one
 * attempt of the wait, which keeps its token and queue place until it holds
 * the lock; a release hands the lock to the oldest live waiter and publishes
 * the grant on that waiter's inbox, read by "X@"), "lb-fair-list",
 * "lb-fair-list-fenced" (the same wait on one connection: it names its grant
 * list, "X@" pops one grant off it and lb__fair_take_grant judges it; a
 * release that must push the grant itself does so in two more steps, LPUSH
 * and PEXPIRE), "lb-fair-list-long" (a lease of 4000 ms, the others'
 * 1000 ms), "lb-fair-baton" (the same wait trying the baton first: its
 * SET NX, its mark and a pop of the baton list, each a step, then the
 * queue; a baton with no lease to use is given back in further steps), "lb-fair-leave", "lb-fair-list-leave" (a wait with a
 * deadline: after two busy attempts its next step is the leave attempt, and
 * the step after that begins a new wait), "lb-fair-list-yield" (releases
 * with fair_yield_every 1 and fair_yield_ms 500: a window after every
 * hand-off once an outsider was seen), "spoil-grants" (a pseudo-client
 * whose every step writes a string, with a TTL, at the grant list name of
 * each queued token that has no key there: another program's doing; it
 * never holds the lock), "spoil-fair" (a string over the state's name, then
 * over the queue's, in turn, with a TTL of 3000 ms that pauses move),
 * "spoil-queue" (deletes the queue, the state left as it was), "baton",
 * "baton-no-margin", "baton-own-ttl" (a candidate hand-off on one list,
 * tests/race/baton_parts.c: an attempt, the waiter's mark and a pop of the
 * baton, each a step; the last two over-count the lock they receive). NULL
 * if unknown. */
lbr_part *lbr_part_new(const char *kind, const lbr_part_config *cfg);
/* Whether clients of `kind` have an inbox for hand-offs (the fair kinds). */
int lbr_kind_reads_inbox(const char *kind);
/* Reads one hand-off message waiting on the client's inbox (or pops one off
 * its grant list) and takes the grant as the library's wait does
 * (lb__fair_handed, lb__fair_take_grant). 1: it took the lock; 0: the message
 * granted nothing (another token's, an older place, no wait running); -1:
 * none waiting (or, on a list, no wait running); -2: no inbox; -3: its
 * connection failed or the grant did not parse. */
int lbr_part_read_inbox(lbr_part *p);
/* The mode a migration follower acts in now (an lb_mode), -1 for any other
 * participant. "vanish-mode" is a pseudo-client whose every step DELs the
 * namespace's control key; "lb-follow-modern" follows it from modern. */
int lbr_part_mode(const lbr_part *p);
/* "lb-follow-legacy-refresh", "lb-follow-compat-refresh",
 * "lb-follow-modern-refresh": followers that re-read the control key only
 * once this interval has passed on the world's virtual clock (the tool's
 * default --refresh-ms), ms. */
#define LBR_REFRESH_MS 1000
/* The stage time the tool judges by with its defaults (validity 30000 ms +
 * refresh 1000 ms), ms: a pause this long lets an operator's next step pass. */
#define LBR_STAGE_MS 31000
/* A pseudo-client's part functions: it never holds the lock and has no value. */
int lbr_never_holds(const lbr_part *p);
int lbr_never_valid(const lbr_part *p, const lb_codec *c, const lb_now *n);
const char *lbr_no_value(const lbr_part *p, size_t *len);
/* Before its first command an operator stores the namespace's configuration
 * (`mode config ... --override NAME`, part of that first step, once per
 * world; a tool that has no such override gets the values on each mode set).
 * "operator:A,B,..." runs the tool's commands A, B, ... in turn, each of
 * legacy, compat, modern (mode set with --override observation, a watch of
 * 0 ms stored; every other check as the tool makes it by default) or sweep
 * (--expire-live): its scan and checks are one step and its mode write
 * (held back by a relay of its connections, tests/race/tool.c) the next, so
 * two operators interleave. Its tool runs under libfaketime with the
 * operator's clock (the world's virtual time and its offset) as host clock.
 * "operator" runs the lockbridge tool (LB_RACE_TOOL, else $BUILD/lockbridge,
 * else build/lockbridge) against the world's server, one command a step: mode
 * set compat, sweep, mode set modern, in turn ("operator-back": compat,
 * modern, compat, legacy), validity, refresh and watch of 0 ms stored. A
 * command that did not run as intended (an exit
 * other than success, or than the gate's refusal for a mode set) breaks the
 * world: the step returns LBR_BROKEN. */

/* ---- The world ------------------------------------------------------------------ */
#define LBR_MAX_CLIENTS 5

typedef struct lbr_world lbr_world;

typedef struct lbr_world_config {
    int port;              /* the redis-server to drive */
    redisContext *conn;    /* optional: a connection to borrow instead of port */
    const char *key;       /* the lock key (flushed at start) */
    lb_codec codec;        /* the fleet's value codec */
    int64_t ttl_ms;        /* every client's lock validity, ms */
    int64_t fleet_max_ttl_ms; /* given to lockbridge's legacy clients (0: none) */
    /* 1: the key starts holding a timestamp that expired a second before the
     * world's start (a crashed holder's lock), so takeovers need no crash. */
    int start_expired;
    /* The fencing counter "{key}:fence" at the start (NULL: absent): a
     * value that cannot count ("x", or at INT64_MAX), as an operator or
     * another program may leave it. */
    const char *fence_value;
    /* An overwrite that ends earlier than the value it replaced by no more
     * than this is within the clock skew the fleet allows (the release
     * margin): counted apart, not a violation. 0: none tolerated. */
    int64_t skew_tolerance_ms;
    const char *kinds[LBR_MAX_CLIENTS]; /* client A, B, ...; NULL ends the list */
    /* Per-client validity, ms (0: ttl_ms), and clock offset from true time, ms:
     * a mixed fleet (a wire client with 30 s beside L1 with 15 min). */
    int64_t client_ttl_ms[LBR_MAX_CLIENTS];
    int64_t client_offset_ms[LBR_MAX_CLIENTS];
    int liveness_steps;    /* "A?" must acquire within this many steps (default 12) */
    /* Models the wire protocol's assumption that a client is not paused in the
     * middle of an operation (between its GET and GETSET, or GET and DEL) for
     * longer than midop_pause_max_ms. When set, a "+N" that would break it makes
     * the schedule invalid (LBR_BAD_SCHEDULE) rather than a violation. */
    int bound_midop_pauses;
    int64_t midop_pause_max_ms;
    /* Per-client lock key (NULL: key): a second lock beside the first, e.g.
     * one named like the first's companion. Mutual exclusion is judged per
     * key; a pause moves each such key's TTL too (a companion of `key` moves
     * with that lock's other companions). */
    const char *client_key[LBR_MAX_CLIENTS];
    /* Bounded liveness: a release that ends LB_OK leaves the key free, or
     * holding a live client's value (its holder's, or a waiter's token a
     * grant handed it), or passed down the baton list to a live client
     * blocked on it (never held by nobody for the rest of a TTL while others
     * wait); an acquire that ends LB_OK leaves its client holding validly
     * (a lease still to run). A waiter that dies while blocked on the baton
     * breaks the first by design: such searches crash nobody. */
    int bounded_liveness;
} lbr_world_config;

lbr_world *lbr_world_new(const lbr_world_config *cfg);
void lbr_world_free(lbr_world *w);

/* Runs a schedule. Tokens, separated by spaces:
 *   A          client A takes one step (sends its next command, reads the reply)
 *   A:CMD      the same, checking that the command is CMD (SETNX, GET, GETSET, DEL,
 *              INCR, EXPIRE, SET, or a script's name, or EVAL for any script;
 *              "-" when the operation ends without sending anything)
 *   +N         every clock advances N milliseconds (a pause: nobody steps); the
 *              lock key's Redis TTL, if any, is moved by as much, and with a
 *              fair client in the fleet so are its queue's leases and TTLs (a
 *              queue or state that lapses in it under a live lease is a
 *              violation)
 *   A~N        client A's clock is N milliseconds ahead of true time (may be < 0)
 *   A!         client A crashes: it stops for good and believes nothing
 *   A?         liveness: A, stepping alone, must hold the lock within the bound
 *   A.         A steps until its current operation ends (nothing if idle)
 *   A@         A reads one hand-off message waiting on its inbox, oldest first
 *              (or pops one grant off its grant list, a "-list" kind), and
 *              takes the grant if the library would (a fair client; a
 *              schedule error when nothing waits)
 * Returns LBR_OK, LBR_VIOLATION (lbr_violation() names it with the schedule
 * that led to it), LBR_BAD_SCHEDULE (a token did not match) or LBR_BROKEN (a
 * step could not do what it models, e.g. the operator's tool did not run;
 * lbr_violation() says why): a result that proves nothing either way. */
enum { LBR_OK = 0, LBR_VIOLATION = 1, LBR_BAD_SCHEDULE = -1, LBR_BROKEN = -2 };
int lbr_run(lbr_world *w, const char *schedule);

/* One step of client `idx` (0 = A) with no command check; same returns. */
int lbr_step(lbr_world *w, int idx);
int lbr_clients(const lbr_world *w);
int lbr_crashed(const lbr_world *w, int idx);
/* Whether client `idx` is in the middle of an operation (an operator: its
 * mode write waits). */
int lbr_running(const lbr_world *w, int idx);

const char *lbr_violation(const lbr_world *w); /* "" when none */
const char *lbr_trace(const lbr_world *w);     /* the steps taken, as a schedule */
/* Overwrites of a valid lock by a value with a later expiry (the legacy protocol's
 * GETSET overwrite): not a violation of mutual exclusion, counted apart. */
int lbr_overwrites(const lbr_world *w);
/* Acquisitions completed, by all clients. */
int lbr_acquisitions(const lbr_world *w);

/* ---- Exhaustive exploration -------------------------------------------------------
 * Every schedule of `depth` client steps over the world's clients, with at most
 * `max_crashes` crashes and `max_jumps` clock jumps of `jump_ms` placed anywhere,
 * each replayed from a fresh world and closed by letting every running client
 * finish its operation, a jump past every expiry and a liveness check. Stops at the first violation and keeps its schedule.
 * A broken world (LBR_BROKEN) stops the search: lbr_explore returns -1 with
 * the reason in the result's report. */
typedef struct lbr_explore_config {
    lbr_world_config world;
    /* Optional schedule run before every searched one (the state the search
     * starts from, e.g. "A:SETNX A! +3600": a crashed holder's lock, expired);
     * its crashes count against max_crashes' clients, not its budget. */
    const char *prefix;
    int depth;
    int max_crashes;
    int max_jumps;
    int64_t jump_ms;
    /* At most this many inbox reads ("X@", by clients whose kind reads an
     * inbox), each after a step of the reader's or another's, the last step
     * included; they do not count against depth.
     * A read with nothing waiting is outside the model (pruned). */
    int max_reads;
} lbr_explore_config;

typedef struct lbr_explore_result {
    long schedules; /* schedules replayed */
    long pruned;    /* schedules outside the modelled assumptions */
    long steps;     /* tokens run in all */
    int violation;  /* 1 if one was found */
    char counterexample[1100]; /* the schedule that replays it */
    char report[4608];         /* the violation as reported */
} lbr_explore_result;

int lbr_explore(const lbr_explore_config *cfg, lbr_explore_result *out);

/* Moves `key`'s TTL, if any, by a pause of `ms` (deleting the key when the
 * pause outlasts it), as the world moves the lock key's. */
void lbr_warp_key(redisContext *c, const char *key, long long ms);

/* The longest validity of the world's clients, ms. */
int64_t lbr_max_ttl_ms(const lbr_world_config *cfg);

#endif
