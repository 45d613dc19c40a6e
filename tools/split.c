/* seqrec-split - add train / validation / test cut points to a sequences
 * stream (see seqrec-split(1)). Argument parsing and wiring only: the cut
 * points come from lib/split.c. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fileio.h"
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
        "      --drop-short     drop short users instead of keeping them\n"
        "  -o, --output FILE    write to FILE (atomically) instead of stdout\n"
        "  -v, --verbose        name every short user on stderr\n"
        "  -h, --help           show this help and exit\n"
        "  -V, --version        show the version and exit\n"
        "\n"
        "Short users: fewer than 3 items (leave-one-out), no held-out item\n"
        "(ratio), no item before T (time). They are counted on stderr and kept,\n"
        "for training only (under --time: without history), unless --drop-short.\n"
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

int main(int argc, char **argv)
{
    enum { OPT_DROP_SHORT = 256 };
    static const struct option longopts[] = {
        {"leave-one-out", no_argument, NULL, 'l'},
        {"ratio", required_argument, NULL, 'r'},
        {"time", required_argument, NULL, 't'},
        {"drop-short", no_argument, NULL, OPT_DROP_SHORT},
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    sq_split_opts opts = {.mode = SQ_SPLIT_LOO};
    const char *out_path = NULL, *mode_arg = NULL;
    int drop_short = 0, verbose = 0, modes = 0, c;
    sq_err err = {0};

    while ((c = getopt_long(argc, argv, "lr:t:o:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            opts.mode = SQ_SPLIT_LOO;
            modes |= 1 << opts.mode;
            break;
        case 'r':
            if (sq_split_parse_ratio(&opts, optarg, &err))
                return sq_report(prog, &err);
            mode_arg = optarg;
            modes |= 1 << opts.mode;
            break;
        case 't':
            if (sq_split_parse_time(&opts, optarg, &err))
                return sq_report(prog, &err);
            mode_arg = optarg;
            modes |= 1 << opts.mode;
            break;
        case OPT_DROP_SHORT: drop_short = 1; break;
        case 'o': out_path = optarg; break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s (seqrec) %s\n", prog, SEQREC_VERSION); return 0;
        default:
            fprintf(stderr, "Try '%s --help' for more information.\n", prog);
            return SQ_EX_USAGE;
        }
    }
    if (modes & (modes - 1)) { /* more than one bit */
        fprintf(stderr, "%s: choose one of --leave-one-out, --ratio and --time\n", prog);
        return SQ_EX_USAGE;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "%s: at most one input FILE\n", prog);
        return SQ_EX_USAGE;
    }
    const char *in_path = optind < argc ? argv[optind] : NULL;
    const char *in_name = sq_in_name(in_path), *out_name = sq_out_name(out_path);

    FILE *in = NULL;
    sq_reader rd = {0};
    sq_writer wr = {0};
    sq_outfile out = {0};
    sq_header hdr = {0};
    sq_record rec;
    uint64_t n_users = 0, n_short = 0, n_dropped = 0;

    if (sq_in_open(&in, in_path, &err) || sq_reader_open(&rd, in, in_name, &err))
        goto fail;
    if (rd.hdr.kind != SQ_SEQUENCES) {
        sq_fail(&err, SQ_EX_DATA, "%s: expected a sequences stream, got %s", in_name,
                sq_kind_name(rd.hdr.kind));
        goto fail;
    }
    if (opts.mode == SQ_SPLIT_TIME && !(rd.hdr.flags & SQ_FLAG_TS)) {
        sq_fail(&err, SQ_EX_DATA, "%s: --time needs timestamps, but this stream has none "
                "(preprocess a source that has them)", in_name);
        goto fail;
    }
    if (sq_header_copy(&hdr, &rd.hdr, &err))
        goto fail;
    hdr.kind = SQ_SPLIT;
    if (sq_meta_add(&hdr, &err, "split.mode", "%s", sq_split_mode_name(opts.mode)) ||
        (mode_arg && opts.mode == SQ_SPLIT_RATIO &&
         sq_meta_add(&hdr, &err, "split.ratio", "%s", mode_arg)) ||
        (mode_arg && opts.mode == SQ_SPLIT_TIME &&
         sq_meta_add(&hdr, &err, "split.time", "%s", mode_arg)) ||
        sq_meta_add(&hdr, &err, "split.short", "%s", drop_short ? "drop" : "train"))
        goto fail;
    if (sq_out_open(&out, out_path, 1, &err) ||
        sq_writer_open(&wr, out.fp, out_name, &hdr, &err))
        goto fail;

    int got;
    while ((got = sq_reader_next(&rd, &rec, &err)) == 1) {
        sq_cut cut;
        if (sq_split_record(&opts, &rec, in_name, &cut, &err))
            goto fail;
        n_users++;
        if (cut.is_short) {
            n_short++;
            if (verbose)
                fprintf(stderr, "%s: user %" PRIu32 ": %" PRIu32 " items, %s: %s\n", prog,
                        rec.user, rec.len, short_reason(&opts),
                        short_action(&opts, drop_short));
            if (drop_short) {
                n_dropped++;
                continue;
            }
        }
        rec.n_train = cut.n_train;
        rec.n_valid = cut.n_valid;
        if (sq_write(&wr, &rec, &err))
            goto fail;
    }
    if (got < 0 || sq_writer_finish(&wr, &err) || sq_out_commit(&out, &err))
        goto fail;
    if (n_short)
        fprintf(stderr, "%s: %" PRIu64 " of %" PRIu64 " users short (%s): %s\n", prog,
                n_short, n_users, short_reason(&opts), short_action(&opts, drop_short));
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_reader_free(&rd);
    sq_in_close(in);
    return 0;

fail:
    sq_report(prog, &err);
    sq_out_abort(&out);
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_reader_free(&rd);
    sq_in_close(in);
    return err.code;
}
