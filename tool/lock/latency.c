/* The latency histogram: bucket arithmetic, merging and quantiles. */
#include <math.h>

#include "tool/lock/latency.h"

#define SUB (1u << LB__CLI_LAT_SUB_BITS)

/* Values below 2*SUB have a bucket each; above, a value's bucket is its top
 * SUB_BITS+1 significant bits, which bounds the relative error by 1/SUB. */
static unsigned bucket_of(uint64_t us) {
    if (us < 2 * SUB) return (unsigned)us;
    unsigned msb = 63u - (unsigned)__builtin_clzll(us);
    if (msb > LB__CLI_LAT_MAX_BITS) return LB__CLI_LAT_BUCKETS - 1;
    unsigned shift = msb - LB__CLI_LAT_SUB_BITS;
    return (shift << LB__CLI_LAT_SUB_BITS) + (unsigned)(us >> shift);
}

/* The middle of a bucket, in microseconds. */
static double bucket_mid_us(unsigned b) {
    if (b < 2 * SUB) return (double)b;
    unsigned shift = (b >> LB__CLI_LAT_SUB_BITS) - 1;
    uint64_t top = SUB + (b & (SUB - 1)), low = top << shift, width = (uint64_t)1 << shift;
    return (double)low + (double)(width - 1) / 2.0;
}

void lb__cli_latency_add(lb__cli_latency *h, double ms) {
    if (!(ms >= 0)) ms = 0; /* NaN and negative readings count as zero */
    double us = round(ms * 1000.0);
    uint64_t v = us >= 0x1p63 ? UINT64_MAX : (uint64_t)us;
    h->buckets[bucket_of(v)]++;
    h->count++;
    if (ms > h->max_ms) h->max_ms = ms;
}

void lb__cli_latency_merge(lb__cli_latency *into, const lb__cli_latency *from) {
    for (unsigned b = 0; b < LB__CLI_LAT_BUCKETS; b++) into->buckets[b] += from->buckets[b];
    into->count += from->count;
    if (from->max_ms > into->max_ms) into->max_ms = from->max_ms;
}

double lb__cli_latency_quantile(const lb__cli_latency *h, double q) {
    if (h->count == 0) return 0;
    uint64_t rank = (uint64_t)ceil(q * (double)h->count), seen = 0;
    if (rank < 1) rank = 1;
    for (unsigned b = 0; b < LB__CLI_LAT_BUCKETS; b++) {
        seen += h->buckets[b];
        if (seen >= rank) {
            double ms = bucket_mid_us(b) / 1000.0;
            return ms < h->max_ms ? ms : h->max_ms;
        }
    }
    return h->max_ms;
}
