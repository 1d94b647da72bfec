/* Paired rounds: one of our strategies and the best peer library, run back to
 * back, alternately, several times; the rate target reads their median ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

/* A single run of each side a minute apart compares two moments of a shared
 * machine as much as two lockers: on two CPUs, rates of one strategy move by
 * a fifth between runs. Side by side, each pair sees about the same machine,
 * alternating who goes first cancels a drift within the pair, and the median
 * of the pairs' ratios ignores one disturbed pair. */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double rate_of(const contended *r) {
    return r->seconds > 0 ? (double)r->acquisitions / r->seconds : 0.0;
}

/* max/min acquisitions per client; 1e9 when a client starved. */
static double spread_of(const contended *r) {
    return r->min_client ? (double)r->max_client / (double)r->min_client : 1e9;
}

static int one_side(const lbt_redis *server, redisContext *ctl, const char *peers_dir,
                    const paired_result *p, int peer, double seconds, double *rate,
                    double *spread) {
    contended r;
    memset(&r, 0, sizeof r);
    int rc = peer && !p->peer_ours
                 ? peer_rerun(server, ctl, peers_dir, p->peer, p->clients, seconds, &r)
                 : contended_rerun(server, ctl, peer ? p->peer : p->ours, p->clients, seconds, &r);
    if (rc == 0 && r.status != RUN_OK) rc = -1;
    *rate = rc == 0 ? rate_of(&r) : 0.0;
    *spread = rc == 0 ? spread_of(&r) : 0.0;
    samples_free(&r.tta);
    samples_free(&r.handoff);
    return rc;
}

static double median_of(const double *v, int n) {
    double sorted[PAIRED_ROUNDS];
    memcpy(sorted, v, (size_t)n * sizeof sorted[0]);
    qsort(sorted, (size_t)n, sizeof sorted[0], cmp_double);
    return sorted[n / 2];
}

int run_paired(const lbt_redis *server, redisContext *ctl, const char *peers_dir, double seconds,
               paired_result *p) {
    p->rounds = 0;
    p->median = p->spread_median = 0.0;
    for (int i = 0; i < PAIRED_ROUNDS; i++) {
        double rate[2], spread[2]; /* [0] ours, [1] the peer's */
        int first = i % 2; /* even rounds: ours first */
        if (one_side(server, ctl, peers_dir, p, first, seconds, &rate[first], &spread[first]) != 0 ||
            one_side(server, ctl, peers_dir, p, !first, seconds, &rate[!first], &spread[!first]) != 0 ||
            rate[1] <= 0 || spread[1] <= 0)
            break;
        p->ours_rate[i] = rate[0];
        p->peer_rate[i] = rate[1];
        p->ratio[i] = rate[0] / rate[1];
        p->ours_spread[i] = spread[0];
        p->peer_spread[i] = spread[1];
        p->spread_ratio[i] = spread[0] / spread[1];
        p->rounds++;
        fprintf(stderr, "bench: paired round %d, %d clients: %.0f / %.0f = %.2f\n", i + 1,
                p->clients, rate[0], rate[1], p->ratio[i]);
    }
    if (p->rounds < PAIRED_ROUNDS) return -1;
    p->median = median_of(p->ratio, PAIRED_ROUNDS);
    p->spread_median = median_of(p->spread_ratio, PAIRED_ROUNDS);
    return 0;
}

void fill_paired(table *t, const paired_result *p, int n) {
    static const char *const cols[] = {"ours", "against", "clients", "round", "first",
                                       "ours acq/s", "theirs acq/s", "ratio",
                                       "ours max/min", "theirs max/min", NULL};
    table_init(t, "paired", cols);
    table_title(t, "Side by side: %d rounds back to back of each pair (the targets read the "
                   "median ratios)", PAIRED_ROUNDS);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < p[k].rounds; i++) {
            int r = table_row(t);
            cell(t, r, 0, "%s", p[k].ours);
            cell(t, r, 1, "%s", p[k].peer[0] ? p[k].peer : "no peer");
            cell(t, r, 2, "%d", p[k].clients);
            cell(t, r, 3, "%d", i + 1);
            cell(t, r, 4, "%s", i % 2 ? "theirs" : "ours");
            cell(t, r, 5, "%.0f", p[k].ours_rate[i]);
            cell(t, r, 6, "%.0f", p[k].peer_rate[i]);
            cell(t, r, 7, "%.2f", p[k].ratio[i]);
            cell(t, r, 8, "%.2f", p[k].ours_spread[i]);
            cell(t, r, 9, "%.2f", p[k].peer_spread[i]);
        }
}
