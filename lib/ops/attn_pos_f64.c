/* attn_pos_f64.c - the position-only mixers in double precision, for the
 * finite-difference gradient checks: the very code of attn_pos.c, compiled
 * with real = double (names get the _f64 suffix, see real.h). */
#define SQ_REAL double
#include "attn_pos.c"
