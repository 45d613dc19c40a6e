/* seqrec-pad - turn each user's training sequence into fixed-length rows
 * (see seqrec-pad(1)). Argument parsing and wiring only: the rows come from
 * lib/data/pad.c, which the training engine uses too. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "filter.h"
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

typedef struct {
    uint32_t len, copies;
    uint64_t seed;
    int mode, right;
    const char *in_path, *out_path;
} pad_args;

/* The options into *a; 0, or the exit status (-1: --help or --version, 0). */
static int parse_args(int argc, char **argv, pad_args *a)
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
    int c;
    while ((c = getopt_long(argc, argv, "n:m:k:s:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (sq_cli_u32(optarg, 1, SQ_MAX_RECORD_ITEMS, &a->len))
                return sq_cli_usage_error(prog, "--len '%s': expected an integer in 1..%u",
                                          optarg, SQ_MAX_RECORD_ITEMS);
            break;
        case 'm':
            if ((a->mode = sq_pad_mode_parse(optarg)) < 0)
                return sq_cli_usage_error(prog, "--mode '%s': expected zero or randompad",
                                          optarg);
            break;
        case OPT_RIGHT: a->right = 1; break;
        case 'k':
            if (sq_cli_u32(optarg, 1, UINT32_MAX, &a->copies))
                return sq_cli_usage_error(prog, "--copies '%s': expected an integer in 1..%u",
                                          optarg, UINT32_MAX);
            break;
        case 's':
            if (sq_cli_u64(optarg, 0, UINT64_MAX, &a->seed))
                return sq_cli_usage_error(prog, "--seed '%s': expected a non-negative integer",
                                          optarg);
            break;
        case 'o': a->out_path = optarg; break;
        case 'h': usage(stdout); return -1;
        case 'V': sq_cli_version(prog); return -1;
        default: return sq_cli_try_help(prog);
        }
    }
    if (a->len == 0)
        return sq_cli_usage_error(prog, "--len N is required");
    /* RandomPad's original sequence must end at the last position. */
    if (a->right && a->mode == SQ_PAD_RANDOM)
        return sq_cli_usage_error(prog, "--right applies to --mode zero only");
    if (a->right)
        a->mode = SQ_PAD_ZERO_RIGHT;
    if (argc - optind > 1)
        return sq_cli_usage_error(prog, "at most one input FILE");
    a->in_path = optind < argc ? argv[optind] : NULL;
    return 0;
}

/* The output header: the input's, as a padded stream, and how it was padded. */
static int pad_header(sq_filter *f, const pad_args *a, sq_err *e)
{
    uint16_t kind = f->rd.hdr.kind;
    if (sq_expect_kind(&f->rd.hdr, f->in_name, SQ_KIND_BIT(SQ_SEQUENCES) | SQ_KIND_BIT(SQ_SPLIT),
                       NULL, e))
        return e->code;
    sq_header *h = &f->hdr;
    h->kind = SQ_PADDED;
    h->max_len = a->len;
    h->flags &= ~(uint32_t)SQ_FLAG_TS; /* rows have padding: no timestamps */
    if (sq_meta_add(h, e, "pad.len", "%u", a->len) ||
        sq_meta_add(h, e, "pad.mode", "%s", sq_pad_policy_name((enum sq_pad_policy)a->mode)) ||
        (a->mode != SQ_PAD_RANDOM &&
         sq_meta_add(h, e, "pad.side", "%s", a->right ? "right" : "left")) ||
        sq_meta_add(h, e, "pad.copies", "%" PRIu32, a->copies) ||
        (a->mode == SQ_PAD_RANDOM && sq_meta_add(h, e, "pad.seed", "%" PRIu64, a->seed)) ||
        sq_meta_add(h, e, "pad.input", "%s", sq_kind_name(kind)))
        return e->code;
    return 0;
}

/* Every record of the input as `copies` padded rows. */
static int pad_rows(sq_filter *f, const pad_args *a, sq_err *e)
{
    uint32_t n = a->len;
    uint32_t *row = NULL; /* the padded row, then the held-out targets */
    size_t row_cap = 0;
    sq_record rec;
    int got;
    while ((got = sq_reader_next(&f->rd, &rec, e)) == 1) {
        uint32_t n_train = f->rd.hdr.kind == SQ_SPLIT ? rec.n_train : rec.len;
        uint32_t held = rec.len - n_train;
        size_t need = (size_t)n + held;
        if (need > row_cap) {
            uint32_t *p = realloc(row, need * sizeof *row);
            if (!p) {
                sq_fail(e, SQ_EX_OSERR, "out of memory for a row of %zu items", need);
                break;
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
        o.n_valid = f->rd.hdr.kind == SQ_SPLIT ? rec.n_valid : 0;
        for (uint32_t v = 0; v < a->copies && !e->code; v++) {
            sq_rng rng;
            sq_rng_seed(&rng, a->seed, sq_pad_stream(rec.user, v));
            sq_pad_row(row, n, rec.items, n_train, (enum sq_pad_policy)a->mode, &rng);
            o.view = v;
            sq_write(&f->wr, &o, e);
        }
        if (e->code)
            break;
    }
    free(row);
    return e->code;
}

int main(int argc, char **argv)
{
    pad_args a = {.copies = 1, .seed = 1, .mode = SQ_PAD_ZERO_LEFT};
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? sq_cli_info_done(prog) : rc;
    sq_err err = {0};
    sq_filter f = {0};
    if (sq_filter_open(&f, a.in_path, a.out_path, &err) || pad_header(&f, &a, &err) ||
        sq_filter_start(&f, &err) || pad_rows(&f, &a, &err) || sq_filter_finish(&f, &err))
        sq_report(prog, &err);
    sq_filter_close(&f);
    return err.code;
}
