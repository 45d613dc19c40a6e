/* Unit tests for lib/train/attnmap.c (seqrec-score --attention-map): the
 * files of a tiny SASRec and BERT4Rec model (the input rows, every head's
 * matrix equal to the model's own map, the means, the gnuplot script), the
 * refusals, and the drawing step with a stand-in gnuplot (none, one that
 * draws, one that fails), so the real one need not be installed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attnmap.h"
#include "dataset.h"
#include "eval.h"
#include "model.h"
#include "sasrec.h"
#include "unit.h"

/* User 1's six items: the test history is the first five, the validation
 * history the first four. */
static uint32_t items1[] = {3, 1, 4, 1, 5, 9};

static int one_user(sq_dataset *ds, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 9);
    int rc = sq_meta_add(&h, e, "dataset", "%s", "a");
    if (!rc)
        rc = sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    sq_record r = {.user = 1, .len = 6, .items = items1, .n_train = 4, .n_valid = 1};
    if (!rc)
        rc = sq_dataset_add(ds, &r, e);
    return rc ? rc : sq_dataset_finish(ds, e);
}

static int tiny_model(sq_sasrec *m, int backbone, sq_err *e)
{
    sq_sasrec_config c;
    sq_sasrec_defaults(&c, backbone);
    c.n_items = 9;
    c.n_layers = 2;
    c.n_heads = 2;
    c.dim = 8;
    c.ffn = 16;
    c.max_len = 8;
    c.dropout = 0;
    if (sq_sasrec_alloc(m, &c, e))
        return e->code;
    sq_sasrec_init_weights(m, 5);
    return 0;
}

/* The whole of a small text file (NUL-terminated, caller frees), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = calloc(1, 1 << 16);
    size_t n = s ? fread(s, 1, (1 << 16) - 1, f) : 0;
    (void)n;
    fclose(f);
    return s;
}

/* An n x n matrix of TSV numbers into a[n * n]: 0, or -1 when the file is
 * missing or its shape is not n rows of n fields. */
static int read_matrix(const char *path, int n, double *a)
{
    char *s = slurp(path), *p = s;
    int rows = 0, bad = !s;
    while (!bad && *p) {
        for (int j = 0; j < n && !bad; j++) {
            char *end;
            double v = strtod(p, &end);
            char want = j + 1 < n ? '\t' : '\n';
            if (end == p || *end != want || rows >= n)
                bad = 1;
            else
                a[(size_t)rows * n + j] = v;
            p = end + 1;
        }
        rows++;
    }
    free(s);
    return bad || rows != n ? -1 : 0;
}

/* The names in dir other than "." and "..", sorted, joined by spaces. */
static void list_dir(const char *dir, char *out, size_t room)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.') {
            size_t at = strlen(out);
            snprintf(out + at, room - at, "%s%s", at ? " " : "", ents[i]->d_name);
        }
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
}

static void remove_dir(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
        if (ents[i]->d_name[0] != '.')
            unlink(path);
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
    rmdir(dir);
}

/* PREFIX.items.tsv: a header, then "row position item" of the model's
 * rows (the mask token as "mask"). */
static void check_items(unit_ctx *t, const char *prefix, const sq_attn_map *am)
{
    char path[512], want[1024] = "row\tposition\titem\n";
    for (int i = 0; i < am->n; i++) {
        size_t at = strlen(want);
        if (am->ids[i] == am->mask_id)
            snprintf(want + at, sizeof want - at, "%d\t%d\tmask\n", i, am->pos[i]);
        else
            snprintf(want + at, sizeof want - at, "%d\t%d\t%d\n", i, am->pos[i], am->ids[i]);
    }
    snprintf(path, sizeof path, "%s.items.tsv", prefix);
    char *s = slurp(path);
    CHECK_STR(s, want);
    free(s);
}

/* The .lL.hH.tsv files hold the model's own map (to %.7g), the .lL.mean.tsv
 * the mean of the heads; returns the number of values compared. */
static int check_matrices(unit_ctx *t, const char *prefix, const sq_attn_map *am)
{
    int n = am->n, compared = 0;
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * sizeof *a), *mean = malloc(nn * sizeof *mean);
    double *sum = calloc(nn, sizeof *sum);
    char path[512];
    CHECK(a && mean && sum);
    for (int l = 0; a && mean && sum && l < am->layers; l++) {
        memset(sum, 0, nn * sizeof *sum);
        for (int h = 0; h < am->heads; h++) {
            snprintf(path, sizeof path, "%s.l%d.h%d.tsv", prefix, l + 1, h + 1);
            CHECK_EQ(read_matrix(path, n, a), 0);
            const float *want = am->map + ((size_t)l * am->heads + h) * nn;
            double worst = 0;
            for (size_t i = 0; i < nn; i++) {
                worst = fmax(worst, fabs(a[i] - want[i]));
                sum[i] += a[i];
                compared++;
            }
            CHECK(worst <= 1e-6);
        }
        snprintf(path, sizeof path, "%s.l%d.mean.tsv", prefix, l + 1);
        CHECK_EQ(read_matrix(path, n, mean), 0);
        double worst = 0;
        for (size_t i = 0; i < nn; i++)
            worst = fmax(worst, fabs(mean[i] - sum[i] / am->heads));
        CHECK(worst <= 2e-6);
    }
    free(a);
    free(mean);
    free(sum);
    return compared;
}

UNIT_TEST(test_attnmap_sasrec_files)
{
    sq_err e = {0};
    sq_dataset ds;
    sq_sasrec m;
    CHECK_EQ(one_user(&ds, &e), 0);
    CHECK_EQ(tiny_model(&m, SQ_BACKBONE_SASREC, &e), 0);
    if (e.code)
        return;
    sq_model model;
    sq_sasrec_model_view(&model, &m);
    char dir[] = "/tmp/sq_attnmap_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char prefix[64], path[128], names[1024];
    snprintf(prefix, sizeof prefix, "%s/u1", dir);
    CHECK_EQ(sq_attention_map_write(&model, "m.sqm", &ds, "in.sqr", 1, SQ_EVAL_TEST, prefix, &e),
             0);
    /* the files, no temp file left, no picture (drawing is another step) */
    list_dir(dir, names, sizeof names);
    CHECK_STR(names, "u1.gp u1.items.tsv u1.l1.h1.tsv u1.l1.h2.tsv u1.l1.mean.tsv "
                     "u1.l2.h1.tsv u1.l2.h2.tsv u1.l2.mean.tsv");
    /* the model's own map of the test history (the first five items) */
    sq_attn_map am;
    CHECK_EQ(model.attention(&model, items1, 5, &am, &e), 0);
    CHECK_EQ(am.n, 5);
    for (int i = 0; i < am.n; i++)
        CHECK_EQ(am.ids[i], items1[i]);
    check_items(t, prefix, &am);
    CHECK_EQ(check_matrices(t, prefix, &am), 2 * 2 * 25);
    /* SASRec is causal and softmax: rows sum to 1, nothing above the diagonal */
    double a[25];
    snprintf(path, sizeof path, "%s.l2.mean.tsv", prefix);
    CHECK_EQ(read_matrix(path, 5, a), 0);
    for (int i = 0; i < 5; i++) {
        double row = 0;
        for (int j = 0; j < 5; j++) {
            row += a[i * 5 + j];
            if (j > i)
                CHECK(a[i * 5 + j] == 0);
        }
        CHECK_NEAR(row, 1, 1e-5);
    }
    sq_attn_map_free(&am);
    /* the script: a panel per layer on the means, in the prefix's directory */
    snprintf(path, sizeof path, "%s.gp", prefix);
    char *s = slurp(path);
    CHECK(s != NULL);
    if (s) {
        CHECK(strstr(s, "# sasrec --attn softmax, user 1 (5 items)\n") == s);
        CHECK(strstr(s, "run: gnuplot u1.gp\n") != NULL);
        CHECK(strstr(s, "set output 'u1.png'\n") != NULL);
        CHECK(strstr(s, "set multiplot layout 1,2 title") != NULL);
        CHECK(strstr(s, "plot 'u1.l1.mean.tsv' matrix with image\n") != NULL);
        CHECK(strstr(s, "plot 'u1.l2.mean.tsv' matrix with image\n") != NULL);
        CHECK(strstr(s, "set xtics (\"3\" 0, \"1\" 1, \"4\" 2, \"1\" 3, \"5\" 4)") != NULL);
        CHECK(strstr(s, "set cbrange [0:*]\n") != NULL); /* weights >= 0 */
        CHECK(strstr(s, dir) == NULL); /* names relative to the directory */
    }
    free(s);
    /* --target valid: the history before the validation target */
    snprintf(prefix, sizeof prefix, "%s/v1", dir);
    CHECK_EQ(sq_attention_map_write(&model, "m.sqm", &ds, "in.sqr", 1, SQ_EVAL_VALID, prefix,
                                    &e), 0);
    CHECK_EQ(model.attention(&model, items1, 4, &am, &e), 0);
    CHECK_EQ(am.n, 4);
    check_items(t, prefix, &am);
    CHECK_EQ(check_matrices(t, prefix, &am), 2 * 2 * 16);
    sq_attn_map_free(&am);
    remove_dir(dir);
    sq_sasrec_free(&m);
    sq_dataset_free(&ds);
}

/* BERT4Rec: the mask token ends the rows ("mask", "[M]" on the axes). */
UNIT_TEST(test_attnmap_bert4rec_mask_row)
{
    sq_err e = {0};
    sq_dataset ds;
    sq_sasrec m;
    CHECK_EQ(one_user(&ds, &e), 0);
    CHECK_EQ(tiny_model(&m, SQ_BACKBONE_BERT4REC, &e), 0);
    if (e.code)
        return;
    sq_model model;
    sq_sasrec_model_view(&model, &m);
    char dir[] = "/tmp/sq_attnmap_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char prefix[64], path[128];
    snprintf(prefix, sizeof prefix, "%s/b", dir);
    CHECK_EQ(sq_attention_map_write(&model, "m.sqm", &ds, "in.sqr", 1, SQ_EVAL_TEST, prefix, &e),
             0);
    sq_attn_map am;
    CHECK_EQ(model.attention(&model, items1, 5, &am, &e), 0);
    CHECK_EQ(am.n, 6);
    CHECK_EQ(am.mask_id, 10);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(am.ids[i], items1[i]);
    CHECK_EQ(am.ids[5], am.mask_id);
    check_items(t, prefix, &am);
    snprintf(path, sizeof path, "%s.items.tsv", prefix);
    char *s = slurp(path);
    CHECK(s && strstr(s, "\n5\t") && strstr(s, "\tmask\n") == s + strlen(s) - 6);
    free(s);
    CHECK_EQ(check_matrices(t, prefix, &am), 2 * 2 * 36);
    sq_attn_map_free(&am);
    snprintf(path, sizeof path, "%s.gp", prefix);
    s = slurp(path);
    CHECK(s && strstr(s, "# bert4rec --attn softmax, user 1 (6 items)\n") == s);
    CHECK(s && strstr(s, ", \"5\" 4, \"[M]\" 5)") != NULL);
    free(s);
    remove_dir(dir);
    sq_sasrec_free(&m);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_attnmap_refusals)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(one_user(&ds, &e), 0);
    char dir[] = "/tmp/sq_attnmap_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char prefix[64], names[256];
    snprintf(prefix, sizeof prefix, "%s/x", dir);
    /* a model without attention: a usage error, nothing written */
    sq_model pop = {0};
    snprintf(pop.name, sizeof pop.name, "pop");
    CHECK_EQ(sq_attention_map_write(&pop, "p.sqm", &ds, "in.sqr", 1, SQ_EVAL_TEST, prefix, &e),
             SQ_EX_USAGE);
    CHECK_STR(e.msg, "--attention-map: p.sqm is a pop model, which has no attention (sasrec "
                     "and bert4rec models have)");
    /* a user the input lacks */
    sq_sasrec m;
    CHECK_EQ(tiny_model(&m, SQ_BACKBONE_SASREC, &e), 0);
    sq_model model;
    sq_sasrec_model_view(&model, &m);
    sq_err e2 = {0};
    CHECK_EQ(sq_attention_map_write(&model, "m.sqm", &ds, "in.sqr", 9, SQ_EVAL_TEST, prefix,
                                    &e2), SQ_EX_DATA);
    CHECK_STR(e2.msg, "--attention-map: in.sqr has no user 9");
    list_dir(dir, names, sizeof names);
    CHECK_STR(names, "");
    /* a prefix in a directory that does not exist */
    sq_err e3 = {0};
    snprintf(prefix, sizeof prefix, "%s/no/x", dir);
    CHECK_EQ(sq_attention_map_write(&model, "m.sqm", &ds, "in.sqr", 1, SQ_EVAL_TEST, prefix,
                                    &e3), SQ_EX_CANTCREAT);
    CHECK(strstr(e3.msg, "/no/x.items.tsv") != NULL);
    remove_dir(dir);
    sq_sasrec_free(&m);
    sq_dataset_free(&ds);
}

/* A stand-in gnuplot at dir/NAME/gnuplot running body; 0 or -1. */
static int fake_gnuplot(const char *dir, const char *name, const char *body)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (mkdir(path, 0755) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/%s/gnuplot", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "#!/bin/sh\n%s\n", body);
    return fclose(f) == 0 && chmod(path, 0755) == 0 ? 0 : -1;
}

/* Draws with PATH = dir/bin only (the stand-ins use no other program). */
static int draw_with(const char *dir, const char *bin, const char *prefix, int *drawn,
                     sq_err *e)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, bin);
    const char *old = getenv("PATH");
    char *keep = old ? strdup(old) : NULL;
    setenv("PATH", path, 1);
    int rc = sq_attention_map_draw(prefix, drawn, e);
    if (keep)
        setenv("PATH", keep, 1);
    else
        unsetenv("PATH");
    free(keep);
    return rc;
}

UNIT_TEST(test_attnmap_draw)
{
    char dir[] = "/tmp/sq_attnmap_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    /* draws PREFIX.png from the script's name, in the script's directory */
    CHECK_EQ(fake_gnuplot(dir, "ok", "[ -f \"$1\" ] && : > \"${1%.gp}.png\""), 0);
    CHECK_EQ(fake_gnuplot(dir, "fails", "exit 3"), 0);
    char sub[128], prefix[64], png[80], gp[80], cwd[512], cwd2[512];
    snprintf(sub, sizeof sub, "%s/none", dir); /* a PATH without gnuplot */
    CHECK_EQ(mkdir(sub, 0755), 0);
    snprintf(sub, sizeof sub, "%s/maps", dir);
    CHECK_EQ(mkdir(sub, 0755), 0);
    snprintf(prefix, sizeof prefix, "%s/maps/u7", dir);
    snprintf(png, sizeof png, "%s.png", prefix);
    snprintf(gp, sizeof gp, "%s.gp", prefix);
    FILE *f = fopen(gp, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    /* no gnuplot: not an error, not drawn */
    sq_err e = {0};
    int drawn = -1;
    CHECK_EQ(draw_with(dir, "none", prefix, &drawn, &e), 0);
    CHECK_EQ(drawn, 0);
    CHECK(access(png, F_OK) != 0);
    /* a gnuplot that works */
    drawn = -1;
    CHECK_EQ(draw_with(dir, "ok", prefix, &drawn, &e), 0);
    CHECK_EQ(drawn, 1);
    CHECK(access(png, F_OK) == 0);
    CHECK(getcwd(cwd2, sizeof cwd2) != NULL);
    CHECK_STR(cwd2, cwd); /* only the child changed directory */
    /* one that fails: 70 naming the script */
    drawn = -1;
    CHECK_EQ(draw_with(dir, "fails", prefix, &drawn, &e), SQ_EX_SOFTWARE);
    CHECK_EQ(drawn, 0);
    char want[128];
    snprintf(want, sizeof want, "gnuplot failed on %s", gp);
    CHECK_STR(e.msg, want);
    static const char *const subs[] = {"maps", "ok", "fails", "none"};
    for (int i = 0; i < 4; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, subs[i]);
        remove_dir(sub);
    }
    rmdir(dir);
}
