/* The operator's lockbridge tool as a child process of the race harness, its
 * connections relayed so that its mode write can be held back (tool.c). */
#ifndef LOCKBRIDGE_TEST_RACE_TOOL_H
#define LOCKBRIDGE_TEST_RACE_TOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct lbr_tool lbr_tool;

typedef struct lbr_tool_config {
    int port;             /* the world's redis-server */
    const char *args;     /* the tool's arguments after -p PORT, space-separated */
    /* Non-NULL: the tool's first EVAL or EVALSHA that names this key (the
     * control key: the mode write) is held back until lbr_tool_release. */
    const char *hold_key;
    /* The tool's host clock is set this far from the real clock, ms (0: the
     * real clock). It runs under libfaketime to that end (LB_RACE_FAKETIME,
     * else Debian's path of libfaketime.so.1; tools/deps.sh installs it). */
    int64_t shift_ms;
} lbr_tool_config;

/* The tool the harness runs: LB_RACE_TOOL, else $BUILD/lockbridge, else
 * build/lockbridge. */
const char *lbr_tool_path(void);

/* Starts the tool and relays its connections until it exits or its held
 * write arrives. NULL when no child could be started (errno says). */
lbr_tool *lbr_tool_start(const lbr_tool_config *cfg);
/* 1: the tool waits with its mode write held back; 0: it has exited. */
int lbr_tool_parked(const lbr_tool *t);
/* Lets the held write through and relays until the tool exits. */
void lbr_tool_release(lbr_tool *t);
/* The exit status once exited (128 + N after signal N), -1 before. */
int lbr_tool_status(const lbr_tool *t);
/* The end of what the tool printed on stdout and stderr. */
const char *lbr_tool_output(const lbr_tool *t);
/* Kills the tool if it still runs (its held write is discarded) and frees. */
void lbr_tool_free(lbr_tool *t);

#endif
