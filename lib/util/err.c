#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int sq_fail(sq_err *e, int code, const char *fmt, ...)
{
    if (e->code != 0)
        return e->code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

int sq_report(const char *prog, const sq_err *e)
{
    fprintf(stderr, "%s: %s\n", prog, e->msg);
    return e->code;
}
