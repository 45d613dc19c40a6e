/* cli.h - the command-line helpers every seqrec program needs.
 *
 * Programs parse their options with getopt_long and these helpers, then
 * call lib/. The parsers check a whole argument and print nothing: they
 * return 0 and store the value, or -1 and leave *out unchanged, so that the
 * caller words its own message (and reports it with sq_cli_usage_error).
 *
 * Numbers are decimal, with no spaces and no '+'; a '-' only where the
 * type is signed. "", "12x", "0x10", " 5" and out-of-range values fail. */
#ifndef SQ_CLI_H
#define SQ_CLI_H

#include <getopt.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Prints "PROG: MESSAGE" and "Try 'PROG --help' for more information." to
 * stderr; returns SQ_EX_USAGE (64) for `return sq_cli_usage_error(...)`. */
int sq_cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints only the "Try 'PROG --help' ..." line (after getopt's own message
 * about an unknown option); returns SQ_EX_USAGE. */
int sq_cli_try_help(const char *prog);

/* Prints "PROG (seqrec) VERSION" on standard output: the one -V, --version
 * line of every program (tests/bats/seqrec.bats checks them all). */
void sq_cli_version(const char *prog);

/* The exit status after --help or --version: 0, or 74 with "PROG: <stdout>:
 * write error: ..." when standard output could not take the text (a full
 * disk), as GNU programs do: a caller saving the help must hear of it. */
int sq_cli_info_done(const char *prog);

/* An integer in [lo, hi] (inclusive). */
int sq_cli_int(const char *s, int lo, int hi, int *out);
int sq_cli_long(const char *s, long lo, long hi, long *out);
int sq_cli_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* An unsigned integer in [lo, hi]: no sign at all. Seeds:
 * sq_cli_u64(s, 0, UINT64_MAX, &seed). */
int sq_cli_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out);
int sq_cli_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* A real number as strtod reads it (1, -0.5, 1e-3, inf); NaN, overflow,
 * leading spaces and trailing characters fail. */
int sq_cli_real(const char *s, double *out);
/* The same, and in [lo, hi] (inclusive; an open bound is a check of the
 * caller's, after this). */
int sq_cli_real_range(const char *s, double lo, double hi, double *out);

/* The name (without "--") of the long option whose val is VAL in the
 * table OPTS (ended by a zero entry), or "?" when there is none; for
 * messages such as "--%s: invalid number". */
const char *sq_cli_opt_name(const struct option *opts, int val);

#ifdef __cplusplus
}
#endif
#endif
