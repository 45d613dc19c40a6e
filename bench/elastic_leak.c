/* elastic_leak - what every-position training would do to ELASTIC: the
 * experiment behind its rule of training only the newest position of an
 * input (elastic.h, LEAKAGE; `make bench-elastic-leak`).
 *
 *   elastic_leak SPLIT EPOCHS [MODEL OPTIONS as key=value ...] > leak.csv
 *
 * Trains --model elastic on SPLIT (a split stream) three times with the
 * same seed, EPOCHS each, validating every epoch (NDCG@10 over all items,
 * as seqrec-train does):
 *   all     every position trained: refused by seqrec-train, run here
 *           through a copy of the model's table without its check; the
 *           state of position t has seen item t+1 through the interest
 *           tokens, so the training loss falls far below what the
 *           validation can reach
 *   random  ELASTIC's default: one random prefix per user an epoch
 *   last    every prefix (RecBole's samples)
 * CSV on stdout: target,epoch,train_loss,valid_ndcg10,seconds. The model
 * options (config keys, e.g. dim=32 max_len=50) go to every run;
 * targets=all,random runs only those. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "elastic.h"
#include "kv.h"
#include "train.h"

typedef struct {
    const char *target;
} run_ctx;

static int on_epoch(void *ctx, const sq_epoch_stats *s, sq_err *e)
{
    (void)e;
    const run_ctx *r = ctx;
    printf("%s,%llu,%.6f,%.6f,%.3f\n", r->target, (unsigned long long)s->epoch, s->loss,
           s->evaluated ? s->ndcg10 : -1.0, s->seconds);
    fflush(stdout);
    return 0;
}

static int run(const sq_dataset *ds, const char *given, int target, const char *name,
               int epochs, const char *out, sq_err *e)
{
    sq_model_def leaky = sq_model_elastic; /* the table without its refusal */
    leaky.check_step = NULL;
    sq_train_opts o;
    if (sq_train_opts_for_model(&o, &leaky, NULL, e))
        return e->code;
    o.model = &leaky;
    o.target = target;
    o.epochs = epochs;
    o.patience = 0;
    if (!(o.cfg = calloc(1, leaky.cfg_size)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = leaky.config(o.cfg, given, &(sq_data_dims){.n_items = ds->hdr.n_items}, e) || sq_train_check(&o, e);
    run_ctx rctx = {name};
    sq_train_hooks hooks = {.ctx = &rctx, .epoch = on_epoch};
    if (!rc)
        rc = sq_train(&o, ds, out, NULL, &hooks, e);
    free(o.cfg);
    return rc ? e->code : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: elastic_leak SPLIT EPOCHS [key=value ...] > leak.csv\n");
        return 64;
    }
    int epochs = atoi(argv[2]);
    sq_err e = {0};
    char *given = NULL;
    const char *only = NULL;
    size_t len = 0;
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "targets=", 8)) {
            only = argv[i] + 8;
            continue;
        }
        char key[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
            fprintf(stderr, "elastic_leak: expected key=value, got '%s'\n", argv[i]);
            return 64;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
        if (sq_kv_put(&given, &len, 1 << 16, &e, key, eq + 1)) {
            fprintf(stderr, "elastic_leak: %s\n", e.msg);
            return e.code;
        }
    }
    FILE *in = fopen(argv[1], "rb");
    sq_dataset ds = {0};
    if (!in) {
        perror(argv[1]);
        free(given);
        return 66;
    }
    int rc = sq_dataset_read(&ds, in, argv[1], &e);
    fclose(in);
    static const struct { int target; const char *name; } runs[] = {
        {SQ_TARGET_ALL, "all"}, {SQ_TARGET_RANDOM, "random"}, {SQ_TARGET_LAST, "last"}};
    char out[] = "/tmp/elastic_leak_XXXXXX";
    int fd = rc ? -1 : mkstemp(out);
    if (!rc && fd < 0) {
        perror("mkstemp");
        rc = 73;
    }
    if (fd >= 0)
        close(fd);
    printf("target,epoch,train_loss,valid_ndcg10,seconds\n");
    for (size_t i = 0; !rc && i < sizeof runs / sizeof runs[0]; i++)
        if (!only || strstr(only, runs[i].name))
            rc = run(&ds, given, runs[i].target, runs[i].name, epochs, out, &e);
    if (fd >= 0) { /* the runs' model file and checkpoint */
        char ckpt[sizeof out + 8];
        snprintf(ckpt, sizeof ckpt, "%s.ckpt", out);
        remove(ckpt);
        remove(out);
    }
    if (rc)
        fprintf(stderr, "elastic_leak: %s\n", e.msg);
    sq_dataset_free(&ds);
    free(given);
    return rc;
}
