/* Fuzz target for the lockbridge tool's argument parsing (tool/common/args.c,
 * compiled in here since the tool is not part of the library): the input,
 * split at NUL bytes, is an argument vector. Whatever it holds, the parser
 * accepts it or refuses it with a message; what it accepts stays within its
 * tables, and every integer it reads prints back to the same integer. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/common/args.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) \
    do {            \
        if (!(cond)) abort(); \
    } while (0)

#define MAX_ARGS 16

static const lb__cli_optdef cli_opts[] = {
    {"--ttl", 1}, {"--key", LB__CLI_REPEAT}, {"--force", 0}, {"--codec", 1}, {NULL, 0},
};

/* Usage errors go to stderr; keep them out of the fuzzer's log. */
static int quiet_begin(void) {
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
    return saved;
}

static void quiet_end(int saved) {
    if (saved < 0) return;
    dup2(saved, 2);
    close(saved);
}

static void check_i64(const char *s) {
    int64_t v = 0;
    if (lb__cli_parse_i64(s, strlen(s), &v) != 0) return;
    char back[32];
    snprintf(back, sizeof back, "%lld", (long long)v);
    int64_t again = -1;
    CHECK(lb__cli_parse_i64(back, strlen(back), &again) == 0 && again == v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char buf[1024];
    if (size == 0) return 0;
    size_t n = size - 1 < sizeof buf - 1 ? size - 1 : sizeof buf - 1;
    memcpy(buf, data + 1, n);
    buf[n] = '\0';
    char *argv[MAX_ARGS];
    int argc = 0;
    for (char *p = buf; argc < MAX_ARGS && p <= buf + n; p += strlen(p) + 1) argv[argc++] = p;

    lb__cli_args a;
    lb__cli_args_init(&a, "lockbridge");
    int used = -1;
    int saved = quiet_begin();
    int rc = lb__cli_parse(&a, argc, argv, cli_opts, 2, data[0] & 1, &used);
    quiet_end(saved);
    CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        CHECK(used >= 0 && used <= argc);
        CHECK(a.npos >= 0 && a.npos <= 2);
        for (int i = 0; i < a.npos; i++) CHECK(a.pos[i] >= buf && a.pos[i] <= buf + n);
        CHECK(a.nrep >= 0 && a.nrep <= LB__CLI_MAX_REPEATS);
        for (int i = 0; i < a.nrep; i++) CHECK(a.rep[i].index >= 0 && a.rep[i].index < 4);
    }
    for (int i = 0; i < argc; i++) check_i64(argv[i]);
    return 0;
}
