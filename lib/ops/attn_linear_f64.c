/* attn_linear_f64.c - the linear attention kernels in double precision, for
 * the finite-difference gradient checks: the very code of attn_linear.c,
 * compiled with real = double (names get the _f64 suffix, see real.h). */
#define SQ_REAL double
#include "attn_linear.c"
