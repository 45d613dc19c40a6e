/* seqrec-train - train a model on a split (or padded) stream and write a
 * .sqm model file (see seqrec-train(1)). Argument parsing, the log line and
 * the progress bar only: the options come from the tables of the trainer
 * (lib/train/train.c) and of every registered model (lib/model/models.c),
 * the loop is lib/train/train.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dataset.h"
#include "err.h"
#include "fileio.h"
#include "kv.h"
#include "mixer.h"
#include "models.h"
#include "progress.h"
#include "ranks.h"
#include "runconfig.h"
#include "device.h"
#include "threads.h"
#include "train.h"

static const char *prog = "seqrec-train";

enum { MAX_OPTS = 128, OPT_MODEL = 256, OPT_RESUME, OPT_LOG, OPT_INIT, OPT_MAP, OPT_DEVICE, OPT_PRECISION,
       OPT_LIST_MODELS, OPT_TABLE = 512 };
enum { OPT_CONFIG = 300, OPT_CONFIG_KEYS }; /* --config, --config-keys (CONFIG FILES) */

/* Every option of the command line: the fixed ones, the trainer's table,
 * then each model's tables (an option several models share once). */
typedef struct {
    struct option lo[MAX_OPTS];
    const sq_opt *opt[MAX_OPTS];  /* for val OPT_TABLE + i */
    int trainer[MAX_OPTS];        /* 1: a trainer option, 0: a model's */
    int n, n_table;
} optset;

static int add_table(optset *s, const sq_opt *t, int trainer)
{
    for (; t && t->type; t++) {
        if (!t->name)
            continue;
        int dup = 0;
        for (int i = 0; i < s->n_table && !dup; i++)
            dup = strcmp(s->opt[i]->name, t->name) == 0;
        if (dup)
            continue;
        if (s->n >= MAX_OPTS - 1)
            return -1;
        s->opt[s->n_table] = t;
        s->trainer[s->n_table] = trainer;
        s->lo[s->n++] = (struct option){t->name, t->type == SQ_OPT_FLAG ? no_argument
                                                                          : required_argument,
                                        NULL, OPT_TABLE + s->n_table};
        s->n_table++;
    }
    return 0;
}

static int build_options(optset *s)
{
    static const struct option fixed[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"output", required_argument, NULL, 'o'},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"init", required_argument, NULL, OPT_INIT},
        {"map", required_argument, NULL, OPT_MAP},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"log", required_argument, NULL, OPT_LOG},
        {"list-models", no_argument, NULL, OPT_LIST_MODELS},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"config-keys", no_argument, NULL, OPT_CONFIG_KEYS},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
    };
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        s->lo[s->n++] = fixed[i];
    if (add_table(s, sq_train_options, 1))
        return -1;
    for (int m = 0; m < sq_models_count(); m++) {
        const sq_model_def *d = sq_models_get(m);
        if (add_table(s, d->opts, 0))
            return -1;
        for (int i = 0; d->more_opts && d->more_opts(i); i++)
            if (add_table(s, d->more_opts(i), 0))
                return -1;
    }
    return 0;
}

/* ---- --help, from the tables ---- */

/* The models whose default of trainer option t differs (train_defaults). */
static void model_defaults_help(const sq_opt *t)
{
    char kb[64], v[64];
    const char *key = sq_opt_key(t, kb, sizeof kb);
    for (int m = 0; m < sq_models_count(); m++) {
        const sq_model_def *d = sq_models_get(m);
        if (d->train_defaults && sq_kv_get(d->train_defaults, key, v, sizeof v))
            printf("  %-19s (default %s with --model %s)\n", "", v, d->name);
    }
}

/* Whether o is an attention kind's option: it binds into the kind's
 * config, not the model's, and has no per-model default. */
static int mixer_opt(const sq_opt *o)
{
    for (int k = 0; k < sq_mixer_count(); k++)
        for (const sq_opt *t = sq_mixer_get(k)->opts; t && t->type; t++)
            if (t == o)
                return 1;
    return 0;
}

/* The option of model d named name (its own tables), or NULL. */
static const sq_opt *model_opt(const sq_model_def *d, const char *name)
{
    for (int i = -1; i == -1 || (d->more_opts && d->more_opts(i)); i++) {
        const sq_opt *t = sq_opt_find(i < 0 ? d->opts : d->more_opts(i), name);
        if (t)
            return t;
    }
    return NULL;
}

/* The later models whose own default of model option t (shown first with
 * model `first`) differs from t's: each model's config at its defaults (on
 * a 100-item stream) against the same config holding t's default. */
static void model_opt_defaults_help(const sq_opt *t, int first)
{
    for (int m = first + 1; m < sq_models_count(); m++) {
        const sq_model_def *d = sq_models_get(m);
        const sq_opt *o = model_opt(d, t->name);
        if (!o || !t->def || mixer_opt(o))
            continue;
        void *cfg = calloc(2, d->cfg_size);
        sq_err e = {0};
        char own[64], base[64];
        if (cfg && !d->config(cfg, "", &(sq_data_dims){.n_items = 100}, &e)) {
            void *alt = (char *)cfg + d->cfg_size;
            memcpy(alt, cfg, d->cfg_size);
            sq_opt_format(o, cfg, own, sizeof own);
            if (!sq_opt_set(o, alt, t->def, SQ_EX_USAGE, NULL, &e) &&
                strcmp(sq_opt_format(o, alt, base, sizeof base), own) != 0) {
                if (o->type == SQ_OPT_REAL) /* "0.5", not "0.50000000000000000" */
                    snprintf(own, sizeof own, "%g", strtod(own, NULL));
                printf("  %-19s (default %s with --model %s)\n", "", own, d->name);
            }
        }
        free(cfg);
    }
}

static void usage(const optset *s)
{
    printf("Usage: seqrec-train [OPTION]... -o MODEL [FILE]\n"
           "Train a sequential recommender on a split (or padded) stream (FILE or\n"
           "standard input) and write the model file MODEL.\n\n"
           "  --model NAME        the model (default sasrec):\n");
    for (int m = 0; m < sq_models_count(); m++)
        printf("  %-20s  %-10s %s\n", "", sq_models_get(m)->name, sq_models_get(m)->summary);
    /* each model's options that no model before it has */
    const sq_opt *shown[MAX_OPTS];
    int n_shown = 0;
    for (int m = 0; m < sq_models_count(); m++) {
        const sq_model_def *d = sq_models_get(m);
        int heading = 0;
        for (int i = -1; i == -1 || (d->more_opts && d->more_opts(i)); i++) {
            const sq_opt *t = i < 0 ? d->opts : d->more_opts(i);
            for (; t && t->type; t++) {
                int seen = !t->name;
                for (int k = 0; k < n_shown && !seen; k++)
                    seen = strcmp(shown[k]->name, t->name) == 0;
                if (seen || n_shown >= MAX_OPTS)
                    continue;
                shown[n_shown++] = t;
                if (!heading++)
                    printf("Options of --model %s%s:\n", d->name,
                           m ? " (and those above that it names)" : "");
                sq_opt one[2] = {*t, {0}};
                sq_opt_help(one, stdout);
                model_opt_defaults_help(t, m);
            }
        }
    }
    printf("Training:\n");
    for (const sq_opt *t = sq_train_options; t->type; t++) {
        sq_opt one[2] = {*t, {0}};
        sq_opt_help(one, stdout);
        model_defaults_help(t);
    }
    (void)s;
    printf("Files:\n"
           "  -o, --output MODEL  the model file (written atomically); the checkpoint\n"
           "                      is MODEL.ckpt\n"
           "  --resume CKPT       continue the run saved in CKPT (MODEL defaults to\n"
           "                      CKPT without .ckpt)\n"
           "  --init MODEL0       start from the model file MODEL0 (fine-tuning): its\n"
           "                      model and options, on a stream of its dataset with\n"
           "                      as many items or more (new items initialised as\n"
           "                      usual); training options from the command line\n"
           "  --map FILE          the model carries this id map (seqrec-preprocess --map\n"
           "                      of the stream; 65 when it is not the stream's): the\n"
           "                      model file is then all that a deployment needs\n"
           "                      (seqrec-export --id-map, seqrec-preprocess --model).\n"
           "                      Without it, --init and --resume carry over their\n"
           "                      model's map when it is the stream's\n"
           "  --log FILE          epoch lines to FILE (- standard output) instead of\n"
           "                      standard error\n"
           "  --config FILE       settings as key=value lines, the keys of a model\n"
           "                      file's config (a .sqm file itself is one, and so\n"
           "                      is what seqrec-cat --header prints); options given\n"
           "                      on the command line win\n"
           "  --config-keys       print the keys --model takes in a config, KEY<TAB>\n"
           "                      --OPTION a line, and exit"
           "Device:\n"
           "  --device D          cpu (default), cuda or cuda:N: every model and\n"
           "                      attention kind (hstu: heads of at most 128\n"
           "                      dimensions; pop counts on the host);\n"
           "                      69 when there is no such GPU\n"
           "  --precision P       the GPU's GEMMs: tf32 (default), fp32 or bf16\n"
           "  --list-models       print every model, NAME<TAB>summary a line, and exit\n"
           "  -h, --help          show this help and exit\n"
           "  -V, --version       show the version and exit\n"
           "\n"
           "Exit status: 0 ok, 64 usage, 65 bad data, 66 missing input, 69 no GPU,\n"
           "70 training diverged or a GPU kernel failed, 71 out of (device) memory,\n"
           "73 cannot create output, 74 I/O error.\n");
}

/* ---- the epoch log and the progress bar ---- */

typedef struct {
    FILE *log;       /* where the JSON lines go */
    const char *name; /* its name, for messages */
    int bar;         /* draw a progress bar on stderr (a terminal) */
    int epochs;
    char best[128];  /* the bar's "best ndcg@10 0.1234 (epoch 3)", once known */
    /* the bar's clock (progress.h): the run's start, this epoch's start and
     * its validation's, the previous epoch's wall and validation times */
    double t_run, t_epoch, t_valid, train_s, last_epoch_s, last_eval_s;
    uint64_t valid_epoch; /* the epoch whose validation is running (0: none) */
} out_ctx;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void draw(const out_ctx *c, sq_bar *b)
{
    char line[512];
    b->epochs = c->epochs;
    b->run_s = wall_now() - c->t_run;
    b->last_epoch_s = c->last_epoch_s;
    b->last_eval_s = c->last_eval_s;
    b->best = c->best;
    fprintf(stderr, "\r\033[K%s", sq_bar_line(b, line, sizeof line));
    fflush(stderr);
}

static void progress(void *p, uint64_t epoch, uint64_t batch, uint64_t n_batches, double loss)
{
    out_ctx *c = p;
    if (!c->bar || (batch != n_batches && batch % 4 && batch != 1))
        return;
    sq_bar b = {.epoch = epoch, .done = batch, .total = n_batches, .loss = loss,
                .phase_s = wall_now() - c->t_epoch};
    draw(c, &b);
}

/* Validation after the batches: how far along, from the ranking loop. */
static void validating(void *p, uint64_t epoch, uint64_t done, uint64_t total)
{
    out_ctx *c = p;
    if (!c->bar)
        return;
    double t = wall_now();
    if (c->valid_epoch != epoch) { /* its first call: the batches are done */
        c->valid_epoch = epoch;
        c->t_valid = t;
        c->train_s = t - c->t_epoch;
    }
    sq_bar b = {.epoch = epoch, .done = done, .total = total, .validating = 1,
                .phase_s = t - c->t_valid, .train_s = c->train_s};
    draw(c, &b);
}

/* The epoch log: standard error without --log, standard output for
 * "--log -" (a model never goes there: -o - is refused), else the file. */
static FILE *log_open(const char *path, const char *mode)
{
    if (!path)
        return stderr;
    return strcmp(path, "-") == 0 ? stdout : fopen(path, mode);
}

static const char *log_name(const char *path)
{
    return path ? sq_out_name(path) : "<stderr>";
}

/* 0, or -1 when the log's last lines could not be written. */
static int log_close(FILE *f)
{
    if (f == stderr || f == stdout)
        return fflush(f) || ferror(f) ? -1 : 0;
    return fclose(f) ? -1 : 0;
}

/* A terminal's line for an epoch whose JSON line goes to a --log file. */
static void human_line(const out_ctx *c, const sq_epoch_stats *s)
{
    fprintf(stderr, "epoch %" PRIu64 "/%d loss %.4f", s->epoch, c->epochs, s->loss);
    if (s->evaluated)
        fprintf(stderr, " valid %s %.4f%s", s->stop_name, s->stop,
                s->improved ? " (best)" : "");
    fprintf(stderr, " %.1f s\n", s->seconds);
}

/* The valid object of the log line: HR@10, NDCG@10, MRR@10, and the stop
 * metric when it is another one. */
static void valid_object(FILE *f, const sq_epoch_stats *s)
{
    fprintf(f, ",\"valid\":{\"hr@10\":%.6f,\"ndcg@10\":%.6f,\"mrr@10\":%.6f", s->hr10,
            s->ndcg10, s->mrr10);
    if (strcmp(s->stop_name, "hr@10") && strcmp(s->stop_name, "ndcg@10") &&
        strcmp(s->stop_name, "mrr@10"))
        fprintf(f, ",\"%s\":%.6f", s->stop_name, s->stop);
    fputc('}', f);
}

static int epoch_line(void *p, const sq_epoch_stats *s, sq_err *e)
{
    out_ctx *c = p;
    if (c->bar) { /* the next epoch's estimates start from this one's times */
        double t = wall_now();
        c->last_epoch_s = t - c->t_epoch;
        c->last_eval_s = c->valid_epoch == s->epoch ? t - c->t_valid : 0;
        c->t_epoch = t;
        fprintf(stderr, "\r\033[K");
        if (c->log != stderr)
            human_line(c, s);
        if (s->best_epoch)
            snprintf(c->best, sizeof c->best, " best %s %.4f (epoch %" PRIu64 ")",
                     s->stop_name, s->best_stop, s->best_epoch);
    }
    fprintf(c->log, "{\"epoch\":%" PRIu64 ",\"loss\":%.6f", s->epoch, s->loss);
    if (s->evaluated)
        valid_object(c->log, s);
    if (s->loss_rose)
        fprintf(c->log, ",\"warning\":\"the loss rose to %.3gx its first value %.6g\"",
                s->loss / s->first_loss, s->first_loss);
    /* "seconds" first: tools cut the line there to drop the wall times */
    fprintf(c->log, ",\"seconds\":%.6f,\"train_seconds\":%.6f,\"eval_seconds\":%.6f"
            ",\"seq_per_s\":%.1f,\"max_rss_mib\":%.1f", s->seconds, s->train_seconds,
            s->eval_seconds, s->seq_per_s, s->max_rss_mib);
    if (s->device_mib >= 0) /* a GPU run: its device memory too */
        fprintf(c->log, ",\"device_mib\":%.1f", s->device_mib);
    fputs("}\n", c->log);
    if (fflush(c->log) || ferror(c->log))
        return sq_fail(e, SQ_EX_IO, "%s: cannot write the log: %s", c->name, strerror(errno));
    return 0;
}

/* ---- arguments ---- */

typedef struct {
    sq_train_opts o;
    const sq_model_def *model;
    char *given;        /* the model options given, as "key=value\n" text */
    size_t given_len;
    char *train_given;  /* the trainer options given, the same way */
    size_t train_given_len;
    const char *out_path, *resume, *log_path, *in_path, *init, *map;
    const char *device;  /* --device (NULL: cpu) */
    int precision;       /* --precision: SQ_PREC_* (default tf32) */
    char *derived;      /* out_path derived from --resume */
    char *map_bytes;    /* the id map the model carries, or NULL */
    size_t map_len;
    int epochs_given, model_given, other_given;
    const char *other;  /* an option --resume does not take */
    const char *config; /* --config FILE */
    int config_keys;    /* --config-keys */
} args;

/* Adds "key=value" of option t to the kv text *text. */
static int give(char **text, size_t *len, const sq_opt *t, const char *value)
{
    char kb[64];
    sq_err e = {0};
    return sq_kv_put(text, len, 1 << 20, &e, sq_opt_key(t, kb, sizeof kb), value);
}

/* One table option; 0, or the exit status. */
static int table_opt(args *a, const optset *s, int i, const char *arg)
{
    const sq_opt *t = s->opt[i];
    if (strcmp(t->name, "epochs") && strcmp(t->name, "threads")) {
        a->other_given = 1;
        a->other = t->name;
    }
    a->epochs_given |= strcmp(t->name, "epochs") == 0;
    const char *value = t->type == SQ_OPT_FLAG ? "1" : arg;
    if (s->trainer[i]) {
        /* refused now, naming the option; kept as text to go over the
         * model's defaults once the model is known */
        sq_err e = {0};
        if (sq_opt_set(t, &a->o, value, SQ_EX_USAGE, NULL, &e))
            return sq_cli_usage_error(prog, "%s", e.msg);
        return give(&a->train_given, &a->train_given_len, t, value) ? SQ_EX_OSERR : 0;
    }
    if (give(&a->given, &a->given_len, t, value))
        return SQ_EX_OSERR;
    return 0;
}

/* ---- --config FILE (runconfig.h) ---- */

/* *text = pre + *text: the file's lines first, so that the options of the
 * command line, after them, win (kv.h: the last line of a key wins). */
static int prepend(char **text, size_t *len, const char *pre, size_t pre_len)
{
    if (!pre_len)
        return 0;
    char *t = malloc(pre_len + *len + 1);
    if (!t)
        return SQ_EX_OSERR;
    memcpy(t, pre, pre_len);
    if (*len)
        memcpy(t + pre_len, *text, *len);
    t[pre_len + *len] = '\0';
    free(*text);
    *text = t;
    *len += pre_len;
    return 0;
}

/* --config: its settings under those of the command line, whatever their
 * order; the file's model unless --model is given. --config-keys: the keys
 * of the model, and exit. */
static int config_file(args *a)
{
    if (a->config && a->resume)
        return sq_cli_usage_error(prog, "--config cannot be given with --resume (the "
                                  "checkpoint holds the settings)");
    if (a->config) {
        sq_runconfig c;
        sq_err e = {0};
        const sq_model_def *d;
        if (sq_runconfig_read(a->config, a->model_given ? a->model : NULL, &c, &d, &e)) {
            sq_report(prog, &e);
            return e.code;
        }
        a->model = d;
        int rc = prepend(&a->given, &a->given_len, c.model_kv, c.model_len) ||
                 prepend(&a->train_given, &a->train_given_len, c.train_kv, c.train_len);
        sq_runconfig_free(&c);
        if (rc)
            return SQ_EX_OSERR;
    }
    if (a->config_keys) {
        sq_runconfig_keys(a->model, stdout);
        return -1;
    }
    return 0;
}

static int parse_args(args *a, const optset *s, int argc, char **argv)
{
    int c, rc;
    const char *model = "sasrec";
    while ((c = getopt_long(argc, argv, "o:hV", s->lo, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL:
            model = optarg;
            a->model_given = 1;
            break;
        case 'o': a->out_path = optarg; break;
        case OPT_RESUME: a->resume = optarg; break;
        case OPT_INIT: a->init = optarg; break;
        case OPT_MAP: a->map = optarg; break;
        case OPT_DEVICE: {
            int be, idx;
            sq_err de = {0};
            if (sq_device_parse(optarg, &be, &idx, &de))
                return sq_cli_usage_error(prog, "%s", de.msg);
            a->device = optarg;
            break;
        }
        case OPT_PRECISION: {
            sq_err de = {0};
            if (sq_precision_parse(optarg, &a->precision, &de))
                return sq_cli_usage_error(prog, "%s", de.msg);
            break;
        }
        case OPT_LOG: a->log_path = optarg; break;
        case OPT_CONFIG: a->config = optarg; break;
        case OPT_CONFIG_KEYS: a->config_keys = 1; break;
        case OPT_LIST_MODELS: /* for scripts: make leaderboard */
            for (int m = 0; m < sq_models_count(); m++)
                printf("%s\t%s\n", sq_models_get(m)->name, sq_models_get(m)->summary);
            return -1;
        case 'h': usage(s); return -1;
        case 'V': sq_cli_version(prog); return -1;
        default:
            if (c < OPT_TABLE)
                return sq_cli_try_help(prog);
            if ((rc = table_opt(a, s, c - OPT_TABLE, optarg)) != 0)
                return rc;
        }
    }
    char names[256];
    if (!(a->model = sq_models_find(model)))
        return sq_cli_usage_error(prog, "unknown --model '%s' (%s)", model,
                                  sq_models_names(names, sizeof names));
    if ((rc = config_file(a)) != 0)
        return rc;
    sq_err e = {0};
    if (sq_train_opts_for_model(&a->o, a->model, a->train_given, &e)) {
        sq_report(prog, &e);
        return e.code;
    }
    if (argc - optind > 1)
        return sq_cli_usage_error(prog, "at most one input FILE");
    a->in_path = optind < argc ? argv[optind] : NULL;
    if (a->resume && !a->out_path) {
        size_t n = strlen(a->resume);
        if (n <= 5 || strcmp(a->resume + n - 5, ".ckpt") != 0)
            return sq_cli_usage_error(prog, "--resume %s: name the model with -o (the "
                                      "checkpoint's name does not end in .ckpt)", a->resume);
        if (!(a->derived = strdup(a->resume)))
            return SQ_EX_OSERR;
        a->derived[n - 5] = '\0';
        a->out_path = a->derived;
    }
    if (!a->out_path)
        return sq_cli_usage_error(prog, "no model file: give -o MODEL");
    if (strcmp(a->out_path, "-") == 0)
        return sq_cli_usage_error(prog, "-o: a model file cannot go to standard output");
    if (a->resume && !a->model->step)
        return sq_cli_usage_error(prog, "--resume is for trained models, not --model %s",
                                  a->model->name);
    if (a->resume && a->init)
        return sq_cli_usage_error(prog, "--init cannot be given with --resume (the checkpoint "
                                  "holds the parameters)");
    if (a->init && a->model->fit)
        return sq_cli_usage_error(prog, "--init is for trained models, not --model %s",
                                  a->model->name);
    if (a->resume && (a->other_given || a->given))
        return sq_cli_usage_error(prog, "--%s cannot be given with --resume (the checkpoint's "
                                  "value is used; only --epochs, --threads and --log may "
                                  "change)", a->other ? a->other : "option");
    return 0;
}

/* What parse_args cannot see: --epochs 0 is for --init (the model only
 * extended to the stream's items) and --resume (the best model so far), not
 * for a fresh run, which would write an untrained model. */
static int check_epochs(const args *a)
{
    if (a->o.epochs == 0 && a->model->step && !a->init && !a->resume)
        return sq_cli_usage_error(prog, "--epochs must be at least 1 (0 only with --init or "
                                  "--resume)");
    return 0;
}

/* --resume reads the training split again (the checkpoint holds no data):
 * standard input that is a terminal or empty means it was left out. */
static int resume_input(const args *a, FILE *in, sq_err *e)
{
    if (!a->resume || in != stdin)
        return 0;
    const char *again = "--resume needs the training split again: seqrec-train --resume";
    if (isatty(fileno(in)))
        return sq_fail(e, SQ_EX_USAGE, "%s %s ... SPLIT (standard input is a terminal)",
                       again, a->resume);
    int c = getc(in);
    if (c == EOF && ferror(in))
        return sq_fail(e, SQ_EX_IO, "<stdin>: %s", strerror(errno));
    if (c == EOF)
        return sq_fail(e, SQ_EX_DATA, "<stdin>: byte 0: empty input (%s %s ... SPLIT)", again,
                       a->resume);
    return ungetc(c, in) == EOF ? sq_fail(e, SQ_EX_IO, "<stdin>: cannot push back") : 0;
}

/* The model's config from the options given: early (n_items unknown) to
 * refuse bad options before reading the data, then for the data. */
static int model_config(args *a, const sq_data_dims *dd, sq_err *e)
{
    free(a->o.cfg);
    if (!(a->o.cfg = calloc(1, a->model->cfg_size)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    a->o.model = a->model;
    if (a->model->config(a->o.cfg, a->given, dd, e))
        return e->code;
    return a->model->step ? sq_train_check(&a->o, e) : 0;
}

/* --init: the model and its config from the model file (the options given
 * must agree with it), for the data. */
static int init_config(args *a, const sq_data_dims *dd, sq_err *e)
{
    const sq_model_def *def;
    free(a->o.cfg);
    a->o.cfg = NULL;
    if (sq_train_init_config(a->init, a->model_given ? a->model : NULL, a->given, dd, &def,
                             &a->o.cfg, e))
        return e->code;
    a->model = a->o.model = def;
    a->o.init = a->init;
    /* the file's model, not --model's default, picks the training defaults */
    if (sq_train_opts_for_model(&a->o, def, a->train_given, e))
        return e->code;
    return sq_train_check(&a->o, e);
}

/* --resume: the checkpoint's options, with --epochs and --threads given. */
static int resume_opts(args *a, const sq_dataset *ds, sq_err *e)
{
    int epochs = a->o.epochs, threads = a->o.threads;
    const sq_ctx *cx = a->o.cx; /* a run resumes on the device it is given */
    const sq_comm *comm = a->o.comm; /* and the processes */
    free(a->o.cfg);
    a->o.cfg = NULL;
    if (sq_train_read_opts(&a->o, a->resume, e))
        return e->code;
    if (a->epochs_given)
        a->o.epochs = epochs;
    a->o.threads = threads;
    a->o.cx = cx;
    a->o.comm = comm;
    /* --cuda-graphs is how a GPU runs the steps: a run checkpointed with it
     * resumes on a CPU without */
    if (!cx || cx->backend != SQ_BACKEND_CUDA)
        a->o.graphs = 0;
    if (a->model_given && a->o.model != a->model)
        return sq_fail(e, SQ_EX_USAGE, "%s: a checkpoint of --model %s, not %s", a->resume,
                       a->o.model->name, a->model->name);
    a->model = a->o.model;
    (void)ds;
    return 0;
}

/* A one-pass model: fit, write, and log its validation. The log is opened
 * first (73 before any work, as a trained model's), and a log line that
 * cannot be written takes the model with it: a failed run leaves no
 * output. */
static int fit(args *a, const sq_dataset *ds, sq_err *e)
{
    int evaluated;
    double hr, ndcg;
    FILE *lf = log_open(a->log_path, "w");
    if (!lf)
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: %s", a->log_path, strerror(errno));
    int rc = sq_train_fit(a->model, ds, a->out_path, a->map_bytes, a->map_len, a->o.threads,
                          &evaluated, &hr, &ndcg, e);
    if (!rc && evaluated)
        fprintf(lf, "{\"model\":\"%s\",\"valid\":{\"hr@10\":%.6f,\"ndcg@10\":%.6f}}\n",
                a->model->name, hr, ndcg);
    if (log_close(lf) && !rc) {
        rc = sq_fail(e, SQ_EX_IO, "%s: cannot write the log", log_name(a->log_path));
        unlink(a->out_path);
    }
    return rc;
}

/* The job's ranks when a launcher started several processes (train.h
 * RANKS): every rank reads the split itself and trains. */
static int open_ranks(args *a, sq_comm *comm, sq_err *e)
{
    char who[32];
    if (!sq_comm_launched(who, sizeof who))
        return 0;
    if (a->model->fit)
        return sq_fail(e, SQ_EX_USAGE, "--model %s fits in one pass: run it in one process, "
                       "not under %s", a->model->name, who);
    if (!a->in_path || strcmp(a->in_path, "-") == 0)
        return sq_fail(e, SQ_EX_USAGE, "under %s every process reads the split itself: give "
                       "it as a FILE, not on standard input", who);
    if (sq_comm_open(comm, e))
        return e->code;
    int backend = SQ_BACKEND_CPU, index;
    if (a->device && sq_device_parse(a->device, &backend, &index, e))
        return e->code;
    if (comm->kind != SQ_COMM_MPI && backend == SQ_BACKEND_CPU)
        return sq_fail(e, SQ_EX_USAGE, "training on the CPU across processes started with "
                       "RANK/WORLD_SIZE needs MPI: start them with mpirun or srun");
    a->o.comm = comm;
    int cpus = sq_threads_cpus();
    if (comm->rank == 0 && a->o.threads > cpus)
        fprintf(stderr, "%s: warning: %d threads a process on %d CPU%s (the launcher's "
                "binding): give mpirun --map-by slot:PE=%d (or --bind-to none), or srun "
                "--cpus-per-task %d\n", prog, a->o.threads, cpus, cpus == 1 ? "" : "s",
                a->o.threads, a->o.threads);
    return 0;
}

/* The device; ranks on GPUs take their node's GPU LOCAL_RANK (unless
 * --device names one) and join the ranks' NCCL communicator. */
static int open_device(args *a, sq_comm *comm, sq_ctx *cx, sq_err *e)
{
    char name[32];
    const char *dev = a->device;
    if (sq_comm_ranks(comm) && dev && strcmp(dev, "cuda") == 0) {
        snprintf(name, sizeof name, "cuda:%d", comm->local_rank);
        dev = name;
    }
    if (sq_device_open(cx, dev, a->precision, a->o.threads, e))
        return e->code;
    if (sq_comm_ranks(comm) && cx->backend == SQ_BACKEND_CUDA)
        return sq_ranks_nccl(comm, cx, e);
    return 0;
}

/* A trained model: the loop, with the log lines and the progress bar. */
static int train(args *a, const sq_dataset *ds, sq_err *e)
{
    int rc;
    sq_data_dims dd = {.n_items = ds->hdr.n_items,
                       .padded_len = ds->hdr.kind == SQ_PADDED ? (int)ds->hdr.max_len : 0,
                       .n_users = sq_dataset_n_users(ds)};
    if (a->resume)
        rc = resume_opts(a, ds, e);
    else if (a->init)
        rc = init_config(a, &dd, e);
    else
        rc = model_config(a, &dd, e);
    if (rc)
        return rc;
    /* under a launcher rank 0 alone logs (and draws the bar) */
    int rank0 = !a->o.comm || a->o.comm->rank == 0;
    FILE *log = stderr;
    if (rank0 && !(log = log_open(a->log_path, a->resume ? "a" : "w")))
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: %s", a->log_path, strerror(errno));
    out_ctx oc = {.log = log, .name = log_name(a->log_path),
                  .bar = rank0 && isatty(STDERR_FILENO), .epochs = a->o.epochs};
    oc.t_run = oc.t_epoch = wall_now();
    sq_train_hooks hooks = {.ctx = &oc, .progress = progress, .epoch = epoch_line,
                            .validating = validating};
    if (!rank0)
        hooks = (sq_train_hooks){0};
    a->o.id_map = a->map_bytes;
    a->o.id_map_len = a->map_len;
    /* a diagnostic: the padded steps without graphs (the same bytes) */
    const char *g = getenv("SEQREC_CUDA_GRAPHS");
    a->o.graphs_eager = a->o.graphs && g && strcmp(g, "eager") == 0;
    /* a diagnostic: ranks on GPUs sum the whole gradient (the same bytes) */
    const char *ns = getenv("SEQREC_NCCL_SUM");
    a->o.nccl_dense = ns && strcmp(ns, "dense") == 0;
    rc = sq_train(&a->o, ds, a->out_path, a->resume, &hooks, e);
    if (rc && oc.bar)
        fprintf(stderr, "\r\033[K");
    int keys = 0;
    long replays = 0;
    if (!rc && rank0 && a->o.graphs && !a->o.graphs_eager && !sq_ctx_graph_stats(a->o.cx, &keys, &replays, e))
        fprintf(stderr, "seqrec-train: --cuda-graphs: %d batch sizes captured, %ld steps "
                "replayed\n", keys, replays);
    if (log_close(log) && !rc)
        rc = sq_fail(e, SQ_EX_IO, "%s: %s", log_name(a->log_path), strerror(errno));
    return rc;
}

int main(int argc, char **argv)
{
    sq_threads_passive(argv);
    static optset s;
    args a = {0};
    sq_train_defaults(&a.o);
    a.precision = SQ_PREC_TF32;
    sq_ctx cx = sq_ctx_cpu();
    sq_comm comm = {.size = 1};
    if (build_options(&s))
        return SQ_EX_SOFTWARE;
    int rc = parse_args(&a, &s, argc, argv);
    if (!rc)
        rc = check_epochs(&a);
    sq_err err = {0};
    FILE *in = NULL;
    sq_dataset ds = {0};
    if (rc)
        goto out;
    const sq_data_dims early = {.n_items = 1};
    if (a.init && init_config(&a, &early, &err)) {
        if (err.code != SQ_EX_USAGE)
            goto fail;
        rc = sq_cli_usage_error(prog, "%s", err.msg);
        goto out;
    }
    if (!a.resume && !a.init && model_config(&a, &early, &err)) {
        rc = sq_cli_usage_error(prog, "%s", err.msg);
        goto out;
    }
    if (sq_threads_start(a.o.threads, !a.model->fit, &err) < 0)
        goto fail;
    if (a.device && a.model->fit && !a.model->gpu_check && strcmp(a.device, "cpu") != 0) {
        rc = sq_cli_usage_error(prog, "--device %s: --model %s runs on the CPU only", a.device,
                                a.model->name);
        goto out;
    }
    if (open_ranks(&a, &comm, &err) || open_device(&a, &comm, &cx, &err))
        goto fail;
    a.o.cx = &cx;
    if (sq_in_open(&in, a.in_path, &err) || resume_input(&a, in, &err) ||
        sq_dataset_read_as(&ds, in, sq_in_name(a.in_path),
                           SQ_KIND_BIT(SQ_SPLIT) | SQ_KIND_BIT(SQ_PADDED), &err) ||
        sq_train_check_data(&ds, sq_in_name(a.in_path), &err))
        goto fail;
    char msg[1024];
    if (sq_train_pick_map(a.map, a.resume ? a.resume : a.init, &ds.hdr, sq_in_name(a.in_path),
                          &a.map_bytes, &a.map_len, msg, sizeof msg, &err))
        goto fail;
    if (msg[0])
        fprintf(stderr, "%s: %s\n", prog, msg);
    if (a.model->fit ? fit(&a, &ds, &err) : train(&a, &ds, &err))
        goto fail;
    goto out;
fail:;
    char who[64];
    if (comm.rank)
        snprintf(who, sizeof who, "%s (rank %d)", prog, comm.rank);
    else
        snprintf(who, sizeof who, "%s", prog);
    sq_report(who, &err);
    rc = err.code ? err.code : SQ_EX_SOFTWARE;
    sq_comm_abort(&comm, rc); /* no rank waits on this one */
out:
    sq_comm_close(&comm);
    sq_device_close(&cx);
    sq_dataset_free(&ds);
    sq_in_close(in);
    free(a.derived);
    free(a.map_bytes);
    free(a.given);
    free(a.train_given);
    free(a.o.cfg);
    return rc < 0 ? sq_cli_info_done(prog) : rc;
}
