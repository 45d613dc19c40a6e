/* runconfig.c - seqrec-train --config FILE (runconfig.h). */
#include "runconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "kv.h"
#include "mixer.h"
#include "modelfile.h"
#include "models.h"
#include "train.h"

enum { MAX_CONFIG = 1 << 20 };

int sq_runconfig_is_record(const char *key)
{
    static const char *const exact[] = {"n_items", "n_users", "train.best_epoch",
                                        "train.epochs_done", "train.stop", "train.parts"};
    static const char *const prefix[] = {"data.", "seqrec.", "valid."};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(key, exact[i]))
            return 1;
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (!strncmp(key, prefix[i], strlen(prefix[i])))
            return 1;
    /* what a one-pass model counted (pop.train_interactions) */
    const char *dot = strchr(key, '.');
    return dot && !strcmp(dot, ".train_interactions");
}

static const sq_opt *key_in(const sq_opt *t, const char *key)
{
    char kb[64];
    for (; t && t->type; t++)
        if (!strcmp(sq_opt_key(t, kb, sizeof kb), key))
            return t;
    return NULL;
}

const sq_opt *sq_runconfig_model_key(const sq_model_def *d, const char *key)
{
    for (int i = -1; i == -1 || (d->more_opts && d->more_opts(i)); i++) {
        const sq_opt *o = key_in(i < 0 ? d->opts : d->more_opts(i), key);
        if (o)
            return o;
    }
    return NULL;
}

/* The whole of a text file, NUL-terminated (malloc'd). */
static int slurp(const char *path, char **text, sq_err *e)
{
    FILE *f;
    if (sq_in_open(&f, path, e))
        return e->code;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : sq_fail(e, SQ_EX_OSERR, "out of memory");
    while (!rc) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
        if (n == cap && cap >= MAX_CONFIG) {
            rc = sq_fail(e, SQ_EX_DATA, "%s: over %d bytes: not a config file",
                         sq_in_name(path), MAX_CONFIG);
        } else if (n == cap) {
            char *t = realloc(buf, 2 * cap + 1);
            if (!t)
                rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
            else
                buf = t, cap *= 2;
        }
    }
    if (!rc && ferror(f))
        rc = sq_fail(e, SQ_EX_IO, "%s: %s", sq_in_name(path), strerror(errno));
    if (!rc && memchr(buf, '\0', n))
        rc = sq_fail(e, SQ_EX_DATA, "%s: byte %zu: a NUL byte: not a config file",
                     sq_in_name(path), (size_t)((char *)memchr(buf, '\0', n) - buf));
    sq_in_close(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *text = buf;
    return 0;
}

/* The config text of FILE: a model file's config, or the file itself. */
static int config_text(const char *path, char **text, int *is_model, sq_err *e)
{
    *is_model = sq_modelfile_sniff(path);
    if (!*is_model)
        return slurp(path, text, e);
    sq_modelfile mf = {0};
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    *text = mf.config;
    mf.config = NULL;
    sq_modelfile_free(&mf);
    return 0;
}

/* One line of the text: *key and *val point into line (cut at '='), or
 * both NULL for a line to skip; -1 for a line that is no key=value. */
static int split_line(char *line, char **key, char **val)
{
    static const char *const header[] = {"file", "kind", "version", "tensor", "tensors",
                                         "checksum"};
    *key = *val = NULL;
    if (!*line || line[0] == '#')
        return 0;
    if (!strncmp(line, "config\t", 7))
        line += 7;
    else
        for (size_t i = 0; i < sizeof header / sizeof header[0]; i++) {
            size_t hl = strlen(header[i]);
            if (!strncmp(line, header[i], hl) && line[hl] == '\t')
                return 0;
        }
    char *eq = strchr(line, '=');
    if (!eq || eq == line || strcspn(line, " \t") < (size_t)(eq - line))
        return -1;
    *eq = '\0';
    *key = line;
    *val = eq + 1;
    return 0;
}

/* The model of another table that key belongs to, or NULL. */
static const sq_model_def *owner_of(const char *key)
{
    for (int m = 0; m < sq_models_count(); m++)
        if (sq_runconfig_model_key(sq_models_get(m), key))
            return sq_models_get(m);
    return NULL;
}

/* One setting: checked by its option and added to the model's or the
 * trainer's text. */
static int one_key(sq_runconfig *c, const sq_model_def *d, const char *key, const char *val,
                   const char *where, void *scratch, sq_err *e)
{
    const sq_opt *t = key_in(sq_train_options, key);
    const sq_opt *o = t ? NULL : sq_runconfig_model_key(d, key);
    if (t && t->cli_only)
        return sq_fail(e, SQ_EX_USAGE, "%s: %s is not a setting of a config (give --%s on "
                       "the command line)", where, key, t->name);
    if (t || o) {
        if (sq_opt_set(t ? t : o, scratch, val, SQ_EX_USAGE, where, e))
            return e->code;
        return sq_kv_put(t ? &c->train_kv : &c->model_kv, t ? &c->train_len : &c->model_len,
                         MAX_CONFIG, e, key, val);
    }
    const sq_model_def *other = owner_of(key);
    if (other)
        return sq_fail(e, SQ_EX_USAGE, "%s: %s is a setting of --model %s, not of --model %s",
                       where, key, other->name, d->name);
    /* an option's name where its key belongs: say the key */
    const sq_opt *named = sq_opt_find(sq_train_options, key);
    for (int i = -1; !named && (i == -1 || (d->more_opts && d->more_opts(i))); i++)
        named = sq_opt_find(i < 0 ? d->opts : d->more_opts(i), key);
    char kb[64];
    if (named && !named->cli_only)
        return sq_fail(e, SQ_EX_USAGE, "%s: unknown key '%s' (the key of --%s is %s)", where,
                       key, named->name, sq_opt_key(named, kb, sizeof kb));
    return sq_fail(e, SQ_EX_USAGE, "%s: unknown key '%s' (seqrec-train --model %s "
                   "--config-keys lists them)", where, key, d->name);
}

/* The `model` key of the text (the last one), its line into *line. */
static int model_key(const char *path, char *text, int is_model, sq_runconfig *c,
                     int *line, sq_err *e)
{
    int no = 0;
    for (char *p = text; p && *p; no++) {
        char *nl = strchr(p, '\n'), *key, *val;
        if (nl)
            *nl = '\0';
        int bad = split_line(p, &key, &val);
        if (bad && is_model)
            return sq_fail(e, SQ_EX_DATA, "%s: config line %d is not key=value", path, no + 1);
        if (bad)
            return sq_fail(e, SQ_EX_DATA, "%s:%d: not a key=value line", path, no + 1);
        if (key && !strcmp(key, "model")) {
            free(c->model);
            *line = no + 1;
            if (!(c->model = strdup(val)))
                return sq_fail(e, SQ_EX_OSERR, "out of memory");
        }
        if (key) /* put the line back together for the second pass */
            key[strlen(key)] = '=';
        if (nl)
            *nl = '\n';
        p = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* Every line's key for model d. */
static int all_keys(const char *path, char *text, int is_model, const sq_model_def *d,
                    sq_runconfig *c, sq_err *e)
{
    size_t scratch_n = d->cfg_size + sizeof(sq_mixer_cfg) + sizeof(sq_train_opts);
    void *scratch = calloc(1, scratch_n);
    if (!scratch)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = 0, no = 1;
    for (char *p = text; !rc && p && *p; no++) {
        char *nl = strchr(p, '\n'), *key, *val, where[512];
        if (nl)
            *nl = '\0';
        split_line(p, &key, &val);
        if (key && is_model)
            snprintf(where, sizeof where, "%s: key %s", path, key);
        else
            snprintf(where, sizeof where, "%s:%d", path, no);
        if (key && strcmp(key, "model") && !sq_runconfig_is_record(key))
            rc = one_key(c, d, key, val, where, scratch, e);
        p = nl ? nl + 1 : NULL;
    }
    free(scratch);
    return rc;
}

int sq_runconfig_read(const char *path, const sq_model_def *want, sq_runconfig *c,
                      const sq_model_def **def, sq_err *e)
{
    memset(c, 0, sizeof *c);
    char *text = NULL, names[256], where[512];
    int is_model, line = 0, rc = config_text(path, &text, &is_model, e);
    if (!rc) { /* CRLF lines as LF: the passes below cut lines in place */
        char *w = text;
        for (const char *r = text; *r; r++)
            if (!(r[0] == '\r' && (r[1] == '\n' || !r[1])))
                *w++ = *r;
        *w = '\0';
        rc = model_key(path, text, is_model, c, &line, e);
    }
    const sq_model_def *d = want;
    if (is_model)
        snprintf(where, sizeof where, "%s: key model", path);
    else
        snprintf(where, sizeof where, "%s:%d", path, line);
    if (!rc && !d && c->model && !(d = sq_models_find(c->model)))
        rc = sq_fail(e, SQ_EX_USAGE, "%s: unknown model '%s' (%s)", where, c->model,
                     sq_models_names(names, sizeof names));
    if (!rc && !d)
        d = sq_models_get(0);
    if (!rc)
        rc = all_keys(path, text, is_model, d, c, e);
    free(text);
    if (rc) {
        sq_runconfig_free(c);
        return rc;
    }
    *def = d;
    return 0;
}

void sq_runconfig_free(sq_runconfig *c)
{
    free(c->model);
    free(c->model_kv);
    free(c->train_kv);
    memset(c, 0, sizeof *c);
}

static void print_keys(const sq_opt *t, FILE *f)
{
    char kb[64];
    for (; t && t->type; t++)
        if (!t->cli_only)
            fprintf(f, "%s\t%s%s\n", sq_opt_key(t, kb, sizeof kb), t->name ? "--" : "",
                t->name ? t->name : "-");
}

void sq_runconfig_keys(const sq_model_def *d, FILE *f)
{
    char kb[64];
    /* a key shared by two tables of the model (none today) once */
    for (int i = -1; i == -1 || (d->more_opts && d->more_opts(i)); i++)
        for (const sq_opt *t = i < 0 ? d->opts : d->more_opts(i); t && t->type; t++)
            if (sq_runconfig_model_key(d, sq_opt_key(t, kb, sizeof kb)) == t) {
                sq_opt one[2] = {*t, {0}};
                print_keys(one, f);
            }
    if (!d->fit)
        print_keys(sq_train_options, f);
}
