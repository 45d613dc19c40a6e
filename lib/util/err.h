/* err.h - error reporting shared by every seqrec library function.
 *
 * Library functions never print and never exit: they fill an sq_err and
 * return its code, so that the program's main can remove a half-written
 * output file before it exits. Codes are the BSD sysexits values the man
 * pages document. */
#ifndef SQ_ERR_H
#define SQ_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SQ_OK = 0,
    SQ_EX_USAGE = 64,   /* bad command line */
    SQ_EX_DATA = 65,    /* malformed input data */
    SQ_EX_NOINPUT = 66, /* input file missing or unreadable */
    SQ_EX_UNAVAILABLE = 69, /* no GPU, or no such device */
    SQ_EX_SOFTWARE = 70,/* internal error, or training diverged */
    SQ_EX_OSERR = 71,   /* out of memory or other OS failure */
    SQ_EX_CANTCREAT = 73,/* output file cannot be created */
    SQ_EX_IO = 74,      /* read or write failed */
};

typedef struct {
    int code;        /* 0 when no error has been recorded */
    char msg[1024];  /* "FILE: byte N: reason", without program name */
} sq_err;

/* Records an error (the first one wins) and returns its code. */
int sq_fail(sq_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prints "PROG: MSG" to stderr and returns e->code (for `return`). */
int sq_report(const char *prog, const sq_err *e);

#ifdef __cplusplus
}
#endif
#endif
