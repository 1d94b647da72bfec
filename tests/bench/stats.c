/* lockbridge-bench: the clock, samples and their percentiles, command tallies
 * read from INFO commandstats, and memory readings of the server and ourselves. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"

int64_t bench_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ms(int64_t ms_) {
    if (ms_ <= 0) return;
    struct timespec ts = {(time_t)(ms_ / 1000), (long)(ms_ % 1000) * 1000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* ---- Samples ------------------------------------------------------------------- */
int samples_push(samples *s, int64_t ns) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
    return 0;
}

int samples_append(samples *dst, const samples *src) {
    for (size_t i = 0; i < src->n; i++)
        if (samples_push(dst, src->v[i]) != 0) return -1;
    return 0;
}

void samples_free(samples *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void samples_sort(samples *s) {
    if (s->n) qsort(s->v, s->n, sizeof *s->v, cmp_i64);
}

int64_t percentile(const samples *sorted, double p) {
    if (sorted->n == 0) return 0;
    size_t rank = (size_t)((p / 100.0) * (double)sorted->n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > sorted->n) rank = sorted->n;
    return sorted->v[rank - 1];
}

int64_t samples_max(const samples *sorted) { return sorted->n ? sorted->v[sorted->n - 1] : 0; }

double us(int64_t ns) { return (double)ns / 1e3; }
double ms(int64_t ns) { return (double)ns / 1e6; }
double per_op(uint64_t n, uint64_t ops) { return ops ? (double)n / (double)ops : 0.0; }

/* ---- Tallies ------------------------------------------------------------------- */
void tally_add(tally *t, const char *name, size_t len, uint64_t calls) {
    char key[TALLY_NAME_CAP];
    if (len >= sizeof key) len = sizeof key - 1;
    for (size_t i = 0; i < len; i++) key[i] = (char)tolower((unsigned char)name[i]);
    key[len] = '\0';
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], key) == 0) {
            t->calls[i] += calls;
            return;
        }
    if (t->n == TALLY_MAX) {
        t->overflow = 1;
        return;
    }
    memcpy(t->name[t->n], key, len + 1);
    t->calls[t->n++] = calls;
}

uint64_t tally_get(const tally *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) return t->calls[i];
    return 0;
}

uint64_t tally_usec(const tally *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) return t->usec[i];
    return 0;
}

void tally_add_usec(tally *t, const char *name, uint64_t usec) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) t->usec[i] += usec;
}

uint64_t tally_total(const tally *t) {
    uint64_t sum = 0;
    for (int i = 0; i < t->n; i++) sum += t->calls[i];
    return sum;
}

int server_tally(redisContext *c, tally *t) {
    memset(t, 0, sizeof *t);
    redisReply *r = redisCommand(c, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    const char *p = r->str;
    while ((p = strstr(p, "cmdstat_")) != NULL) {
        p += strlen("cmdstat_");
        const char *colon = strchr(p, ':');
        if (!colon || strncmp(colon + 1, "calls=", 6) != 0) break;
        char *end, name[TALLY_NAME_CAP];
        unsigned long long calls = strtoull(colon + 7, &end, 10), usec = 0;
        if (end == colon + 7) break;
        if (strncmp(end, ",usec=", 6) == 0) usec = strtoull(end + 6, &end, 10);
        size_t len = (size_t)(colon - p) < sizeof name ? (size_t)(colon - p) : sizeof name - 1;
        memcpy(name, p, len);
        name[len] = '\0';
        if (strcmp(name, "info") != 0) {
            tally_add(t, name, len, calls);
            tally_add_usec(t, name, usec);
        }
        p = end;
    }
    freeReplyObject(r);
    return t->overflow ? -1 : 0;
}

void tally_accumulate(tally *acc, const tally *after, const tally *before) {
    for (int i = 0; i < after->n; i++) {
        uint64_t was = tally_get(before, after->name[i]);
        if (after->calls[i] > was) {
            tally_add(acc, after->name[i], strlen(after->name[i]), after->calls[i] - was);
            tally_add_usec(acc, after->name[i], after->usec[i] - tally_usec(before, after->name[i]));
        }
    }
}

void tally_mix(const tally *t, uint64_t ops, char *out, size_t cap) {
    int order[TALLY_MAX];
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < t->n; i++) {
        int j = i;
        for (; j > 0 && strcmp(t->name[order[j - 1]], t->name[i]) > 0; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < t->n && o < cap; k++) {
        int i = order[k];
        int n = snprintf(out + o, cap - o, "%s%s %.2g", k ? ", " : "", t->name[i],
                         per_op(t->calls[i], ops));
        if (n < 0) break;
        o += (size_t)n;
    }
}

/* ---- Memory readings ----------------------------------------------------------- */
long long server_info_int(redisContext *c, const char *section, const char *field) {
    redisReply *r = redisCommand(c, "INFO %s", section);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        size_t flen = strlen(field);
        for (const char *p = r->str; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
            if (strncmp(p, field, flen) == 0 && p[flen] == ':') {
                v = strtoll(p + flen + 1, NULL, 10);
                break;
            }
    }
    if (r) freeReplyObject(r);
    return v;
}

long long self_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtoll(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}
