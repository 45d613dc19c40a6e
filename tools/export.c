/* seqrec-export - write a model's tensors (item embeddings by default) as
 * TSV or NumPy .npy, or list them. See man/man1/seqrec-export.1.
 *
 * Rows of an item-indexed tensor (first dimension n_items + 1, or n_items + 2
 * for a table with BERT4Rec's mask row; pos_emb excepted) are items: row 0
 * is the padding item, row i dense item i, row n_items + 1 the mask token.
 * TSV keeps only the item rows 1..n_items (with original ids via --map);
 * .npy keeps every row, so that row i is dense item i. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dataset.h"
#include "fileio.h"
#include "idmap.h"
#include "modelfile.h"

static const char *PROG = "seqrec-export";

static void usage(FILE *f)
{
    fprintf(f,
"usage: seqrec-export -m MODEL [options]\n"
"Write one tensor of a model file (default item_emb, the item embeddings) as\n"
"TSV (id<TAB>v1<TAB>v2...) or NumPy .npy, or list the model's tensors.\n"
"\n"
"  -m, --model FILE      the model file (seqrec-train -o)\n"
"  -t, --tensor NAME     the tensor to write (default item_emb)\n"
"  -f, --format FMT      tsv (default): one row per item (padding and mask\n"
"                        rows left out) or per first index; npy: the whole\n"
"                        tensor, every row, NumPy format 1.0\n"
"      --map FILE        TSV ids: original item ids from the map of\n"
"                        seqrec-preprocess --map (item-indexed tensors only;\n"
"                        65 when it is not the model's map or an extension)\n"
"      --id-map          instead: write the id map the model carries\n"
"                        (seqrec-train --map), byte for byte (65: none)\n"
"  -l, --list            list the tensors (name, dtype, shape) instead\n"
"  -o, --output FILE     write to FILE (atomically) instead of stdout\n"
"\n"
"  -h, --help            this help\n"
"  -V, --version         print the version\n"
"\n"
"Exit status: 0 ok, 64 usage, 65 bad data (also: no such tensor), 66 missing\n"
"input, 73 cannot create output, 74 I/O error. See seqrec-export(1).\n");
}

enum { FMT_TSV = 0, FMT_NPY = 1 };

typedef struct {
    const char *model, *tensor, *map, *output;
    int format, list, id_map, tensor_given;
} opts;

/* What to write: the tensor, its rows and how they are named. */
typedef struct {
    const sq_tensor *t;
    uint64_t rows, cols;   /* first dimension; product of the others */
    int items;             /* rows are items (row 0 padding) */
    uint64_t first, last;  /* TSV rows written: [first, last) */
    const sq_idmap *map;   /* or NULL */
    const char *map_name;
} job;

/* One element of t as text. */
static void put_value(FILE *f, const sq_tensor *t, uint64_t i)
{
    const unsigned char *d = t->data;
    switch (t->dtype) {
    case SQ_F32: {
        float v;
        memcpy(&v, d + i * 4, 4);
        fprintf(f, "%.9g", (double)v);
        break;
    }
    case SQ_U32: {
        uint32_t v;
        memcpy(&v, d + i * 4, 4);
        fprintf(f, "%" PRIu32, v);
        break;
    }
    case SQ_U64: {
        uint64_t v;
        memcpy(&v, d + i * 8, 8);
        fprintf(f, "%" PRIu64, v);
        break;
    }
    default:
        fprintf(f, "%u", d[i]);
    }
}

static int write_tsv(void *ctx, FILE *f, const char *name, sq_err *e)
{
    const job *j = ctx;
    for (uint64_t r = j->first; r < j->last; r++) {
        if (j->map) {
            const char *id = sq_idmap_item(j->map, (uint32_t)r);
            if (!id)
                return sq_fail(e, SQ_EX_DATA, "%s: no item %" PRIu64 " in the map (a map of "
                               "another dataset?)", j->map_name, r);
            fputs(id, f);
        } else {
            fprintf(f, "%" PRIu64, r);
        }
        for (uint64_t c = 0; c < j->cols; c++) {
            fputc('\t', f);
            put_value(f, j->t, r * j->cols + c);
        }
        if (fputc('\n', f) == EOF)
            return sq_fail(e, SQ_EX_IO, "%s: write error", name);
    }
    return ferror(f) ? sq_fail(e, SQ_EX_IO, "%s: write error", name) : 0;
}

/* NumPy format 1.0: magic, version, u16 header length, a Python dict
 * literal padded with spaces to end in '\n' at a multiple of 64 bytes. */
static int write_npy(void *ctx, FILE *f, const char *name, sq_err *e)
{
    const sq_tensor *t = ((const job *)ctx)->t;
    static const char *descr[] = {[SQ_F32] = "<f4", [SQ_U32] = "<u4", [SQ_U64] = "<u8",
                                  [SQ_BYTES] = "|u1"};
    char dict[512], dims[256] = "";
    size_t dl = 0;
    for (int i = 0; i < t->ndim; i++)
        dl += (size_t)snprintf(dims + dl, sizeof dims - dl, "%llu,%s",
                               (unsigned long long)t->shape[i], i + 1 < t->ndim ? " " : "");
    if (t->ndim > 1) /* "(6, 8)": the trailing comma only for one dimension */
        dims[dl - 1] = '\0';
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr[t->dtype], dims);
    size_t hlen = (size_t)n + 1; /* with the '\n' */
    size_t pad = (64 - (10 + hlen) % 64) % 64;
    uint16_t h16 = (uint16_t)(hlen + pad);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(h16 & 0xff),
                             (unsigned char)(h16 >> 8)};
    fwrite(pre, 1, sizeof pre, f);
    fwrite(dict, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (t->bytes)
        fwrite(t->data, 1, (size_t)t->bytes, f);
    return ferror(f) ? sq_fail(e, SQ_EX_IO, "%s: write error", name) : 0;
}

static int write_list(void *ctx, FILE *f, const char *name, sq_err *e)
{
    if (sq_modelfile_list(f, ctx, ""))
        return sq_fail(e, SQ_EX_IO, "%s: write error", name);
    return 0;
}

/* Fills the job for the chosen tensor of mf. */
static int plan(const opts *o, const sq_modelfile *mf, job *j, sq_err *e)
{
    const char *mname = sq_in_name(o->model);
    j->t = sq_modelfile_find(mf, o->tensor);
    if (!j->t) {
        char names[512];
        size_t len = 0;
        names[0] = '\0';
        for (int i = 0; i < mf->n_tensors && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                    mf->tensors[i].name);
        return sq_fail(e, SQ_EX_DATA, "%s: no tensor '%s' (it has: %s)", mname, o->tensor, names);
    }
    const sq_tensor *t = j->t;
    j->rows = t->ndim ? t->shape[0] : 1;
    j->cols = 1;
    for (int i = 1; i < t->ndim; i++)
        j->cols *= t->shape[i];
    char a[64];
    uint64_t n_items = 0;
    if (sq_modelfile_get(mf, "n_items", a, sizeof a))
        n_items = strtoull(a, NULL, 10);
    j->items = n_items && t->ndim >= 1 && strcmp(t->name, "pos_emb") != 0 &&
               (j->rows == n_items + 1 || j->rows == n_items + 2);
    j->first = j->items ? 1 : 0;
    j->last = j->items ? n_items + 1 : j->rows;
    if (o->map && !j->items)
        return sq_fail(e, SQ_EX_USAGE, "--map: tensor '%s' of %s is not indexed by item "
                       "(its first dimension is not n_items + 1)", t->name, mname);
    return 0;
}

typedef struct {
    const char *bytes;
    size_t len;
} raw_text;

static int write_raw(void *ctx, FILE *f, const char *name, sq_err *e)
{
    const raw_text *r = ctx;
    if (fwrite(r->bytes, 1, r->len, f) != r->len || ferror(f))
        return sq_fail(e, SQ_EX_IO, "%s: write error", name);
    return 0;
}

/* --id-map: the map the model carries, as it was given to seqrec-train. */
static int write_id_map(const opts *o, const sq_modelfile *mf, sq_err *e)
{
    raw_text r;
    int rc = sq_modelfile_id_map(mf, o->model, &r.bytes, &r.len, e);
    if (rc == 1)
        return sq_fail(e, SQ_EX_DATA, "%s carries no id map (train it with seqrec-train --map "
                       "FILE)", o->model);
    return rc ? rc : sq_out_write(o->output, 0, write_raw, &r, e);
}

/* --map must be the model's map or an extension of it (idmap.h). */
static int check_map(const opts *o, const sq_modelfile *mf, const sq_idmap *m, sq_err *e)
{
    sq_mapfp fp;
    char w[768] = "";
    sq_mapfp_from_meta(mf->config, "data.", &fp);
    if (sq_idmap_check_extends(m, sq_in_name(o->map), 1, &fp.item, "model", o->model, w,
                               sizeof w, e))
        return e->code;
    if (w[0])
        fprintf(stderr, "%s: warning: %s\n", PROG, w);
    return 0;
}

static int run(const opts *o, sq_err *e)
{
    sq_modelfile mf;
    if (sq_modelfile_read(o->model, &mf, e))
        return e->code;
    int rc;
    if (o->id_map) {
        rc = write_id_map(o, &mf, e);
        sq_modelfile_free(&mf);
        return rc;
    }
    if (o->list) {
        rc = sq_out_write(o->output, 0, write_list, &mf, e);
        sq_modelfile_free(&mf);
        return rc;
    }
    job j = {0};
    sq_idmap map = {0};
    rc = plan(o, &mf, &j, e);
    if (!rc && o->map) {
        rc = sq_idmap_read(&map, o->map, e);
        j.map = rc ? NULL : &map;
        j.map_name = sq_in_name(o->map);
        if (!rc)
            rc = check_map(o, &mf, &map, e);
    }
    if (!rc)
        rc = sq_out_write(o->output, o->format == FMT_NPY, o->format == FMT_NPY ? write_npy
                          : write_tsv, &j, e);
    if (j.map)
        sq_idmap_free(&map);
    sq_modelfile_free(&mf);
    return rc;
}

/* The options into *o; 0, or the exit status (-1: --help or --version). */
static int parse_args(int argc, char **argv, opts *o)
{
    enum { O_MAP = 256, O_ID_MAP };
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},  {"tensor", required_argument, 0, 't'},
        {"format", required_argument, 0, 'f'}, {"map", required_argument, 0, O_MAP},
        {"list", no_argument, 0, 'l'},         {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {"id-map", no_argument, 0, O_ID_MAP},  {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "m:t:f:lo:hV", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 't':
            o->tensor = optarg;
            o->tensor_given = 1;
            break;
        case O_ID_MAP: o->id_map = 1; break;
        case 'f':
            if (strcmp(optarg, "tsv") == 0)
                o->format = FMT_TSV;
            else if (strcmp(optarg, "npy") == 0)
                o->format = FMT_NPY;
            else
                return sq_cli_usage_error(PROG, "--format: expected tsv or npy, got '%s'", optarg);
            break;
        case O_MAP: o->map = optarg; break;
        case 'l': o->list = 1; break;
        case 'o': o->output = optarg; break;
        case 'h': usage(stdout); return -1;
        case 'V': sq_cli_version(PROG); return -1;
        default: return sq_cli_try_help(PROG);
        }
    }
    if (optind < argc)
        return sq_cli_usage_error(PROG, "unexpected argument '%s' (the model goes with -m)",
                                  argv[optind]);
    if (!o->model)
        return sq_cli_usage_error(PROG, "no model: give -m MODEL");
    if (o->map && o->format == FMT_NPY)
        return sq_cli_usage_error(PROG, "--map goes with --format tsv (a .npy holds no ids: "
                                  "row i is dense item i)");
    if (o->id_map && (o->list || o->map || o->tensor_given || o->format == FMT_NPY))
        return sq_cli_usage_error(PROG, "--id-map writes the map the model carries: no "
                                  "--list, --map, --tensor or --format npy");
    if (o->list && (o->map || o->format == FMT_NPY))
        return sq_cli_usage_error(PROG, "--list prints text: no --map or --format npy");
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {.tensor = "item_emb"};
    sq_err e = {0};
    int rc = parse_args(argc, argv, &o);
    if (!rc && run(&o, &e))
        rc = sq_report(PROG, &e);
    return rc < 0 ? sq_cli_info_done(PROG) : rc;
}
