/* mixer_opt.h - a kind's options in the tests, by name through the kind's
 * option table (mixer.h: sq_mixer_set, sq_mixer_option), so that no test
 * knows the struct a kind keeps its options in. */
#ifndef SQ_TEST_MIXER_OPT_H
#define SQ_TEST_MIXER_OPT_H

#include <stdio.h>
#include <stdlib.h>

#include "mixer.h"

/* --name value for c's kind; a refusal is a bug of the test: fatal. */
static inline void mixer_set(sq_mixer_cfg *c, const char *name, const char *value)
{
    sq_err e = {0};
    if (sq_mixer_set(c, name, value, &e)) {
        fprintf(stderr, "mixer_set(%s, %s): %s\n", name, value, e.msg);
        abort();
    }
}

static inline void mixer_set_int(sq_mixer_cfg *c, const char *name, int v)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", v);
    mixer_set(c, name, buf);
}

/* Option name of c's kind as text ("" when the kind has none). */
static inline const char *mixer_get(const sq_mixer_cfg *c, const char *name, char *buf,
                                    size_t n)
{
    const char *s = sq_mixer_option(c, name, buf, n);
    return s ? s : "";
}

/* Writes v unchecked into option name of c's kind, at its table's offset
 * (an int option takes (int)v): a config built in code, out of range, for
 * the checks to refuse. */
static inline void mixer_poke(sq_mixer_cfg *c, const char *name, double v)
{
    const sq_mixer *m = sq_mixer_get(c->kind);
    const sq_opt *o = m ? sq_opt_find(m->opts, name) : NULL;
    if (!o) {
        fprintf(stderr, "mixer_poke: no option --%s\n", name);
        abort();
    }
    char *p = (char *)c + o->offset;
    if (o->type == SQ_OPT_REAL)
        *(double *)(void *)p = v;
    else
        *(int *)(void *)p = (int)v;
}

#endif
