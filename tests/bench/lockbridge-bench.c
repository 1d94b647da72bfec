/* lockbridge-bench: the whole comparison on a temporary redis-server: PING and
 * pipelined SET as the reference, uncontended modes, one key contended by
 * lockbridge and by peers, many keys from one async thread, memory of held
 * locks, and the targets. Prints tables; writes CSV, markdown and plot data. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "lockbridge/lockbridge.h"

/* ---- Tunables ------------------------------------------------------------------ */
#define DEFAULT_SAMPLES 5000   /* timed operations per uncontended row, count */
#define DEFAULT_SECONDS 2.0    /* length of each contended run, seconds */
#define DEFAULT_ASYNC_S 2.0    /* length of the many-keys run, seconds */
#define ASYNC_INFLIGHT 4096    /* handles in flight on the async connection, count */
#define DEFAULT_LOCKS 100000   /* locks held at once for the memory figures, count */
#define SET_REQUESTS 2000000   /* redis-benchmark requests for the SET rate (about 2 s), count */

/* Targets, checked in the same run (see docs/benchmarks.md). */
#define T_UNCONTENDED_X 1.10   /* modern acquire+release / two PING round trips, at most */
#define T_PEER_X 1.2           /* acquisitions/s at 32 clients / best peer's, at least */
#define T_P99_MS 10.0          /* time-to-acquire p99 at 32 clients, under, ms */
#define T_MAX_MS 50.0          /* worst time to acquire at 32 clients, under, ms */
#define T_SPREAD 1.5           /* max / min acquisitions per client, at most */
#define T_CALLS 12.0           /* Redis commands per acquisition incl. the section's 2, at most */
#define T_ASYNC_X 0.30         /* async locks/s / pipelined SET rate, median of rounds, at least */
#define TARGET_CLIENTS 32
/* The strategy whose rate against the best peer is also measured in paired
 * rounds (paired.c): the fair candidate for the plain waiting call. */
#define PAIRED_STRATEGY "lockbridge modern, fair: baton, then grant lists (fair, lb_lock_acquire)"
/* Waking on release must never be slower or less fair than polling, at any
 * client count: the two run side by side too. */
#define WAKE_STRATEGY "lockbridge modern, wake-on-release (lb_lock_acquire_wait)"
#define POLL_STRATEGY "lockbridge modern, polling only (lb_lock_acquire)"
/* The fair candidate against the best peer, then waking on release against
 * polling at each client count, then polling against itself at 32 clients:
 * the control, whose ratios show how far the method alone moves a median. */
#define N_PAIRS 5
#define CONTROL_PAIR (N_PAIRS - 1)

enum { T_REF, T_UNCONT, T_PEERS, T_CONT, T_PAIRED, T_ASYNC, T_MEM, T_TARGETS, N_TABLES };

typedef struct options {
    const char *csv, *markdown, *plot, *peers_dir;
    int samples, locks, no_peers, inflight, async_only;
    double seconds, async_seconds;
} options;

/* ---- Contended table ------------------------------------------------------------ */
static const char *status_name(const contended *r) {
    switch (r->status) {
    case RUN_OK: return "ok";
    case RUN_FAILED: return "FAILED";
    case RUN_SKIPPED: return "skipped";
    case RUN_NOT_BUILT: return "not built yet";
    }
    return "?";
}

static double acq_rate(const contended *r) {
    return r->seconds > 0 ? (double)r->acquisitions / r->seconds : 0.0;
}

static double calls_per_acq(const contended *r) { return per_op(r->server_calls, r->acquisitions); }

/* max/min acquisitions per client; infinite when a client starved. */
static double spread(const contended *r) {
    return r->min_client ? (double)r->max_client / (double)r->min_client : 1e9;
}

static void fill_contended(table *t, const contended_set *set, double seconds) {
    static const char *const cols[] = {
        "strategy",        "clients",       "acq_per_s",      "tta_p50_ms",
        "tta_p99_ms",      "tta_max_ms",    "handoffs_share", "handoff_p50_ms", "handoff_p99_ms",
        "redis_calls_per_acq", "sent_per_acq", "max_per_client", "min_per_client",
        "max_over_min",    "gave_up",       "lost_updates",   "status", NULL};
    table_init(t, "contended", cols);
    t->key_cols = 2;
    table_title(t, "Contended: one key, GET/SET counter under the lock, %.1f s per run", seconds);
    for (int i = 0; i < set->n; i++) {
        const contended *r = &set->r[i];
        int row = table_row(t);
        cell(t, row, 0, "%s", r->name);
        if (r->status == RUN_SKIPPED || r->status == RUN_NOT_BUILT ||
            (r->status == RUN_FAILED && r->acquisitions == 0 && r->tta.n == 0)) {
            cell(t, row, 1, r->clients ? "%d" : "2, 8, 32", r->clients);
            for (int c = 2; c < t->ncols - 1; c++) cell(t, row, c, "-");
            cell(t, row, t->ncols - 1, "%s%s%s", status_name(r), r->note[0] ? ": " : "", r->note);
            continue;
        }
        cell(t, row, 1, "%d", r->clients);
        cell(t, row, 2, "%.0f", acq_rate(r));
        cell(t, row, 3, "%.2f", ms(percentile(&r->tta, 50)));
        cell(t, row, 4, "%.2f", ms(percentile(&r->tta, 99)));
        cell(t, row, 5, "%.2f", ms(samples_max(&r->tta)));
        cell(t, row, 6, "%.2f", per_op(r->handoff.n, r->acquisitions));
        cell(t, row, 7, "%.2f", ms(percentile(&r->handoff, 50)));
        cell(t, row, 8, "%.2f", ms(percentile(&r->handoff, 99)));
        if (r->part) cell(t, row, 9, "-"); /* the server's counts are the whole run's */
        else cell(t, row, 9, "%.2f", calls_per_acq(r));
        if (r->sent >= 0) cell(t, row, 10, "%.2f", per_op((uint64_t)r->sent, r->acquisitions) + 2);
        else cell(t, row, 10, "-");
        cell(t, row, 11, "%" PRIu64, r->max_client);
        cell(t, row, 12, "%" PRIu64, r->min_client);
        if (r->min_client) cell(t, row, 13, "%.2f", spread(r));
        else cell(t, row, 13, "inf");
        cell(t, row, 14, "%" PRIu64, r->gave_up);
        if (r->part) cell(t, row, 15, "-");
        else cell(t, row, 15, "%lld", r->lost);
        if (r->overlaps > 0)
            cell(t, row, 16, "%s: %lld overlaps %s", status_name(r), r->overlaps, r->note);
        else
            cell(t, row, 16, "%s%s%s", status_name(r), r->note[0] ? ": " : "", r->note);
    }
}

/* Plot data for gnuplot: one block per strategy that ran, two blank lines
 * between blocks, a quoted title line first. Columns: clients, time-to-acquire
 * p99 (ms), Redis commands per acquisition, min/max acquisitions per client. */
static int write_plot(const char *path, const contended_set *set) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < set->n; i++) {
        const contended *r = &set->r[i];
        if ((r->status != RUN_OK && r->status != RUN_FAILED) || r->part) continue;
        if (i == 0 || strcmp(set->r[i - 1].name, r->name) != 0)
            fprintf(f, "%s\"%s%s\"\n", i ? "\n\n" : "", r->name, r->ours ? "" : " (peer)");
        fprintf(f, "%d %.3f %.3f %.4f\n", r->clients, ms(percentile(&r->tta, 99)),
                calls_per_acq(r),
                r->max_client ? (double)r->min_client / (double)r->max_client : 0.0);
    }
    return fclose(f);
}

/* ---- Reference, async and memory tables ------------------------------------------------------ */
static void fill_reference(table *t, const reference *ref) {
    static const char *const cols[] = {"measure", "value", NULL};
    table_init(t, "reference", cols);
    table_title(t, "Reference: the server alone, on the same machine in the same run");
    int r;
    r = table_row(t), cell(t, r, 0, "PING round trip of one client, median, us"),
    cell(t, r, 1, "%.1f", us(ref->ping_median_ns));
    r = table_row(t), cell(t, r, 0, "PING round trip of one client, p99, us"),
    cell(t, r, 1, "%.1f", us(ref->ping_p99_ns));
    r = table_row(t), cell(t, r, 0, "redis-benchmark -P 16 -t set, requests per second"),
    cell(t, r, 1, "%.0f", ref->set_rate);
    r = table_row(t), cell(t, r, 0, "redis-benchmark's own summary"),
    cell(t, r, 1, "%s", ref->set_line[0] ? ref->set_line : "redis-benchmark failed");
}

static void fill_async(table *t, const async_result *a) {
    static const char *const cols[] = {"measure", "value", NULL};
    table_init(t, "async", cols);
    table_title(t, "Many keys from one async thread (libevent), %" PRIu64
                   " locks in flight on one connection, %d interleaved rounds",
                a->inflight, a->rounds);
    char each[CELL_CAP];
    size_t at = 0;
    for (int i = 0; i < a->rounds && at < sizeof each; i++)
        at += (size_t)snprintf(each + at, sizeof each - at, "%s%.3f", i ? ", " : "", a->ratio[i]);
    if (a->rounds == 0) snprintf(each, sizeof each, "none");
    int r;
    r = table_row(t), cell(t, r, 0, "locks per second (acquire + release, distinct keys), median"),
    cell(t, r, 1, "%.0f", a->lock_median);
    r = table_row(t), cell(t, r, 0, "redis-benchmark -P 16 -t set, requests per second, median"),
    cell(t, r, 1, "%.0f", a->set_median);
    r = table_row(t), cell(t, r, 0, "locks per second / pipelined SET rate, median of the rounds"),
    cell(t, r, 1, "%.3f", a->ratio_median);
    r = table_row(t), cell(t, r, 0, "the rounds' ratios, in order"), cell(t, r, 1, "%s", each);
    r = table_row(t), cell(t, r, 0, "Redis calls per lock (commandstats)"),
    cell(t, r, 1, "%.2f", per_op(a->server_calls, a->locks));
    r = table_row(t), cell(t, r, 0, "server busy executing them, share of the lock runs"),
    cell(t, r, 1, "%.2f", a->seconds > 0 ? (double)a->server_usec / 1e6 / a->seconds : 0.0);
    r = table_row(t), cell(t, r, 0, "errors"),
    cell(t, r, 1, "%" PRIu64 "%s%s", a->errors, a->error[0] ? ": " : "", a->error);
}

static void fill_memory(table *t, const memory_result *m) {
    static const char *const cols[] = {"measure", "value", NULL};
    table_init(t, "memory", cols);
    table_title(t, "Memory with %d modern locks held at once", m->locks);
    int r;
    r = table_row(t), cell(t, r, 0, "bytes per held lock (allocator hook, requested bytes)"),
    cell(t, r, 1, "%.1f", m->bytes_per_lock);
    r = table_row(t), cell(t, r, 0, "allocations per lock"),
    cell(t, r, 1, "%.2f", per_op(m->allocations, (uint64_t)m->locks));
    r = table_row(t), cell(t, r, 0, "VmRSS with the locks held, MiB"),
    cell(t, r, 1, "%.1f", (double)m->rss_held / 1048576.0);
    r = table_row(t), cell(t, r, 0, "VmRSS growth per lock, bytes"),
    cell(t, r, 1, "%.1f", m->locks ? (double)(m->rss_held - m->rss_before) / m->locks : 0.0);
    r = table_row(t), cell(t, r, 0, "Redis used_memory growth per lock, bytes"),
    cell(t, r, 1, "%.1f", m->locks ? (double)(m->redis_held - m->redis_before) / m->locks : 0.0);
    r = table_row(t), cell(t, r, 0, "locks acquired"),
    cell(t, r, 1, "%" PRIu64 "%s%s", m->acquired, m->error[0] ? ": " : "", m->error);
}

/* ---- Targets --------------------------------------------------------------------- */
/* One row: the verdict, and when behind, what limits it (`why`, may be NULL). */
static void target(table *t, const char *what, const char *bound, const char *measured, int met,
                   double ratio, const char *why) {
    int r = table_row(t);
    cell(t, r, 0, "%s", what);
    cell(t, r, 1, "%s", bound);
    cell(t, r, 2, "%s", measured);
    if (ratio < 0) cell(t, r, 3, "%s", met ? "met" : "missed");
    else cell(t, r, 3, "%s (%.2f x the bound)", met ? "ahead" : "behind", ratio);
    cell(t, r, 4, "%s", met || !why ? "" : why);
}

/* The legacy fleets' loop is the users' own code, not a lock library: the
 * target compares with the libraries (the "best of those libraries"),
 * and the loop is reported beside. */
static int is_library(const contended *r) { return strncmp(r->name, "legacy fleets", 13) != 0; }

static const contended *best_peer(const contended_set *set, int libraries) {
    const contended *best = NULL;
    for (int i = 0; i < set->n; i++) {
        const contended *r = &set->r[i];
        if (!r->ours && r->clients == TARGET_CLIENTS && r->status == RUN_OK &&
            is_library(r) == libraries && (!best || acq_rate(r) > acq_rate(best)))
            best = r;
    }
    return best;
}

/* How a strategy waits, from its name: what limits its wait and its spread. */
static const char *wait_limit(const contended *r) {
    if (strstr(r->name, "beside"))
        return "the windows: the polling clients outside fair mode get the key only in "
               "windows the fair releases leave them (200 ms, at least 800 ms apart, once one "
               "of them has noted itself), and the fair waiters keep off it during each; "
               "between windows a poller that took the key passes the baton on at its release";
    if (strstr(r->name, "baton"))
        return "the order of the waiters: Redis answers the BLPOPs on the baton list in the "
               "order they blocked, so a waiter waits behind the other 31 clients' turns, and "
               "a turn is a chain: the release script (which writes the next holder's token "
               "and pushes the baton), the first blocked waiter's BLPOP answered and its "
               "thread woken, and the section's two round trips, on 2 CPUs shared by 32 "
               "client threads and the server";
    if (strstr(r->name, "fair"))
        return "the queue, and the hop through the waiter: a turn is the release script, the "
               "message to the next waiter's inbox, two thread wake-ups (its subscriber "
               "thread, then the waiting thread) and the section's two round trips, on 2 CPUs "
               "shared by 64 client threads and the server";
    if (strstr(r->name, "wake"))
        return "a lock released twice within 20 ms has its channel let go for a second and "
               "its waits poll (a release woke every wait listening, one could win), so "
               "under contention this is polling: the releasing client, asking again at "
               "once, often wins first";
    return "the releasing client asks again at once and wins against waiters asleep in a "
           "back-off of up to 100 ms; a waiter can lose many rounds in a row";
}

/* The row that the paired rounds measured reads its rate verdict from their
 * median ratio; the single run is quoted beside. */
static double paired_ratio(const contended *r, const paired_result *p, char *m, size_t cap) {
    if (!p || p->rounds != PAIRED_ROUNDS || strcmp(r->name, p->ours) != 0) return -1.0;
    int n = snprintf(m, cap, "median of %d rounds side by side: %.2f (", p->rounds, p->median);
    for (int i = 0; i < p->rounds && n > 0 && (size_t)n < cap; i++)
        n += snprintf(m + n, cap - (size_t)n, "%s%.2f", i ? ", " : "", p->ratio[i]);
    if (n > 0 && (size_t)n < cap) snprintf(m + n, cap - (size_t)n, "); single run: ");
    return p->median;
}

/* Where a fair turn's commands go: on the baton, and through the queue. */
#define BATON_CALLS                                                                         \
    "; a turn on the baton: the wait's mark (an EVAL running GET and SET, so that it "     \
    "never writes over another program's value) and its BLPOP (and its SET NX unless it " \
    "began right after its own release handed the lock on), the release's EVALSHA "       \
    "running one MGET of the key and the mark, ZPOPMIN (the queue comes first), RPUSH, "  \
    "PEXPIRE and SET, and the section's 2: 12 in a loop, 13 otherwise; a wait the baton "  \
    "misses for fair_baton_ms queues, and a queued turn costs 21; the run's end cuts "     \
    "each client's last wait short, its commands counted with no acquisition"
/* Why a queued fair turn cannot be 12 commands with what the fair mode promises. */
#define FAIR_CALLS_FLOOR                                                                    \
    "; a fair turn runs two scripts: the release (EVALSHA, the GET that proves it ours, "    \
    "TIME for the leases, the head popped and its lease read, the next waiter named, the "  \
    "grant pushed and given a TTL so that a dead waiter's goes, the key written, the "      \
    "queue's state updated: 11) and the next wait's queueing (EVALSHA, TIME, GET, one "     \
    "read of the state, the place and its lease written, PEXPIRE NX for a queue formed "    \
    "anew: 7), with the wake-up and the section 3 more; with leases on the server's "       \
    "clock, a TTL on every key and every key declared, no queue goes under 16 (release: "   \
    "EVALSHA, GET, TIME, pop, SET, push, the list's TTL, the next named; wait: EVALSHA, "    \
    "GET, TIME, the place with its lease, the queue's TTL; wake-up and section)"

static void contended_targets(table *t, const contended *r, const contended *peer,
                              const contended *loop, const paired_result *p) {
    char what[192], m[320], why[CELL_CAP];
    double rate = acq_rate(r), p99 = ms(percentile(&r->tta, 99)), mx = ms(samples_max(&r->tta));
    snprintf(what, sizeof what, "%s, 32 clients: acquisitions/s over the best peer library's",
             r->name);
    if (peer) {
        double x = rate / acq_rate(peer);
        m[0] = '\0';
        double median = paired_ratio(r, p, m, sizeof m);
        int n = (int)strlen(m);
        n += snprintf(m + n, sizeof m - (size_t)n, "%.0f / %.0f (%s) = %.2f", rate, acq_rate(peer),
                      peer->name, x);
        if (median >= 0) x = median;
        if (loop && n > 0 && (size_t)n < sizeof m)
            snprintf(m + n, sizeof m - (size_t)n, "; beside the legacy fleets' loop (%.0f): %.2f",
                     acq_rate(loop), rate / acq_rate(loop));
        snprintf(why, sizeof why,
                 "one key serialises acquisitions (section, release, next acquire); the best "
                 "peer's max_over_min is %s",
                 peer->min_client ? "low" : "inf: its rate comes from starving clients");
        target(t, what, ">= 1.2", m, x >= T_PEER_X, x / T_PEER_X, why);
    } else {
        target(t, what, ">= 1.2", "no peer ran", 0, -1, "no peer to compare with");
    }
    snprintf(why, sizeof why, "%s (the lock went to another client in %.0f%% of acquisitions)",
             wait_limit(r), 100.0 * per_op(r->handoff.n, r->acquisitions));
    snprintf(what, sizeof what, "%s, 32 clients: time-to-acquire p99", r->name);
    snprintf(m, sizeof m, "%.2f ms", p99);
    target(t, what, "< 10 ms", m, p99 < T_P99_MS, p99 / T_P99_MS, why);
    snprintf(what, sizeof what, "%s, 32 clients: worst time to acquire", r->name);
    snprintf(m, sizeof m, "%.2f ms", mx);
    target(t, what, "< 50 ms", m, mx < T_MAX_MS, mx / T_MAX_MS, why);
    snprintf(what, sizeof what, "%s, 32 clients: max/min acquisitions per client", r->name);
    if (r->min_client) snprintf(m, sizeof m, "%.2f", spread(r));
    else snprintf(m, sizeof m, "%" PRIu64 " / 0 (a client starved)", r->max_client);
    target(t, what, "<= 1.5", m, spread(r) <= T_SPREAD, r->min_client ? spread(r) / T_SPREAD : -1,
           why);
    snprintf(what, sizeof what,
             "%s, 32 clients: Redis commands per acquisition (commandstats, section's 2 included)",
             r->name);
    snprintf(m, sizeof m, "%.2f", calls_per_acq(r));
    char mix[400];
    tally_mix(&r->calls, r->acquisitions, mix, sizeof mix);
    snprintf(why, sizeof why,
             "the commands run inside scripts count, as for the peers (sent by the clients, "
             "the section's 2 included: %.2f); Redis 7.0 has no compare-and-delete command, "
             "so a safe release alone is 3 (EVALSHA, its GET, DEL) and no safe lock counted "
             "this way is under 6%s; the server ran: %s",
             r->sent >= 0 ? per_op((uint64_t)r->sent, r->acquisitions) + 2 : -1.0,
             strstr(r->name, "baton") ? BATON_CALLS
             : strstr(r->name, "fair") ? FAIR_CALLS_FLOOR : "", mix);
    target(t, what, "<= 12", m, calls_per_acq(r) <= T_CALLS, calls_per_acq(r) / T_CALLS, why);
}

/* Waking on release against polling, side by side at each client count:
 * rate and spread, each as the median of the rounds' ratios. */
static void wake_targets(table *t, const paired_result *p, const paired_result *control) {
    char what[192], m[320], why[CELL_CAP], ctl[160] = "";
    if (control->rounds == PAIRED_ROUNDS)
        snprintf(ctl, sizeof ctl,
                 "; polling side by side with itself at %d clients (the control) read %.2f "
                 "for the rate and %.2f for max/min in this run", control->clients,
                 control->median, control->spread_median);
    snprintf(why, sizeof why,
             "cause not known: both send the server the same commands per acquisition "
             "(see the contended "
             "table); each client of the wake-on-release row also runs a waiter (a thread "
             "and a subscriber connection of its own), and under contention its channel is "
             "let go and its waits poll%s", ctl);
    snprintf(what, sizeof what, "wake-on-release over polling, %d clients: acquisitions/s",
             p->clients);
    if (p->rounds != PAIRED_ROUNDS) {
        target(t, what, ">= 1.00", "a round failed", 0, -1, "a paired round failed");
        return;
    }
    int n = snprintf(m, sizeof m, "median of %d rounds side by side: %.2f (", p->rounds, p->median);
    for (int i = 0; i < p->rounds && n > 0 && (size_t)n < sizeof m; i++)
        n += snprintf(m + n, sizeof m - (size_t)n, "%s%.2f", i ? ", " : "", p->ratio[i]);
    if (n > 0 && (size_t)n < sizeof m) snprintf(m + n, sizeof m - (size_t)n, ")");
    target(t, what, ">= 1.00", m, p->median >= 1.0, p->median, why);
    snprintf(what, sizeof what,
             "wake-on-release over polling, %d clients: max/min acquisitions per client", p->clients);
    n = snprintf(m, sizeof m, "median of %d rounds side by side: %.2f (", p->rounds,
                 p->spread_median);
    for (int i = 0; i < p->rounds && n > 0 && (size_t)n < sizeof m; i++)
        n += snprintf(m + n, sizeof m - (size_t)n, "%s%.2f/%.2f", i ? ", " : "", p->ours_spread[i],
                      p->peer_spread[i]);
    if (n > 0 && (size_t)n < sizeof m) snprintf(m + n, sizeof m - (size_t)n, ")");
    target(t, what, "<= 1.00", m, p->spread_median <= 1.0, p->spread_median, why);
}

static void fill_targets(table *t, const reference *ref, const uncontended_summary *u,
                         const contended_set *set, const async_result *a, const paired_result *p) {
    static const char *const cols[] = {"target", "bound", "measured", "verdict",
                                       "what limits it (when behind)", NULL};
    table_init(t, "targets", cols);
    table_title(t, "Targets (ratios measured in this run)");
    char m[192], why[CELL_CAP];
    double two_pings = 2.0 * (double)ref->ping_median_ns;
    double x = two_pings > 0 ? (double)u->modern_median_ns / two_pings : 0.0;
    snprintf(m, sizeof m, "%.1f us / 2 x %.1f us = %.2f", us(u->modern_median_ns),
             us(ref->ping_median_ns), x);
    double extra_us = us(u->modern_median_ns) - 2 * us(ref->ping_median_ns);
    double extra_server = u->modern_server_us - 2 * u->ping_server_us;
    snprintf(why, sizeof why,
             "%.1f us beyond two PINGs, of which the server's own time accounts for %.1f us "
             "(commandstats: %.1f us per SET + release script, %.1f us per PING); what it "
             "does not account for is the client's side: token, command building, replies",
             extra_us, extra_server, u->modern_server_us, u->ping_server_us);
    target(t, "uncontended modern acquire+release, median over two PING medians", "<= 1.10", m,
           x <= T_UNCONTENDED_X, x / T_UNCONTENDED_X, why);
    const contended *peer = best_peer(set, 1), *loop = best_peer(set, 0);
    for (int i = 0; i < set->n; i++) {
        const contended *r = &set->r[i];
        if (r->ours && r->clients == TARGET_CLIENTS && r->status != RUN_SKIPPED &&
            r->status != RUN_NOT_BUILT)
            contended_targets(t, r, peer, loop, p);
    }
    for (int i = 0; i < set->n; i++)
        if (set->r[i].ours && set->r[i].status == RUN_NOT_BUILT)
            target(t, set->r[i].name, "all contended targets", "not built yet", 0, -1,
                   "not built yet");
    double ax = a->ratio_median;
    snprintf(m, sizeof m, "%.0f / %.0f, median of %d rounds = %.3f", a->lock_median,
             a->set_median, a->rounds, ax);
    double server_us = a->locks ? (double)a->server_usec / (double)a->locks : 0.0;
    snprintf(why, sizeof why,
             "a lock is %.2f commands run by the server (its SET, its PUBLISH, its share of "
             "one EVALSHA, MGET and DEL for the releases of a loop turn), a SET 1, and no "
             "safe release is a single command on Redis 7.0; "
             "the server spent %.2f us executing each lock (at most %.0f locks/s "
             "for the server alone, %.2f of the SET rate), busy %.0f%% of the run; the rest "
             "is I/O and the one client thread",
             per_op(a->server_calls, a->locks), server_us,
             server_us > 0 ? 1e6 / server_us : 0.0,
             server_us > 0 && a->set_median > 0 ? 1e6 / server_us / a->set_median : 0.0,
             a->seconds > 0 ? (double)a->server_usec / 1e4 / a->seconds : 0.0);
    target(t, "one async thread: locks/s on distinct keys over the pipelined SET rate", ">= 0.30", m,
           ax >= T_ASYNC_X, ax / T_ASYNC_X, why);
    for (int k = 1; k < CONTROL_PAIR; k++) wake_targets(t, &p[k], &p[CONTROL_PAIR]);
}

/* Correctness, not speed: lost updates, overlaps, failed runs of lockbridge
 * and command counts that disagree with the server make the run fail. A
 * peer's failure is its own: reported in its row, not in the exit status. */
static int correctness(const contended_set *set, const uncontended_summary *u) {
    int bad = !u->checks_ok || u->failures;
    for (int i = 0; i < set->n; i++) bad |= set->r[i].ours && set->r[i].status == RUN_FAILED;
    return bad ? -1 : 0;
}

/* ---- Program ------------------------------------------------------------------------ */
static void usage(FILE *f) {
    fprintf(f,
            "usage: lockbridge-bench [--csv PATH] [--markdown PATH] [--plot-data PATH]\n"
            "                        [--samples N] [--seconds S] [--async-seconds S]\n"
            "                        [--locks N] [--inflight N] [--peers DIR] [--no-peers]\n"
            "                        [--async-only] [--versions]\n"
            "  --samples N        timed operations per uncontended row (default %d)\n"
            "  --seconds S        length of each contended run, seconds (default %.0f)\n"
            "  --async-seconds S  length of the many-keys run, seconds (default %.0f)\n"
            "  --locks N          locks held at once for the memory figures (default %d)\n"
            "  --inflight N       lock handles in flight in the many-keys run (default %d)\n"
            "  --async-only       run and print the many-keys rounds alone (no files written)\n"
            "  --peers DIR        the peers' driver scripts (default tests/bench/peers)\n",
            DEFAULT_SAMPLES, DEFAULT_SECONDS, DEFAULT_ASYNC_S, DEFAULT_LOCKS, ASYNC_INFLIGHT);
}

static int parse_num(const char *v, double lo, double hi, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi)) return -1;
    *out = d;
    return 0;
}

/* Returns 0 to run, 1 to exit successfully, -1 on a usage error. */
static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->samples = DEFAULT_SAMPLES;
    o->seconds = DEFAULT_SECONDS;
    o->async_seconds = DEFAULT_ASYNC_S;
    o->locks = DEFAULT_LOCKS;
    o->inflight = ASYNC_INFLIGHT;
    o->peers_dir = "tests/bench/peers";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (strcmp(a, "--versions") == 0) {
            printf("lockbridge %s, hiredis %d.%d.%d\n", lb_version(), HIREDIS_MAJOR,
                   HIREDIS_MINOR, HIREDIS_PATCH);
            return 1;
        }
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--no-peers") == 0) {
            o->no_peers = 1;
            continue;
        }
        if (strcmp(a, "--async-only") == 0) {
            o->async_only = 1;
            continue;
        }
        if (!v) return -1;
        i++;
        if (strcmp(a, "--csv") == 0) o->csv = v;
        else if (strcmp(a, "--markdown") == 0) o->markdown = v;
        else if (strcmp(a, "--plot-data") == 0) o->plot = v;
        else if (strcmp(a, "--peers") == 0) o->peers_dir = v;
        else if (strcmp(a, "--samples") == 0 && parse_num(v, 20, 1e7, &d) == 0) o->samples = (int)d;
        else if (strcmp(a, "--seconds") == 0 && parse_num(v, 0.1, 600, &d) == 0) o->seconds = d;
        else if (strcmp(a, "--async-seconds") == 0 && parse_num(v, 0.1, 600, &d) == 0)
            o->async_seconds = d;
        else if (strcmp(a, "--locks") == 0 && parse_num(v, 1, 1e7, &d) == 0) o->locks = (int)d;
        else if (strcmp(a, "--inflight") == 0 && parse_num(v, 1, 65536, &d) == 0)
            o->inflight = (int)d;
        else return -1;
    }
    return 0;
}

static int write_file(const char *path, table *const *tables, int n, int markdown) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    if (!markdown) fputs("table,row,column,value\n", f);
    for (int i = 0; i < n; i++) {
        if (markdown) table_markdown(tables[i], f);
        else table_csv(tables[i], f);
    }
    return fclose(f);
}

static int write_outputs(const options *o, table *const *tables, int n, const contended_set *set) {
    int rc = 0;
    for (int i = 0; i < n; i++) table_print(tables[i], stdout);
    if (o->csv) rc |= write_file(o->csv, tables, n, 0);
    if (o->markdown) rc |= write_file(o->markdown, tables, n, 1);
    if (o->plot) rc |= write_plot(o->plot, set);
    if (rc) fprintf(stderr, "bench: cannot write the results\n");
    return rc;
}

/* Everything measured with the server up; returns the program's exit status. */
static int bench(const lbt_redis *server, const options *o, table *tabs, contended_set *set) {
    reference ref;
    uncontended_summary u;
    async_result a;
    memory_result mem;
    memset(&ref, 0, sizeof ref);
    if (o->async_only) {
        int rc = run_async_rounds(server, o->async_seconds, o->inflight, SET_REQUESTS, &a);
        fill_async(&tabs[T_ASYNC], &a);
        table_print(&tabs[T_ASYNC], stdout);
        return rc == 0 ? 0 : 1;
    }
    if (run_uncontended(server, o->samples, &tabs[T_UNCONT], &ref, &u) != 0) return 2;
    fprintf(stderr, "bench: redis-benchmark -P 16 -t set\n");
    if (reference_set_rate(server, SET_REQUESTS, &ref) != 0)
        fprintf(stderr, "bench: no pipelined SET rate: its target cannot be checked\n");
    fill_reference(&tabs[T_REF], &ref);
    redisContext *ctl = lbt_redis_connect(server);
    if (!ctl) return 2;
    peers_table_attach(&tabs[T_PEERS]);
    run_contended_ours(server, ctl, o->seconds, set);
    if (!o->no_peers) run_contended_peers(server, ctl, o->seconds, o->peers_dir, set);
    paired_result paired[N_PAIRS];
    memset(paired, 0, sizeof paired);
    snprintf(paired[0].ours, sizeof paired[0].ours, "%s", PAIRED_STRATEGY);
    paired[0].clients = TARGET_CLIENTS;
    const contended *best = best_peer(set, 1);
    if (best) {
        snprintf(paired[0].peer, sizeof paired[0].peer, "%s", best->name);
        fprintf(stderr, "bench: %s and %s side by side\n", paired[0].ours, paired[0].peer);
        if (run_paired(server, ctl, o->peers_dir, o->seconds, &paired[0]) != 0)
            fprintf(stderr, "bench: a paired round failed: the single runs decide\n");
    }
    for (int k = 1; k <= CONTROL_PAIR; k++) {
        paired_result *w = &paired[k];
        int control = k == CONTROL_PAIR;
        if (!control && k - 1 >= N_CLIENT_COUNTS) continue;
        snprintf(w->ours, sizeof w->ours, "%s", control ? POLL_STRATEGY : WAKE_STRATEGY);
        snprintf(w->peer, sizeof w->peer, "%s", POLL_STRATEGY);
        w->peer_ours = 1;
        w->clients = control ? TARGET_CLIENTS : CLIENT_COUNTS[k - 1];
        fprintf(stderr, "bench: %s side by side, %d clients\n",
                control ? "polling and polling (the control)" : "waking on release and polling",
                w->clients);
        if (run_paired(server, ctl, o->peers_dir, o->seconds, w) != 0)
            fprintf(stderr, "bench: a paired round failed\n");
    }
    redisFree(ctl);
    fill_contended(&tabs[T_CONT], set, o->seconds);
    fill_paired(&tabs[T_PAIRED], paired, N_PAIRS);
    fprintf(stderr, "bench: many keys from one async thread\n");
    run_async_rounds(server, o->async_seconds, o->inflight, SET_REQUESTS, &a);
    fill_async(&tabs[T_ASYNC], &a);
    fprintf(stderr, "bench: memory with %d locks held\n", o->locks);
    run_memory(server, o->locks, &mem);
    fill_memory(&tabs[T_MEM], &mem);
    fill_targets(&tabs[T_TARGETS], &ref, &u, set, &a, paired);
    table *order[] = {&tabs[T_TARGETS], &tabs[T_REF], &tabs[T_UNCONT], &tabs[T_CONT],
                      &tabs[T_PAIRED], &tabs[T_PEERS], &tabs[T_ASYNC], &tabs[T_MEM]};
    int out = write_outputs(o, order, N_TABLES, set);
    int ok = correctness(set, &u) == 0 && a.errors == 0 && mem.errors == 0;
    return out == 0 && ok ? 0 : 1;
}

int main(int argc, char **argv) {
    options o;
    int a = parse_args(argc, argv, &o);
    if (a != 0) {
        if (a < 0) usage(stderr);
        return a < 0 ? 2 : 0;
    }
    table *tabs = calloc(N_TABLES, sizeof *tabs);
    contended_set *set = calloc(1, sizeof *set);
    lbt_redis server;
    if (!tabs || !set || lbt_redis_start(&server, NULL) != 0) {
        free(tabs);
        free(set);
        return 2;
    }
    int status = bench(&server, &o, tabs, set);
    lbt_redis_stop(&server);
    contended_free(set);
    free(set);
    free(tabs);
    return status;
}
