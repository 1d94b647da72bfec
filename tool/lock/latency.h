/* Latency recording for the tool: a fixed-size log-linear histogram, so a run of
 * any length uses the same memory, with quantiles within 1/64 of the true value. */
#ifndef LOCKBRIDGE_CLI_LATENCY_H
#define LOCKBRIDGE_CLI_LATENCY_H

#include <stdint.h>

/* Samples are kept in microseconds: exact below 128 us, then 64 buckets per
 * doubling below 2^41 us (about 25 days); longer samples land in the last one. */
#define LB__CLI_LAT_SUB_BITS 6
#define LB__CLI_LAT_MAX_BITS 40
#define LB__CLI_LAT_BUCKETS \
    ((LB__CLI_LAT_MAX_BITS - LB__CLI_LAT_SUB_BITS + 2) << LB__CLI_LAT_SUB_BITS)

typedef struct lb__cli_latency {
    uint64_t count;
    double max_ms; /* exact */
    uint64_t buckets[LB__CLI_LAT_BUCKETS];
} lb__cli_latency;

/* Records one sample, in milliseconds. */
void lb__cli_latency_add(lb__cli_latency *h, double ms);
/* Adds every sample of `from` to `into`. */
void lb__cli_latency_merge(lb__cli_latency *into, const lb__cli_latency *from);
/* The q-quantile (0 < q <= 1) in milliseconds, at most the exact maximum; 0 when empty. */
double lb__cli_latency_quantile(const lb__cli_latency *h, double q);

#endif
