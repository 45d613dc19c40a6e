/* seqrec-split - add train / validation / test cut points to a sequences
 * stream (see seqrec-split(1)). Argument parsing and wiring only: the cut
 * points come from lib/data/split.c. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "fileio.h"
#include "filter.h"
#include "split.h"
#include "stream.h"

static const char *prog = "seqrec-split";

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: seqrec-split [OPTION]... [FILE]\n"
        "Cut each user's sequence of a sequences stream (FILE or standard input)\n"
        "into train, validation and test, and write a split stream.\n"
        "\n"
        "  -l, --leave-one-out  last item test, second-to-last validation, the\n"
        "                       rest train (the default)\n"
        "  -r, --ratio R        per user, in order: TRAIN,VALID,TEST or TRAIN,TEST\n"
        "                       fractions summing to 1 (e.g. 0.8,0.1,0.1), rounded\n"
        "                       as RecBole does\n"
        "  -t, --time T[,T2]    global temporal cut (needs timestamps): ts < T\n"
        "                       train, T <= ts < T2 validation, the rest test\n"
        "      --holdout-users F\n"
        "                       a fraction F (0 < F < 1) of the users, chosen by a\n"
        "                       hash of the user id, keep their last item as the\n"
        "                       validation target; every other user trains on its\n"
        "                       whole sequence; no test targets (fine-tuning)\n"
        "      --seed S         the seed of --holdout-users' hash (default 0)\n"
        "      --drop-short     drop short users instead of keeping them\n"
        "  -o, --output FILE    write to FILE (atomically) instead of stdout\n"
        "  -v, --verbose        name every short user on stderr\n"
        "  -h, --help           show this help and exit\n"
        "  -V, --version        show the version and exit\n"
        "\n"
        "Short users: fewer than 3 items (leave-one-out), no held-out item\n"
        "(ratio), no item before T (time), a held-out user with a single item\n"
        "(holdout-users). They are counted on stderr and kept, for training only\n"
        "(under --time: without history), unless --drop-short.\n"
        "Exit status: 0 ok, 64 usage, 65 bad data, 66 missing input,\n"
        "73 cannot create output, 74 I/O error.\n");
}

/* What a short user is, for the stderr report. */
static const char *short_reason(const sq_split_opts *o)
{
    switch (o->mode) {
    case SQ_SPLIT_LOO: return "fewer than 3 items for leave-one-out";
    case SQ_SPLIT_RATIO: return "too few items for a held-out part";
    case SQ_SPLIT_TIME: return "no item before the cut";
    case SQ_SPLIT_HOLDOUT: return "a held-out user with a single item";
    }
    return "";
}

/* What happens to a short user. A time-short user keeps its cut (every item
 * held out, no history): moving post-cut items into training would leak the
 * test period into the model. */
static const char *short_action(const sq_split_opts *o, int drop)
{
    if (drop)
        return "dropped";
    return o->mode == SQ_SPLIT_TIME ? "kept without history" : "kept for training only";
}

typedef struct {
    sq_split_opts opts;
    int drop_short, verbose, seed_given;
    const char *in_path, *out_path;
} split_args;

/* The options into *a; 0, or the exit status (-1: --help or --version, 0). */
static int parse_args(int argc, char **argv, split_args *a)
{
    enum { OPT_DROP_SHORT = 256, OPT_HOLDOUT, OPT_SEED };
    static const struct option longopts[] = {
        {"leave-one-out", no_argument, NULL, 'l'},
        {"ratio", required_argument, NULL, 'r'},
        {"time", required_argument, NULL, 't'},
        {"holdout-users", required_argument, NULL, OPT_HOLDOUT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"drop-short", no_argument, NULL, OPT_DROP_SHORT},
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    sq_err err = {0};
    int modes = 0, c;
    while ((c = getopt_long(argc, argv, "lr:t:o:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': a->opts.mode = SQ_SPLIT_LOO; break;
        case 'r':
        case 't':
        case OPT_HOLDOUT:
            if ((c == 'r'   ? sq_split_parse_ratio
                 : c == 't' ? sq_split_parse_time
                            : sq_split_parse_holdout)(&a->opts, optarg, &err))
                return sq_report(prog, &err);
            break;
        case OPT_SEED:
            if (sq_split_parse_seed(&a->opts, optarg, &err))
                return sq_report(prog, &err);
            a->seed_given = 1;
            break;
        case OPT_DROP_SHORT: a->drop_short = 1; break;
        case 'o': a->out_path = optarg; break;
        case 'v': a->verbose = 1; break;
        case 'h': usage(stdout); return -1;
        case 'V': sq_cli_version(prog); return -1;
        default: return sq_cli_try_help(prog);
        }
        if (c == 'l' || c == 'r' || c == 't' || c == OPT_HOLDOUT)
            modes |= 1 << a->opts.mode;
    }
    if (modes & (modes - 1)) /* more than one bit */
        return sq_cli_usage_error(prog, "choose one of --leave-one-out, --ratio, --time and "
                                  "--holdout-users");
    if (a->seed_given && a->opts.mode != SQ_SPLIT_HOLDOUT)
        return sq_cli_usage_error(prog, "--seed needs --holdout-users");
    if (argc - optind > 1)
        return sq_cli_usage_error(prog, "at most one input FILE");
    a->in_path = optind < argc ? argv[optind] : NULL;
    return 0;
}

/* The output header: the input's, as a split stream, and how it was cut. */
static int split_header(sq_filter *f, const split_args *a, sq_err *e)
{
    const sq_split_opts *o = &a->opts;
    if (sq_expect_kind(&f->rd.hdr, f->in_name, SQ_KIND_BIT(SQ_SEQUENCES), NULL, e))
        return e->code;
    if (o->mode == SQ_SPLIT_TIME && !(f->rd.hdr.flags & SQ_FLAG_TS))
        return sq_fail(e, SQ_EX_DATA, "%s: --time needs timestamps, but this stream has none "
                       "(preprocess a source that has them)", f->in_name);
    f->hdr.kind = SQ_SPLIT;
    return sq_split_meta(&f->hdr, o, a->drop_short, e);
}

/* Cuts every record; counts the users and the short ones. */
static int split_records(sq_filter *f, const split_args *a, uint64_t *n_users,
                         uint64_t *n_short, sq_err *e)
{
    const sq_split_opts *o = &a->opts;
    sq_record rec;
    int got;
    while ((got = sq_reader_next(&f->rd, &rec, e)) == 1) {
        sq_cut cut;
        if (sq_split_record(o, &rec, f->in_name, &cut, e))
            return e->code;
        ++*n_users;
        if (cut.is_short) {
            ++*n_short;
            if (a->verbose)
                fprintf(stderr, "%s: user %" PRIu32 ": %" PRIu32 " items, %s: %s\n", prog,
                        rec.user, rec.len, short_reason(o), short_action(o, a->drop_short));
            if (a->drop_short)
                continue;
        }
        rec.n_train = cut.n_train;
        rec.n_valid = cut.n_valid;
        if (sq_write(&f->wr, &rec, e))
            return e->code;
    }
    return got < 0 ? e->code : 0;
}

int main(int argc, char **argv)
{
    split_args a = {.opts = {.mode = SQ_SPLIT_LOO}};
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? sq_cli_info_done(prog) : rc;
    sq_err err = {0};
    sq_filter f = {0};
    uint64_t n_users = 0, n_short = 0;
    /* An output that cannot be written (a directory, ...) fails now, not
     * after the input has been read. */
    if (sq_out_check(a.out_path, &err))
        return sq_report(prog, &err);
    if (sq_filter_open(&f, a.in_path, a.out_path, &err) || split_header(&f, &a, &err) ||
        sq_filter_start(&f, &err) || split_records(&f, &a, &n_users, &n_short, &err) ||
        sq_filter_finish(&f, &err))
        sq_report(prog, &err);
    else if (n_short)
        fprintf(stderr, "%s: %" PRIu64 " of %" PRIu64 " users short (%s): %s\n", prog, n_short,
                n_users, short_reason(&a.opts), short_action(&a.opts, a.drop_short));
    sq_filter_close(&f);
    return err.code;
}
