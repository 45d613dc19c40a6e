/* ops_f64.c - the ops in double precision, for the finite-difference
 * gradient checks: the very code of ops.c, compiled with real = double
 * (names get the _f64 suffix, see real.h). */
#define SQ_REAL double
#include "ops.c"
