/* twice.h - the declarations of a header written over `real` (real.h),
 * expanded once for float (name) and once for double (name_f64).
 *
 * A header puts its R(...) declarations in a `#elif
 * defined(SQ_DECLARE_TWICE)` branch after its include guard's and, at the
 * place they belong, writes
 *     #define SQ_TWICE "this.h"
 *     #include "twice.h"
 * No include guard: it is meant to be included many times. */
#pragma push_macro("real")
#pragma push_macro("R")
#undef real
#undef R
#define SQ_DECLARE_TWICE
#define real float
#define R(name) name
#include SQ_TWICE
#undef real
#undef R
#define real double
#define R(name) name##_f64
#include SQ_TWICE
#undef real
#undef R
#undef SQ_DECLARE_TWICE
#undef SQ_TWICE
#pragma pop_macro("R")
#pragma pop_macro("real")
