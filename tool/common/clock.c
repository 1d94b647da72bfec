/* Real time for the tool's commands: a monotonic reading for measuring waits,
 * plain sleeps, and waits that SIGINT or SIGTERM end early. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "tool/common/cli.h"

double lb__cli_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static struct timespec ts_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    return ts;
}

void lb__cli_sleep_ms(int64_t ms) {
    struct timespec ts = ts_ms(ms);
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static void stop_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

void lb__cli_block_signals(void) {
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* The signals are blocked, so one that arrives at any moment stays pending
 * until sigtimedwait takes it: there is no window in which it is missed. A
 * zero wait only takes a signal already pending. */
int lb__cli_wait_signal(int64_t ms) {
    sigset_t set;
    stop_signals(&set);
    double deadline = lb__cli_mono_ms() + (double)ms;
    for (;;) {
        double left = deadline - lb__cli_mono_ms();
        struct timespec ts = ts_ms(left > 0 ? (int64_t)ceil(left) : 0);
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) return 1;
        if (sig == -1 && errno == EAGAIN) return 0;
    }
}
