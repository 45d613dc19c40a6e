/* adam_f64.c - the optimiser in double precision (see real.h). */
#define SQ_REAL double
#include "adam.c"
