/* The search (race_search.c): random schedules over the real clients, the
 * first one caught shrunk to a catalogue line (`lockbridge race --search`). */
#ifndef LOCKBRIDGE_CLI_RACE_SEARCH_H
#define LOCKBRIDGE_CLI_RACE_SEARCH_H

#include <hiredis/hiredis.h>

#include "tool/race/race.h"

typedef struct lb__race_search {
    lb__race_proxy *proxy;
    redisContext *ctl;          /* the tool's own connection: resets the keys */
    const lb__race_config *cfg;
    const char **client_cmd;    /* [LB__RACE_MAX_CLIENTS]; NULL: not given */
    const int *ports;
    const char *dir;            /* the run's folder for the clients' stderr; "" none */
    int64_t start_timeout_ms;
    int schedules;              /* --search N: schedules drawn at most */
    uint64_t seed;              /* --seed S */
    int shrink_tries;           /* runs the shrinking may take */
    /* Called after every run ("draw", "shrink", "replay") with the schedule
     * as run, steps named where they went through; and once after the
     * recording ("record", n 0, line: the clients' sequences). */
    void (*progress)(const char *phase, int n, lb__race_verdict v, const char *kind,
                     const char *line);
} lb__race_search;

typedef struct lb__race_found {
    int found, tried, shrink_runs, replayed, tokens;
    char kind[32];
    char detail[1024];
    char recorded[LB__RACE_SCHED_MAX]; /* each client's lone sequence, " | " between */
    char first[LB__RACE_SCHED_MAX];    /* the schedule caught, as drawn, steps named */
    char schedule[LB__RACE_SCHED_MAX]; /* shrunk, steps named: the catalogue line */
    char *trace;                       /* the shrunk line's replay; the caller frees it */
} lb__race_found;

/* Records each client alone, then draws up to `schedules` schedules from the
 * seed and runs each until one is caught, which is shrunk and replayed as
 * printed. CAUGHT (f->found), PASSED (none caught), NOT_FOLLOWED (a client
 * recorded nothing: f->detail) or ERROR. */
lb__race_verdict lb__race_search_run(const lb__race_search *se, lb__race_found *f);

#endif
