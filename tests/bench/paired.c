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

static int one_side(const lbt_redis *server, redisContext *ctl, const char *peers_dir,
                    const paired_result *p, int peer, double seconds, double *rate) {
    contended r;
    int rc = peer ? peer_rerun(server, ctl, peers_dir, p->peer, p->clients, seconds, &r)
                  : contended_rerun(server, ctl, p->ours, p->clients, seconds, &r);
    if (rc == 0 && r.status != RUN_OK) rc = -1;
    *rate = rc == 0 ? rate_of(&r) : 0.0;
    samples_free(&r.tta);
    samples_free(&r.handoff);
    return rc;
}

int run_paired(const lbt_redis *server, redisContext *ctl, const char *peers_dir, double seconds,
               paired_result *p) {
    p->rounds = 0;
    p->median = 0.0;
    for (int i = 0; i < PAIRED_ROUNDS; i++) {
        double rate[2]; /* [0] ours, [1] the peer's */
        int first = i % 2; /* even rounds: ours first */
        if (one_side(server, ctl, peers_dir, p, first, seconds, &rate[first]) != 0 ||
            one_side(server, ctl, peers_dir, p, !first, seconds, &rate[!first]) != 0 ||
            rate[1] <= 0)
            break;
        p->ours_rate[i] = rate[0];
        p->peer_rate[i] = rate[1];
        p->ratio[i] = rate[0] / rate[1];
        p->rounds++;
        fprintf(stderr, "bench: paired round %d: %.0f / %.0f = %.2f\n", i + 1, rate[0], rate[1],
                p->ratio[i]);
    }
    if (p->rounds < PAIRED_ROUNDS) return -1;
    double sorted[PAIRED_ROUNDS];
    memcpy(sorted, p->ratio, sizeof sorted);
    qsort(sorted, PAIRED_ROUNDS, sizeof sorted[0], cmp_double);
    p->median = sorted[PAIRED_ROUNDS / 2];
    return 0;
}

void fill_paired(table *t, const paired_result *p) {
    static const char *const cols[] = {"round", "first", "ours acq/s", "peer acq/s", "ratio", NULL};
    table_init(t, "paired", cols);
    table_title(t, "Side by side: %s against %s, %d clients, %d rounds back to back (median ratio %.2f)",
                p->ours, p->peer[0] ? p->peer : "no peer", p->clients, p->rounds, p->median);
    for (int i = 0; i < p->rounds; i++) {
        int r = table_row(t);
        cell(t, r, 0, "%d", i + 1);
        cell(t, r, 1, "%s", i % 2 ? "peer" : "ours");
        cell(t, r, 2, "%.0f", p->ours_rate[i]);
        cell(t, r, 3, "%.0f", p->peer_rate[i]);
        cell(t, r, 4, "%.2f", p->ratio[i]);
    }
}
