/* Replays the fuzz targets of tests/fuzz on their seed corpora and on the
 * inputs that once crashed them (tests/fuzz/regress), so that every build,
 * including the sanitizer builds, checks them without clang. A failing input
 * aborts this binary, which the test runner counts as a failure. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Each target defines LLVMFuzzerTestOneInput: renamed here, one per target. */
#define LLVMFuzzerTestOneInput fuzz_codec_one
#include "fuzz/fuzz_codec.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_machine_one
#include "fuzz/fuzz_machine.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_classify_one
#include "fuzz/fuzz_classify.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_cli_one
#include "fuzz/fuzz_cli.c"
#undef LLVMFuzzerTestOneInput

/* Runs `one` on every file of `dir`; returns how many, -1 if dir is missing. */
static int replay_dir(const char *dir, int (*one)(const uint8_t *, size_t)) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        /* A copy of exactly `len` bytes, so ASan sees reads past the input. */
        uint8_t *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, buf, len);
        one(copy, len);
        free(copy);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *name, int (*one)(const uint8_t *, size_t)) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    int seeds = replay_dir(dir, one);
    if (seeds <= 0) fail_msg("no seed corpus in %s (run from the source tree)", dir);
    snprintf(dir, sizeof dir, "tests/fuzz/regress/%s", name);
    int regress = replay_dir(dir, one);
    print_message("%s: %d seeds, %d regression inputs\n", name, seeds, regress < 0 ? 0 : regress);
}

static void test_codec_corpus_and_regressions_pass(void **state) {
    (void)state;
    replay("fuzz_codec", fuzz_codec_one);
}

static void test_machine_corpus_and_regressions_pass(void **state) {
    (void)state;
    replay("fuzz_machine", fuzz_machine_one);
}

static void test_classify_corpus_and_regressions_pass(void **state) {
    (void)state;
    replay("fuzz_classify", fuzz_classify_one);
}

static void test_cli_corpus_and_regressions_pass(void **state) {
    (void)state;
    replay("fuzz_cli", fuzz_cli_one);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_corpus_and_regressions_pass),
        cmocka_unit_test(test_machine_corpus_and_regressions_pass),
        cmocka_unit_test(test_classify_corpus_and_regressions_pass),
        cmocka_unit_test(test_cli_corpus_and_regressions_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
