/* seqrec-metrics - HR, Recall, NDCG, MRR, MAP and Precision at K from
 * ranks, coverage, Gini and popularity bias of recommended lists, and the
 * paired comparison of two rank files. Argument parsing and wiring only:
 * the metrics are lib/train/metrics.c, the list measures exposure.c, the
 * comparison compare.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compare.h"
#include "dataset.h"
#include "err.h"
#include "exposure.h"
#include "fileio.h"
#include "metrics.h"

static const char *prog = "seqrec-metrics";

static const char usage[] =
    "Usage: seqrec-metrics [OPTION]... [FILE]\n"
    "Print ranking metrics of the rank records in FILE (a ranks stream or the\n"
    "text form \"user TAB rank TAB n_cand [TAB item]\"; standard input without FILE\n"
    "or when FILE is -).\n"
    "\n"
    "  -k, --cutoffs LIST  cutoffs K, comma-separated (default 10,20)\n"
    "      --per-user      average each metric per user (each user's records\n"
    "                      first), not per record\n"
    "      --corrected C   correct the metrics of sampled candidates (Krichene and\n"
    "                      Rendle): rank (each metric at the full rank's estimate\n"
    "                      1 + (r-1)(N-1)/(n_cand-1)) or bv[:GAMMA] (their\n"
    "                      bias-variance estimator, GAMMA 0.1); N from --items,\n"
    "                      --popularity or the stream\n"
    "      --topk TOP      also Coverage@K and Gini@K (and PopBias@K with\n"
    "                      --popularity) of the top-K lists in TOP (a topk stream\n"
    "                      or seqrec-score's tsv with dense ids); without FILE\n"
    "                      only these\n"
    "      --coverage      Coverage@K and Gini@K of the ranks' targets within K\n"
    "                      (the records must carry the item)\n"
    "      --popularity S  PopBias@K: the mean popularity percentile of the\n"
    "                      recommended items, popularity the training parts of\n"
    "                      the split or sequences stream S (implies --coverage\n"
    "                      without --topk)\n"
    "      --items N       the catalogue's size (items 1..N) where no stream says it\n"
    "      --compare A     compare the ranks in A with those in FILE (B) over the\n"
    "                      same records: for each metric the means, B - A, the\n"
    "                      paired t-test and Wilcoxon signed-rank p-values and a\n"
    "                      bootstrap 95% interval of B - A\n"
    "      --bootstrap N   resamples of the interval (default 1000)\n"
    "      --seed S        seed of the resamples (default 1)\n"
    "      --json          print one JSON object instead of the table\n"
    "  -o, --output FILE   write to FILE (atomically) instead of standard output\n"
    "  -h, --help          show this help and exit\n"
    "  -V, --version       show the version and exit\n";

enum { OPT_JSON = 256, OPT_PER_USER, OPT_CORRECTED, OPT_TOPK, OPT_COVERAGE, OPT_POP,
       OPT_ITEMS, OPT_COMPARE, OPT_BOOT, OPT_SEED };

typedef struct {
    uint32_t k[SQ_METRICS_MAX_K];
    int n_k, json, coverage;
    sq_metrics_opts mo;
    const char *output, *input, *topk, *popularity, *compare;
    uint32_t items; /* --items, 0 none */
    uint32_t boot;  /* --bootstrap */
    uint64_t seed;  /* --seed */
    int boot_given;
} args;

static int write_table(void *r, FILE *f, const char *name, sq_err *e)
{
    return sq_metrics_write_table(r, f, name, e);
}

static int write_json(void *r, FILE *f, const char *name, sq_err *e)
{
    return sq_metrics_write_json(r, f, name, e);
}

static int write_cmp_table(void *c, FILE *f, const char *name, sq_err *e)
{
    return sq_compare_write_table(c, f, name, e);
}

static int write_cmp_json(void *c, FILE *f, const char *name, sq_err *e)
{
    return sq_compare_write_json(c, f, name, e);
}

/* The options into *a: 0, -1 (--help, --version done) or the exit status. */
static int parse_args(int argc, char **argv, args *a)
{
    static const struct option longopts[] = {
        {"cutoffs", required_argument, NULL, 'k'},
        {"per-user", no_argument, NULL, OPT_PER_USER},
        {"corrected", required_argument, NULL, OPT_CORRECTED},
        {"topk", required_argument, NULL, OPT_TOPK},
        {"coverage", no_argument, NULL, OPT_COVERAGE},
        {"popularity", required_argument, NULL, OPT_POP},
        {"items", required_argument, NULL, OPT_ITEMS},
        {"compare", required_argument, NULL, OPT_COMPARE},
        {"bootstrap", required_argument, NULL, OPT_BOOT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"json", no_argument, NULL, OPT_JSON},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    sq_err err = {0};
    int c;
    opterr = 0; /* we print our own messages */
    while ((c = getopt_long(argc, argv, ":k:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (sq_metrics_parse_k(optarg, a->k, &a->n_k, &err))
                return sq_cli_usage_error(prog, "%s", err.msg);
            break;
        case OPT_PER_USER: a->mo.per_user = 1; break;
        case OPT_CORRECTED:
            if (sq_metrics_parse_corrected(optarg, &a->mo, &err))
                return sq_cli_usage_error(prog, "%s", err.msg);
            break;
        case OPT_TOPK: a->topk = optarg; break;
        case OPT_COVERAGE: a->coverage = 1; break;
        case OPT_POP: a->popularity = optarg; break;
        case OPT_ITEMS:
            if (sq_cli_u32(optarg, 1, UINT32_MAX, &a->items))
                return sq_cli_usage_error(prog, "--items: expected a positive integer, got '%s'",
                                          optarg);
            break;
        case OPT_COMPARE: a->compare = optarg; break;
        case OPT_BOOT:
            if (sq_cli_u32(optarg, 1, 1000000, &a->boot))
                return sq_cli_usage_error(prog, "--bootstrap: expected an integer in "
                                          "1..1000000, got '%s'", optarg);
            a->boot_given = 1;
            break;
        case OPT_SEED:
            if (sq_cli_u64(optarg, 0, UINT64_MAX, &a->seed))
                return sq_cli_usage_error(prog, "--seed: expected a non-negative integer, "
                                          "got '%s'", optarg);
            a->boot_given = 1;
            break;
        case OPT_JSON: a->json = 1; break;
        case 'o': a->output = optarg; break;
        case 'h': fputs(usage, stdout); return -1;
        case 'V': sq_cli_version(prog); return -1;
        case ':': return sq_cli_usage_error(prog, "missing argument to %s", argv[optind - 1]);
        default: return sq_cli_usage_error(prog, "unknown option %s", argv[optind - 1]);
        }
    }
    if (argc - optind > 1)
        return sq_cli_usage_error(prog, "at most one input file, got another: %s",
                                  argv[optind + 1]);
    a->input = optind < argc ? argv[optind] : NULL;
    if (a->compare && (a->topk || a->coverage || a->popularity))
        return sq_cli_usage_error(prog, "--compare compares ranks: not with --topk, --coverage "
                                  "or --popularity");
    if (a->compare && !a->input)
        return sq_cli_usage_error(prog, "--compare A needs the second rank file B: "
                                  "seqrec-metrics --compare A B");
    if (a->compare && !strcmp(a->compare, "-") && !strcmp(a->input, "-"))
        return sq_cli_usage_error(prog, "--compare: A and B cannot both be standard input");
    if (a->boot_given && !a->compare)
        return sq_cli_usage_error(prog, "--bootstrap and --seed apply to --compare");
    if (a->topk && a->coverage)
        return sq_cli_usage_error(prog, "--coverage measures the ranks' targets, --topk the "
                                  "lists: give one");
    if (a->topk && !a->input && a->mo.corrected)
        return sq_cli_usage_error(prog, "--corrected applies to ranks: give the ranks FILE "
                                  "with --topk");
    if (a->topk && !strcmp(a->topk, "-") && (!a->input || !strcmp(a->input, "-")))
        return sq_cli_usage_error(prog, "--topk - and the ranks cannot both be standard input");
    return 0;
}

/* What a run holds */
typedef struct {
    sq_metrics m;
    sq_exposure x;
    sq_dataset pop;
    double *pct;
    sq_metrics_report rep;
} run_t;

/* --popularity: the training counts of the stream, as percentiles. */
static int load_popularity(const args *a, run_t *r, sq_err *e)
{
    FILE *f = NULL;
    int rc = sq_in_open(&f, a->popularity, e);
    if (!rc)
        rc = sq_dataset_read_as(&r->pop, f, sq_in_name(a->popularity),
                                SQ_KIND_BIT(SQ_SEQUENCES) | SQ_KIND_BIT(SQ_SPLIT) |
                                    SQ_KIND_BIT(SQ_PADDED), e);
    sq_in_close(f);
    if (rc)
        return rc;
    uint32_t n = r->pop.hdr.n_items;
    if (a->items && a->items != n)
        return sq_fail(e, SQ_EX_USAGE, "--items %u but %s has %u items", a->items,
                       sq_in_name(a->popularity), n);
    if (!(r->pct = malloc(((size_t)n + 1) * sizeof *r->pct)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", n);
    return sq_popularity_pct(r->pop.pop, n, r->pct, e);
}

/* The list measures of the ranks' targets (--coverage, --popularity). */
static int ranks_exposure(const args *a, run_t *r, uint32_t n_items, sq_err *e)
{
    if (!n_items)
        return sq_fail(e, SQ_EX_USAGE, "%s: the catalogue's size is unknown: give --items N "
                       "or --popularity FILE", sq_in_name(a->input));
    if (sq_exposure_init(&r->x, a->k, a->n_k, n_items, r->pct, e))
        return e->code;
    for (uint64_t i = 0; i < r->m.records; i++) {
        const sq_rank_rec *q = &r->m.rec[i];
        sq_err tmp = {0};
        if (!q->item)
            return sq_fail(e, SQ_EX_DATA, "%s: record %llu has no item: --coverage and "
                           "--popularity need the fourth field", sq_in_name(a->input),
                           (unsigned long long)i + 1);
        if (sq_exposure_add(&r->x, q->user, &q->item, 1, q->rank, &tmp))
            return sq_fail(e, tmp.code, "%s: record %llu: %s", sq_in_name(a->input),
                           (unsigned long long)i + 1, tmp.msg);
    }
    return SQ_OK;
}

/* Reads the ranks of path into m (the cutoffs of a). */
static int read_ranks(const args *a, const char *path, sq_metrics *m, sq_err *e)
{
    FILE *in = NULL;
    if (sq_metrics_init(m, a->k, a->n_k, e) || sq_in_open(&in, path, e))
        return e->code;
    int rc = sq_metrics_read(m, in, sq_in_name(path), e);
    sq_in_close(in);
    return rc;
}

/* --compare A B */
static int run_compare(const args *a, sq_err *e)
{
    sq_metrics ma, mb;
    memset(&ma, 0, sizeof ma);
    memset(&mb, 0, sizeof mb);
    sq_compare *c = malloc(sizeof *c);
    int rc = c ? SQ_OK : sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (!rc)
        rc = read_ranks(a, a->compare, &ma, e);
    if (!rc)
        rc = read_ranks(a, a->input, &mb, e);
    sq_metrics_opts mo = a->mo;
    mo.n_items = a->items ? a->items : ma.n_items ? ma.n_items : mb.n_items;
    if (!rc && mo.corrected && !mo.n_items)
        rc = sq_fail(e, SQ_EX_USAGE, "--corrected needs the catalogue's size: give --items N "
                     "(a text ranks file does not say it)");
    if (!rc)
        rc = sq_compare_run(&ma, sq_in_name(a->compare), &mb, sq_in_name(a->input), &mo,
                            a->boot, a->seed, c, e);
    if (!rc)
        rc = sq_out_write(a->output, 0, a->json ? write_cmp_json : write_cmp_table, c, e);
    sq_metrics_free(&ma);
    sq_metrics_free(&mb);
    free(c);
    return rc;
}

static int run(const args *a, run_t *r, sq_err *e)
{
    if (a->compare)
        return run_compare(a, e);
    uint32_t n_items = a->items;
    if (a->popularity && load_popularity(a, r, e))
        return e->code;
    if (a->popularity)
        n_items = r->pop.hdr.n_items;
    int ranks = a->input || !a->topk;
    if (ranks) {
        FILE *in = NULL;
        if (sq_metrics_init(&r->m, a->k, a->n_k, e) || sq_in_open(&in, a->input, e))
            return e->code;
        int rc = sq_metrics_read(&r->m, in, sq_in_name(a->input), e);
        sq_in_close(in);
        if (rc)
            return rc;
        sq_metrics_opts mo = a->mo;
        mo.n_items = n_items ? n_items : r->m.n_items;
        if (mo.corrected && !mo.n_items)
            return sq_fail(e, SQ_EX_USAGE, "--corrected needs the catalogue's size: give "
                           "--items N or --popularity FILE (a text ranks file does not say it)");
        if (sq_metrics_report_make(&r->m, &mo, &r->rep, e))
            return e->code;
    } else {
        r->rep.n_k = a->n_k;
        memcpy(r->rep.k, a->k, sizeof r->rep.k);
    }
    if (a->topk) {
        FILE *in = NULL;
        if (sq_exposure_init(&r->x, a->k, a->n_k, n_items, r->pct, e) ||
            sq_in_open(&in, a->topk, e))
            return e->code;
        int rc = sq_exposure_read_topk(&r->x, in, sq_in_name(a->topk), e);
        sq_in_close(in);
        if (rc)
            return rc;
    } else if ((a->coverage || a->popularity) &&
               ranks_exposure(a, r, n_items ? n_items : r->m.n_items, e)) {
        return e->code;
    }
    if ((a->topk || a->coverage || a->popularity) &&
        sq_exposure_report(&r->x, a->mo.per_user, &r->rep, e))
        return e->code;
    return sq_out_write(a->output, 0, a->json ? write_json : write_table, &r->rep, e);
}

int main(int argc, char **argv)
{
    args a = {.k = {10, 20}, .n_k = 2, .boot = 1000, .seed = 1};
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? sq_cli_info_done(prog) : rc;
    run_t r;
    memset(&r, 0, sizeof r);
    sq_err err = {0};
    rc = run(&a, &r, &err);
    sq_metrics_free(&r.m);
    sq_exposure_free(&r.x);
    sq_dataset_free(&r.pop);
    free(r.pct);
    return rc ? sq_report(prog, &err) : 0;
}
