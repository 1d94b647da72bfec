/* Runs the lockbridge tool as a child process for tests and reads its output (see proc.h). */
#include "harness/proc.h"

#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char tool[512];

int lbt_tool_init(const char *test) {
    const char *t = getenv("LB_TOOL"), *build = getenv("BUILD");
    if (t) snprintf(tool, sizeof tool, "%s", t);
    else snprintf(tool, sizeof tool, "%s/lockbridge", build && *build ? build : "build");
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "%s: no tool at %s (set LB_TOOL or BUILD)\n", test, tool);
        return -1;
    }
    return 0;
}

const char *lbt_tool(void) { return tool; }

void lbt_spawn(lbt_proc *p, const char *const *args) {
    const char *argv[LBT_MAX_ARGS + 2];
    int n = 0, out[2], err[2];
    argv[n++] = tool;
    for (int i = 0; args[i]; i++) {
        assert_true(n < LBT_MAX_ARGS);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    memset(p, 0, sizeof *p);
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        execv(tool, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    p->out_fd = out[0];
    p->err_fd = err[0];
}

/* Reads whatever is ready on one pipe; closes it at end of file. */
static void drain(int *fd, char *buf, size_t cap, size_t *len) {
    char tmp[4096];
    ssize_t n = read(*fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return;
    }
    assert_true(*len + (size_t)n < cap);
    memcpy(buf + *len, tmp, (size_t)n);
    *len += (size_t)n;
    buf[*len] = '\0';
}

/* One round of reading both pipes; fails the test if nothing comes for too long. */
static void pump(lbt_proc *p) {
    struct pollfd fds[2] = {{p->out_fd, POLLIN, 0}, {p->err_fd, POLLIN, 0}};
    int rc = poll(fds, 2, LBT_STUCK_MS);
    if (rc < 0 && errno == EINTR) return;
    assert_true(rc > 0);
    if (p->out_fd >= 0 && fds[0].revents) drain(&p->out_fd, p->out, sizeof p->out, &p->outlen);
    if (p->err_fd >= 0 && fds[1].revents) drain(&p->err_fd, p->err, sizeof p->err, &p->errlen);
}

void lbt_wait_lines(lbt_proc *p, int lines) {
    for (;;) {
        int seen = 0;
        for (size_t i = 0; i < p->outlen; i++) seen += p->out[i] == '\n';
        if (seen >= lines) return;
        assert_true(p->out_fd >= 0);
        pump(p);
    }
}

static int reap(const lbt_proc *p) {
    int status;
    assert_int_equal(waitpid(p->pid, &status, 0), p->pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

int lbt_finish(lbt_proc *p) {
    while (p->out_fd >= 0 || p->err_fd >= 0) pump(p);
    return reap(p);
}

int lbt_finish_with(lbt_proc *p, void (*meanwhile)(void), int every_ms) {
    int idle_ms = 0;
    while (p->out_fd >= 0 || p->err_fd >= 0) {
        struct pollfd fds[2] = {{p->out_fd, POLLIN, 0}, {p->err_fd, POLLIN, 0}};
        if (meanwhile) meanwhile();
        int rc = poll(fds, 2, every_ms);
        if (rc < 0 && errno == EINTR) continue;
        assert_true(rc >= 0);
        idle_ms = rc == 0 ? idle_ms + every_ms : 0;
        assert_true(idle_ms < LBT_STUCK_MS);
        if (p->out_fd >= 0 && fds[0].revents) drain(&p->out_fd, p->out, sizeof p->out, &p->outlen);
        if (p->err_fd >= 0 && fds[1].revents) drain(&p->err_fd, p->err, sizeof p->err, &p->errlen);
    }
    return reap(p);
}

int lbt_run(lbt_proc *p, const char *const *args) {
    lbt_spawn(p, args);
    return lbt_finish(p);
}

void lbt_parse(const lbt_proc *p, lbt_lines *out) {
    char copy[sizeof p->out];
    memcpy(copy, p->out, p->outlen + 1);
    memset(out, 0, sizeof *out);
    char *save = NULL;
    for (char *s = strtok_r(copy, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        assert_true(out->n < LBT_MAX_LINES);
        out->line[out->n] = cJSON_Parse(s);
        if (!out->line[out->n]) fail_msg("not JSON: %s", s);
        out->n++;
    }
}

/* Unlike lbt_parse, any number of lines: a scan may print one per key. */
cJSON *lbt_last_json(const lbt_proc *p, int rc, int expect_exit) {
    if (rc != expect_exit)
        fail_msg("exit %d, expected %d:\n%s%s", rc, expect_exit, p->out, p->err);
    char copy[sizeof p->out];
    memcpy(copy, p->out, p->outlen + 1);
    cJSON *last = NULL;
    char *save = NULL;
    for (char *s = strtok_r(copy, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        cJSON_Delete(last);
        last = cJSON_Parse(s);
        if (!last) fail_msg("not JSON: %s", s);
    }
    if (!last) fail_msg("no output; stderr: %s", p->err);
    return last;
}

cJSON *lbt_run_json(lbt_proc *p, const char *const *args, int expect_exit) {
    return lbt_last_json(p, lbt_run(p, args), expect_exit);
}

void lbt_lines_free(lbt_lines *l) {
    for (int i = 0; i < l->n; i++) cJSON_Delete(l->line[i]);
    l->n = 0;
}

const char *lbt_str_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v)) fail_msg("field %s is not a string", name);
    return v->valuestring;
}

double lbt_num_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v)) fail_msg("field %s is not a number", name);
    return v->valuedouble;
}

int lbt_bool_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsBool(v)) fail_msg("field %s is not a boolean", name);
    return cJSON_IsTrue(v);
}
