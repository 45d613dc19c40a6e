/* Unit tests for lib/util/cli.c: the option-value parsers and messages. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "unit.h"

UNIT_TEST(test_cli_int)
{
    int v = 7;
    CHECK_EQ(sq_cli_int("42", 1, 100, &v), 0);
    CHECK_EQ(v, 42);
    CHECK_EQ(sq_cli_int("-3", -5, 5, &v), 0);
    CHECK_EQ(v, -3);
    CHECK_EQ(sq_cli_int("1", 1, 1, &v), 0); /* both bounds inclusive */
    CHECK_EQ(v, 1);
    v = 7;
    CHECK_EQ(sq_cli_int("0", 1, 100, &v), -1);
    CHECK_EQ(sq_cli_int("101", 1, 100, &v), -1);
    CHECK_EQ(sq_cli_int("", 0, 100, &v), -1);
    CHECK_EQ(sq_cli_int("12x", 0, 100, &v), -1);
    CHECK_EQ(sq_cli_int(" 5", 0, 100, &v), -1);
    CHECK_EQ(sq_cli_int("+5", 0, 100, &v), -1);
    CHECK_EQ(sq_cli_int("-", -5, 5, &v), -1);
    CHECK_EQ(sq_cli_int("0x10", 0, 100, &v), -1);
    CHECK_EQ(sq_cli_int("99999999999999999999", INT_MIN, INT_MAX, &v), -1);
    CHECK_EQ(v, 7); /* untouched on failure */
}

UNIT_TEST(test_cli_long_i64)
{
    long l = 0;
    CHECK_EQ(sq_cli_long("2147483648", 0, LONG_MAX, &l), 0);
    CHECK_EQ(l, 2147483648L);
    CHECK_EQ(sq_cli_long("-1", 0, LONG_MAX, &l), -1);
    int64_t v = 0;
    CHECK_EQ(sq_cli_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &v), 0);
    CHECK(v == INT64_MIN);
    CHECK_EQ(sq_cli_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), -1);
}

UNIT_TEST(test_cli_unsigned)
{
    uint64_t v = 5;
    CHECK_EQ(sq_cli_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
    CHECK(v == UINT64_MAX);
    CHECK_EQ(sq_cli_u64("18446744073709551616", 0, UINT64_MAX, &v), -1); /* overflow */
    CHECK_EQ(sq_cli_u64("-1", 0, UINT64_MAX, &v), -1); /* strtoull would wrap it */
    CHECK_EQ(sq_cli_u64("", 0, UINT64_MAX, &v), -1);
    CHECK_EQ(sq_cli_u64("0", 0, UINT64_MAX, &v), 0);
    CHECK(v == 0);
    uint32_t u = 3;
    CHECK_EQ(sq_cli_u32("4294967295", 1, UINT32_MAX, &u), 0);
    CHECK(u == UINT32_MAX);
    CHECK_EQ(sq_cli_u32("4294967296", 1, UINT32_MAX, &u), -1);
    CHECK_EQ(sq_cli_u32("0", 1, UINT32_MAX, &u), -1);
    CHECK(u == UINT32_MAX);
}

UNIT_TEST(test_cli_real)
{
    double x = 2;
    CHECK_EQ(sq_cli_real("0.5", &x), 0);
    CHECK(x == 0.5);
    CHECK_EQ(sq_cli_real("-1e-3", &x), 0);
    CHECK(x == -1e-3);
    CHECK_EQ(sq_cli_real("3", &x), 0);
    CHECK(x == 3);
    x = 2;
    CHECK_EQ(sq_cli_real("", &x), -1);
    CHECK_EQ(sq_cli_real("nan", &x), -1);
    CHECK_EQ(sq_cli_real("NaN", &x), -1);
    CHECK_EQ(sq_cli_real("1.5x", &x), -1);
    CHECK_EQ(sq_cli_real(" 1", &x), -1);
    CHECK_EQ(sq_cli_real("1e999", &x), -1);
    CHECK_EQ(sq_cli_real("high", &x), -1);
    CHECK(x == 2);
    CHECK_EQ(sq_cli_real_range("1", 0, 1, &x), 0);
    CHECK(x == 1);
    CHECK_EQ(sq_cli_real_range("1.0001", 0, 1, &x), -1);
    CHECK_EQ(sq_cli_real_range("-0.1", 0, 1, &x), -1);
    CHECK_EQ(sq_cli_real_range("inf", 0, 1, &x), -1);
    CHECK_EQ(sq_cli_real_range("nan", 0, 1, &x), -1);
    CHECK(x == 1);
}

UNIT_TEST(test_cli_opt_name)
{
    static const struct option opts[] = {
        {"seed", required_argument, NULL, 300},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    CHECK_STR(sq_cli_opt_name(opts, 300), "seed");
    CHECK_STR(sq_cli_opt_name(opts, 'o'), "output");
    CHECK_STR(sq_cli_opt_name(opts, 'x'), "?");
}

/* The message goes to stderr: catch it in a temp file. */
UNIT_TEST(test_cli_usage_error)
{
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    if (!tmp)
        return;
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    int rc = sq_cli_usage_error("seqrec-x", "--len '%s': expected %d..%d", "0", 1, 9);
    int rc2 = sq_cli_try_help("seqrec-y");
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    CHECK_EQ(rc, SQ_EX_USAGE);
    CHECK_EQ(rc2, 64);
    char buf[512] = {0};
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    CHECK_STR(buf, "seqrec-x: --len '0': expected 1..9\n"
                   "Try 'seqrec-x --help' for more information.\n"
                   "Try 'seqrec-y --help' for more information.\n");
}
