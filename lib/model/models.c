/* models.c - the table of models (models.h). A new model is one line
 * of SQ_MODELS: its sq_model_def, defined in the model's own file. */
#include "models.h"

#include <stdio.h>
#include <string.h>

/* The models, in the order of --help: a new model is one line. */
#define SQ_MODELS(X)   \
    X(sasrec)          \
    X(bert4rec)        \
    X(pop)             \
    X(blin)            \
    X(elastic)         \
    X(gru4rec)         \
    X(caser)           \
    X(fpmc)            \
    X(hstu)            \
    X(core)            \
    X(cl4srec)         \
    /* the list ends here */

#define DECLARE(name) extern const sq_model_def sq_model_##name;
SQ_MODELS(DECLARE)
#undef DECLARE
#define ADDRESS(name) &sq_model_##name,
static const sq_model_def *const models[] = {SQ_MODELS(ADDRESS)};
#undef ADDRESS

int sq_models_count(void)
{
    return (int)(sizeof models / sizeof models[0]);
}

const sq_model_def *sq_models_get(int i)
{
    return i >= 0 && i < sq_models_count() ? models[i] : NULL;
}

const sq_model_def *sq_models_find(const char *name)
{
    for (int i = 0; name && i < sq_models_count(); i++)
        if (strcmp(models[i]->name, name) == 0)
            return models[i];
    return NULL;
}

const char *sq_models_names(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < sq_models_count() && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", models[i]->name);
    return buf;
}

int sq_model_load(sq_model *m, const char *path, sq_err *e)
{
    return sq_model_load_on(m, path, NULL, e);
}

int sq_model_load_on(sq_model *m, const char *path, const sq_ctx *cx, sq_err *e)
{
    char known[256];
    return sq_model_load_by(m, path, sq_models_find, sq_models_names(known, sizeof known), cx,
                            e);
}
