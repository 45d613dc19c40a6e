/* seqrec-pad - turn each user's training sequence into fixed-length rows
 * (see seqrec-pad(1)). Argument parsing and wiring only: the rows come from
 * lib/pad.c, which the training engine uses too. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fileio.h"
#include "pad.h"
#include "rng.h"
#include "stream.h"

static const char *prog = "seqrec-pad";

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: seqrec-pad --len N [OPTION]... [FILE]\n"
        "Pad the training part of every user of a split stream (or of a\n"
        "sequences stream, all of it training) into rows of exactly N items\n"
        "and write a padded stream; held-out targets follow the row unchanged.\n"
        "\n"
        "  -n, --len N          row length (required, N >= 1); longer sequences\n"
        "                       keep their newest N items\n"
        "  -m, --mode MODE      zero (default): zeros on the left, or\n"
        "                       randompad: Blin's random repeat padding,\n"
        "                       [0..0 S 0 S ... 0 S] with 1..floor((N-|S|)/(|S|+1))\n"
        "                       repeats drawn per row, none when 2|S| >= N\n"
        "      --right          zero mode: pad on the right instead\n"
        "  -k, --copies K       write K independently drawn views per user\n"
        "                       (default 1)\n"
        "  -s, --seed S         random seed (default 1); a row depends only on\n"
        "                       (S, user, view)\n"
        "  -o, --output FILE    write to FILE (atomically) instead of stdout\n"
        "  -h, --help           show this help and exit\n"
        "  -V, --version        show the version and exit\n"
        "\n"
        "Exit status: 0 ok, 64 usage, 65 bad data, 66 missing input,\n"
        "73 cannot create output, 74 I/O error.\n");
}

/* Whole-string unsigned decimal in [lo, hi]; no sign, no spaces. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
    if (!isdigit((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*end || errno || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_RIGHT = 256 };
    static const struct option longopts[] = {
        {"len", required_argument, NULL, 'n'},
        {"mode", required_argument, NULL, 'm'},
        {"right", no_argument, NULL, OPT_RIGHT},
        {"copies", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 's'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    uint64_t len = 0, copies = 1, seed = 1;
    int mode = SQ_PAD_ZERO_LEFT, right = 0, c;
    const char *out_path = NULL;
    sq_err err = {0};

    while ((c = getopt_long(argc, argv, "n:m:k:s:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_u64(optarg, 1, SQ_MAX_RECORD_ITEMS, &len)) {
                fprintf(stderr, "%s: --len '%s': expected an integer in 1..%u\n", prog,
                        optarg, SQ_MAX_RECORD_ITEMS);
                return SQ_EX_USAGE;
            }
            break;
        case 'm':
            mode = sq_pad_mode_parse(optarg);
            if (mode < 0) {
                fprintf(stderr, "%s: --mode '%s': expected zero or randompad\n", prog, optarg);
                return SQ_EX_USAGE;
            }
            break;
        case OPT_RIGHT: right = 1; break;
        case 'k':
            if (parse_u64(optarg, 1, UINT32_MAX, &copies)) {
                fprintf(stderr, "%s: --copies '%s': expected an integer in 1..%u\n", prog,
                        optarg, UINT32_MAX);
                return SQ_EX_USAGE;
            }
            break;
        case 's':
            if (parse_u64(optarg, 0, UINT64_MAX, &seed)) {
                fprintf(stderr, "%s: --seed '%s': expected a non-negative integer\n", prog,
                        optarg);
                return SQ_EX_USAGE;
            }
            break;
        case 'o': out_path = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s (seqrec) %s\n", prog, SEQREC_VERSION); return 0;
        default:
            fprintf(stderr, "Try '%s --help' for more information.\n", prog);
            return SQ_EX_USAGE;
        }
    }
    if (len == 0) {
        fprintf(stderr, "%s: --len N is required\n", prog);
        return SQ_EX_USAGE;
    }
    if (right && mode == SQ_PAD_RANDOM) {
        /* RandomPad's original sequence must end at the last position. */
        fprintf(stderr, "%s: --right applies to --mode zero only\n", prog);
        return SQ_EX_USAGE;
    }
    if (right)
        mode = SQ_PAD_ZERO_RIGHT;
    if (argc - optind > 1) {
        fprintf(stderr, "%s: at most one input FILE\n", prog);
        return SQ_EX_USAGE;
    }
    const char *in_path = optind < argc ? argv[optind] : NULL;
    const char *in_name = sq_in_name(in_path), *out_name = sq_out_name(out_path);
    uint32_t n = (uint32_t)len;

    FILE *in = NULL;
    sq_reader rd = {0};
    sq_writer wr = {0};
    sq_outfile out = {0};
    sq_header hdr = {0};
    sq_record rec;
    uint32_t *row = NULL; /* the padded row, then the held-out targets */
    size_t row_cap = 0;

    if (sq_in_open(&in, in_path, &err) || sq_reader_open(&rd, in, in_name, &err))
        goto fail;
    if (rd.hdr.kind != SQ_SPLIT && rd.hdr.kind != SQ_SEQUENCES) {
        sq_fail(&err, SQ_EX_DATA, "%s: expected a split or sequences stream, got %s",
                in_name, sq_kind_name(rd.hdr.kind));
        goto fail;
    }
    if (sq_header_copy(&hdr, &rd.hdr, &err))
        goto fail;
    hdr.kind = SQ_PADDED;
    hdr.max_len = n;
    hdr.flags &= ~(uint32_t)SQ_FLAG_TS; /* rows have padding: no timestamps */
    if (sq_meta_add(&hdr, &err, "pad.len", "%u", n) ||
        sq_meta_add(&hdr, &err, "pad.mode", "%s", sq_pad_policy_name((enum sq_pad_policy)mode)) ||
        (mode != SQ_PAD_RANDOM &&
         sq_meta_add(&hdr, &err, "pad.side", "%s", right ? "right" : "left")) ||
        sq_meta_add(&hdr, &err, "pad.copies", "%" PRIu64, copies) ||
        (mode == SQ_PAD_RANDOM && sq_meta_add(&hdr, &err, "pad.seed", "%" PRIu64, seed)) ||
        sq_meta_add(&hdr, &err, "pad.input", "%s", sq_kind_name(rd.hdr.kind)))
        goto fail;
    if (sq_out_open(&out, out_path, 1, &err) ||
        sq_writer_open(&wr, out.fp, out_name, &hdr, &err))
        goto fail;

    int got;
    while ((got = sq_reader_next(&rd, &rec, &err)) == 1) {
        uint32_t n_train = rd.hdr.kind == SQ_SPLIT ? rec.n_train : rec.len;
        uint32_t held = rec.len - n_train;
        size_t need = (size_t)n + held;
        if (need > row_cap) {
            uint32_t *p = realloc(row, need * sizeof *row);
            if (!p) {
                sq_fail(&err, SQ_EX_OSERR, "out of memory for a row of %zu items", need);
                goto fail;
            }
            row = p;
            row_cap = need;
        }
        memcpy(row + n, rec.items + n_train, (size_t)held * sizeof *row);
        sq_record o = {0};
        o.user = rec.user;
        o.len = (uint32_t)need;
        o.items = row;
        o.n_train = n;
        o.n_valid = rd.hdr.kind == SQ_SPLIT ? rec.n_valid : 0;
        for (uint64_t v = 0; v < copies; v++) {
            sq_rng rng;
            sq_rng_seed(&rng, seed, sq_pad_stream(rec.user, (uint32_t)v));
            sq_pad_row(row, n, rec.items, n_train, (enum sq_pad_policy)mode, &rng);
            o.view = (uint32_t)v;
            if (sq_write(&wr, &o, &err))
                goto fail;
        }
    }
    if (got < 0 || sq_writer_finish(&wr, &err) || sq_out_commit(&out, &err))
        goto fail;
    free(row);
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_reader_free(&rd);
    sq_in_close(in);
    return 0;

fail:
    sq_report(prog, &err);
    sq_out_abort(&out);
    free(row);
    sq_writer_free(&wr);
    sq_header_free(&hdr);
    sq_reader_free(&rd);
    sq_in_close(in);
    return err.code;
}
