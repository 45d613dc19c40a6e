/* Unit tests for lib/model/tensor.c and the two tables built on it: the
 * mixer table (lib/model/mixers.c) and the model table
 * (lib/model/models.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixer.h"
#include "models.h"
#include "sasrec.h"
#include "tensor.h"
#include "unit.h"

/* Storage order is by `order`, not by table order; unused tensors take no
 * room. */
static const sq_tensor_desc descs[] = {
    {"b", 20, 0, SQ_INIT_ZERO, "C"},
    {"w", 3, 1, SQ_INIT_WEIGHT, "LCC"},
    {"ln", 21, 0, SQ_INIT_ONE, "C"},
    {"r", 4, 1, SQ_INIT_TRUNC, "LN"},
    {"unused", 5, 1, SQ_INIT_WEIGHT, "CC"},
};

static double sd_half(const void *ctx, const sq_tensor_set *s, int i)
{
    (void)ctx, (void)s, (void)i;
    return 0.5;
}

static void build(sq_tensor_set *s, sq_err *e)
{
    sq_dims d = {{0}};
    sq_dims_set(&d, 'C', 3);
    sq_dims_set(&d, 'L', 2);
    sq_dims_set(&d, 'N', 4);
    memset(s, 0, sizeof *s);
    sq_tensors_add(s, descs, 4, &d, 1, 0, e);
    sq_tensors_add(s, descs + 4, 1, &d, 0, 1, e);
    sq_tensors_layout(s);
}

typedef struct {
    size_t off[8], n[8];
    int decay[8], runs;
} runs_seen;

static void see_run(void *p, size_t off, size_t n, int decay)
{
    runs_seen *r = p;
    r->off[r->runs] = off;
    r->n[r->runs] = n;
    r->decay[r->runs++] = decay;
}

UNIT_TEST(test_tensor_layout_runs_init)
{
    sq_tensor_set s;
    sq_err e = {0};
    build(&s, &e);
    CHECK_EQ(s.n, 5);
    CHECK_EQ((int)s.total, 18 + 8 + 3 + 3);
    /* storage: w (order 3), r (4), b (20), ln (21) */
    CHECK_EQ((int)s.off[1], 0);
    CHECK_EQ((int)s.off[3], 18);
    CHECK_EQ((int)s.off[0], 26);
    CHECK_EQ((int)s.off[2], 29);
    CHECK_EQ((int)s.size[4], 0);
    CHECK_EQ(s.nd[1], 3);
    CHECK_EQ((int)s.shape[1][0], 2);
    CHECK_EQ(sq_tensors_find(&s, "ln"), 2);
    CHECK_EQ(sq_tensors_find(&s, "nope"), -1);
    runs_seen r = {0};
    sq_tensors_runs(&s, see_run, &r);
    CHECK_EQ(r.runs, 2); /* w r | b ln */
    CHECK_EQ((int)r.n[0], 26);
    CHECK_EQ(r.decay[0], 1);
    CHECK_EQ((int)r.off[1], 26);
    CHECK_EQ(r.decay[1], 0);
    float *m = malloc(s.total * sizeof *m), *m2 = malloc(s.total * sizeof *m2);
    sq_init_rule rule = {.xavier = 1, .trunc_sd = sd_half};
    sq_tensors_init(&s, m, &rule, 9);
    sq_tensors_init(&s, m2, &rule, 9);
    CHECK(memcmp(m, m2, s.total * sizeof *m) == 0); /* seeded */
    int ones = 1, zeros = 1, trunc = 1;
    for (int i = 0; i < 3; i++) {
        zeros &= m[26 + i] == 0;
        ones &= m[29 + i] == 1;
    }
    for (int i = 18; i < 26; i++)
        trunc &= fabsf(m[i]) <= 1.0f && m[i] != 0; /* within 2 sd of 0.5 */
    CHECK(zeros && ones && trunc);
    free(m);
    free(m2);
}

UNIT_TEST(test_tensor_file_round_trip)
{
    sq_tensor_set s;
    sq_err e = {0};
    build(&s, &e);
    float *m = malloc(s.total * sizeof *m), *back = calloc(s.total, sizeof *back);
    for (size_t i = 0; i < s.total; i++)
        m[i] = (float)i;
    char path[] = "/tmp/seqrec-tensor-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    sq_modelfile mf = {0};
    CHECK_EQ(sq_modelfile_set(&mf, &e, "model", "test"), 0);
    CHECK_EQ(sq_tensors_to_file(&s, m, &mf, &e), 0);
    CHECK_EQ(mf.n_tensors, 4); /* the unused one is not stored */
    CHECK_STR(mf.tensors[0].name, "w"); /* storage order */
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    sq_modelfile rd;
    CHECK_EQ(sq_modelfile_read(path, &rd, &e), 0);
    CHECK_EQ(sq_tensors_from_file(&s, back, &rd, path, &e), 0);
    CHECK(memcmp(m, back, s.total * sizeof *m) == 0);
    /* another shape of the same name is refused, naming the tensor */
    sq_tensor_set s2 = s;
    s2.shape[3][1] = 5;
    e = (sq_err){0};
    CHECK_EQ(sq_tensors_from_file(&s2, back, &rd, path, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "tensor r") != NULL);
    s2 = s;
    s2.size[4] = 9; /* a tensor the file lacks */
    e = (sq_err){0};
    CHECK_EQ(sq_tensors_from_file(&s2, back, &rd, path, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "no tensor unused") != NULL);
    sq_modelfile_free(&rd);
    unlink(path);
    free(m);
    free(back);
}

/* Every kind of the table is complete, named once, and its tensors are
 * per layer with orders no backbone tensor uses; a kind whose shapes use
 * 'K' has the dims hook that sets it. */
UNIT_TEST(test_mixer_table)
{
    CHECK(sq_mixer_count() >= 11);
    CHECK(sq_mixer_get(-1) == NULL && sq_mixer_get(sq_mixer_count()) == NULL);
    for (int k = 0; k < sq_mixer_count(); k++) {
        const sq_mixer *m = sq_mixer_get(k);
        CHECK(m->name && m->help && m->cache_size && m->scratch_size && m->map);
        CHECK(m->forward && m->backward && m->forward_f64 && m->backward_f64);
        CHECK_EQ(sq_mixer_find(m->name), k);
        CHECK(m->n_tensors <= SQ_MIXER_MAXT);
        /* the backbone sets no 'K': a kind whose shapes use it sets it */
        int uses_k = 0;
        for (int j = 0; j < m->n_tensors; j++)
            uses_k |= strchr(m->tensors[j].shape, 'K') != NULL;
        CHECK(!uses_k || m->dims);
        for (int j = 0; j < m->n_tensors; j++) {
            CHECK_EQ(m->tensors[j].shape[0], 'L');
            int clash = 0;
            sq_sasrec_config c;
            sq_sasrec_defaults(&c, SQ_BACKBONE_BERT4REC);
            c.n_items = 5;
            sq_tensor_set s;
            sq_err e = {0};
            CHECK_EQ(sq_sasrec_tensor_set(&c, &s, &e), 0);
            for (int i = 0; i < SQ_SASREC_NT; i++)
                clash |= s.desc[i]->order == m->tensors[j].order ||
                         !strcmp(s.desc[i]->name, m->tensors[j].name);
            CHECK(!clash);
        }
    }
    CHECK_EQ(sq_mixer_find("quadratic"), -1);
    char buf[256];
    CHECK(strncmp(sq_mixer_names(buf, sizeof buf), "softmax, linrec", 15) == 0);
}

/* Every model of the registry has what its kind of training needs. */
UNIT_TEST(test_model_registry)
{
    CHECK(sq_models_count() >= 3);
    for (int i = 0; i < sq_models_count(); i++) {
        const sq_model_def *d = sq_models_get(i);
        CHECK(d->name && d->summary && d->opts && d->config && d->load && d->cfg_size > 0);
        CHECK(sq_models_find(d->name) == d);
        if (d->fit)
            continue;
        CHECK(d->config_read && d->config_write && d->net_alloc && d->net_free &&
              d->net_init && d->batcher && d->work_alloc && d->work_free && d->step &&
              d->view);
        /* its defaults make a valid config */
        void *cfg = calloc(1, d->cfg_size);
        sq_err e = {0};
        const sq_data_dims dd = {.n_items = 10, .n_users = 5};
        CHECK_EQ(d->config(cfg, NULL, &dd, &e), 0);
        CHECK(!d->config_check || d->config_check(cfg, &e) == 0);
        e = (sq_err){0};
        CHECK_EQ(d->config(cfg, "no_such_option=1\n", &dd, &e), SQ_EX_USAGE);
        free(cfg);
    }
    CHECK(sq_models_find("gru") == NULL);
}
