/* seqrec-metrics - HR, Recall, NDCG, MRR and Precision at K from ranks.
 * Argument parsing only; the metrics are lib/train/metrics.c. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "err.h"
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
    "      --json          print one JSON object instead of the table\n"
    "  -o, --output FILE   write to FILE (atomically) instead of standard output\n"
    "  -h, --help          show this help and exit\n"
    "  -V, --version       show the version and exit\n";

enum { OPT_JSON = 256 };

static int write_table(void *m, FILE *f, const char *name, sq_err *e)
{
    return sq_metrics_write_table(m, f, name, e);
}

static int write_json(void *m, FILE *f, const char *name, sq_err *e)
{
    return sq_metrics_write_json(m, f, name, e);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"cutoffs", required_argument, NULL, 'k'},
        {"json", no_argument, NULL, OPT_JSON},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    uint32_t k[SQ_METRICS_MAX_K] = {10, 20};
    int n_k = 2;
    int json = 0;
    const char *output = NULL;
    sq_err err = {0};
    int c;
    opterr = 0; /* we print our own messages */
    while ((c = getopt_long(argc, argv, ":k:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (sq_metrics_parse_k(optarg, k, &n_k, &err))
                return sq_cli_usage_error(prog, "%s", err.msg);
            break;
        case OPT_JSON: json = 1; break;
        case 'o': output = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': sq_cli_version(prog); return 0;
        case ':': return sq_cli_usage_error(prog, "missing argument to %s", argv[optind - 1]);
        default: return sq_cli_usage_error(prog, "unknown option %s", argv[optind - 1]);
        }
    }
    if (argc - optind > 1)
        return sq_cli_usage_error(prog, "at most one input file, got another: %s",
                                  argv[optind + 1]);
    const char *input = optind < argc ? argv[optind] : NULL;

    sq_metrics m;
    if (sq_metrics_init(&m, k, n_k, &err))
        return sq_report(prog, &err);
    FILE *in = NULL;
    if (sq_in_open(&in, input, &err)) {
        sq_metrics_free(&m);
        return sq_report(prog, &err);
    }
    int rc = sq_metrics_read(&m, in, sq_in_name(input), &err);
    sq_in_close(in);
    if (rc == SQ_OK)
        rc = sq_out_write(output, 0, json ? write_json : write_table, &m, &err);
    sq_metrics_free(&m);
    return rc ? sq_report(prog, &err) : 0;
}
