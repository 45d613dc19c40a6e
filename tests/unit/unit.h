/* unit.h - the smallest test harness that does the job.
 *
 * A test is `UNIT_TEST(test_name) { CHECK(...); }` in tests/unit/test_*.c.
 * The Makefile collects every UNIT_TEST line into the runner's table, so a
 * new test needs no registration. A test fails when any CHECK fails. */
#ifndef SQ_UNIT_H
#define SQ_UNIT_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int checks;
    int failed;
    int skipped; /* set by SKIP(): the test could not run here */
} unit_ctx;

#define UNIT_TEST(fn) void fn(unit_ctx *t)

#define CHECK(cond) do { \
    t->checks++; \
    if (!(cond)) { \
        t->failed++; \
        fprintf(stderr, "  %s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, t->name, #cond); \
    } } while (0)

#define CHECK_EQ(a, b) do { \
    long long a_ = (long long)(a), b_ = (long long)(b); \
    t->checks++; \
    if (a_ != b_) { \
        t->failed++; \
        fprintf(stderr, "  %s:%d: %s: %s == %s failed (%lld vs %lld)\n", \
                __FILE__, __LINE__, t->name, #a, #b, a_, b_); \
    } } while (0)

#define CHECK_STR(a, b) do { \
    const char *a_ = (a), *b_ = (b); \
    t->checks++; \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) { \
        t->failed++; \
        fprintf(stderr, "  %s:%d: %s: \"%s\" == \"%s\" failed\n", \
                __FILE__, __LINE__, t->name, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
    } } while (0)

/* |a-b| <= tol * max(1, |a|, |b|): relative for large values, absolute near 0. */
#define CHECK_NEAR(a, b, tol) do { \
    double a_ = (double)(a), b_ = (double)(b); \
    double s_ = fmax(1.0, fmax(fabs(a_), fabs(b_))); \
    t->checks++; \
    if (!(fabs(a_ - b_) <= (tol) * s_)) { \
        t->failed++; \
        fprintf(stderr, "  %s:%d: %s: %s ~ %s failed (%.9g vs %.9g)\n", \
                __FILE__, __LINE__, t->name, #a, #b, a_, b_); \
    } } while (0)

#define SKIP(why) do { t->skipped = 1; fprintf(stderr, "  %s: skipped: %s\n", t->name, why); return; } while (0)

#endif
