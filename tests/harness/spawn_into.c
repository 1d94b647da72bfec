/* Test harness: a program with its stdout into a temporary file (see spawn_into.h). */
#include <stdlib.h>
#include <unistd.h>

#include "harness/spawn_into.h"

pid_t lbt_spawn_into(char *const argv[], char *path) {
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd);
    return pid;
}
