/* Test harness: a program started in the background with its stdout into a
 * temporary file, for the tests and the soak that read what it printed. */
#ifndef LBT_SPAWN_INTO_H
#define LBT_SPAWN_INTO_H

#include <sys/types.h>

/* Creates a file from the mkstemp template `path` (rewritten in place to the
 * file's name) and starts argv (argv[0] looked up in PATH) with its stdout
 * into it. The child's pid, or -1 when the file or the process could not be
 * made. */
pid_t lbt_spawn_into(char *const argv[], char *path);

#endif
