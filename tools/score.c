/* seqrec-score - rank held-out targets with a model, or recommend the top K
 * items of every user (see seqrec-score(1)). Argument parsing and wiring
 * only: models load through the model table (lib/model/models.c), ranks and
 * top-K lists come from lib/train/eval.c, the input is held by
 * lib/data/dataset.c, the --users list is read and resolved by
 * lib/data/userlist.c, the item filters by lib/data/itemlist.c (applied in
 * eval.c), and --attention-map's files and picture are made by
 * lib/train/attnmap.c. Under a launcher (mpirun, srun) each rank scores its
 * shard and rank 0 writes every rank's results in one process's order
 * (lib/train/score_ranks.c). Left here besides the options: the text
 * formats of --topk and the messages (warnings and notes included). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnmap.h"
#include "cli.h"
#include "comm.h"
#include "dataset.h"
#include "err.h"
#include "eval.h"
#include "fileio.h"
#include "idmap.h"
#include "model.h"
#include "models.h"
#include "score_ranks.h"
#include "stream.h"
#include "device.h"
#include "threads.h"
#include "itemlist.h"
#include "userlist.h"

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
        "  -x, --exclude-history  ranks: drop the items of the history from the\n"
        "                         candidates (the target itself stays a candidate);\n"
        "                         top-K lists drop them already (the default there)\n"
        "      --ties T           pessimistic (default: equal scores count against\n"
        "                         the target) or optimistic\n"
        "  -s, --seed S           seed of the negative draws (default 1)\n"
        "  -k, --topk K           write the K best items of every user given all it\n"
        "                         has (train, validation and test) instead of ranks;\n"
        "                         items of the user's history are left out\n"
        "      --include-history  with --topk: keep the history's items as candidates\n"
        "  -f, --format F         with --topk: tsv (default: user<TAB>item:score,...),\n"
        "                         long (a header, then user<TAB>rank<TAB>item<TAB>score\n"
        "                         rows), jsonl (one JSON object per user) or stream\n"
        "                         (a topk stream)\n"
        "      --map FILE         with --topk tsv, long or jsonl: print original user\n"
        "                         and item ids from the map of seqrec-preprocess --map\n"
        "                         (65 unless its items extend the model's map and its\n"
        "                         users the stream's); with ranks too: the ids of\n"
        "                         the user and item lists below\n"
        "      --users FILE       only the users listed in FILE, one id a line\n"
        "                         (original ids with --map, dense ids without); an\n"
        "                         id not in the map or not in the input is a warning\n"
        "      --exclude-items FILE  never recommend or rank the items listed in FILE\n"
        "                         (one id a line, as --users); a held-out target\n"
        "                         that is excluded is not ranked (counted in a note)\n"
        "      --allow-items FILE  only the items listed in FILE are candidates\n"
        "                         (an item in both lists is excluded); an id of\n"
        "                         either list not in the map is a warning\n"
        "      --shard i/n        only the users whose XXH3-64 of the id is i mod n\n"
        "      --attention-map U  instead: write the attention weights of every\n"
        "                         layer for user U's history (the one --target\n"
        "                         ranks) to PREFIX.lL.hH.tsv, PREFIX.lL.mean.tsv\n"
        "                         and PREFIX.items.tsv, and a gnuplot heat map\n"
        "                         PREFIX.gp, PREFIX.png (-o PREFIX required)\n"
        "      --expert-stats FILE  ranks: also write how often each expert of the\n"
        "                         model's memory (ELASTIC's interest pool) is\n"
        "                         retrieved for the ranked targets: a header, then\n"
        "                         expert<TAB>count lines, every expert (65 for a\n"
        "                         model without experts)\n"
        "  -b, --batch B          histories per model call (default 256, fewer\n"
        "                         for catalogues over 262,143 items: 256 MiB of\n"
        "                         scores at most)\n"
        "  -j, --threads T        threads (default: all); the output is the same\n"
        "                         bytes whatever -j, -b and --shard\n"
        "      --device D         cpu (default), cuda or cuda:N: every model scores\n"
        "                         on that GPU (pop on the host; hstu with heads of\n"
        "                         at most 128 dimensions; 69 when there is none);\n"
        "                         the GPU's scores equal the CPU's to float\n"
        "                         rounding, not bit for bit\n"
        "      --precision P      the GPU's GEMMs: tf32 (default), fp32 or bf16\n"
        "  -o, --output FILE      write to FILE (atomically) instead of stdout;\n"
        "                         with --attention-map the files' PREFIX\n"
        "  -h, --help             show this help and exit\n"
        "  -V, --version          show the version and exit\n"
        "\n"
        "Under mpirun or srun, each of the P processes scores the users of shard\n"
        "RANK/P and rank 0 writes the output of one process (see seqrec-score(1)).\n"
        "\n"
        "Rank = 1 + candidates scoring higher + (pessimistic) other candidates\n"
        "scoring equal. Exit status: 0 ok, 64 usage, 65 bad data (also: a stream\n"
        "of another dataset than the model's, a bad line of --users), 66 missing\n"
        "input, model or --users file,\n"
        "69 no GPU, 70 the model gave NaN scores or a GPU kernel failed, 71 out of\n"
        "(device) memory, 73 cannot create output, 74 I/O error.\n");
}

enum { FMT_TSV = 0, FMT_STREAM, FMT_LONG, FMT_JSONL }; /* --format */

typedef struct {
    sq_writer *w;        /* stream output, or NULL */
    FILE *tsv;           /* text output (tsv, long, jsonl), or NULL */
    int fmt;             /* FMT_* */
    const char *out_name;
    const sq_idmap *map; /* or NULL */
    const char *map_name;
    uint64_t done;
    uint64_t local;      /* under a launcher: rank 0's own results scored */
    int ranks;           /* the job's processes (1: one process) */
    int progress;        /* stderr is a terminal (rank 0) */
    int warned_sep;      /* the tsv warning about ':' and ',' in ids was given */
} out_ctx;

static void progress(out_ctx *o)
{
    /* under a launcher the results arrive at the end: tick counts instead */
    if (++o->done % 4096 == 0 && o->progress && o->ranks == 1)
        fprintf(stderr, "\r%s: %" PRIu64 " scored", prog, o->done);
}

/* Rank 0's own share, as it is scored (score_ranks.h tick) */
static void tick(void *ctx)
{
    out_ctx *o = ctx;
    if (++o->local % 4096 == 0 && o->progress)
        fprintf(stderr, "\r%s: %" PRIu64 " scored by rank 0 of %d", prog, o->local, o->ranks);
}

static int put_rank(void *ctx, const sq_rank *r, sq_err *e)
{
    out_ctx *o = ctx;
    progress(o);
    sq_record rec = {.user = r->user, .len = 1, .item = r->item, .rank = r->rank,
                     .n_cand = r->n_cand};
    return sq_write(o->w, &rec, e);
}

/* The original id of dense user (is_item 0) or item id, or NULL without a
 * map; 65 when the map lacks it. */
static int orig_id(const out_ctx *o, int is_item, uint32_t id, const char **s, sq_err *e)
{
    *s = NULL;
    if (!o->map)
        return 0;
    *s = is_item ? sq_idmap_item(o->map, id) : sq_idmap_user(o->map, id);
    if (!*s)
        return sq_fail(e, SQ_EX_DATA, "%s: no %s %u in the map (a map of another dataset?)",
                       o->map_name, is_item ? "item" : "user", id);
    return 0;
}

/* An id: the original one (a JSON string in jsonl), or the dense number. */
static void put_id(FILE *f, const char *orig, uint32_t dense, int json)
{
    if (!orig) {
        fprintf(f, "%" PRIu32, dense);
        return;
    }
    if (!json) {
        fputs(orig, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)orig; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A score as text: %.9g (the float's bits); in JSON a non-finite one is
 * null. */
static void put_score(FILE *f, float x, int json)
{
    if (json && !isfinite(x))
        fputs("null", f);
    else
        fprintf(f, "%.9g", (double)x);
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
    FILE *f = o->tsv;
    int json = o->fmt == FMT_JSONL;
    const char *u, *it;
    if (orig_id(o, 0, user, &u, e))
        return e->code;
    if (json) {
        fputs("{\"user\":", f);
        put_id(f, u, user, 1);
        fputs(",\"items\":[", f);
    } else if (o->fmt == FMT_TSV) {
        put_id(f, u, user, 0);
    }
    for (uint32_t j = 0; j < k; j++) {
        if (orig_id(o, 1, items[j], &it, e))
            return e->code;
        if (o->fmt == FMT_LONG) { /* user rank item score */
            put_id(f, u, user, 0);
            fprintf(f, "\t%" PRIu32 "\t", j + 1);
            put_id(f, it, items[j], 0);
            fputc('\t', f);
            put_score(f, scores[j], 0);
            fputc('\n', f);
            continue;
        }
        if (it && !json && !o->warned_sep && strpbrk(it, ":,")) {
            o->warned_sep = 1;
            fprintf(stderr, "%s: warning: item id '%s' of %s holds ':' or ',': the lines "
                    "item:score,... are ambiguous (use --format long or jsonl)\n", prog, it,
                    o->map_name);
        }
        if (j || !json)
            fputc(j ? ',' : '\t', f);
        put_id(f, it, items[j], json);
        if (!json) {
            fputc(':', f);
            put_score(f, scores[j], 0);
        }
    }
    if (json) {
        fputs("],\"scores\":[", f);
        for (uint32_t j = 0; j < k; j++) {
            if (j)
                fputc(',', f);
            put_score(f, scores[j], 1);
        }
        fputs("]}\n", f);
    } else if (o->fmt == FMT_TSV) {
        fputc('\n', f);
    }
    if (ferror(f))
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", o->out_name, strerror(errno));
    return 0;
}

/* ---- the command line ---- */

/* the long-only options */
enum { O_TIES = 256, O_MAP, O_SHARD, O_ATTN_MAP, O_INCLUDE_HISTORY, O_USERS, O_EXPERTS,
       O_DEVICE, O_PRECISION, O_EXCLUDE_ITEMS, O_ALLOW_ITEMS };

typedef struct {
    sq_eval_opts eo;
    const char *model_path, *in_path, *out_path, *map_path, *shard, *users_path;
    const char *excl_path, *allow_path; /* --exclude-items, --allow-items */
    const char *experts_path; /* --expert-stats */
    uint32_t topk, map_user;
    int fmt, amap;  /* FMT_*; --attention-map given */
    const char *device; /* --device (NULL: cpu) */
    int precision;      /* --precision: SQ_PREC_* */
    const sq_ctx *cx;   /* the context main made of them */
    int rank_opts;  /* --target, --candidates or --ties given */
    int cand_opts;  /* --candidates or --ties given */
    int exclude_given, include_given; /* -x, --include-history */
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
    case O_DEVICE: {
        int be, idx;
        if (sq_device_parse(arg, &be, &idx, &err))
            return sq_cli_usage_error(prog, "%s", err.msg);
        a->device = arg;
        return 0;
    }
    case O_PRECISION:
        if (sq_precision_parse(arg, &a->precision, &err))
            return sq_cli_usage_error(prog, "%s", err.msg);
        return 0;
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
    case 'x': a->exclude_given = 1; return 0;
    case O_INCLUDE_HISTORY: a->include_given = 1; return 0;
    case O_USERS: a->users_path = arg; return 0;
    case O_EXCLUDE_ITEMS: a->excl_path = arg; return 0;
    case O_ALLOW_ITEMS: a->allow_path = arg; return 0;
    case O_EXPERTS: a->experts_path = arg; return 0;
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
    case 'f': {
        static const char *const fmts[] = {"tsv", "stream", "long", "jsonl"};
        for (w = 0; w < 4 && strcmp(arg, fmts[w]); w++)
            ;
        if (w == 4)
            return sq_cli_usage_error(prog, "--format: expected tsv, long, jsonl or stream, "
                                      "got '%s'", arg);
        a->fmt = w;
        a->fmt_given = 1;
        return 0;
    }
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
    if (a->amap && (a->topk || a->cand_opts || a->shard || a->fmt_given || a->map_path ||
                    a->exclude_given || a->include_given || a->users_path || a->excl_path ||
                    a->allow_path))
        return "--attention-map takes -m, -t, -o PREFIX and the input only";
    if (a->amap && (!a->out_path || !strcmp(a->out_path, "-")))
        return "--attention-map writes several files: give their prefix with -o PREFIX";
    if (a->experts_path && (a->topk || a->amap))
        return "--expert-stats counts the experts of the ranked targets: not with --topk "
               "or --attention-map";
    if (a->topk && a->rank_opts)
        return "--topk ranks every item: --target, --candidates and --ties apply to ranks only";
    if (!a->topk && a->fmt_given)
        return "--format applies to --topk only";
    if (!a->topk && a->map_path && !a->users_path && !a->excl_path && !a->allow_path)
        return "--map applies to --topk, or to the ids of --users, --exclude-items and "
               "--allow-items";
    if (a->fmt == FMT_STREAM && a->map_path)
        return "--map translates ids for people: it needs --format tsv, long or jsonl (a "
               "stream keeps dense ids)";
    if (a->include_given && !a->topk)
        return "--include-history applies to --topk (ranks keep the history as candidates "
               "unless -x)";
    if (a->include_given && a->exclude_given)
        return "--include-history and --exclude-history contradict each other";
    int stdin_in = n_inputs == 0 || !strcmp(a->in_path ? a->in_path : "-", "-");
    const char *lists[3] = {a->users_path, a->excl_path, a->allow_path};
    int n_stdin = stdin_in;
    for (int i = 0; i < 3; i++)
        n_stdin += lists[i] && (!strcmp(lists[i], "-") || !strcmp(lists[i], ""));
    if (n_stdin > 1)
        return "at most one of the input, --users, --exclude-items and --allow-items can be "
               "standard input";
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
        {"include-history", no_argument, NULL, O_INCLUDE_HISTORY},
        {"users", required_argument, NULL, O_USERS},
        {"exclude-items", required_argument, NULL, O_EXCLUDE_ITEMS},
        {"allow-items", required_argument, NULL, O_ALLOW_ITEMS},
        {"expert-stats", required_argument, NULL, O_EXPERTS},
        {"ties", required_argument, NULL, O_TIES},
        {"seed", required_argument, NULL, 's'},
        {"topk", required_argument, NULL, 'k'},
        {"format", required_argument, NULL, 'f'},
        {"map", required_argument, NULL, O_MAP},
        {"shard", required_argument, NULL, O_SHARD},
        {"attention-map", required_argument, NULL, O_ATTN_MAP},
        {"batch", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, O_DEVICE},
        {"precision", required_argument, NULL, O_PRECISION},
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
            sq_cli_version(prog);
            return -1;
        }
        if ((rc = parse_opt(c, optarg, a)) != 0)
            return rc;
    }
    a->in_path = optind < argc ? argv[optind] : NULL;
    const char *why = conflict(a, argc - optind);
    if (why)
        return sq_cli_usage_error(prog, "%s", why);
    /* top-K leaves the history out unless --include-history; ranks keep
     * it unless -x (-x with --topk: the default, accepted) */
    a->eo.exclude_history = a->topk ? !a->include_given : a->exclude_given;
    /* a diagnostic: a GPU model's top-K selected on the host (the same lists) */
    const char *tk = getenv("SEQREC_GPU_TOPK");
    a->eo.topk_host = tk && strcmp(tk, "host") == 0;
    /* and its ranks counted on the host (the same ranks) */
    const char *rk = getenv("SEQREC_GPU_RANKS");
    a->eo.ranks_host = rk && strcmp(rk, "host") == 0;
    return 0;
}

/* ---- id maps (idmap.h) ---- */

/* The stream must have the model's id map (same items), and a --map
 * (NULL: none) must extend the model's items and the stream's users. What
 * could not be checked (no fingerprint) is one warning line (none when
 * quiet: the ranks of a job but rank 0). */
static int check_maps(const score_args *a, const sq_model *m, const sq_header *h,
                      const char *in_name, const sq_idmap *map, int quiet, sq_err *e)
{
    sq_mapfp mfp, sfp;
    char w[768] = "";
    sq_mapfp_from_meta(m->meta, "", &mfp);
    sq_mapfp_from_meta(h->meta, "", &sfp);
    const char *mn = map ? sq_in_name(a->map_path) : NULL;
    if (sq_mapfp_check_stream(&mfp, a->model_path, &sfp, in_name, w, sizeof w, e) ||
        (map && sq_idmap_check_extends(map, mn, 1, &mfp.item, "model", a->model_path,
                                       w[0] ? NULL : w, sizeof w, e)) ||
        (map && sq_idmap_check_extends(map, mn, 0, &sfp.user, "stream", in_name,
                                       w[0] ? NULL : w, sizeof w, e)))
        return e->code;
    if (w[0] && !quiet)
        fprintf(stderr, "%s: warning: %s\n", prog, w);
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
    int drawn = 0;
    if (sq_model_load(&model, a->model_path, err) || sq_in_open(&in, a->in_path, err) ||
        sq_dataset_read(&ds, in, in_name, err) ||
        sq_model_check_stream(&model, &ds.hdr, in_name, err) ||
        check_maps(a, &model, &ds.hdr, in_name, NULL, 0, err) ||
        sq_attention_map_write(&model, a->model_path, &ds, in_name, a->map_user, a->eo.target,
                               a->out_path, err) ||
        sq_attention_map_draw(a->out_path, &drawn, err))
        sq_report(prog, err);
    else if (!drawn)
        fprintf(stderr, "%s: note: gnuplot not found: %s.gp written, %s.png not drawn\n", prog,
                a->out_path, a->out_path);
    sq_dataset_free(&ds);
    sq_in_close(in);
    sq_model_free(&model);
    return err->code;
}

/* ---- --users ---- */

/* Resolves the --users list (userlist.h) and warns about the lines it
 * skipped: at most 10, then (when it succeeded) the count; quiet: not. */
static int resolve_users(const sq_user_list *u, const char *file, const sq_idmap *map,
                         const sq_dataset *ds, const char *in_name, int quiet,
                         sq_user_set *s, sq_err *e)
{
    int rc = sq_user_list_resolve(u, file, map, ds, s, e);
    for (size_t i = 0; !quiet && i < s->n_skip && i < 10; i++) {
        const sq_user_line *l = s->skip[i].user;
        char why[128]; /* a very long input name is cut here, as it always was */
        if (s->skip[i].why == SQ_USER_NOT_IN_MAP)
            snprintf(why, sizeof why, "is not in the map");
        else
            snprintf(why, sizeof why, "has no record in %s", in_name);
        fprintf(stderr, "%s: warning: %s: line %" PRIu64 ": user '%s' %s: skipped\n", prog,
                file, l->line, l->id, why);
    }
    if (!rc && !quiet && s->n_skip > 10)
        fprintf(stderr, "%s: warning: %s: %zu unknown users in all, skipped\n", prog, file,
                s->n_skip);
    return rc;
}

/* ---- --exclude-items, --allow-items ---- */

/* The item filter (itemlist.h) of the model's catalogue, and a warning for
 * each unknown id (at most 10) and their count (quiet: none). */
static int resolve_items(const score_args *a, const sq_user_list *excl, const sq_user_list *allow,
                         const sq_idmap *map, uint32_t n_items, int quiet, sq_item_filter *f,
                         sq_err *e)
{
    const char *xn = a->excl_path ? sq_in_name(a->excl_path) : NULL;
    const char *an = a->allow_path ? sq_in_name(a->allow_path) : NULL;
    if (sq_item_filter_make(f, n_items, map, a->excl_path ? excl : NULL, xn,
                            a->allow_path ? allow : NULL, an, e))
        return e->code;
    for (size_t i = 0; !quiet && i < f->n_skip && i < 10; i++) {
        const sq_item_skip *k = &f->skip[i];
        fprintf(stderr, "%s: warning: %s: line %" PRIu64 ": item '%s' is not %s: ignored\n",
                prog, k->allow ? an : xn, k->line->line, k->line->id,
                map ? "in the map" : "an item of the model");
    }
    if (!quiet && f->n_skip)
        fprintf(stderr, "%s: warning: %zu unknown item id%s in all (--exclude-items, "
                "--allow-items): ignored\n", prog, f->n_skip, f->n_skip == 1 ? "" : "s");
    if (f->n_ok == 0)
        return sq_fail(e, SQ_EX_DATA, "--exclude-items/--allow-items leave no item of the "
                       "model's %u as a candidate", n_items);
    return 0;
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
        (a->shard && sq_meta_add(hdr, e, "score.shard", "%s", a->shard)) ||
        (a->users_path && sq_meta_add(hdr, e, "score.users", "%s", a->users_path)) ||
        (a->excl_path && sq_meta_add(hdr, e, "score.exclude_items", "%s", a->excl_path)) ||
        (a->allow_path && sq_meta_add(hdr, e, "score.allow_items", "%s", a->allow_path)))
        return e->code;
    return 0;
}

/* ---- --expert-stats ---- */

/* The counts of --expert-stats (NULL without it): refuses a model without
 * experts and (where the file is written: rank 0) an output that cannot
 * be created before any scoring. */
static int experts_begin(const score_args *a, const sq_model *m, int writer, uint64_t **count,
                         sq_err *e)
{
    *count = NULL;
    if (!a->experts_path)
        return 0;
    if (!m->experts || !m->n_experts)
        return sq_fail(e, SQ_EX_DATA, "--expert-stats: %s is a %s model, which has no "
                       "experts", a->model_path, m->name);
    if (writer && sq_out_check(a->experts_path, e))
        return e->code;
    if (m->n_experts > SIZE_MAX / sizeof **count || !(*count = calloc(m->n_experts,
                                                                     sizeof **count)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %" PRIu64 " expert counts",
                       m->n_experts);
    return 0;
}

typedef struct {
    const uint64_t *count;
    uint64_t n;
} experts_out;

static int write_experts(void *ctx, FILE *fp, const char *name, sq_err *e)
{
    const experts_out *x = ctx;
    fputs("expert\tcount\n", fp);
    for (uint64_t i = 0; i < x->n; i++)
        fprintf(fp, "%" PRIu64 "\t%" PRIu64 "\n", i, x->count[i]);
    /* flushed here: a full disk must be heard of before the ranks commit */
    if (fflush(fp) || ferror(fp))
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(errno));
    return 0;
}

/* What a run holds (run_score) */
typedef struct {
    sq_model model;
    sq_idmap map;
    sq_dataset ds;
    sq_outfile out;   /* rank 0's */
    sq_writer wr;
    sq_header hdr;
    sq_user_list ul;
    sq_user_set us;
    sq_user_list xl, al; /* --exclude-items, --allow-items */
    sq_item_filter items;
    uint64_t *experts;
    FILE *in;
} score_run;

static void score_run_free(score_run *r)
{
    sq_writer_free(&r->wr);
    sq_header_free(&r->hdr);
    sq_dataset_free(&r->ds);
    sq_in_close(r->in);
    sq_idmap_free(&r->map);
    sq_user_list_free(&r->ul);
    sq_user_set_free(&r->us);
    sq_user_list_free(&r->xl);
    sq_user_list_free(&r->al);
    sq_item_filter_free(&r->items);
    free(r->experts);
    sq_model_free(&r->model);
}

/* Loads and checks everything, and opens the output where it is written
 * (writer: one process, or rank 0 of a job; the other ranks only score
 * and stay quiet). */
static int score_setup(const score_args *a, int writer, score_run *r, out_ctx *oc, sq_err *err)
{
    const char *in_name = sq_in_name(a->in_path);
    int text = a->topk && a->fmt != FMT_STREAM;
    if (sq_model_load_on(&r->model, a->model_path, a->cx, err) ||
        (a->map_path && sq_idmap_read(&r->map, a->map_path, err)) ||
        (a->users_path && sq_user_list_read(&r->ul, a->users_path, err)) ||
        (a->excl_path && sq_id_list_read(&r->xl, a->excl_path, "item", err)) ||
        (a->allow_path && sq_id_list_read(&r->al, a->allow_path, "item", err)) ||
        (writer && sq_out_open(&r->out, a->out_path, !text, err)) ||
        sq_in_open(&r->in, a->in_path, err) ||
        sq_dataset_read(&r->ds, r->in, in_name, err) ||
        sq_model_check_stream(&r->model, &r->ds.hdr, in_name, err) ||
        check_maps(a, &r->model, &r->ds.hdr, in_name, oc->map, !writer, err) ||
        experts_begin(a, &r->model, writer, &r->experts, err) ||
        (a->users_path && resolve_users(&r->ul, sq_in_name(a->users_path), oc->map, &r->ds,
                                        in_name, !writer, &r->us, err)) ||
        ((a->excl_path || a->allow_path) &&
         resolve_items(a, &r->xl, &r->al, a->map_path ? &r->map : NULL, r->model.n_items,
                       !writer, &r->items, err)))
        return err->code;
    if (!a->topk && sq_expect_kind(&r->ds.hdr, in_name,
                                   SQ_KIND_BIT(SQ_SPLIT) | SQ_KIND_BIT(SQ_PADDED),
                                   "a sequences stream has no held-out targets: cut it with "
                                   "seqrec-split first, or use --topk", err))
        return err->code;
    if (!writer)
        return 0;
    if (!text && (score_header(&r->hdr, &r->ds.hdr, a, r->model.name, err) ||
                  sq_writer_open(&r->wr, r->out.fp, oc->out_name, &r->hdr, err)))
        return err->code;
    oc->w = text ? NULL : &r->wr;
    oc->tsv = text ? r->out.fp : NULL;
    if (text && a->fmt == FMT_LONG)
        fputs("user\trank\titem\tscore\n", r->out.fp);
    return 0;
}

/* Commits the output and the --expert-stats file together: the counts
 * are written (and flushed) before the output commits, so that a failure
 * of either leaves neither. */
static int commit_outputs(const score_args *a, score_run *r, const out_ctx *oc, sq_err *err)
{
    experts_out xo = {r->experts, r->model.n_experts};
    sq_outfile xf = {0};
    int rc = oc->w && sq_writer_finish(&r->wr, err);
    if (!rc && r->experts)
        rc = sq_out_open(&xf, a->experts_path, 0, err) ||
             write_experts(&xo, xf.fp, sq_out_name(a->experts_path), err);
    if (!rc)
        rc = sq_out_commit(&r->out, err);
    if (!rc && r->experts)
        rc = sq_out_commit(&xf, err);
    sq_out_abort(&xf);
    return rc ? err->code : 0;
}

/* The writer's end: the output and --expert-stats committed, the notes. */
static int score_finish(const score_args *a, score_run *r, const out_ctx *oc, uint64_t unknown,
                        uint64_t filtered, sq_err *err)
{
    const char *in_name = sq_in_name(a->in_path);
    if (commit_outputs(a, r, oc, err))
        return err->code;
    if (unknown)
        fprintf(stderr, "%s: note: %" PRIu64 " users of %s not in the training stream of the "
                "%s model (it has a row per user): not scored\n", prog, unknown, in_name,
                r->model.name);
    if (filtered)
        fprintf(stderr, "%s: note: %" PRIu64 " held-out targets of %s are items that "
                "--exclude-items/--allow-items leave out: not ranked\n", prog, filtered,
                in_name);
    if (oc->done == 0 && !a->shard && !a->users_path)
        fprintf(stderr, "%s: note: %s has no %s\n", prog, in_name,
                a->topk ? "users" : a->eo.target == SQ_EVAL_VALID ? "validation targets"
                                                                  : "test targets");
    return 0;
}

/* Ranks the held-out targets, or writes every user's top K: one process,
 * or each rank of a job its shard and rank 0 the output (score_ranks.h).
 * *fail says whether every rank knows of a failure (else: abort). */
static int run_score(const score_args *a, const sq_comm *comm, sq_score_fail *fail,
                     sq_err *err)
{
    int writer = comm->rank == 0;
    score_run r = {0};
    out_ctx oc = {.fmt = a->fmt, .out_name = sq_out_name(a->out_path),
                  .map = a->map_path ? &r.map : NULL, .map_name = a->map_path,
                  .ranks = comm->size, .progress = writer && isatty(STDERR_FILENO)};
    uint64_t unknown = 0, filtered = 0;
    int rc = score_setup(a, writer, &r, &oc, err);
    sq_eval_opts eo = a->eo;
    eo.users = r.us.set;
    eo.n_users = r.us.n;
    eo.expert_count = r.experts;
    eo.unknown_users = &unknown;
    eo.item_ok = r.items.ok;
    eo.filtered_targets = &filtered;
    /* every rank learns whether every rank is ready (a file missing on one
     * node) and has what rank 0 has */
    rc = sq_score_agree(comm, rc, fail, err);
    if (!rc)
        rc = sq_score_same(comm, a->model_path, &r.ds, &eo, a->topk, fail, err);
    if (!rc) {
        sq_score_out so = {.rank = put_rank, .topk = put_topk, .ctx = &oc, .tick = tick,
                           .n_experts = r.model.n_experts};
        rc = sq_score_run(comm, &r.model, &r.ds, &eo, a->topk, &so, err);
        *fail = so.fail;
        if (oc.progress && comm->size == 1 && oc.done >= 4096)
            fprintf(stderr, "\r%s: %" PRIu64 " scored\n", prog, oc.done);
        else if (oc.progress && oc.local >= 4096) /* over rank 0's longer line */
            fprintf(stderr, "\r\033[K%s: %" PRIu64 " scored by %d processes\n", prog, oc.done,
                    comm->size);
    }
    if (!rc && writer)
        rc = score_finish(a, &r, &oc, unknown, filtered, err);
    if (rc)
        sq_out_abort(&r.out);
    score_run_free(&r);
    return rc;
}

/* The job's ranks when a launcher started several processes: each reads
 * the model and the input itself and scores its shard. 0, or the exit
 * status (the same refusal on every rank). */
static int open_ranks(const score_args *a, sq_comm *comm, sq_err *e)
{
    char who[32];
    if (!sq_comm_launched(who, sizeof who))
        return 0;
    if (sq_comm_open(comm, e))
        return e->code;
    if (comm->size == 1) /* a job of one rank: the plain run */
        return 0;
    if (comm->kind != SQ_COMM_MPI)
        return sq_fail(e, SQ_EX_USAGE, "scoring across processes started with RANK/WORLD_SIZE "
                       "needs MPI: start them with mpirun or srun");
    if (a->amap)
        return sq_fail(e, SQ_EX_USAGE, "--attention-map draws one user's maps: run it in one "
                       "process, not under %s", who);
    if (a->shard)
        return sq_fail(e, SQ_EX_USAGE, "--shard %s and %s's %d processes do not go together: "
                       "under a launcher rank r scores shard r/%d itself (drop --shard, or run "
                       "the shards as separate processes)", a->shard, who, comm->size,
                       comm->size);
    if (!a->in_path || !strcmp(a->in_path, "-"))
        return sq_fail(e, SQ_EX_USAGE, "under %s every process reads the input itself: give "
                       "it as a FILE, not on standard input", who);
    const char *lists[3] = {a->users_path, a->excl_path, a->allow_path};
    for (int i = 0; i < 3; i++)
        if (lists[i] && (!strcmp(lists[i], "-") || !*lists[i]))
            return sq_fail(e, SQ_EX_USAGE, "under %s every process reads -m, --map, --users "
                           "and the item lists itself: give them as files, not standard "
                           "input", who);
    if (!strcmp(a->model_path, "-") || (a->map_path && !strcmp(a->map_path, "-")))
        return sq_fail(e, SQ_EX_USAGE, "under %s every process reads -m, --map, --users "
                       "and the item lists itself: give them as files, not standard input",
                       who);
    return 0;
}

/* A failure's message: the failing rank's own (named when not rank 0), or
 * rank 0's word that another rank failed */
static void report(const sq_comm *c, const sq_score_fail *f, sq_err *err)
{
    char who[64];
    if (f->remote && c->rank != 0)
        return;
    if (c->rank)
        snprintf(who, sizeof who, "%s (rank %d)", prog, c->rank);
    else
        snprintf(who, sizeof who, "%s", prog);
    sq_report(who, err);
}

int main(int argc, char **argv)
{
    sq_threads_passive(argv); /* threads.h: idle OpenMP threads sleep (2.4x faster, 2 cores) */
    score_args a = {0};
    sq_eval_defaults(&a.eo);
    a.precision = SQ_PREC_TF32;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? sq_cli_info_done(prog) : rc;
    sq_err err = {0};
    /* OpenMP and OpenBLAS: -j, or every CPU; the team starts before any output */
    if (sq_threads_start(a.eo.threads, 0, &err) < 0)
        return sq_report(prog, &err);
    if (a.amap && a.device && strcmp(a.device, "cpu") != 0)
        return sq_cli_usage_error(prog, "--attention-map runs on the CPU (no --device %s)",
                                  a.device);
    sq_ctx cx = sq_ctx_cpu();
    sq_comm comm = {.size = 1};
    /* a refusal is every rank's: rank 0 alone says it, no rank waits */
    sq_score_fail fail = {.agreed = 1, .remote = 1};
    /* ranks on GPUs take their node's GPU LOCAL_RANK unless --device names one */
    char dev[32];
    const char *device = a.device;
    if ((rc = open_ranks(&a, &comm, &err)) != 0) {
        report(&comm, &fail, &err);
    } else {
        if (comm.size > 1 && device && strcmp(device, "cuda") == 0) {
            snprintf(dev, sizeof dev, "cuda:%d", comm.local_rank);
            device = dev;
        }
        if ((rc = sq_device_open(&cx, device, a.precision, a.eo.threads, &err)) != 0) {
            fail.agreed = comm.size == 1; /* this rank's own failure */
            fail.remote = 0;
            report(&comm, &fail, &err);
        }
    }
    a.cx = &cx;
    if (!rc && a.amap)
        rc = run_attention_map(&a, &err);
    else if (!rc && (rc = run_score(&a, &comm, &fail, &err)) != 0)
        report(&comm, &fail, &err);
    if (rc && !fail.agreed)
        sq_comm_abort(&comm, rc); /* a rank may wait on this one: end them all */
    sq_comm_close(&comm);
    sq_device_close(&cx);
    return rc;
}
