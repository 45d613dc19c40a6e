/* The unit test runner: runs every UNIT_TEST (or those whose name contains
 * one of argv[1..]), leaves out those whose name contains an argument
 * after a '-' (gpu-check's sanitizers: "cuda -cuda_nccl"), and ends with
 * the line "N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "threads.h"
#include "unit.h"

#define X(fn) void fn(unit_ctx *t);
#include "list.h"
#undef X

static const struct {
    const char *name;
    void (*fn)(unit_ctx *);
} tests[] = {
#define X(fn) {#fn, fn},
#include "list.h"
#undef X
};

/* Whether the test called name runs: named by an argument (or none is a
 * name), and left out by none. */
static int wanted(const char *name, int argc, char **argv)
{
    int names = 0, named = 0;
    for (int a = 1; a < argc; a++) {
        if (argv[a][0] == '-') {
            if (argv[a][1] && strstr(name, argv[a] + 1))
                return 0;
        } else {
            names++;
            named = named || strstr(name, argv[a]) != NULL;
        }
    }
    return !names || named;
}

int main(int argc, char **argv)
{
    /* Tiny models: idle OpenMP threads spinning would starve the rest. */
    sq_threads_passive(argv);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (!wanted(tests[i].name, argc, argv))
            continue;
        unit_ctx t = {tests[i].name, 0, 0, 0};
        tests[i].fn(&t);
        if (t.failed) {
            failed++;
            printf("FAIL %s (%d of %d checks)\n", t.name, t.failed, t.checks);
        } else if (t.skipped) {
            skipped++;
            printf("SKIP %s\n", t.name);
        } else {
            passed++;
            printf("ok   %s (%d checks)\n", t.name, t.checks);
        }
        fflush(stdout);
    }
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
