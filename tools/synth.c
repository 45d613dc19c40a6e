/* seqrec-synth - seeded synthetic interaction logs with sequential structure.
 * Argument parsing only; the generator is lib/data/synth.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "fileio.h"
#include "synth.h"

static const char *prog = "seqrec-synth";

static const char usage[] =
    "Usage: seqrec-synth [OPTION]...\n"
    "Write a seeded synthetic interaction log with learnable sequential structure.\n"
    "\n"
    "  --users N          users 1..N (default 2000)\n"
    "  --items N          items 1..N (default 500)\n"
    "  --clusters N       latent interest clusters (default 20)\n"
    "  --user-clusters N  preferred clusters per user (default 3)\n"
    "  --min-len N        shortest sequence (default 5)\n"
    "  --mean-len X       mean sequence length before clipping (default 20)\n"
    "  --max-len N        longest sequence (default 200)\n"
    "  --zipf S           popularity exponent inside a cluster (default 1)\n"
    "  --p-next P         probability of the item's fixed successor (default 0.5)\n"
    "  --p-stay P         else, probability to stay in the cluster (default 0.7)\n"
    "  --seed N           random seed (default 42)\n"
    "  --format FMT       text (TSV user, item, rating, timestamp) or stream\n"
    "                     (a sequences stream with timestamps); default text\n"
    "  -o, --output FILE  write to FILE (atomically) instead of standard output\n"
    "  -h, --help         show this help and exit\n"
    "  -V, --version      show the version and exit\n";

enum { OPT_USERS = 256, OPT_ITEMS, OPT_CLUSTERS, OPT_USER_CLUSTERS, OPT_MIN_LEN,
       OPT_MEAN_LEN, OPT_MAX_LEN, OPT_ZIPF, OPT_P_NEXT, OPT_P_STAY, OPT_SEED,
       OPT_FORMAT };

/* The options into *o, *output and *stream; 0, or the exit status (-1:
 * --help or --version, 0). */
static int parse_args(int argc, char **argv, sq_synth_opts *o, const char **output, int *stream)
{
    static const struct option longopts[] = {
        {"users", required_argument, NULL, OPT_USERS},
        {"items", required_argument, NULL, OPT_ITEMS},
        {"clusters", required_argument, NULL, OPT_CLUSTERS},
        {"user-clusters", required_argument, NULL, OPT_USER_CLUSTERS},
        {"min-len", required_argument, NULL, OPT_MIN_LEN},
        {"mean-len", required_argument, NULL, OPT_MEAN_LEN},
        {"max-len", required_argument, NULL, OPT_MAX_LEN},
        {"zipf", required_argument, NULL, OPT_ZIPF},
        {"p-next", required_argument, NULL, OPT_P_NEXT},
        {"p-stay", required_argument, NULL, OPT_P_STAY},
        {"seed", required_argument, NULL, OPT_SEED},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0; /* we print our own messages */
    while ((c = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        uint64_t v = 0;
        double x = 0;
        int bad = 0;
        switch (c) {
        case OPT_USERS:
        case OPT_ITEMS:
        case OPT_CLUSTERS:
        case OPT_USER_CLUSTERS:
        case OPT_MIN_LEN:
        case OPT_MAX_LEN: bad = sq_cli_u64(optarg, 0, UINT32_MAX, &v); break;
        case OPT_SEED: bad = sq_cli_u64(optarg, 0, UINT64_MAX, &v); break;
        case OPT_MEAN_LEN:
        case OPT_ZIPF:
        case OPT_P_NEXT:
        case OPT_P_STAY: bad = sq_cli_real(optarg, &x); break;
        default: break;
        }
        if (bad)
            return sq_cli_usage_error(prog, "--%s: invalid number '%s'",
                                      sq_cli_opt_name(longopts, c), optarg);
        switch (c) {
        case OPT_USERS: o->users = (uint32_t)v; break;
        case OPT_ITEMS: o->items = (uint32_t)v; break;
        case OPT_CLUSTERS: o->clusters = (uint32_t)v; break;
        case OPT_USER_CLUSTERS: o->user_clusters = (uint32_t)v; break;
        case OPT_MIN_LEN: o->min_len = (uint32_t)v; break;
        case OPT_MAX_LEN: o->max_len = (uint32_t)v; break;
        case OPT_SEED: o->seed = v; break;
        case OPT_MEAN_LEN: o->mean_len = x; break;
        case OPT_ZIPF: o->zipf = x; break;
        case OPT_P_NEXT: o->p_next = x; break;
        case OPT_P_STAY: o->p_stay = x; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "text") == 0)
                *stream = 0;
            else if (strcmp(optarg, "stream") == 0)
                *stream = 1;
            else
                return sq_cli_usage_error(prog, "--format: expected text or stream, got '%s'",
                                          optarg);
            break;
        case 'o': *output = optarg; break;
        case 'h': fputs(usage, stdout); return -1;
        case 'V': sq_cli_version(prog); return -1;
        case ':': return sq_cli_usage_error(prog, "%s: missing argument", argv[optind - 1]);
        default: return sq_cli_usage_error(prog, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return sq_cli_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    return 0;
}

static int write_text(void *s, FILE *f, const char *name, sq_err *e)
{
    return sq_synth_write_text(s, f, name, e);
}

static int write_stream(void *s, FILE *f, const char *name, sq_err *e)
{
    return sq_synth_write_stream(s, f, name, e);
}

int main(int argc, char **argv)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    const char *output = NULL;
    int stream = 0;
    int rc = parse_args(argc, argv, &o, &output, &stream);
    if (rc)
        return rc < 0 ? sq_cli_info_done(prog) : rc;
    sq_err err = {0};
    sq_synth s;
    if (sq_synth_init(&s, &o, &err)) {
        if (err.code == SQ_EX_USAGE)
            return sq_cli_usage_error(prog, "%s", err.msg);
        return sq_report(prog, &err);
    }
    rc = sq_out_write(output, stream, stream ? write_stream : write_text, &s, &err);
    sq_synth_free(&s);
    return rc ? sq_report(prog, &err) : 0;
}
