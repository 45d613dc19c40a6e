/* cli.c - the command-line helpers of cli.h. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sq_cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return sq_cli_try_help(prog);
}

int sq_cli_try_help(const char *prog)
{
    fprintf(stderr, "Try '%s --help' for more information.\n", prog);
    return SQ_EX_USAGE;
}

void sq_cli_version(const char *prog)
{
    printf("%s (seqrec) %s\n", prog, SEQREC_VERSION);
}

int sq_cli_info_done(const char *prog)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    int err = errno;
    fprintf(stderr, "%s: <stdout>: write error%s%s\n", prog, err ? ": " : "",
            err ? strerror(err) : "");
    return SQ_EX_IO;
}

/* A whole-string decimal: digits, after one '-' where neg is allowed. */
static int is_decimal(const char *s, int neg)
{
    if (neg && s[0] == '-')
        s++;
    return isdigit((unsigned char)s[0]);
}

int sq_cli_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!is_decimal(s, 1))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int sq_cli_int(const char *s, int lo, int hi, int *out)
{
    int64_t v;
    if (sq_cli_i64(s, lo, hi, &v))
        return -1;
    *out = (int)v;
    return 0;
}

int sq_cli_long(const char *s, long lo, long hi, long *out)
{
    int64_t v;
    if (sq_cli_i64(s, lo, hi, &v))
        return -1;
    *out = (long)v;
    return 0;
}

int sq_cli_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!is_decimal(s, 0))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int sq_cli_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    if (sq_cli_u64(s, lo, hi, &v))
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int sq_cli_real(const char *s, double *out)
{
    if (!s[0] || isspace((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || v != v)
        return -1;
    *out = v;
    return 0;
}

int sq_cli_real_range(const char *s, double lo, double hi, double *out)
{
    double v;
    if (sq_cli_real(s, &v) || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

const char *sq_cli_opt_name(const struct option *opts, int val)
{
    for (const struct option *o = opts; o->name; o++)
        if (o->val == val)
            return o->name;
    return "?";
}
