/* lockbridge-bench: the many-keys row in interleaved rounds: each round
 * measures the pipelined SET rate and then the async locks, and the target
 * reads the median of the rounds' ratios, so that load which comes and goes
 * on a shared machine falls on both sides of the ratio alike. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, int n) {
    double sorted[ASYNC_ROUNDS];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

/* Adds one round's counts to the whole run's. */
static void add_round(async_result *all, const async_result *one) {
    all->seconds += one->seconds;
    all->locks += one->locks;
    all->errors += one->errors;
    all->server_calls += one->server_calls;
    all->server_usec += one->server_usec;
    if (!all->error[0] && one->error[0]) snprintf(all->error, sizeof all->error, "%s", one->error);
}

int run_async_rounds(const lbt_redis *server, double seconds, int inflight, int set_requests,
                     async_result *res) {
    memset(res, 0, sizeof *res);
    res->inflight = (uint64_t)inflight;
    int n = 0;
    for (int i = 0; i < ASYNC_ROUNDS; i++) {
        reference ref;
        memset(&ref, 0, sizeof ref);
        async_result one;
        if (reference_set_rate(server, set_requests / ASYNC_ROUNDS, &ref) != 0) {
            res->errors++;
            snprintf(res->error, sizeof res->error, "round %d: no pipelined SET rate", i + 1);
            break;
        }
        int rc = run_async(server, seconds / ASYNC_ROUNDS, inflight, &one);
        add_round(res, &one);
        if (rc != 0 || one.seconds <= 0) break;
        res->set_rate[n] = ref.set_rate;
        res->lock_rate[n] = (double)one.locks / one.seconds;
        res->ratio[n] = res->lock_rate[n] / ref.set_rate;
        n++;
    }
    res->rounds = n;
    if (n == 0) return -1;
    res->set_median = median_of(res->set_rate, n);
    res->lock_median = median_of(res->lock_rate, n);
    res->ratio_median = median_of(res->ratio, n);
    return res->errors ? -1 : 0;
}
