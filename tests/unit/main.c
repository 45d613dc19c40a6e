/* The unit test runner: runs every UNIT_TEST (or those whose name contains
 * one of argv[1..]) and ends with the line "N passed, N failed". */
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

int main(int argc, char **argv)
{
    /* Tiny models: idle OpenMP threads spinning would starve the rest. */
    sq_threads_passive(argv);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc && !want; a++)
            want = strstr(tests[i].name, argv[a]) != NULL;
        if (!want)
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
