/* sasrec_f64.c - the SASRec model in double precision, for the whole-model
 * finite-difference gradient check: the very code of sasrec.c, compiled
 * with real = double (names get the _f64 suffix, see real.h). */
#define SQ_REAL double
#include "sasrec.c"
