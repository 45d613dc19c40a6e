/* Unit tests for lib/sasrec.c and lib/batch.c.
 *
 * The whole model is checked against central finite differences in double
 * precision (lib/sasrec_f64.c is the same source as the float model that
 * trains): every parameter of a tiny SASRec (2 blocks, d = 6, 2 heads, 9
 * items, three short packed sequences) through the CE and the BCE loss,
 * with dropout off and on (a fixed mask is a fixed function). The float
 * build must then agree with the double one. Set SQ_TEST_VERBOSE=1 to print
 * the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "batch.h"
#include "gradcheck.h"
#include "ops.h"
#include "rng.h"
#include "sasrec.h"
#include "unit.h"

#define GRAD_TOL 1e-6
#define F32_TOL 2e-5

/* A tiny fixed batch: 3 sequences of lengths 1, 4, 5; one ignored target
 * (0) and a padding token (id 0) inside the longest one. */
typedef struct {
    int ids[10], pos[10], off[4], rows[10], targets[10], neg[20];
    uint32_t user[3];
    sq_packed pb;
} tiny_batch;

static void tiny_batch_init(tiny_batch *t, int max_len, int K)
{
    static const int len[3] = {1, 4, 5};
    static const int ids[10] = {3, 1, 4, 1, 5, 9, 2, 0, 5, 3};
    static const int tg[10] = {5, 2, 7, 0, 9, 8, 1, 4, 6, 2};
    memset(t, 0, sizeof *t);
    int T = sq_pack_offsets(t->off, len, 3);
    sq_pack_positions(t->pos, t->off, 3, max_len);
    for (int i = 0; i < T; i++) {
        t->ids[i] = ids[i];
        t->rows[i] = i;
        t->targets[i] = tg[i];
        for (int k = 0; k < K; k++)
            t->neg[i * K + k] = (i * 3 + k * 5) % 10; /* 0 = no negative, sometimes */
    }
    t->pb = (sq_packed){.B = 3, .T = T, .ids = t->ids, .off = t->off, .pos = t->pos,
                        .user = t->user, .n = T, .rows = t->rows, .targets = t->targets,
                        .K = K, .neg = K ? t->neg : NULL};
}

static sq_sasrec_config tiny_config(double dropout)
{
    return (sq_sasrec_config){.n_items = 9, .n_layers = 2, .n_heads = 2, .dim = 6,
                              .ffn = 7, .max_len = 5, .dropout = dropout, .ln_eps = 1e-8};
}

typedef struct {
    sq_sasrec_f64 *m;
    sq_sasrec_work_f64 *w;
    const sq_packed *b;
    int loss;
} obj_ctx;

static double loss_obj(void *p)
{
    obj_ctx *c = p;
    int cnt;
    sq_sasrec_forward_f64(c->m, c->w, c->b, 1, 7, 3);
    return sq_sasrec_loss_f64(c->m, c->w, c->b, c->loss, NULL, &cnt);
}

/* Finite differences on every parameter of the double model; then the float
 * model on the same parameters. */
static void gradcheck_model(unit_ctx *t, int loss, double dropout, const char *what)
{
    sq_err e = {0};
    sq_sasrec_config cfg = tiny_config(dropout);
    tiny_batch tb;
    tiny_batch_init(&tb, cfg.max_len, loss == SQ_LOSS_BCE ? 2 : 0);
    sq_sasrec_cap cap = {.B = 3, .T = tb.pb.T, .n = tb.pb.n,
                         .att = sq_attention_cache_size(tb.off, 3, 1), .K = tb.pb.K,
                         .train = 1};
    sq_sasrec_f64 m, g;
    sq_sasrec_work_f64 w;
    CHECK_EQ(sq_sasrec_alloc_f64(&m, &cfg, &e), 0);
    CHECK_EQ(sq_sasrec_alloc_f64(&g, &cfg, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc_f64(&w, &cfg, &cap, &e), 0);
    sq_sasrec_init_weights_f64(&m, 11);
    /* Perturb biases and LayerNorm parameters away from 0 and 1, so their
     * gradients are exercised in general position. */
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    for (size_t i = m.n_decay; i < m.n; i++)
        m.mem[i] += 0.3 * sq_rng_normal(&r);
    /* the item table larger than xavier's tiny scale, so logits vary */
    for (size_t i = (size_t)cfg.dim; i < m.sizes[0]; i++)
        m.mem[i] *= 3;

    int cnt = 0;
    memset(g.mem, 0, g.n * sizeof *g.mem);
    sq_sasrec_forward_f64(&m, &w, &tb.pb, 1, 7, 3);
    double L0 = sq_sasrec_loss_f64(&m, &w, &tb.pb, loss, &g, &cnt);
    sq_sasrec_backward_f64(&m, &w, &tb.pb, &g);
    CHECK_EQ(cnt, 9);
    CHECK(L0 > 0);

    obj_ctx c = {&m, &w, &tb.pb, loss};
    double err = gc_check(loss_obj, &c, m.mem, g.mem, m.n);
    gc_note(t->name, what, err);
    CHECK(err < GRAD_TOL);
    /* padding row: no gradient */
    for (int i = 0; i < cfg.dim; i++)
        CHECK(g.p.item_emb[i] == 0);

    /* float build on the same parameters */
    sq_sasrec mf, gf;
    sq_sasrec_work wf;
    CHECK_EQ(sq_sasrec_alloc(&mf, &cfg, &e), 0);
    CHECK_EQ(sq_sasrec_alloc(&gf, &cfg, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc(&wf, &cfg, &cap, &e), 0);
    for (size_t i = 0; i < m.n; i++)
        mf.mem[i] = (float)m.mem[i];
    sq_sasrec_forward(&mf, &wf, &tb.pb, 1, 7, 3);
    double Lf = sq_sasrec_loss(&mf, &wf, &tb.pb, loss, &gf, &cnt);
    sq_sasrec_backward(&mf, &wf, &tb.pb, &gf);
    CHECK_NEAR(Lf, L0, 1e-5);
    double ferr = gc_rel_diff(gf.mem, g.mem, g.n);
    gc_note(t->name, "float vs double grads", ferr);
    CHECK(ferr < F32_TOL);

    sq_sasrec_work_free(&wf);
    sq_sasrec_free(&gf);
    sq_sasrec_free(&mf);
    sq_sasrec_work_free_f64(&w);
    sq_sasrec_free_f64(&g);
    sq_sasrec_free_f64(&m);
}

UNIT_TEST(test_sasrec_gradcheck_ce)
{
    gradcheck_model(t, SQ_LOSS_CE, 0, "ce, dropout 0");
}

UNIT_TEST(test_sasrec_gradcheck_bce)
{
    gradcheck_model(t, SQ_LOSS_BCE, 0, "bce K=2, dropout 0");
}

UNIT_TEST(test_sasrec_gradcheck_dropout)
{
    gradcheck_model(t, SQ_LOSS_CE, 0.3, "ce, dropout 0.3");
    gradcheck_model(t, SQ_LOSS_BCE, 0.3, "bce K=2, dropout 0.3");
}

/* A sequence's states do not depend on the other sequences of its batch
 * (packed segments), and sq_sasrec_scores is the newest state times E. */
UNIT_TEST(test_sasrec_segments_and_scores)
{
    sq_err e = {0};
    sq_sasrec_config cfg = tiny_config(0);
    tiny_batch tb;
    tiny_batch_init(&tb, cfg.max_len, 0);
    sq_sasrec m;
    CHECK_EQ(sq_sasrec_alloc(&m, &cfg, &e), 0);
    sq_sasrec_init_weights(&m, 3);
    sq_sasrec_cap cap = {.B = 3, .T = tb.pb.T, .n = 0, .att = 64, .train = 0};
    sq_sasrec_work w, w1;
    CHECK_EQ(sq_sasrec_work_alloc(&w, &cfg, &cap, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc(&w1, &cfg, &cap, &e), 0);
    sq_sasrec_forward(&m, &w, &tb.pb, 0, 0, 0);
    /* sequence 1 (rows 1..4) alone */
    int off1[2] = {0, 4};
    sq_packed one = {.B = 1, .T = 4, .ids = tb.ids + 1, .off = off1, .pos = tb.pos + 1};
    sq_sasrec_forward(&m, &w1, &one, 0, 0, 0);
    CHECK(memcmp(w1.out, w.out + 1 * cfg.dim, 4 * cfg.dim * sizeof(float)) == 0);

    /* scores: histories = the batch's sequences plus an empty one and one
     * longer than max_len (only its newest 5 items count) */
    uint32_t items[] = {3, 1, 4, 1, 5, 7, 7, 9, 2, 0, 5, 3};
    uint32_t hoff[] = {0, 1, 5, 5}, hlen[] = {1, 4, 0, 7};
    /* history 3: items[5..12) = 7 7 9 2 0 5 3 -> newest five 9 2 0 5 3 */
    sq_batch hb = {.items = items, .off = hoff, .len = hlen, .B = 4};
    int V1 = 10;
    float *sc = calloc(4 * (size_t)V1, sizeof *sc);
    CHECK_EQ(sq_sasrec_scores(&m, &hb, sc, &e), 0);
    const int last_row[3] = {0, 4, 9}; /* newest rows of tb's sequences */
    for (int b = 0; b < 4; b++) {
        int hb_idx = b == 3 ? 2 : b; /* history 3 == tb sequence 2 */
        if (b == 2)
            continue;
        const float *h = w.out + (size_t)last_row[hb_idx] * cfg.dim;
        for (int i = 1; i < V1; i++) {
            double s = 0;
            for (int c = 0; c < cfg.dim; c++)
                s += (double)h[c] * m.p.item_emb[(size_t)i * cfg.dim + c];
            CHECK_NEAR(sc[(size_t)b * V1 + i], s, 1e-5);
        }
    }
    /* the empty history scores from the last position embedding alone */
    int id0 = 0, pos0 = cfg.max_len - 1, off0[2] = {0, 1};
    sq_packed cold = {.B = 1, .T = 1, .ids = &id0, .off = off0, .pos = &pos0};
    sq_sasrec_forward(&m, &w1, &cold, 0, 0, 0);
    for (int i = 1; i < V1; i++) {
        double s = 0;
        for (int c = 0; c < cfg.dim; c++)
            s += (double)w1.out[c] * m.p.item_emb[(size_t)i * cfg.dim + c];
        CHECK_NEAR(sc[2 * (size_t)V1 + i], s, 1e-5);
    }
    free(sc);
    sq_sasrec_work_free(&w1);
    sq_sasrec_work_free(&w);
    sq_sasrec_free(&m);
}

/* Config checks and the model-file round trip of config and tensors. */
UNIT_TEST(test_sasrec_config)
{
    sq_err e = {0};
    sq_sasrec_config c = tiny_config(0.2);
    CHECK_EQ(sq_sasrec_config_check(&c, &e), 0);
    c.n_heads = 4; /* 6 % 4 != 0 */
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    c = tiny_config(1.0);
    e.code = 0;
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    size_t sizes[SQ_SASREC_NT];
    c = tiny_config(0);
    size_t n = sq_sasrec_sizes(&c, sizes);
    /* 10*6 + 5*6 + 2*(4*36 + 2*42 + 5*6 + 7 + 4*6) + 2*6 */
    CHECK_EQ(n, 60 + 30 + 2 * (144 + 84 + 30 + 7 + 24) + 12);
    CHECK_STR(sq_sasrec_tensor_name(0), "item_emb");
    CHECK(sq_sasrec_tensor_name(SQ_SASREC_NT) == NULL);
}

/* ------------------------------------------------------------------------ */
/* Batch builder                                                            */

/* 4 users: training parts of 3, 1 (no sample), 6 and 2 items. */
static const uint32_t seq_items[] = {1, 2, 3, 9, 4, 5, 6, 7, 8, 1, 2, 3};
static const uint64_t seq_start[] = {0, 3, 4, 10};
static const uint32_t seq_ntrain[] = {3, 1, 6, 2};

static sq_seqs tiny_seqs(void)
{
    return (sq_seqs){.n_users = 4, .n_items = 9, .items = seq_items,
                     .start = seq_start, .n_train = seq_ntrain};
}

UNIT_TEST(test_batch_all)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b;
    CHECK_EQ(sq_batcher_init(&b, &d, SQ_TARGET_ALL, 4, 8, 0, 1, &e), 0);
    CHECK_EQ(b.n_samples, 3);
    CHECK_EQ(sq_batcher_n_batches(&b), 1);
    CHECK_EQ(b.cap_T, 2 + 4 + 1);
    sq_batcher_shuffle(&b, 0);
    const sq_packed *p = sq_batcher_get(&b, 0, 0);
    CHECK_EQ(p->B, 3);
    CHECK_EQ(p->T, 7);
    CHECK_EQ(p->n, 7);
    for (int j = 0; j < p->B; j++) {
        uint32_t u = p->user[j];
        int len = p->off[j + 1] - p->off[j];
        const uint32_t *it = seq_items + seq_start[u];
        int nt = (int)seq_ntrain[u];
        CHECK_EQ(len, nt - 1 < 4 ? nt - 1 : 4);
        for (int s = 0; s < len; s++) {
            int row = p->off[j] + s;
            CHECK_EQ(p->ids[row], it[nt - 1 - len + s]);
            CHECK_EQ(p->pos[row], 4 - len + s);
            CHECK_EQ(p->rows[row], row);
            CHECK_EQ(p->targets[row], it[nt - len + s]);
        }
    }
    sq_batcher_free(&b);
}

UNIT_TEST(test_batch_last)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b;
    CHECK_EQ(sq_batcher_init(&b, &d, SQ_TARGET_LAST, 3, 2, 0, 1, &e), 0);
    CHECK_EQ(b.n_samples, 2 + 5 + 1);
    CHECK_EQ(sq_batcher_n_batches(&b), 4);
    sq_batcher_shuffle(&b, 2);
    int seen = 0;
    for (uint64_t i = 0; i < 4; i++) {
        const sq_packed *p = sq_batcher_get(&b, 2, i);
        CHECK_EQ(p->n, p->B);
        for (int j = 0; j < p->B; j++) {
            CHECK_EQ(p->rows[j], p->off[j + 1] - 1);
            CHECK(p->off[j + 1] - p->off[j] <= 3);
            seen++;
        }
    }
    CHECK_EQ(seen, 8);
    sq_batcher_free(&b);
}

/* Negatives avoid the user's training items and do not depend on the batch
 * size; the shuffle depends on the epoch. */
UNIT_TEST(test_batch_negatives)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b1, b3;
    CHECK_EQ(sq_batcher_init(&b1, &d, SQ_TARGET_ALL, 8, 1, 3, 42, &e), 0);
    CHECK_EQ(sq_batcher_init(&b3, &d, SQ_TARGET_ALL, 8, 3, 3, 42, &e), 0);
    sq_batcher_shuffle(&b1, 5);
    sq_batcher_shuffle(&b3, 5);
    const sq_packed *p3 = sq_batcher_get(&b3, 5, 0);
    int negs3[64], n3 = p3->n * 3;
    memcpy(negs3, p3->neg, (size_t)n3 * sizeof(int));
    uint32_t users3[3];
    memcpy(users3, p3->user, sizeof users3);
    int at = 0;
    for (uint64_t i = 0; i < 3; i++) {
        const sq_packed *p = sq_batcher_get(&b1, 5, i);
        CHECK_EQ(p->user[0], users3[i]);
        uint32_t u = p->user[0];
        for (int k = 0; k < p->n * 3; k++) {
            int x = p->neg[k];
            CHECK(x >= 1 && x <= 9);
            for (uint32_t j = 0; j < seq_ntrain[u]; j++)
                CHECK(x != (int)seq_items[seq_start[u] + j]);
            CHECK_EQ(x, negs3[at + k]);
        }
        at += p->n * 3;
    }
    CHECK_EQ(at, n3);
    /* another epoch, another order or other negatives */
    sq_batcher_shuffle(&b3, 6);
    const sq_packed *q = sq_batcher_get(&b3, 6, 0);
    CHECK(memcmp(q->neg, negs3, (size_t)n3 * sizeof(int)) != 0 ||
          memcmp(q->user, users3, sizeof users3) != 0);
    sq_batcher_free(&b1);
    sq_batcher_free(&b3);
}

/* ------------------------------------------------------------------------ */
/* PyTorch oracle (tests/reference/sasrec_ref.py, README.md there)          */

static int dump_tensor(FILE *idx, const char *dir, const char *name, const char *dt,
                       const void *data, size_t elem, size_t n, int nd, const size_t *shape)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, elem, n, f) == n;
    ok &= fclose(f) == 0;
    fprintf(idx, "tensor %s %s", name, dt);
    for (int d = 0; d < nd; d++)
        fprintf(idx, " %zu", shape[d]);
    fprintf(idx, "\n");
    return ok ? 0 : -1;
}

static double *read_f64(const char *dir, const char *name, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    double *x = calloc(n ? n : 1, sizeof *x);
    if (!f || !x) {
        if (f)
            fclose(f);
        free(x);
        return NULL;
    }
    size_t got = fread(x, sizeof *x, n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra) {
        free(x);
        return NULL;
    }
    return x;
}

/* max |a - b| / max(max |b|, floor) over n: the normwise relative
 * difference, with a floor for tensors whose exact value is 0 (the key
 * bias: softmax ignores a shift common to all keys), where only round-off
 * remains. */
static double rel_f64(const double *a, const double *b, size_t n, double floor_)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(fabs(a[i] - b[i]) <= d))
            d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > m)
            m = fabs(b[i]);
    }
    return d / fmax(m, fmax(floor_, 1e-300));
}

UNIT_TEST(test_sasrec_torch_reference)
{
    const char *root = getenv("SEQREC_ROOT") ? getenv("SEQREC_ROOT") : ".";
    char script[512];
    snprintf(script, sizeof script, "%s/tests/reference/sasrec_ref.py", root);
    FILE *probe = fopen(script, "r");
    if (!probe)
        SKIP("tests/reference/sasrec_ref.py not found (run from the repository root)");
    fclose(probe);

    sq_err e = {0};
    sq_sasrec_config cfg = {.n_items = 20, .n_layers = 2, .n_heads = 2, .dim = 8, .ffn = 12,
                            .max_len = 6, .dropout = 0, .ln_eps = 1e-8};
    enum { B = 3, T = 13, K = 2 };
    int len[B] = {2, 5, 6}, off[B + 1], pos[T], ids[T], rows[T], targets[T], neg[T * K];
    sq_pack_offsets(off, len, B);
    sq_pack_positions(pos, off, B, cfg.max_len);
    sq_rng r;
    sq_rng_seed(&r, 77, 0);
    for (int i = 0; i < T; i++) {
        ids[i] = 1 + (int)sq_rng_below(&r, 20);
        rows[i] = i;
        targets[i] = 1 + (int)sq_rng_below(&r, 20);
        for (int k = 0; k < K; k++)
            neg[i * K + k] = (int)sq_rng_below(&r, 21); /* 0 = none, sometimes */
    }
    ids[9] = 0;     /* a padding token inside a sequence */
    targets[4] = 0; /* an ignored target */
    sq_packed pb = {.B = B, .T = T, .ids = ids, .off = off, .pos = pos, .n = T, .rows = rows,
                    .targets = targets, .K = K, .neg = neg};
    sq_sasrec_cap cap = {.B = B, .T = T, .n = T, .att = sq_attention_cache_size(off, B, 1),
                         .K = K, .train = 1};

    sq_sasrec_f64 md, gd;
    sq_sasrec mf, gf;
    sq_sasrec_work_f64 wd;
    sq_sasrec_work wf;
    CHECK_EQ(sq_sasrec_alloc_f64(&md, &cfg, &e) || sq_sasrec_alloc_f64(&gd, &cfg, &e) ||
             sq_sasrec_alloc(&mf, &cfg, &e) || sq_sasrec_alloc(&gf, &cfg, &e) ||
             sq_sasrec_work_alloc_f64(&wd, &cfg, &cap, &e) ||
             sq_sasrec_work_alloc(&wf, &cfg, &cap, &e), 0);
    sq_sasrec_init_weights_f64(&md, 5);
    for (size_t i = md.n_decay; i < md.n; i++)
        md.mem[i] += 0.2 * sq_rng_normal(&r);
    for (size_t i = (size_t)cfg.dim; i < md.sizes[0]; i++)
        md.mem[i] *= 4;
    /* the same weights in both builds: round to float */
    for (size_t i = 0; i < md.n; i++) {
        mf.mem[i] = (float)md.mem[i];
        md.mem[i] = mf.mem[i];
    }

    char dir[] = "/tmp/sqref.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopen(path, "w");
    CHECK(idx != NULL);
    if (!idx)
        return;
    fprintf(idx, "config n_items %u\nconfig layers %d\nconfig heads %d\nconfig dim %d\n"
            "config ffn %d\nconfig max_len %d\nconfig ln_eps %.17g\n", cfg.n_items,
            cfg.n_layers, cfg.n_heads, cfg.dim, cfg.ffn, cfg.max_len, cfg.ln_eps);
    const double *pm = md.mem;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        size_t shape[4];
        if (!md.sizes[i])
            continue; /* not a tensor of a softmax SASRec */
        int nd = sq_sasrec_tensor_shape(&cfg, i, s);
        for (int d = 0; d < nd; d++)
            shape[d] = (size_t)s[d];
        CHECK_EQ(dump_tensor(idx, dir, sq_sasrec_tensor_name(i), "f64", pm, 8, md.sizes[i],
                             nd, shape), 0);
        pm += md.sizes[i];
    }
    size_t sT[1] = {T}, sOff[1] = {B + 1}, sNeg[2] = {T, K};
    CHECK_EQ(dump_tensor(idx, dir, "ids", "i32", ids, 4, T, 1, sT), 0);
    CHECK_EQ(dump_tensor(idx, dir, "off", "i32", off, 4, B + 1, 1, sOff), 0);
    CHECK_EQ(dump_tensor(idx, dir, "rows", "i32", rows, 4, T, 1, sT), 0);
    CHECK_EQ(dump_tensor(idx, dir, "targets", "i32", targets, 4, T, 1, sT), 0);
    CHECK_EQ(dump_tensor(idx, dir, "neg", "i32", neg, 4, T * K, 2, sNeg), 0);
    CHECK_EQ(fclose(idx), 0);

    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "for p in python3 /usr/bin/python3; do "
             "if \"$p\" -c 'import torch' >/dev/null 2>&1; then exec \"$p\" '%s' '%s'; fi; "
             "done; exit 77", script, dir);
    int st = system(cmd);
    int rc = st == -1 ? -1 : WEXITSTATUS(st);
    if (rc == 77) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        (void)!system(cmd);
        sq_sasrec_work_free(&wf);
        sq_sasrec_work_free_f64(&wd);
        sq_sasrec_free(&gf);
        sq_sasrec_free(&mf);
        sq_sasrec_free_f64(&gd);
        sq_sasrec_free_f64(&md);
        SKIP("python3-torch not installed");
    }
    CHECK_EQ(rc, 0);

    double worst_f = 0, worst_d = 0;
#define NOTE(errf, errd) do { \
        double ef_ = (errf), ed_ = (errd); \
        CHECK(ef_ < 1e-5); \
        CHECK(ed_ < 1e-10); \
        if (!(ef_ <= worst_f)) worst_f = ef_; \
        if (!(ed_ <= worst_d)) worst_d = ed_; \
    } while (0)
    double *th = read_f64(dir, "h", (size_t)T * cfg.dim);
    CHECK(th != NULL);
    for (int loss = SQ_LOSS_CE; th && loss <= SQ_LOSS_BCE; loss++) {
        const char *ln = loss == SQ_LOSS_CE ? "ce" : "bce";
        int cnt;
        memset(gd.mem, 0, gd.n * sizeof *gd.mem);
        memset(gf.mem, 0, gf.n * sizeof *gf.mem);
        sq_sasrec_forward_f64(&md, &wd, &pb, 1, 1, 0);
        sq_sasrec_forward(&mf, &wf, &pb, 1, 1, 0);
        if (loss == SQ_LOSS_CE) {
            double *hf = calloc((size_t)T * cfg.dim, sizeof *hf);
            for (size_t i = 0; hf && i < (size_t)T * cfg.dim; i++)
                hf[i] = wf.out[i];
            NOTE(rel_f64(hf, th, (size_t)T * cfg.dim, 0), rel_f64(wd.out, th, (size_t)T * cfg.dim, 0));
            free(hf);
        }
        double ld = sq_sasrec_loss_f64(&md, &wd, &pb, loss, &gd, &cnt);
        double lf = sq_sasrec_loss(&mf, &wf, &pb, loss, &gf, &cnt);
        sq_sasrec_backward_f64(&md, &wd, &pb, &gd);
        sq_sasrec_backward(&mf, &wf, &pb, &gf);
        char name[64];
        snprintf(name, sizeof name, "loss_%s", ln);
        double *tl = read_f64(dir, name, 1);
        CHECK(tl != NULL);
        if (tl)
            NOTE(fabs(lf - tl[0]) / fabs(tl[0]), fabs(ld - tl[0]) / fabs(tl[0]));
        free(tl);
        double *gfd = calloc(gf.n, sizeof *gfd);
        for (size_t i = 0; gfd && i < gf.n; i++)
            gfd[i] = gf.mem[i];
        /* floor: 1e-2 of the largest gradient of the loss */
        double gmax = 0;
        for (size_t i = 0; i < gd.n; i++)
            gmax = fmax(gmax, fabs(gd.mem[i]));
        size_t at = 0;
        for (int i = 0; gfd && i < SQ_SASREC_NT; i++) {
            if (!md.sizes[i])
                continue;
            snprintf(name, sizeof name, "grad_%s.%s", ln, sq_sasrec_tensor_name(i));
            double *tg = read_f64(dir, name, md.sizes[i]);
            CHECK(tg != NULL);
            if (tg) {
                NOTE(rel_f64(gfd + at, tg, md.sizes[i], 1e-2 * gmax),
                     rel_f64(gd.mem + at, tg, md.sizes[i], 1e-2 * gmax));
                gc_note(t->name, name, rel_f64(gfd + at, tg, md.sizes[i], 1e-2 * gmax));
            }
            free(tg);
            at += md.sizes[i];
        }
        free(gfd);
    }
#undef NOTE
    free(th);
    gc_note(t->name, "torch vs C float (max rel)", worst_f);
    gc_note(t->name, "torch vs C double (max rel)", worst_d);
    if (!getenv("SQ_REF_KEEP")) { /* keep the exchange for a look by hand */
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        (void)!system(cmd);
    } else {
        printf("    kept %s\n", dir);
    }
    sq_sasrec_work_free(&wf);
    sq_sasrec_work_free_f64(&wd);
    sq_sasrec_free(&gf);
    sq_sasrec_free(&mf);
    sq_sasrec_free_f64(&gd);
    sq_sasrec_free_f64(&md);
}
