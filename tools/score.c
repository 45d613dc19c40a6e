/* seqrec-score - rank held-out targets with a model, or recommend the top K
 * items of every user (see seqrec-score(1)). Argument parsing and wiring
 * only: models load through lib/model.c, ranks and top-K lists come from
 * lib/eval.c, the input is held by lib/dataset.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataset.h"
#include "err.h"
#include "eval.h"
#include "fileio.h"
#include "model.h"
#include "sasrec.h"
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

/* A positive integer option into *v; 64 otherwise. */
static int parse_pos(const char *opt, const char *s, uint32_t max, uint32_t *v, sq_err *e)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || errno || *end || x < 1 || x > max)
        return sq_fail(e, SQ_EX_USAGE, "%s: expected an integer in 1..%u, got '%s'", opt, max, s);
    *v = (uint32_t)x;
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
    const sq_sasrec *m = sq_sasrec_of(model);
    if (!m)
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
    float *map = NULL;
    int *ids = NULL, *pos = NULL, n = 0, H = 0, rc = 0;
    if (sq_sasrec_attention_map(m, hist, len, &map, &ids, &pos, &n, &H, e))
        return e->code;
    const sq_sasrec_config *c = &m->cfg;
    int L = c->n_layers;
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
        if (ids[i] == sq_mask_id(c))
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
    snprintf(title, sizeof title, "%s --attn %s%s, user %" PRIu32 " (%d items)",
             sq_backbone_name(c->backbone), sq_attn_kind_name(c->attn),
             c->backbone == SQ_BACKBONE_BERT4REC && c->causal ? " --causal" : "", user, n);
    /* weights of either sign (linrec, hydra: no normaliser; mixing: a
     * Jacobian) get a diverging palette over [-max |w|, max |w|] */
    int signed_map = c->attn == SQ_AK_LINREC || c->attn == SQ_AK_HYDRA ||
                     c->attn == SQ_AK_MIXING;
    smax = !signed_map ? 0 : smax > 0 ? smax : 1;
    snprintf(path, plen + 64, "%s.gp", prefix);
    if ((rc = write_gnuplot(path, name, title, L, n, ids, sq_mask_id(c), smax, e)) != 0)
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
    free(map);
    free(ids);
    free(pos);
    return rc;
}

int main(int argc, char **argv)
{
    enum { O_TIES = 256, O_MAP, O_SHARD, O_ATTN_MAP };
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
    sq_eval_opts eo;
    sq_eval_defaults(&eo);
    const char *model_path = NULL, *out_path = NULL, *map_path = NULL, *shard = NULL;
    uint32_t topk = 0, v, map_user = 0;
    int as_stream = 0, rank_opts = 0, fmt_given = 0, c, amap = 0, cand_opts = 0;
    sq_err err = {0};

    while ((c = getopt_long(argc, argv, "m:t:c:xs:k:f:b:j:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 't':
            if (strcmp(optarg, "valid") == 0)
                eo.target = SQ_EVAL_VALID;
            else if (strcmp(optarg, "test") == 0)
                eo.target = SQ_EVAL_TEST;
            else {
                fprintf(stderr, "%s: --target: expected valid or test, got '%s'\n", prog, optarg);
                return SQ_EX_USAGE;
            }
            rank_opts = 1;
            break;
        case 'c':
            if (sq_eval_parse_candidates(optarg, &eo, &err))
                return sq_report(prog, &err);
            rank_opts = 1;
            cand_opts = 1;
            break;
        case 'x': eo.exclude_history = 1; cand_opts = 1; break;
        case O_TIES:
            if (strcmp(optarg, "pessimistic") == 0)
                eo.optimistic = 0;
            else if (strcmp(optarg, "optimistic") == 0)
                eo.optimistic = 1;
            else {
                fprintf(stderr, "%s: --ties: expected pessimistic or optimistic, got '%s'\n",
                        prog, optarg);
                return SQ_EX_USAGE;
            }
            rank_opts = 1;
            cand_opts = 1;
            break;
        case O_ATTN_MAP: {
            char *end;
            errno = 0;
            unsigned long long u = strtoull(optarg, &end, 10);
            if (*optarg < '0' || *optarg > '9' || errno || *end || u > UINT32_MAX) {
                fprintf(stderr, "%s: --attention-map: expected a user id, got '%s'\n", prog,
                        optarg);
                return SQ_EX_USAGE;
            }
            map_user = (uint32_t)u;
            amap = 1;
            break;
        }
        case 's': {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(optarg, &end, 10);
            if (*optarg < '0' || *optarg > '9' || errno || *end) {
                fprintf(stderr, "%s: --seed: expected a non-negative integer, got '%s'\n",
                        prog, optarg);
                return SQ_EX_USAGE;
            }
            eo.seed = s;
            break;
        }
        case 'k':
            if (parse_pos("--topk", optarg, 1u << 20, &topk, &err))
                return sq_report(prog, &err);
            break;
        case 'f':
            if (strcmp(optarg, "tsv") == 0)
                as_stream = 0;
            else if (strcmp(optarg, "stream") == 0)
                as_stream = 1;
            else {
                fprintf(stderr, "%s: --format: expected tsv or stream, got '%s'\n", prog, optarg);
                return SQ_EX_USAGE;
            }
            fmt_given = 1;
            break;
        case O_MAP: map_path = optarg; break;
        case O_SHARD:
            if (sq_eval_parse_shard(optarg, &eo, &err))
                return sq_report(prog, &err);
            shard = optarg;
            break;
        case 'b':
            if (parse_pos("--batch", optarg, 1u << 20, &v, &err))
                return sq_report(prog, &err);
            eo.batch = (int)v;
            break;
        case 'j':
            if (parse_pos("--threads", optarg, 1024, &v, &err))
                return sq_report(prog, &err);
            eo.threads = (int)v;
            break;
        case 'o': out_path = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s (seqrec) %s\n", prog, SEQREC_VERSION); return 0;
        default:
            fprintf(stderr, "Try '%s --help' for more information.\n", prog);
            return SQ_EX_USAGE;
        }
    }
    const char *why = NULL;
    if (!model_path)
        why = "a model is required (-m MODEL.sqm)";
    else if (argc - optind > 1)
        why = "at most one input FILE";
    else if (amap && (topk || cand_opts || shard || fmt_given || map_path))
        why = "--attention-map takes -m, -t, -o PREFIX and the input only";
    else if (amap && (!out_path || !strcmp(out_path, "-")))
        why = "--attention-map writes several files: give their prefix with -o PREFIX";
    else if (topk && rank_opts)
        why = "--topk ranks every item: --target, --candidates and --ties apply to ranks only";
    else if (!topk && (fmt_given || map_path))
        why = "--format and --map apply to --topk only";
    else if (as_stream && map_path)
        why = "--map translates ids for people: it needs --format tsv (a stream keeps dense ids)";
    if (why) {
        fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", prog, why, prog);
        return SQ_EX_USAGE;
    }
    const char *in_path = optind < argc ? argv[optind] : NULL;
    const char *in_name = sq_in_name(in_path), *out_name = sq_out_name(out_path);
    int tsv = topk && !as_stream;

    sq_model model = {0};
    sq_idmap map = {0};
    sq_dataset ds = {0};
    sq_outfile out = {0};
    sq_writer wr = {0};
    sq_header hdr = {0};
    FILE *in = NULL;
    int writer_open = 0;

    if (amap) {
        if (sq_model_load(&model, model_path, &err) || sq_in_open(&in, in_path, &err) ||
            sq_dataset_read(&ds, in, in_name, &err) ||
            sq_model_check_stream(&model, &ds.hdr, in_name, &err) ||
            attention_map(&model, model_path, &ds, in_name, map_user, eo.target, out_path,
                          &err))
            goto fail;
        sq_dataset_free(&ds);
        sq_in_close(in);
        sq_model_free(&model);
        return 0;
    }
    if (sq_model_load(&model, model_path, &err) ||
        (map_path && sq_idmap_read(&map, map_path, &err)) ||
        sq_out_open(&out, out_path, !tsv, &err) ||
        sq_in_open(&in, in_path, &err) ||
        sq_dataset_read(&ds, in, in_name, &err) ||
        sq_model_check_stream(&model, &ds.hdr, in_name, &err))
        goto fail;
    if (!topk && ds.hdr.kind == SQ_SEQUENCES) {
        sq_fail(&err, SQ_EX_DATA, "%s: a sequences stream has no held-out targets "
                "(cut it with seqrec-split first, or use --topk)", in_name);
        goto fail;
    }

    out_ctx oc = {.out_name = out_name, .map = map_path ? &map : NULL, .map_name = map_path,
                  .progress = isatty(STDERR_FILENO)};
    if (!tsv) {
        char cand[64];
        sq_eval_candidates_name(&eo, cand, sizeof cand);
        if (sq_header_copy(&hdr, &ds.hdr, &err))
            goto fail;
        hdr.kind = topk ? SQ_TOPK : SQ_RANKS;
        hdr.flags = 0;
        hdr.max_len = 0;
        if (sq_meta_add(&hdr, &err, "score.model", "%s", model.name) ||
            sq_meta_add(&hdr, &err, "score.model_file", "%s", model_path) ||
            (!topk && sq_meta_add(&hdr, &err, "score.target", "%s",
                                  eo.target == SQ_EVAL_VALID ? "valid" : "test")) ||
            (!topk && sq_meta_add(&hdr, &err, "score.candidates", "%s", cand)) ||
            (!topk && sq_meta_add(&hdr, &err, "score.ties", "%s",
                                  eo.optimistic ? "optimistic" : "pessimistic")) ||
            (topk && sq_meta_add(&hdr, &err, "score.topk", "%u", topk)) ||
            sq_meta_add(&hdr, &err, "score.exclude_history", "%d", eo.exclude_history) ||
            (!topk && eo.cand != SQ_CAND_FULL &&
             sq_meta_add(&hdr, &err, "score.seed", "%" PRIu64, eo.seed)) ||
            (shard && sq_meta_add(&hdr, &err, "score.shard", "%s", shard)))
            goto fail;
        if (sq_writer_open(&wr, out.fp, out_name, &hdr, &err))
            goto fail;
        writer_open = 1;
        oc.w = &wr;
    } else {
        oc.tsv = out.fp;
    }

    int rc = topk ? sq_eval_topk(&model, &ds, &eo, topk, put_topk, &oc, &err)
                  : sq_eval_ranks(&model, &ds, &eo, put_rank, &oc, NULL, &err);
    if (oc.progress && oc.done >= 4096)
        fprintf(stderr, "\r%s: %" PRIu64 " scored\n", prog, oc.done);
    if (rc || (writer_open && sq_writer_finish(&wr, &err)) || sq_out_commit(&out, &err))
        goto fail;
    if (oc.done == 0 && !shard)
        fprintf(stderr, "%s: note: %s has no %s\n", prog, in_name,
                topk ? "users" : eo.target == SQ_EVAL_VALID ? "validation targets" : "test targets");
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_dataset_free(&ds);
    sq_in_close(in);
    sq_idmap_free(&map);
    sq_model_free(&model);
    return 0;

fail:
    sq_report(prog, &err);
    sq_out_abort(&out);
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_dataset_free(&ds);
    sq_in_close(in);
    sq_idmap_free(&map);
    sq_model_free(&model);
    return err.code;
}
