/* model.c - what every model file shares (model.h): the data keys, the
 * training meta, loading through the loader the model table names. */
#include "model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int sq_model_set_data(sq_modelfile *mf, const sq_header *train, sq_err *e)
{
    if (sq_modelfile_set(mf, e, "n_items", "%u", train->n_items))
        return e->code;
    /* Each meta line "key=value" becomes "data.key=value". */
    for (const char *line = train->meta; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *eq = memchr(line, '=', len);
        if (eq && eq > line) {
            char key[256];
            int klen = (int)(eq - line);
            if (klen > (int)sizeof key - 6)
                klen = (int)sizeof key - 6;
            snprintf(key, sizeof key, "data.%.*s", klen, line);
            if (sq_modelfile_set(mf, e, key, "%.*s", (int)(len - (size_t)(eq - line) - 1), eq + 1))
                return e->code;
        }
        line += len + (end ? 1 : 0);
    }
    return sq_modelfile_set(mf, e, "seqrec.version", "%s", SEQREC_VERSION);
}

/* The "data." lines of the config, without the prefix: the training meta. */
static int restore_meta(sq_model *m, const sq_modelfile *mf, sq_err *e)
{
    const char *c = mf->config ? mf->config : "";
    char *meta = malloc(strlen(c) + 1), *w = meta;
    if (!meta)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    for (const char *line = c; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "data.", 5) == 0 && len > 5) {
            memcpy(w, line + 5, len - 5);
            w += len - 5;
        }
        line += len;
    }
    *w = '\0';
    m->meta = meta;
    return 0;
}

/* Puts "PATH: " before a loader's message, which cannot know the path. */
static void prefix_path(sq_err *e, const char *path)
{
    size_t p = strlen(path) + 2, n = strlen(e->msg);
    if (p + n >= sizeof e->msg)
        return;
    memmove(e->msg + p, e->msg, n + 1);
    memcpy(e->msg, path, p - 2);
    memcpy(e->msg + p - 2, ": ", 2);
}

int sq_model_load_by(sq_model *m, const char *path,
                     const sq_model_def *(*find)(const char *name), const char *known,
                     const sq_ctx *cx, sq_err *e)
{
    memset(m, 0, sizeof *m);
    sq_modelfile mf;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    char name[64], num[32];
    int rc = 0;
    const sq_model_def *def = NULL;
    if (!sq_modelfile_get(&mf, "model", name, sizeof name)) {
        rc = sq_fail(e, SQ_EX_DATA, "%s: no \"model\" key in the model config", path);
        goto done;
    }
    if (!sq_modelfile_get(&mf, "n_items", num, sizeof num)) {
        rc = sq_fail(e, SQ_EX_DATA, "%s: no \"n_items\" key in the model config", path);
        goto done;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(num, &end, 10);
    if (errno || *end || end == num || n == 0 || n >= UINT32_MAX) {
        rc = sq_fail(e, SQ_EX_DATA, "%s: bad n_items '%s' in the model config", path, num);
        goto done;
    }
    if (!(def = find(name)) || !def->load) {
        rc = sq_fail(e, SQ_EX_DATA, "%s: unknown model '%s' (this build knows %s)", path, name,
                     known);
        goto done;
    }
    if (strlen(name) >= sizeof m->name) { /* not reached: no such model is in the table */
        rc = sq_fail(e, SQ_EX_DATA, "%s: model name too long", path);
        goto done;
    }
    memcpy(m->name, name, strlen(name) + 1);
    m->n_items = (uint32_t)n;
    if ((rc = restore_meta(m, &mf, e)) != 0)
        goto done;
    sq_ctx cpu = sq_ctx_cpu();
    if (!cx)
        cx = &cpu;
    void *cfg = NULL;
    if (cx->backend != SQ_BACKEND_CPU && !def->gpu_check) {
        rc = sq_fail(e, SQ_EX_USAGE, "--device cuda: --model %s runs on the CPU only (on the "
                     "GPU: " SQ_GPU_MODEL_NAMES ")", name);
        goto done;
    }
    if (cx->backend != SQ_BACKEND_CPU) { /* the model's options must run there too */
        if (!(cfg = calloc(1, def->cfg_size))) {
            rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
            goto done;
        }
        rc = (def->config_read && def->config_read(cfg, &mf, path, e)) ||
                     def->gpu_check(cfg, e) ? e->code : 0;
        free(cfg);
        if (rc)
            goto done;
    }
    if ((rc = def->load(m, &mf, cx, e)) != 0)
        prefix_path(e, path);
done:
    sq_modelfile_free(&mf);
    if (rc)
        sq_model_free(m);
    return rc;
}

void sq_attn_map_free(sq_attn_map *a)
{
    free(a->map);
    free(a->ids);
    free(a->pos);
    memset(a, 0, sizeof *a);
}

void sq_model_free(sq_model *m)
{
    if (m->free_impl)
        m->free_impl(m);
    free(m->meta);
    memset(m, 0, sizeof *m);
}

int sq_model_check_stream(const sq_model *m, const sq_header *h, const char *name, sq_err *e)
{
    if (h->n_items != m->n_items)
        return sq_fail(e, SQ_EX_DATA, "%s: the stream has %u items, the model was trained on %u "
                       "(another dataset?)", name, h->n_items, m->n_items);
    char a[512], b[512];
    sq_header mh = {.meta = m->meta};
    if (sq_meta_get(h, "dataset", a, sizeof a) && sq_meta_get(&mh, "dataset", b, sizeof b) &&
        strcmp(a, b) != 0)
        return sq_fail(e, SQ_EX_DATA, "%s: dataset '%s', but the model was trained on '%s' "
                       "(seqrec-preprocess --model MODEL takes the model's name and id map)",
                       name, a, b);
    return 0;
}

int sq_packed_stage(const sq_ctx *cx, const sq_packed *b, sq_err *e)
{
    if (cx->backend == SQ_BACKEND_CPU)
        return 0;
    size_t T = (size_t)b->T, n = (size_t)b->n, nk = n * (size_t)b->K;
    const void *host[] = {b->ids, b->off, b->pos, b->rows, b->targets, b->neg};
    size_t bytes[] = {T * sizeof(int), ((size_t)b->B + 1) * sizeof(int), T * sizeof(int),
                      b->rows ? n * sizeof(int) : 0, b->targets ? n * sizeof(int) : 0,
                      b->neg ? nk * sizeof(int) : 0};
    return sq_ctx_stage(cx, host, bytes, 6, e);
}

int sq_packed_histories(sq_packed *pb, int **ints, const sq_batch *hist, int max_len,
                        uint32_t n_items, sq_err *e)
{
    int B = hist->B;
    size_t T = 0;
    for (int b = 0; b < B; b++) {
        uint32_t n = hist->len[b];
        T += n == 0 ? 1 : n < (uint32_t)max_len ? n : (uint32_t)max_len;
    }
    if (T > (size_t)INT32_MAX / 2)
        return sq_fail(e, SQ_EX_USAGE, "scoring batch too large");
    int *p = malloc((2 * T + 2 * (size_t)B + 1) * sizeof *p);
    if (!(*ints = p))
        return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    *pb = (sq_packed){.B = B, .T = (int)T, .n = B, .ids = p, .pos = p + T, .off = p + 2 * T};
    pb->rows = pb->off + B + 1;
    int o = 0;
    pb->off[0] = 0;
    for (int b = 0; b < B; b++) {
        uint32_t n = hist->len[b], len = n < (uint32_t)max_len ? n : (uint32_t)max_len;
        const uint32_t *it = hist->items + hist->off[b] + (n - len);
        int total = len ? (int)len : 1;
        pb->ids[o] = 0; /* an empty history: one padding row */
        for (uint32_t t = 0; t < len; t++) {
            if (it[t] == 0 || it[t] > n_items) {
                free(p);
                *ints = NULL;
                return sq_fail(e, SQ_EX_DATA, "item %" PRIu32 " out of 1..n_items %" PRIu32,
                               it[t], n_items);
            }
            pb->ids[o + (int)t] = (int)it[t];
        }
        for (int t = 0; t < total; t++)
            pb->pos[o + t] = max_len - total + t;
        o += total;
        pb->off[b + 1] = o;
        pb->rows[b] = o - 1;
    }
    return 0;
}
