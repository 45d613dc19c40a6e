/* seqrec-score - rank held-out targets with a model, or recommend the top K
 * items of every user (see seqrec-score(1)). Argument parsing and wiring
 * only: models load through the registry (lib/train/registry.c), ranks and top-K lists come from
 * lib/train/eval.c, the input is held by lib/data/dataset.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "dataset.h"
#include "err.h"
#include "eval.h"
#include "fileio.h"
#include "model.h"
#include "registry.h"
#include "stream.h"

static const char *prog = "seqrec-score";

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: seqrec-score -m MODEL.sqm [OPTION]... [FILE]\n"
        "Rank the held-out targets of a split (or padded) stream (FILE or standard\n"
        "input) with a model and write a ranks stream for seqrec-metrics; or, with\n"
        "--topk, recommend the K best items of every user.\n"
        "\n"
        "  -m, --model FILE       the model (.sqm) to score with (required)\n"
        "  -t, --target SET       valid or test (default test): which held-out\n"
        "                         targets to rank, each given the items before it\n"
        "  -c, --candidates C     full (every item, the default), uni:N (N uniform\n"
        "                         negatives) or pop:N (N negatives drawn by training\n"
        "                         popularity), without replacement\n"
        "  -x, --exclude-history  drop the items of the history from the candidates\n"
        "                         (the target itself stays a candidate)\n"
        "      --ties T           pessimistic (default: equal scores count against\n"
        "                         the target) or optimistic\n"
        "  -s, --seed S           seed of the negative draws (default 1)\n"
        "  -k, --topk K           write the K best items of every user given all it\n"
        "                         has (train, validation and test) instead of ranks\n"
        "  -f, --format F         with --topk: tsv (default: user<TAB>item:score,...)\n"
        "                         or stream (a topk stream)\n"
        "      --map FILE         with --topk tsv: print original user and item ids\n"
        "                         from the map of seqrec-preprocess --map\n"
        "      --shard i/n        only the users whose XXH3-64 of the id is i mod n\n"
        "      --attention-map U  instead: write the attention weights of every\n"
        "                         layer for user U's history (the one --target\n"
        "                         ranks) to PREFIX.lL.hH.tsv, PREFIX.lL.mean.tsv\n"
        "                         and PREFIX.items.tsv, and a gnuplot heat map\n"
        "                         PREFIX.gp, PREFIX.png (-o PREFIX required)\n"
        "  -b, --batch B          histories per model call (default 256)\n"
        "  -j, --threads T        threads for ranking (default: all)\n"
        "  -o, --output FILE      write to FILE (atomically) instead of stdout;\n"
        "                         with --attention-map the files' PREFIX\n"
        "  -h, --help             show this help and exit\n"
        "  -V, --version          show the version and exit\n"
        "\n"
        "Rank = 1 + candidates scoring higher + (pessimistic) other candidates\n"
        "scoring equal. Exit status: 0 ok, 64 usage, 65 bad data (also: a stream\n"
        "of another dataset than the model's), 66 missing input or model,\n"
        "70 the model gave NaN scores, 73 cannot create output, 74 I/O error.\n");
}

typedef struct {
    sq_writer *w;        /* stream output, or NULL */
    FILE *tsv;           /* TSV output, or NULL */
    const char *out_name;
    const sq_idmap *map; /* or NULL */
    const char *map_name;
    uint64_t done;
    int progress;        /* stderr is a terminal */
} out_ctx;

static void progress(out_ctx *o)
{
    if (++o->done % 4096 == 0 && o->progress)
        fprintf(stderr, "\r%s: %" PRIu64 " scored", prog, o->done);
}

static int put_rank(void *ctx, const sq_rank *r, sq_err *e)
{
    out_ctx *o = ctx;
    progress(o);
    sq_record rec = {.user = r->user, .len = 1, .item = r->item, .rank = r->rank,
                     .n_cand = r->n_cand};
    return sq_write(o->w, &rec, e);
}

static int put_topk(void *ctx, uint32_t user, uint32_t k, const uint32_t *items,
                    const float *scores, sq_err *e)
{
    out_ctx *o = ctx;
    progress(o);
    if (o->w) {
        sq_record rec = {.user = user, .len = k, .items = (uint32_t *)items,
                         .scores = (float *)scores};
        return sq_write(o->w, &rec, e);
    }
    const char *u = o->map ? sq_idmap_user(o->map, user) : NULL;
    if (o->map && !u)
        return sq_fail(e, SQ_EX_DATA, "%s: no user %u in the map (a map of another dataset?)",
                       o->map_name, user);
    if (u)
        fputs(u, o->tsv);
    else
        fprintf(o->tsv, "%" PRIu32, user);
    for (uint32_t j = 0; j < k; j++) {
        const char *it = o->map ? sq_idmap_item(o->map, items[j]) : NULL;
        if (o->map && !it)
            return sq_fail(e, SQ_EX_DATA, "%s: no item %u in the map (a map of another dataset?)",
                           o->map_name, items[j]);
        fputc(j ? ',' : '\t', o->tsv);
        if (it)
            fprintf(o->tsv, "%s:%.9g", it, (double)scores[j]);
        else
            fprintf(o->tsv, "%" PRIu32 ":%.9g", items[j], (double)scores[j]);
    }
    if (fputc('\n', o->tsv) == EOF)
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", o->out_name, strerror(errno));
    return 0;
}

/* ---- --attention-map ---- */

/* One n x n matrix as TSV (query rows, key columns) at path, atomically. */
static int write_matrix(const char *path, const float *a, int n, sq_err *e)
{
    sq_outfile o = {0};
    if (sq_out_open(&o, path, 0, e))
        return e->code;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            fprintf(o.fp, "%.7g%c", (double)a[(size_t)i * n + j], j + 1 < n ? '\t' : '\n');
    if (ferror(o.fp)) {
        sq_out_abort(&o);
        return sq_fail(e, SQ_EX_IO, "%s: write error", path);
    }
    return sq_out_commit(&o, e);
}

/* The gnuplot script: one panel per layer, the head mean of each, rows =
 * queries (oldest at the top), columns = keys; name = the prefix's last
 * component (gnuplot runs in the prefix's directory). */
static int write_gnuplot(const char *path, const char *name, const char *title, int L, int n,
                         const int *ids, int mask_id, double signed_max, sq_err *e)
{
    sq_outfile o = {0};
    if (sq_out_open(&o, path, 0, e))
        return e->code;
    FILE *f = o.fp;
    int w = 80 + 330 * L;
    fprintf(f, "# %s\n# written by seqrec-score --attention-map; run: gnuplot %s.gp\n", title,
            name);
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size %d,380 font ',9'\n"
               "} else {\n    set terminal png size %d,380\n}\n", w, w);
    fprintf(f, "set output '%s.png'\n", name);
    fprintf(f, "set multiplot layout 1,%d title \"%s\" noenhanced\n", L, title);
    fprintf(f, "set size ratio -1\nset xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\n", n - 1,
            n - 1);
    fprintf(f, "set xlabel 'key'\nset ylabel 'query'\nunset key\n");
    if (signed_max > 0) /* weights of either sign: a diverging palette around 0 */
        fprintf(f, "set palette defined (-1 '#b2182b', 0 'white', 1 '#2166ac')\n"
                   "set cbrange [%.7g:%.7g]\n", -signed_max, signed_max);
    else
        fprintf(f, "set palette defined (0 'white', 1 '#fdd49e', 2 '#d7301f', 3 '#7f0000')\n"
                   "set cbrange [0:*]\n");
    if (n <= 30) { /* item ids as tics */
        for (int axis = 0; axis < 2; axis++) {
            fprintf(f, "set %ctics (", axis ? 'y' : 'x');
            for (int i = 0; i < n; i++) {
                if (ids[i] == mask_id)
                    fprintf(f, "%s\"[M]\" %d", i ? ", " : "", i);
                else
                    fprintf(f, "%s\"%d\" %d", i ? ", " : "", ids[i], i);
            }
            fprintf(f, ")%s\n", axis ? "" : " rotate by 90 right");
        }
    }
    for (int l = 1; l <= L; l++)
        fprintf(f, "set title 'layer %d (mean over heads)'\n"
                   "plot '%s.l%d.mean.tsv' matrix with image\n", l, name, l);
    fprintf(f, "unset multiplot\n");
    if (ferror(f)) {
        sq_out_abort(&o);
        return sq_fail(e, SQ_EX_IO, "%s: write error", path);
    }
    return sq_out_commit(&o, e);
}

/* Runs gnuplot on PREFIX.gp in PREFIX's directory; 1 when gnuplot is not
 * installed (the script stays, for later). */
static int run_gnuplot(const char *dir, const char *name, sq_err *e)
{
    char script[4096];
    snprintf(script, sizeof script, "%s.gp", name);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return sq_fail(e, SQ_EX_OSERR, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (dir[0] && chdir(dir) != 0)
            _exit(126);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(errno == ENOENT ? 127 : 126);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return sq_fail(e, SQ_EX_OSERR, "waitpid: %s", strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return 1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return sq_fail(e, SQ_EX_SOFTWARE, "gnuplot failed on %s%s.gp", dir, name);
    return 0;
}

static int attention_map(const sq_model *model, const char *model_path, const sq_dataset *ds,
                         const char *in_name, uint32_t user, int target, const char *prefix,
                         sq_err *e)
{
    if (!model->attention)
        return sq_fail(e, SQ_EX_USAGE, "--attention-map: %s is a %s model, which has no "
                       "attention (sasrec and bert4rec models have)", model_path, model->name);
    uint64_t r;
    for (r = 0; r < ds->n_seq; r++)
        if (ds->seq[r].user == user && ds->seq[r].view == 0)
            break;
    if (r == ds->n_seq)
        return sq_fail(e, SQ_EX_DATA, "--attention-map: %s has no user %" PRIu32, in_name, user);
    /* the history sq_eval_ranks gives this user's first target of the set */
    const sq_seq *q = &ds->seq[r];
    uint32_t end = target == SQ_EVAL_VALID ? q->n_train : q->n_train + q->n_valid;
    if (end > q->len)
        end = q->len;
    const uint32_t *hist = sq_dataset_items(ds, r) + q->hist;
    uint32_t len = end > q->hist ? end - q->hist : 0;
    sq_attn_map am;
    if (model->attention(model, hist, len, &am, e))
        return e->code;
    const float *map = am.map;
    const int *ids = am.ids, *pos = am.pos;
    int n = am.n, H = am.heads, L = am.layers, rc = 0;
    size_t plen = strlen(prefix);
    char *path = malloc(plen + 64), *dir = malloc(plen + 1);
    float *mean = malloc((size_t)n * n * sizeof *mean);
    sq_outfile o = {0};
    if (!path || !dir || !mean) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
        goto done;
    }
    /* the rows of the input: window position and item (or the mask) */
    snprintf(path, plen + 64, "%s.items.tsv", prefix);
    if ((rc = sq_out_open(&o, path, 0, e)) != 0)
        goto done;
    fprintf(o.fp, "row\tposition\titem\n");
    for (int i = 0; i < n; i++) {
        if (ids[i] == am.mask_id)
            fprintf(o.fp, "%d\t%d\tmask\n", i, pos[i]);
        else
            fprintf(o.fp, "%d\t%d\t%d\n", i, pos[i], ids[i]);
    }
    if ((rc = sq_out_commit(&o, e)) != 0)
        goto done;
    size_t nn = (size_t)n * n;
    double smax = 0; /* the largest |weight| of the head means (the picture) */
    for (int l = 0; l < L; l++) {
        memset(mean, 0, nn * sizeof *mean);
        for (int h = 0; h < H; h++) {
            const float *a = map + ((size_t)l * H + h) * nn;
            for (size_t i = 0; i < nn; i++)
                mean[i] += a[i] / (float)H;
            snprintf(path, plen + 64, "%s.l%d.h%d.tsv", prefix, l + 1, h + 1);
            if ((rc = write_matrix(path, a, n, e)) != 0)
                goto done;
        }
        for (size_t i = 0; i < nn; i++)
            smax = fabs(mean[i]) > smax ? fabs(mean[i]) : smax;
        snprintf(path, plen + 64, "%s.l%d.mean.tsv", prefix, l + 1);
        if ((rc = write_matrix(path, mean, n, e)) != 0)
            goto done;
    }
    /* the script and the picture, made in the prefix's directory */
    const char *slash = strrchr(prefix, '/'), *name = slash ? slash + 1 : prefix;
    size_t dlen = slash ? (size_t)(slash - prefix) + 1 : 0;
    memcpy(dir, prefix, dlen);
    dir[dlen] = '\0';
    char title[256];
    snprintf(title, sizeof title, "%s, user %" PRIu32 " (%d items)", am.what, user, n);
    /* weights of either sign (linrec, hydra: no normaliser; mixing: a
     * Jacobian) get a diverging palette over [-max |w|, max |w|] */
    int signed_map = am.signed_weights;
    smax = !signed_map ? 0 : smax > 0 ? smax : 1;
    snprintf(path, plen + 64, "%s.gp", prefix);
    if ((rc = write_gnuplot(path, name, title, L, n, ids, am.mask_id, smax, e)) != 0)
        goto done;
    rc = run_gnuplot(dir, name, e);
    if (rc == 1) {
        fprintf(stderr, "%s: note: gnuplot not found: %s.gp written, %s.png not drawn\n", prog,
                prefix, prefix);
        rc = 0;
    }
done:
    sq_out_abort(&o);
    free(path);
    free(dir);
    free(mean);
    sq_attn_map_free(&am);
    return rc;
}

/* ---- the command line ---- */

enum { O_TIES = 256, O_MAP, O_SHARD, O_ATTN_MAP }; /* the long-only options */

typedef struct {
    sq_eval_opts eo;
    const char *model_path, *in_path, *out_path, *map_path, *shard;
    uint32_t topk, map_user;
    int as_stream, amap;
    int rank_opts;  /* --target, --candidates or --ties given */
    int cand_opts;  /* --candidates, --exclude-history or --ties given */
    int fmt_given;
} score_args;

/* A positive integer option in 1..max into *v; 64 (printed) otherwise. */
static int parse_pos(const char *opt, const char *s, uint32_t max, uint32_t *v)
{
    if (sq_cli_u32(s, 1, max, v))
        return sq_cli_usage_error(prog, "%s: expected an integer in 1..%u, got '%s'", opt, max,
                                  s);
    return 0;
}

/* Which of two words s is: 0 or 1, or -1 (a usage error, printed). */
static int parse_word(const char *opt, const char *s, const char *w0, const char *w1)
{
    if (strcmp(s, w0) == 0)
        return 0;
    if (strcmp(s, w1) == 0)
        return 1;
    sq_cli_usage_error(prog, "%s: expected %s or %s, got '%s'", opt, w0, w1, s);
    return -1;
}

/* One option (not --help, --version); 0 or the exit status. */
static int parse_opt(int c, const char *arg, score_args *a)
{
    sq_eval_opts *eo = &a->eo;
    sq_err err = {0};
    uint32_t v;
    int w;
    switch (c) {
    case 'm': a->model_path = arg; return 0;
    case 't':
        if ((w = parse_word("--target", arg, "valid", "test")) < 0)
            return SQ_EX_USAGE;
        eo->target = w ? SQ_EVAL_TEST : SQ_EVAL_VALID;
        a->rank_opts = 1;
        return 0;
    case 'c':
        if (sq_eval_parse_candidates(arg, eo, &err))
            return sq_report(prog, &err);
        a->rank_opts = a->cand_opts = 1;
        return 0;
    case 'x': eo->exclude_history = a->cand_opts = 1; return 0;
    case O_TIES:
        if ((w = parse_word("--ties", arg, "pessimistic", "optimistic")) < 0)
            return SQ_EX_USAGE;
        eo->optimistic = w;
        a->rank_opts = a->cand_opts = 1;
        return 0;
    case O_ATTN_MAP:
        if (sq_cli_u32(arg, 0, UINT32_MAX, &a->map_user))
            return sq_cli_usage_error(prog, "--attention-map: expected a user id, got '%s'", arg);
        a->amap = 1;
        return 0;
    case 's':
        if (sq_cli_u64(arg, 0, UINT64_MAX, &eo->seed))
            return sq_cli_usage_error(prog, "--seed: expected a non-negative integer, got '%s'",
                                      arg);
        return 0;
    case 'k': return parse_pos("--topk", arg, 1u << 20, &a->topk);
    case 'f':
        if ((w = parse_word("--format", arg, "tsv", "stream")) < 0)
            return SQ_EX_USAGE;
        a->as_stream = w;
        a->fmt_given = 1;
        return 0;
    case O_MAP: a->map_path = arg; return 0;
    case O_SHARD:
        if (sq_eval_parse_shard(arg, eo, &err))
            return sq_report(prog, &err);
        a->shard = arg;
        return 0;
    case 'b':
        if (parse_pos("--batch", arg, 1u << 20, &v))
            return SQ_EX_USAGE;
        eo->batch = (int)v;
        return 0;
    case 'j':
        if (parse_pos("--threads", arg, 1024, &v))
            return SQ_EX_USAGE;
        eo->threads = (int)v;
        return 0;
    case 'o': a->out_path = arg; return 0;
    default: return sq_cli_try_help(prog);
    }
}

/* Why the options do not go together, or NULL. */
static const char *conflict(const score_args *a, int n_inputs)
{
    if (!a->model_path)
        return "a model is required (-m MODEL.sqm)";
    if (n_inputs > 1)
        return "at most one input FILE";
    if (a->amap && (a->topk || a->cand_opts || a->shard || a->fmt_given || a->map_path))
        return "--attention-map takes -m, -t, -o PREFIX and the input only";
    if (a->amap && (!a->out_path || !strcmp(a->out_path, "-")))
        return "--attention-map writes several files: give their prefix with -o PREFIX";
    if (a->topk && a->rank_opts)
        return "--topk ranks every item: --target, --candidates and --ties apply to ranks only";
    if (!a->topk && (a->fmt_given || a->map_path))
        return "--format and --map apply to --topk only";
    if (a->as_stream && a->map_path)
        return "--map translates ids for people: it needs --format tsv (a stream keeps dense "
               "ids)";
    return NULL;
}

/* The options into *a; 0, or the exit status (-1: --help or --version, 0). */
static int parse_args(int argc, char **argv, score_args *a)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},
        {"target", required_argument, NULL, 't'},
        {"candidates", required_argument, NULL, 'c'},
        {"exclude-history", no_argument, NULL, 'x'},
        {"ties", required_argument, NULL, O_TIES},
        {"seed", required_argument, NULL, 's'},
        {"topk", required_argument, NULL, 'k'},
        {"format", required_argument, NULL, 'f'},
        {"map", required_argument, NULL, O_MAP},
        {"shard", required_argument, NULL, O_SHARD},
        {"attention-map", required_argument, NULL, O_ATTN_MAP},
        {"batch", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c, rc;
    while ((c = getopt_long(argc, argv, "m:t:c:xs:k:f:b:j:o:hV", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return -1;
        }
        if (c == 'V') {
            printf("%s (seqrec) %s\n", prog, SEQREC_VERSION);
            return -1;
        }
        if ((rc = parse_opt(c, optarg, a)) != 0)
            return rc;
    }
    const char *why = conflict(a, argc - optind);
    if (why)
        return sq_cli_usage_error(prog, "%s", why);
    a->in_path = optind < argc ? argv[optind] : NULL;
    return 0;
}

/* ---- the run ---- */

/* --attention-map: the maps of one user's history. */
static int run_attention_map(const score_args *a, sq_err *err)
{
    const char *in_name = sq_in_name(a->in_path);
    sq_model model = {0};
    sq_dataset ds = {0};
    FILE *in = NULL;
    if (sq_model_load(&model, a->model_path, err) || sq_in_open(&in, a->in_path, err) ||
        sq_dataset_read(&ds, in, in_name, err) ||
        sq_model_check_stream(&model, &ds.hdr, in_name, err) ||
        attention_map(&model, a->model_path, &ds, in_name, a->map_user, a->eo.target,
                      a->out_path, err))
        sq_report(prog, err);
    sq_dataset_free(&ds);
    sq_in_close(in);
    sq_model_free(&model);
    return err->code;
}

/* The header of the ranks or topk stream: the input's, and how it was scored. */
static int score_header(sq_header *hdr, const sq_header *in, const score_args *a,
                        const char *model_name, sq_err *e)
{
    const sq_eval_opts *eo = &a->eo;
    uint32_t topk = a->topk;
    char cand[64];
    sq_eval_candidates_name(eo, cand, sizeof cand);
    if (sq_header_copy(hdr, in, e))
        return e->code;
    hdr->kind = topk ? SQ_TOPK : SQ_RANKS;
    hdr->flags = 0;
    hdr->max_len = 0;
    if (sq_meta_add(hdr, e, "score.model", "%s", model_name) ||
        sq_meta_add(hdr, e, "score.model_file", "%s", a->model_path) ||
        (!topk && sq_meta_add(hdr, e, "score.target", "%s",
                              eo->target == SQ_EVAL_VALID ? "valid" : "test")) ||
        (!topk && sq_meta_add(hdr, e, "score.candidates", "%s", cand)) ||
        (!topk && sq_meta_add(hdr, e, "score.ties", "%s",
                              eo->optimistic ? "optimistic" : "pessimistic")) ||
        (topk && sq_meta_add(hdr, e, "score.topk", "%u", topk)) ||
        sq_meta_add(hdr, e, "score.exclude_history", "%d", eo->exclude_history) ||
        (!topk && eo->cand != SQ_CAND_FULL &&
         sq_meta_add(hdr, e, "score.seed", "%" PRIu64, eo->seed)) ||
        (a->shard && sq_meta_add(hdr, e, "score.shard", "%s", a->shard)))
        return e->code;
    return 0;
}

/* Ranks the held-out targets, or writes every user's top K. */
static int run_score(const score_args *a, sq_err *err)
{
    const char *in_name = sq_in_name(a->in_path), *out_name = sq_out_name(a->out_path);
    uint32_t topk = a->topk;
    int tsv = topk && !a->as_stream;
    sq_model model = {0};
    sq_idmap map = {0};
    sq_dataset ds = {0};
    sq_outfile out = {0};
    sq_writer wr = {0};
    sq_header hdr = {0};
    FILE *in = NULL;
    out_ctx oc = {.out_name = out_name, .map = a->map_path ? &map : NULL,
                  .map_name = a->map_path, .progress = isatty(STDERR_FILENO)};

    if (sq_model_load(&model, a->model_path, err) ||
        (a->map_path && sq_idmap_read(&map, a->map_path, err)) ||
        sq_out_open(&out, a->out_path, !tsv, err) ||
        sq_in_open(&in, a->in_path, err) ||
        sq_dataset_read(&ds, in, in_name, err) ||
        sq_model_check_stream(&model, &ds.hdr, in_name, err))
        goto done;
    if (!topk && ds.hdr.kind == SQ_SEQUENCES) {
        sq_fail(err, SQ_EX_DATA, "%s: a sequences stream has no held-out targets "
                "(cut it with seqrec-split first, or use --topk)", in_name);
        goto done;
    }
    if (!tsv && (score_header(&hdr, &ds.hdr, a, model.name, err) ||
                 sq_writer_open(&wr, out.fp, out_name, &hdr, err)))
        goto done;
    oc.w = tsv ? NULL : &wr;
    oc.tsv = tsv ? out.fp : NULL;

    int rc = topk ? sq_eval_topk(&model, &ds, &a->eo, topk, put_topk, &oc, err)
                  : sq_eval_ranks(&model, &ds, &a->eo, put_rank, &oc, NULL, err);
    if (oc.progress && oc.done >= 4096)
        fprintf(stderr, "\r%s: %" PRIu64 " scored\n", prog, oc.done);
    if (rc || (!tsv && sq_writer_finish(&wr, err)) || sq_out_commit(&out, err))
        goto done;
    if (oc.done == 0 && !a->shard)
        fprintf(stderr, "%s: note: %s has no %s\n", prog, in_name,
                topk ? "users" : a->eo.target == SQ_EVAL_VALID ? "validation targets"
                                                               : "test targets");
done:
    if (err->code) {
        sq_report(prog, err);
        sq_out_abort(&out);
    }
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_dataset_free(&ds);
    sq_in_close(in);
    sq_idmap_free(&map);
    sq_model_free(&model);
    return err->code;
}

int main(int argc, char **argv)
{
    score_args a = {0};
    sq_eval_defaults(&a.eo);
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    sq_err err = {0};
    return a.amap ? run_attention_map(&a, &err) : run_score(&a, &err);
}
