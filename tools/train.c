/* seqrec-train - train a model on a split (or padded) stream and write a
 * .sqm model file (see seqrec-train(1)). Argument parsing, the log line and
 * the progress bar only: the loop is lib/train.c, the model lib/sasrec.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "dataset.h"
#include "err.h"
#include "fileio.h"
#include "sasrec.h"
#include "threads.h"
#include "train.h"

static const char *prog = "seqrec-train";

static const char usage[] =
    "Usage: seqrec-train [OPTION]... -o MODEL [FILE]\n"
    "Train a sequential recommender on a split (or padded) stream (FILE or\n"
    "standard input) and write the model file MODEL.\n"
    "\n"
    "Model:\n"
    "  --model NAME        sasrec (default; causal, next item), bert4rec\n"
    "                      (bidirectional, cloze task) or pop (popularity)\n"
    "  --attn NAME         the attention of every block (default softmax):\n"
    "                        softmax        scaled dot product, O(N^2 d)\n"
    "                        linrec         LinRec L2-normalised elu, O(N d^2/h)\n"
    "                        linear         elu+1 linear transformer, O(N d^2/h)\n"
    "                        efficient      row/column softmax, O(N d^2/h)\n"
    "                        hydra          cosine Hydra attention, O(N d^2/h)\n"
    "                        positional     PARec learned N x N, O(N^2 d)\n"
    "                        fpositional    FPARec R1 R2^T of rank --rank\n"
    "                        average, linear-anneal, exp-anneal  fixed\n"
    "                                       patterns (FPARec Table 4), O(N^2 d)\n"
    "                        mixing         masked token-mixing MLP, O(N^2 d)\n"
    "  --linrec-scale S    linrec: code (default: 1/sqrt(d/h) on the product)\n"
    "                      or paper (also 1/sqrt(N) on the key columns)\n"
    "  --rank K            fpositional: rank of R1 R2^T (default 40)\n"
    "  --decay X           exp-anneal: weight decay per step (default e^-1)\n"
    "  --causal            bert4rec: causal attention (HydraRecUni)\n"
    "  --mask-prob P       bert4rec: cloze masking probability (default 0.2)\n"
    "  --layers N          transformer blocks (default 2)\n"
    "  --heads N           attention heads, dividing --dim (default 1; for\n"
    "                      hydra: --dim)\n"
    "  --dim N             hidden size d (default 64)\n"
    "  --ffn N             feed-forward inner size (default 256)\n"
    "  --max-len N         newest N items per sequence (default 50; a padded\n"
    "                      stream's row length when it is one)\n"
    "  --dropout P         dropout rate (default 0.2)\n"
    "Training:\n"
    "  --loss ce|bce       full softmax cross-entropy (default) or BCE with\n"
    "                      sampled negatives (sasrec only)\n"
    "  --neg K             negatives per position for bce (default 1)\n"
    "  --target all|last   train every position (default) or the last one of\n"
    "                      every prefix\n"
    "  --lr X              Adam learning rate (default 1e-3)\n"
    "  --beta1 X           (default 0.9)\n"
    "  --beta2 X           (default 0.98)\n"
    "  --eps X             (default 1e-8)\n"
    "  --weight-decay X    decoupled weight decay (default 0)\n"
    "  --clip X            clip the gradient norm to X (default 0: off)\n"
    "  --batch N           sequences per batch (default 128)\n"
    "  --epochs N          most epochs (default 200)\n"
    "  --patience N        stop after N evaluations without a better\n"
    "                      validation NDCG@10 (default 10; 0: never)\n"
    "  --eval-every N      validate every N epochs (default 1)\n"
    "  --seed N            random seed (default 1)\n"
    "  --threads N         OpenMP and OpenBLAS threads (default: all)\n"
    "Files:\n"
    "  -o, --output MODEL  the model file (written atomically); the checkpoint\n"
    "                      is MODEL.ckpt\n"
    "  --resume CKPT       continue the run saved in CKPT (MODEL defaults to\n"
    "                      CKPT without .ckpt)\n"
    "  --log FILE          epoch lines to FILE instead of standard error\n"
    "  -h, --help          show this help and exit\n"
    "  -V, --version       show the version and exit\n"
    "\n"
    "Exit status: 0 ok, 64 usage, 65 bad data, 66 missing input, 70 training\n"
    "diverged, 73 cannot create output, 74 I/O error.\n";

enum {
    OPT_MODEL = 256, OPT_LAYERS, OPT_HEADS, OPT_DIM, OPT_FFN, OPT_MAX_LEN, OPT_DROPOUT,
    OPT_LR, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_WD, OPT_CLIP, OPT_BATCH, OPT_EPOCHS,
    OPT_LOSS, OPT_NEG, OPT_TARGET, OPT_PATIENCE, OPT_EVAL_EVERY, OPT_SEED, OPT_THREADS,
    OPT_RESUME, OPT_LOG, OPT_ATTN, OPT_LINREC_SCALE, OPT_RANK, OPT_DECAY, OPT_CAUSAL,
    OPT_MASK_PROB, OPT_END
};

static int usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", prog);
    return SQ_EX_USAGE;
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!s[0] || errno || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!s[0] || errno || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

/* ---- the epoch log and the progress bar ---- */

typedef struct {
    FILE *log;       /* where the JSON lines go */
    int bar;         /* draw a progress bar on stderr (a terminal) */
    int epochs;
} out_ctx;

static void progress(void *p, uint64_t epoch, uint64_t batch, uint64_t n_batches, double loss)
{
    out_ctx *c = p;
    if (!c->bar || (batch != n_batches && batch % 4))
        return;
    int width = 30, done = (int)(width * batch / n_batches);
    fprintf(stderr, "\r\033[Kepoch %" PRIu64 "/%d [", epoch, c->epochs);
    for (int i = 0; i < width; i++)
        fputc(i < done ? '#' : ' ', stderr);
    fprintf(stderr, "] %3d%% loss %.4f", (int)(100 * batch / n_batches), loss);
    fflush(stderr);
}

static int epoch_line(void *p, const sq_epoch_stats *s, sq_err *e)
{
    out_ctx *c = p;
    if (c->bar)
        fprintf(stderr, "\r\033[K");
    fprintf(c->log, "{\"epoch\":%" PRIu64 ",\"loss\":%.6f", s->epoch, s->loss);
    if (s->evaluated)
        fprintf(c->log, ",\"valid\":{\"hr@10\":%.6f,\"ndcg@10\":%.6f}", s->hr10, s->ndcg10);
    fprintf(c->log, ",\"seconds\":%.3f,\"seq_per_s\":%.1f}\n", s->seconds, s->seq_per_s);
    if (fflush(c->log) || ferror(c->log))
        return sq_fail(e, SQ_EX_IO, "cannot write the log: %s", strerror(errno));
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"attn", required_argument, NULL, OPT_ATTN},
        {"linrec-scale", required_argument, NULL, OPT_LINREC_SCALE},
        {"rank", required_argument, NULL, OPT_RANK},
        {"decay", required_argument, NULL, OPT_DECAY},
        {"causal", no_argument, NULL, OPT_CAUSAL},
        {"mask-prob", required_argument, NULL, OPT_MASK_PROB},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"dim", required_argument, NULL, OPT_DIM},
        {"ffn", required_argument, NULL, OPT_FFN},
        {"max-len", required_argument, NULL, OPT_MAX_LEN},
        {"dropout", required_argument, NULL, OPT_DROPOUT},
        {"lr", required_argument, NULL, OPT_LR},
        {"beta1", required_argument, NULL, OPT_BETA1},
        {"beta2", required_argument, NULL, OPT_BETA2},
        {"eps", required_argument, NULL, OPT_EPS},
        {"weight-decay", required_argument, NULL, OPT_WD},
        {"clip", required_argument, NULL, OPT_CLIP},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"loss", required_argument, NULL, OPT_LOSS},
        {"neg", required_argument, NULL, OPT_NEG},
        {"target", required_argument, NULL, OPT_TARGET},
        {"patience", required_argument, NULL, OPT_PATIENCE},
        {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
        {"seed", required_argument, NULL, OPT_SEED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"output", required_argument, NULL, 'o'},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"log", required_argument, NULL, OPT_LOG},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    sq_threads_passive(argv);
    sq_train_opts o;
    sq_train_defaults(&o);
    const char *out_path = NULL, *resume = NULL, *log_path = NULL, *model = "sasrec";
    int given[OPT_END - OPT_MODEL] = {0};
    int c, bad = 0;

    while ((c = getopt_long(argc, argv, "o:hV", longopts, NULL)) != -1) {
        if (c >= OPT_MODEL && c < OPT_END)
            given[c - OPT_MODEL] = 1;
        const char *a = optarg;
        switch (c) {
        case OPT_MODEL:
            if (strcmp(a, "pop") && sq_backbone_parse(a) < 0)
                return usage_error("unknown --model '%s'%s (sasrec, bert4rec or pop)", a, "");
            model = a;
            break;
        case OPT_ATTN:
            if ((o.arch.attn = sq_attn_kind_parse(a)) < 0)
                return usage_error("unknown --attn '%s'%s (softmax, linrec, linear, efficient, "
                                   "hydra, positional, fpositional, average, linear-anneal, "
                                   "exp-anneal or mixing)", a, "");
            break;
        case OPT_LINREC_SCALE:
            if (!strcmp(a, "code"))
                o.arch.linrec_scale = SQ_LINREC_CODE;
            else if (!strcmp(a, "paper"))
                o.arch.linrec_scale = SQ_LINREC_PAPER;
            else
                return usage_error("unknown --linrec-scale '%s'%s (paper or code)", a, "");
            break;
        case OPT_RANK: bad = parse_int(a, 1, 65536, &o.arch.rank); break;
        case OPT_DECAY:
            bad = parse_double(a, &o.arch.decay) || !(o.arch.decay > 0 && o.arch.decay <= 1);
            break;
        case OPT_CAUSAL: o.arch.causal = 1; break;
        case OPT_MASK_PROB:
            bad = parse_double(a, &o.mask_prob) || !(o.mask_prob > 0 && o.mask_prob <= 1);
            break;
        case OPT_LAYERS: bad = parse_int(a, 1, 64, &o.arch.n_layers); break;
        case OPT_HEADS: bad = parse_int(a, 1, 8192, &o.arch.n_heads); break;
        case OPT_DIM: bad = parse_int(a, 1, 8192, &o.arch.dim); break;
        case OPT_FFN: bad = parse_int(a, 1, 65536, &o.arch.ffn); break;
        case OPT_MAX_LEN: bad = parse_int(a, 1, 65536, &o.arch.max_len); break;
        case OPT_DROPOUT: bad = parse_double(a, &o.arch.dropout); break;
        case OPT_LR: bad = parse_double(a, &o.lr); break;
        case OPT_BETA1: bad = parse_double(a, &o.beta1); break;
        case OPT_BETA2: bad = parse_double(a, &o.beta2); break;
        case OPT_EPS: bad = parse_double(a, &o.eps); break;
        case OPT_WD: bad = parse_double(a, &o.weight_decay); break;
        case OPT_CLIP: bad = parse_double(a, &o.clip); break;
        case OPT_BATCH: bad = parse_int(a, 1, 1 << 20, &o.batch); break;
        case OPT_EPOCHS: bad = parse_int(a, 0, 1000000000, &o.epochs); break;
        case OPT_LOSS:
            if (!strcmp(a, "ce"))
                o.loss = SQ_LOSS_CE;
            else if (!strcmp(a, "bce"))
                o.loss = SQ_LOSS_BCE;
            else
                return usage_error("unknown --loss '%s'%s (ce or bce)", a, "");
            break;
        case OPT_NEG: bad = parse_int(a, 1, 1024, &o.neg); break;
        case OPT_TARGET:
            if ((o.target = sq_target_parse(a)) < 0)
                return usage_error("unknown --target '%s'%s (all or last)", a, "");
            break;
        case OPT_PATIENCE: bad = parse_int(a, 0, 1000000000, &o.patience); break;
        case OPT_EVAL_EVERY: bad = parse_int(a, 1, 1000000000, &o.eval_every); break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(a, &end, 10);
            bad = !a[0] || a[0] == '-' || a[0] == '+' || a[0] == ' ' || errno || *end;
            o.seed = v;
            break;
        }
        case OPT_THREADS: bad = parse_int(a, 1, 4096, &o.threads); break;
        case 'o': out_path = a; break;
        case OPT_RESUME: resume = a; break;
        case OPT_LOG: log_path = a; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("%s (seqrec) %s\n", prog, SEQREC_VERSION); return 0;
        default:
            fprintf(stderr, "Try '%s --help' for more information.\n", prog);
            return SQ_EX_USAGE;
        }
        if (bad) {
            const char *name = "";
            for (const struct option *lo = longopts; lo->name; lo++)
                if (lo->val == c)
                    name = lo->name;
            return usage_error("bad value '%s' for --%s", a, name);
        }
    }
    if (argc - optind > 1)
        return usage_error("at most one input FILE%s%s", "", "");
    const char *in_path = optind < argc ? argv[optind] : NULL;
    char *derived = NULL;
    if (resume && !out_path) {
        size_t n = strlen(resume);
        if (n <= 5 || strcmp(resume + n - 5, ".ckpt") != 0)
            return usage_error("--resume %s: name the model with -o (the checkpoint's name "
                               "does not end in .ckpt)%s", resume, "");
        derived = strdup(resume);
        if (!derived)
            return SQ_EX_OSERR;
        derived[n - 5] = '\0';
        out_path = derived;
    }
    if (!out_path)
        return usage_error("no model file: give -o MODEL%s%s", "", "");
    if (strcmp(out_path, "-") == 0)
        return usage_error("-o: a model file cannot go to standard output%s%s", "", "");
    if (resume && !strcmp(model, "pop"))
        return usage_error("--resume is for sasrec and bert4rec runs%s%s", "", "");
    if (strcmp(model, "bert4rec") &&
        (given[OPT_CAUSAL - OPT_MODEL] || given[OPT_MASK_PROB - OPT_MODEL]))
        return usage_error("--causal and --mask-prob are for --model bert4rec (SASRec is "
                           "always causal%s)%s", "", "");
    if (!strcmp(model, "bert4rec")) {
        o.arch.backbone = SQ_BACKBONE_BERT4REC;
        o.arch.ln_eps = 1e-12; /* RecBole's BERT4Rec */
    }
    if (o.arch.attn == SQ_AK_HYDRA && !given[OPT_HEADS - OPT_MODEL])
        o.arch.n_heads = o.arch.dim; /* Hydra attention: one feature per head */
    if (resume) {
        /* The checkpoint's options are used; only these may be given again. */
        for (int i = 0; i < OPT_END - OPT_MODEL; i++) {
            int opt = OPT_MODEL + i;
            if (!given[i] || opt == OPT_EPOCHS || opt == OPT_THREADS || opt == OPT_RESUME ||
                opt == OPT_LOG || opt == OPT_MODEL)
                continue;
            const char *name = "";
            for (const struct option *lo = longopts; lo->name; lo++)
                if (lo->val == opt)
                    name = lo->name;
            free(derived);
            return usage_error("--%s cannot be given with --resume (the checkpoint's value "
                               "is used; only --epochs, --threads and --log may change)%s",
                               name, "");
        }
    }

    sq_err err = {0};
    FILE *in = NULL, *log = NULL;
    sq_dataset ds = {0};
    int rc = 0;
    if (!resume && sq_train_check(&o, &err)) {
        free(derived);
        fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", prog, err.msg,
                prog);
        return SQ_EX_USAGE;
    }
    sq_threads_set(o.threads);

    if (sq_in_open(&in, in_path, &err) || sq_dataset_read(&ds, in, sq_in_name(in_path), &err))
        goto fail;
    if (ds.hdr.kind != SQ_SPLIT && ds.hdr.kind != SQ_PADDED) {
        sq_fail(&err, SQ_EX_DATA, "%s: expected a split or padded stream, got %s",
                sq_in_name(in_path), sq_kind_name(ds.hdr.kind));
        goto fail;
    }
    if (!strcmp(model, "pop")) {
        int evaluated;
        double hr, ndcg;
        if (sq_train_pop(&ds, out_path, o.threads, &evaluated, &hr, &ndcg, &err))
            goto fail;
        if (evaluated) {
            FILE *lf = log_path ? fopen(log_path, "w") : stderr;
            if (!lf) {
                sq_fail(&err, SQ_EX_CANTCREAT, "%s: %s", log_path, strerror(errno));
                goto fail;
            }
            fprintf(lf, "{\"model\":\"pop\",\"valid\":{\"hr@10\":%.6f,\"ndcg@10\":%.6f}}\n",
                    hr, ndcg);
            if ((lf != stderr && fclose(lf)) || (lf == stderr && fflush(lf))) {
                sq_fail(&err, SQ_EX_IO, "cannot write the log");
                goto fail;
            }
        }
        goto ok;
    }
    if (resume) {
        int epochs = o.epochs, threads = o.threads;
        if (sq_train_read_opts(&o, resume, &err))
            goto fail;
        if (given[OPT_EPOCHS - OPT_MODEL])
            o.epochs = epochs;
        o.threads = threads;
        if (o.arch.n_items != ds.hdr.n_items) {
            sq_fail(&err, SQ_EX_DATA, "%s: the checkpoint was trained on %" PRIu32 " items, %s "
                    "has %" PRIu32 " (another dataset?)", resume, o.arch.n_items,
                    sq_in_name(in_path), ds.hdr.n_items);
            goto fail;
        }
    } else {
        o.arch.n_items = ds.hdr.n_items;
        if (ds.hdr.kind == SQ_PADDED && !given[OPT_MAX_LEN - OPT_MODEL] && ds.hdr.max_len)
            o.arch.max_len = (int)ds.hdr.max_len;
        if (sq_sasrec_config_check(&o.arch, &err))
            goto fail;
    }
    log = stderr;
    if (log_path && !(log = fopen(log_path, resume ? "a" : "w"))) {
        sq_fail(&err, SQ_EX_CANTCREAT, "%s: %s", log_path, strerror(errno));
        goto fail;
    }
    out_ctx oc = {.log = log, .bar = isatty(STDERR_FILENO) && log != stderr ? 1 : 0,
                  .epochs = o.epochs};
    if (isatty(STDERR_FILENO) && log == stderr)
        oc.bar = 1;
    sq_train_hooks hooks = {.ctx = &oc, .progress = progress, .epoch = epoch_line};
    rc = sq_train_sasrec(&o, &ds, out_path, resume, &hooks, &err);
    if (rc) {
        if (oc.bar)
            fprintf(stderr, "\r\033[K");
        goto fail;
    }
ok:
    if (log && log != stderr && fclose(log)) {
        log = NULL;
        sq_fail(&err, SQ_EX_IO, "%s: %s", log_path, strerror(errno));
        goto fail;
    }
    sq_dataset_free(&ds);
    sq_in_close(in);
    free(derived);
    return 0;

fail:
    sq_report(prog, &err);
    if (log && log != stderr)
        fclose(log);
    sq_dataset_free(&ds);
    sq_in_close(in);
    free(derived);
    return err.code ? err.code : SQ_EX_SOFTWARE;
}
