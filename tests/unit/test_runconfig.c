/* Unit tests for lib/train/runconfig.c: seqrec-train --config's reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv.h"
#include "models.h"
#include "runconfig.h"
#include "unit.h"

/* Writes text to a temp file; its path into path (to unlink). */
static int temp_config(char *path, size_t n, const char *text)
{
    snprintf(path, n, "/tmp/sq_runconfig_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    return ok ? 0 : -1;
}

UNIT_TEST(test_runconfig_records)
{
    CHECK(sq_runconfig_is_record("n_items"));
    CHECK(sq_runconfig_is_record("n_users"));
    CHECK(sq_runconfig_is_record("data.xxh3"));
    CHECK(sq_runconfig_is_record("seqrec.version"));
    CHECK(sq_runconfig_is_record("valid.ndcg@10"));
    CHECK(sq_runconfig_is_record("train.best_epoch"));
    CHECK(sq_runconfig_is_record("train.epochs_done"));
    CHECK(sq_runconfig_is_record("train.parts"));
    CHECK(sq_runconfig_is_record("train.stop"));
    CHECK(sq_runconfig_is_record("pop.train_interactions"));
    CHECK(!sq_runconfig_is_record("train.epochs"));
    CHECK(!sq_runconfig_is_record("dim"));
    CHECK(!sq_runconfig_is_record("model"));
    CHECK(!sq_runconfig_is_record("datax"));
}

/* The header's lines, a cut config and comments: split into the trainer's
 * and the model's text, records and the header's other lines skipped. */
UNIT_TEST(test_runconfig_read_split)
{
    char path[64], v[64];
    if (temp_config(path, sizeof path,
                    "file\tm.sqm\nkind\tmodel\n# a comment\n\nconfig\tmodel=gru4rec\r\n"
                    "config\tn_items=100\ndata.dataset=x\nhidden=8\ntrain.lr=0.003\n"
                    "dim=16\ntensor\titem_emb\tf32\t101x16\nchecksum\tok\ndim=32\n"))
        SKIP("cannot write a temp file");
    sq_runconfig c;
    const sq_model_def *d = NULL;
    sq_err e = {0};
    CHECK_EQ(sq_runconfig_read(path, NULL, &c, &d, &e), 0);
    CHECK(d == sq_models_find("gru4rec"));
    CHECK_STR(c.model, "gru4rec");
    CHECK(sq_kv_get(c.model_kv, "hidden", v, sizeof v) && !strcmp(v, "8"));
    CHECK(sq_kv_get(c.model_kv, "dim", v, sizeof v) && !strcmp(v, "32")); /* last wins */
    CHECK(!sq_kv_get(c.model_kv, "train.lr", v, sizeof v));
    CHECK(!sq_kv_get(c.model_kv, "n_items", v, sizeof v));
    CHECK(!sq_kv_get(c.model_kv, "model", v, sizeof v));
    CHECK(sq_kv_get(c.train_kv, "train.lr", v, sizeof v) && !strcmp(v, "0.003"));
    CHECK(!sq_kv_get(c.train_kv, "data.dataset", v, sizeof v));
    sq_runconfig_free(&c);
    /* the model wanted over the file's: gru4rec's key on line 8 refused */
    CHECK_EQ(sq_runconfig_read(path, sq_models_find("sasrec"), &c, &d, &e), SQ_EX_USAGE);
    char want[128];
    snprintf(want, sizeof want, "%s:8: hidden is a setting of --model gru4rec", path);
    CHECK(strstr(e.msg, want) != NULL);
    CHECK(c.model == NULL && c.model_kv == NULL && c.train_kv == NULL);
    unlink(path);
}

UNIT_TEST(test_runconfig_refusals)
{
    static const struct {
        const char *text;
        int code;
        const char *msg;
    } cases[] = {
        {"dim=16\nnope=1\n", SQ_EX_USAGE, ":2: unknown key 'nope'"},
        {"epochs=3\n", SQ_EX_USAGE, ":1: unknown key 'epochs' (the key of --epochs is "
                                    "train.epochs)"},
        {"train.lr=0\n", SQ_EX_USAGE, ":1: bad train.lr=0"},
        {"\n\nthreads=2\n", SQ_EX_USAGE, ":3: threads is not a setting"},
        {"model=zzz\n", SQ_EX_USAGE, ":1: unknown model 'zzz'"},
        {"dim=16\n=3\n", SQ_EX_DATA, ":2: not a key=value line"},
        {"dim =16\n", SQ_EX_DATA, ":1: not a key=value line"},
        {"just words\n", SQ_EX_DATA, ":1: not a key=value line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64];
        if (temp_config(path, sizeof path, cases[i].text))
            SKIP("cannot write a temp file");
        sq_runconfig c;
        const sq_model_def *d = NULL;
        sq_err e = {0};
        CHECK_EQ(sq_runconfig_read(path, NULL, &c, &d, &e), cases[i].code);
        if (!strstr(e.msg, cases[i].msg))
            fprintf(stderr, "  case %zu: %s\n", i, e.msg);
        CHECK(strstr(e.msg, cases[i].msg) != NULL);
        CHECK(strncmp(e.msg, path, strlen(path)) == 0);
        unlink(path);
    }
}
