/* seqrec-cat - print a seqrec stream as text, check it, or encode text
 * (the encoder is sq_text_encode, lib/data/textenc.c). See
 * man/man1/seqrec-cat.1. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "modelfile.h"
#include "stream.h"
#include "text.h"
#include "textenc.h"

static const char *PROG = "seqrec-cat";

static void usage(FILE *f)
{
    fprintf(f,
"usage: seqrec-cat [options] [FILE...]\n"
"Print seqrec streams as text (one record per line, TSV), or check them.\n"
"\n"
"  -H, --header          print the header, meta and counts instead of records;\n"
"                        of a model file (.sqm): its config and tensors\n"
"  -c, --verify          read and check everything, print nothing\n"
"      --no-ts           do not print timestamps\n"
"  -o, --output FILE     write to FILE (atomically) instead of stdout\n"
"\n"
"Encoding text into a stream (the inverse of printing):\n"
"      --from-text KIND  read the text form of KIND records (sequences, split,\n"
"                        padded, ranks, topk) and write a binary stream;\n"
"                        with -H print its header instead, with -c only check\n"
"      --n-items N       header n_items (default: the largest item id seen)\n"
"      --max-len N       header max_len (required for padded)\n"
"      --timestamps      the text has a timestamps field\n"
"      --meta KEY=VALUE  add a meta line (repeatable)\n"
"\n"
"  -h, --help            this help\n"
"  -V, --version         print the version\n"
"\n"
"Exit status: 0 ok, 64 usage, 65 bad data, 66 missing input, 73 cannot\n"
"create output, 74 I/O error. See seqrec-cat(1) and seqrec(5).\n");
}

typedef struct {
    int header, verify, no_ts;
    const char *output;
    int from_kind;
    long n_items, max_len;
    int with_ts;
    const char **meta;
    int n_meta;
} opts;

/* Prints (or just checks) a model file: its config lines and tensors. */
static int dump_model(const char *path, const opts *o, FILE *out, sq_err *e)
{
    sq_modelfile mf;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    if (!o->verify) {
        fprintf(out, "file\t%s\nkind\tmodel\nversion\t%u\n", sq_in_name(path),
                SQ_MODEL_VERSION);
        for (const char *l = mf.config; l && *l;) {
            size_t n = strcspn(l, "\n");
            fprintf(out, "config\t%.*s\n", (int)n, l);
            l += n + (l[n] == '\n');
        }
        sq_modelfile_list(out, &mf, "tensor\t");
        fprintf(out, "tensors\t%d\nchecksum\tok\n", mf.n_tensors);
    }
    sq_modelfile_free(&mf);
    return 0;
}

/* Prints (or just checks) the stream in, called name in messages. */
static int dump_stream(FILE *in, const char *name, const opts *o, FILE *out, sq_err *e)
{
    sq_reader r;
    sq_record rec;
    int rc = sq_reader_open(&r, in, name, e);
    if (!rc && o->header && !o->verify) {
        const sq_header *h = &r.hdr;
        fprintf(out, "file\t%s\nversion\t%u\nkind\t%s\nn_items\t%" PRIu32 "\nmax_len\t%" PRIu32
                "\ntimestamps\t%s\n", name, h->version, sq_kind_name(h->kind), h->n_items,
                h->max_len, (h->flags & SQ_FLAG_TS) ? "yes" : "no");
        for (const char *l = h->meta; l && *l;) {
            size_t n = strcspn(l, "\n");
            fprintf(out, "meta\t%.*s\n", (int)n, l);
            l += n + (l[n] == '\n');
        }
    }
    int st = -1;
    while (!rc && (st = sq_reader_next(&r, &rec, e)) == 1) {
        if (o->header || o->verify)
            continue;
        if (o->no_ts)
            rec.ts = NULL;
        if (sq_text_write(out, &r.hdr, &rec)) {
            rc = sq_fail(e, SQ_EX_IO, "%s: write error", o->output ? o->output : "<stdout>");
            break;
        }
    }
    if (!rc && st < 0)
        rc = e->code;
    if (!rc && o->header && !o->verify)
        fprintf(out, "records\t%" PRIu64 "\ninteractions\t%" PRIu64 "\nchecksum\tok\n",
                r.n_records, r.n_inter);
    sq_reader_free(&r);
    return rc;
}

/* Prints (or just checks) one stream, or a model file. */
static int dump(const char *path, const opts *o, FILE *out, sq_err *e)
{
    if (sq_modelfile_sniff(path))
        return dump_model(path, o, out, e);
    FILE *in;
    if (sq_in_open(&in, path, e))
        return e->code;
    int rc = dump_stream(in, sq_in_name(path), o, out, e);
    sq_in_close(in);
    return rc;
}

/* Encodes the text input into the stream out. With --header or --verify
 * the stream goes to a temporary file and is then printed as --header
 * prints a stream (or only checked): what the text would become. */
static int encode(const char *path, const opts *o, FILE *out, sq_err *e)
{
    FILE *in;
    if (sq_in_open(&in, path, e))
        return e->code;
    sq_text_encode_opts eo = {
        .kind = (uint16_t)o->from_kind, .with_ts = o->with_ts, .n_items = o->n_items,
        .max_len = o->max_len, .meta = o->meta, .n_meta = o->n_meta,
    };
    const char *name = sq_in_name(path);
    int rc;
    if (o->header || o->verify) {
        FILE *tmp = tmpfile();
        if (!tmp) {
            sq_in_close(in);
            return sq_fail(e, SQ_EX_CANTCREAT, "cannot create a temporary file: %s",
                           strerror(errno));
        }
        rc = sq_text_encode(in, name, &eo, tmp, "<temporary stream>", e);
        if (!rc && (fflush(tmp) || fseek(tmp, 0, SEEK_SET)))
            rc = sq_fail(e, SQ_EX_IO, "<temporary stream>: %s", strerror(errno));
        if (!rc)
            rc = dump_stream(tmp, name, o, out, e);
        fclose(tmp);
    } else {
        rc = sq_text_encode(in, name, &eo, out, sq_out_name(o->output), e);
    }
    sq_in_close(in);
    return rc;
}

/* A header count option (--n-items, --max-len). */
static int parse_count(const char *s, const char *opt, long *v)
{
    if (sq_cli_long(s, 0, (long)SQ_MAX_RECORD_ITEMS * 256L, v))
        return sq_cli_usage_error(PROG, "%s: expected a non-negative number, got '%s'", opt, s);
    return 0;
}

/* The options into *o (o->meta: room for argc entries); 0, or the exit
 * status (-1: --help or --version, 0). */
static int parse_args(int argc, char **argv, opts *o)
{
    enum { O_NO_TS = 256, O_FROM, O_NITEMS, O_MAXLEN, O_TS, O_META };
    static const struct option longs[] = {
        {"header", no_argument, 0, 'H'},       {"verify", no_argument, 0, 'c'},
        {"no-ts", no_argument, 0, O_NO_TS},     {"output", required_argument, 0, 'o'},
        {"from-text", required_argument, 0, O_FROM}, {"n-items", required_argument, 0, O_NITEMS},
        {"max-len", required_argument, 0, O_MAXLEN}, {"timestamps", no_argument, 0, O_TS},
        {"meta", required_argument, 0, O_META}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    int c, rc = 0;
    while (!rc && (c = getopt_long(argc, argv, "Hco:hV", longs, NULL)) != -1) {
        switch (c) {
        case 'H': o->header = 1; break;
        case 'c': o->verify = 1; break;
        case 'o': o->output = optarg; break;
        case O_NO_TS: o->no_ts = 1; break;
        case O_FROM:
            if (!(o->from_kind = sq_kind_parse(optarg)))
                rc = sq_cli_usage_error(PROG, "--from-text: unknown kind '%s' (sequences, "
                                        "split, padded, ranks, topk)", optarg);
            break;
        case O_NITEMS: rc = parse_count(optarg, "--n-items", &o->n_items); break;
        case O_MAXLEN: rc = parse_count(optarg, "--max-len", &o->max_len); break;
        case O_TS: o->with_ts = 1; break;
        case O_META:
            if (!strchr(optarg, '=') || optarg[0] == '=')
                rc = sq_cli_usage_error(PROG, "--meta: expected KEY=VALUE, got '%s'", optarg);
            o->meta[o->n_meta++] = optarg;
            break;
        case 'h': usage(stdout); return -1;
        case 'V': sq_cli_version(PROG); return -1;
        default: usage(stderr); return SQ_EX_USAGE;
        }
    }
    if (rc)
        return rc;
    if (o->from_kind && optind + 1 < argc)
        return sq_cli_usage_error(PROG, "--from-text reads one input");
    if (o->from_kind == SQ_PADDED && o->max_len <= 0)
        return sq_cli_usage_error(PROG, "--from-text padded needs --max-len");
    if (!o->from_kind && (o->n_items >= 0 || o->max_len >= 0 || o->with_ts || o->n_meta))
        return sq_cli_usage_error(PROG, "--n-items, --max-len, --timestamps and --meta go "
                                  "with --from-text");
    if (o->from_kind && o->no_ts)
        return sq_cli_usage_error(PROG, "--no-ts does not go with --from-text (it prints "
                                  "records; leave --timestamps out instead)");
    return 0;
}

/* Encodes the one input, or prints (checks) every input. */
static int run(const opts *o, char **inputs, int n_inputs, sq_err *e)
{
    sq_outfile out = {0};
    /* --header and --verify print (or check) what --from-text makes */
    int binary = o->from_kind != 0 && !o->header && !o->verify;
    int rc = 0;
    if (!o->verify)
        rc = sq_out_open(&out, o->output, binary, e);
    if (!rc && o->from_kind) {
        rc = encode(n_inputs ? inputs[0] : NULL, o, out.fp ? out.fp : stdout, e);
    } else if (!rc) {
        FILE *f = out.fp ? out.fp : stdout;
        if (n_inputs == 0)
            rc = dump(NULL, o, f, e);
        for (int i = 0; !rc && i < n_inputs; i++)
            rc = dump(inputs[i], o, f, e);
    }
    if (!rc && out.fp)
        rc = sq_out_commit(&out, e);
    if (rc)
        sq_out_abort(&out);
    return rc;
}

int main(int argc, char **argv)
{
    opts o = {.n_items = -1, .max_len = -1};
    sq_err e = {0};
    o.meta = calloc((size_t)argc, sizeof *o.meta);
    if (!o.meta) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        return SQ_EX_OSERR;
    }
    int rc = parse_args(argc, argv, &o);
    if (!rc && run(&o, argv + optind, argc - optind, &e))
        rc = sq_report(PROG, &e);
    free(o.meta);
    return rc < 0 ? sq_cli_info_done(PROG) : rc;
}
