/* Test harness: the lockbridge tool run as a child process, its output and JSON lines read. */
#ifndef LOCKBRIDGE_TEST_PROC_H
#define LOCKBRIDGE_TEST_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

/* Arguments a run may pass to the tool, past the tool's own path. */
#define LBT_MAX_ARGS 32
/* A tool that has not answered in this long is stuck: the test fails rather
 * than hangs. It bounds a hang only; no outcome depends on it (milliseconds). */
#define LBT_STUCK_MS 30000
/* JSON lines lbt_parse reads at most. */
#define LBT_MAX_LINES 8

typedef struct lbt_proc {
    pid_t pid;
    int out_fd, err_fd;
    char out[1 << 16]; /* stdout so far, NUL-terminated */
    size_t outlen;
    char err[1 << 13]; /* stderr so far, NUL-terminated */
    size_t errlen;
} lbt_proc;

typedef struct lbt_lines {
    int n;
    cJSON *line[LBT_MAX_LINES];
} lbt_lines;

/* Finds the tool: $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build).
 * Returns 0 if it is executable; otherwise says so on stderr, naming `test`,
 * and returns -1. */
int lbt_tool_init(const char *test);
/* The tool's path, as lbt_tool_init found it. */
const char *lbt_tool(void);

/* Starts the tool with the NULL-terminated `args`, stdout and stderr piped. */
void lbt_spawn(lbt_proc *p, const char *const *args);
/* Waits until the tool has printed `lines` complete lines on stdout. */
void lbt_wait_lines(lbt_proc *p, int lines);
/* Collects the rest of the output; returns the exit code. */
int lbt_finish(lbt_proc *p);
/* Like lbt_finish, calling `meanwhile` (may be NULL) between reads at most
 * every `every_ms`. */
int lbt_finish_with(lbt_proc *p, void (*meanwhile)(void), int every_ms);
/* lbt_spawn, then lbt_finish: the exit code. */
int lbt_run(lbt_proc *p, const char *const *args);

/* Checks a run's exit code `rc` against `expect_exit` (failing with the run's
 * output if they differ) and that every stdout line is JSON; returns the last
 * line parsed (caller frees). */
cJSON *lbt_last_json(const lbt_proc *p, int rc, int expect_exit);
/* lbt_run, then lbt_last_json. */
cJSON *lbt_run_json(lbt_proc *p, const char *const *args, int expect_exit);

/* Parses every stdout line as JSON; each must be valid. */
void lbt_parse(const lbt_proc *p, lbt_lines *out);
void lbt_lines_free(lbt_lines *l);

/* A field of a JSON object, which must be of that type. */
const char *lbt_str_of(const cJSON *o, const char *name);
double lbt_num_of(const cJSON *o, const char *name);
int lbt_bool_of(const cJSON *o, const char *name);

#endif
