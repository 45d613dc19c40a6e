/* seqrec-preprocess - raw interaction logs -> a `sequences` stream.
 * See man/man1/seqrec-preprocess.1. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "interactions.h"
#include "rawread.h"
#include "stream.h"

static const char *PROG = "seqrec-preprocess";

static void usage(FILE *f)
{
    fprintf(f,
"usage: seqrec-preprocess [options] [FILE...]\n"
"Read raw interaction logs (plain text, gz/bz2/xz/zstd, or a member of a zip,\n"
"tar, 7z or rar archive) and write one chronological sequence per user as a\n"
"seqrec `sequences` stream. With no FILE, or when FILE is -, read standard\n"
"input.\n"
"\n"
"Input:\n"
"  -f, --format FMT      auto (default), movielens, recbole, sasrec, s3rec, csv, tsv\n"
"  -m, --member NAME     archive member to read (default: u.data, ratings.dat,\n"
"                        ratings.csv or *.inter, else the only file)\n"
"      --sep STR         csv/tsv field separator (default: comma / tab)\n"
"      --header          csv/tsv: the first line names the columns\n"
"      --user-col C      csv/tsv user column, 1-based or a name (default 1)\n"
"      --item-col C      csv/tsv item column (default 2)\n"
"      --time-col C      csv/tsv timestamp column (default: none, file order)\n"
"      --rating-col C    csv/tsv rating column (default: none)\n"
"\n"
"Filters, in this order:\n"
"      --min-rating R    keep interactions rated R or more\n"
"      --dedup MODE      repeated (user, item) pairs: keep (default), first, last\n"
"      --user-core K     drop users with fewer than K interactions and\n"
"      --item-core K     items with fewer than K, repeated until stable\n"
"      --core K          both --user-core K and --item-core K\n"
"\n"
"Output:\n"
"  -o, --output FILE     write the stream to FILE (atomically) instead of stdout\n"
"  -d, --dataset NAME    dataset name for the meta (default: first FILE's base\n"
"                        name up to its first dot, \"stdin\" for standard input)\n"
"      --map FILE        write the id maps: lines kind<TAB>dense<TAB>original,\n"
"                        kind user or item\n"
"      --stats           print users, items, interactions, lengths and sparsity\n"
"                        (to stdout with -o, else to stderr; on a terminal\n"
"                        without -o only the statistics are printed)\n"
"\n"
"Sequences are ordered by timestamp, ties and formats without timestamps\n"
"in file order. Users and items get dense ids 1..n in numeric order of\n"
"their original ids when all are numbers, else in order of first appearance.\n"
"\n"
"  -h, --help            this help      -V, --version   print the version\n"
"\n"
"Exit status: 0 ok, 64 usage, 65 bad or empty data, 66 missing input,\n"
"73 cannot create output, 74 I/O error. See seqrec-preprocess(1).\n");
}

typedef struct {
    sq_rawopts raw;
    const char *output, *map, *dataset;
    const char *min_rating_text;
    long ucore, icore;
    int dedup;
    int stats;
} opts;

static long parse_count(const char *s, const char *opt, sq_err *e)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > (long)UINT32_MAX) {
        sq_fail(e, SQ_EX_USAGE, "%s: expected a non-negative number, got '%s'", opt, s);
        return 0;
    }
    return v;
}

/* "path/Beauty.txt.gz" -> "Beauty" */
static void dataset_from_path(const char *path, char *buf, size_t n)
{
    if (!path || strcmp(path, "-") == 0) {
        snprintf(buf, n, "stdin");
        return;
    }
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, n, "%.*s", (int)strcspn(b, "."), b);
    if (!buf[0])
        snprintf(buf, n, "%s", b);
}

static void print_stats(FILE *f, const char *dataset, const sq_inter_stats *s, uint64_t input)
{
    fprintf(f,
            "dataset\t%s\n"
            "users\t%u\n"
            "items\t%u\n"
            "interactions\t%llu\n"
            "avg_length\t%.2f\n"
            "min_length\t%u\n"
            "max_length\t%u\n"
            "sparsity\t%.6f\n"
            "input_interactions\t%llu\n",
            dataset, s->users, s->items, (unsigned long long)s->interactions, s->avg_len,
            s->min_len, s->max_len, s->sparsity, (unsigned long long)input);
    fflush(f);
}

/* Per input: its name, member and the format (and columns) it was read with. */
static int add_source_meta(sq_header *h, const opts *o, const char *path,
                           const sq_rawinfo *info, sq_err *e)
{
    const char *name = sq_in_name(path);
    const char *b = strrchr(name, '/');
    int fmt = info->format;
    if (sq_meta_add(h, e, "preprocess.source", "%s", b ? b + 1 : name) ||
        (info->member[0] && sq_meta_add(h, e, "preprocess.member", "%s", info->member)) ||
        sq_meta_add(h, e, "preprocess.format", "%s", sq_format_name(fmt)))
        return e->code;
    if (fmt == SQ_FMT_CSV || fmt == SQ_FMT_TSV) {
        const sq_rawopts *r = &o->raw;
        if (sq_meta_add(h, e, "preprocess.sep", "%s", info->sep) ||
            sq_meta_add(h, e, "preprocess.header", "%s", r->header ? "yes" : "no") ||
            sq_meta_add(h, e, "preprocess.user_col", "%s", r->user_col ? r->user_col : "1") ||
            sq_meta_add(h, e, "preprocess.item_col", "%s", r->item_col ? r->item_col : "2") ||
            sq_meta_add(h, e, "preprocess.time_col", "%s", r->time_col ? r->time_col : "none") ||
            sq_meta_add(h, e, "preprocess.rating_col", "%s",
                        r->rating_col ? r->rating_col : "none"))
            return e->code;
    }
    return 0;
}

/* Meta: the dataset, the tool version, and every option that shaped the data. */
static int add_meta(sq_header *h, const opts *o, const char *dataset, const char **inputs,
                    const sq_rawinfo *info, int n_inputs, const sq_inter *t, sq_err *e)
{
    const char *dedup[] = {"keep", "first", "last"};
    if (sq_meta_add(h, e, "dataset", "%s", dataset) ||
        sq_meta_add(h, e, "seqrec.version", "%s", SEQREC_VERSION))
        return e->code;
    for (int i = 0; i < n_inputs; i++)
        if (add_source_meta(h, o, inputs[i], &info[i], e))
            return e->code;
    if (sq_meta_add(h, e, "preprocess.min_rating", "%s",
                    o->raw.use_min_rating ? o->min_rating_text : "none") ||
        sq_meta_add(h, e, "preprocess.dedup", "%s", dedup[o->dedup]) ||
        sq_meta_add(h, e, "preprocess.user_core", "%ld", o->ucore) ||
        sq_meta_add(h, e, "preprocess.item_core", "%ld", o->icore) ||
        sq_meta_add(h, e, "preprocess.order", "%s",
                    t->has_ts == 1 ? "timestamp,file" : "file") ||
        sq_meta_add(h, e, "preprocess.user_ids", "%s",
                    t->users_numeric ? "numeric" : "appearance") ||
        sq_meta_add(h, e, "preprocess.item_ids", "%s",
                    t->items_numeric ? "numeric" : "appearance") ||
        sq_meta_add(h, e, "preprocess.users", "%u", t->n_users) ||
        sq_meta_add(h, e, "preprocess.items", "%u", t->n_items) ||
        sq_meta_add(h, e, "preprocess.interactions", "%zu", t->n))
        return e->code;
    return 0;
}

int main(int argc, char **argv)
{
    enum { O_SEP = 256, O_HEADER, O_UCOL, O_ICOL, O_TCOL, O_RCOL, O_MINR, O_DEDUP,
           O_UCORE, O_ICORE, O_CORE, O_MAP, O_STATS };
    static const struct option longs[] = {
        {"format", required_argument, 0, 'f'},   {"member", required_argument, 0, 'm'},
        {"sep", required_argument, 0, O_SEP},    {"header", no_argument, 0, O_HEADER},
        {"user-col", required_argument, 0, O_UCOL}, {"item-col", required_argument, 0, O_ICOL},
        {"time-col", required_argument, 0, O_TCOL}, {"rating-col", required_argument, 0, O_RCOL},
        {"min-rating", required_argument, 0, O_MINR}, {"dedup", required_argument, 0, O_DEDUP},
        {"user-core", required_argument, 0, O_UCORE}, {"item-core", required_argument, 0, O_ICORE},
        {"core", required_argument, 0, O_CORE},  {"output", required_argument, 0, 'o'},
        {"dataset", required_argument, 0, 'd'},  {"map", required_argument, 0, O_MAP},
        {"stats", no_argument, 0, O_STATS},      {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},        {0, 0, 0, 0},
    };
    opts o;
    memset(&o, 0, sizeof o);
    sq_err e = {0};
    int c;
    while (!e.code && (c = getopt_long(argc, argv, "f:m:o:d:hV", longs, NULL)) != -1) {
        switch (c) {
        case 'f':
            o.raw.format = sq_format_parse(optarg);
            if (o.raw.format < 0)
                sq_fail(&e, SQ_EX_USAGE, "--format: unknown format '%s' (auto, movielens, "
                        "recbole, sasrec, s3rec, csv, tsv)", optarg);
            break;
        case 'm': o.raw.member = optarg; break;
        case O_SEP: o.raw.sep = optarg; break;
        case O_HEADER: o.raw.header = 1; break;
        case O_UCOL: o.raw.user_col = optarg; break;
        case O_ICOL: o.raw.item_col = optarg; break;
        case O_TCOL: o.raw.time_col = optarg; break;
        case O_RCOL: o.raw.rating_col = optarg; break;
        case O_MINR: {
            char *end;
            o.raw.min_rating = strtod(optarg, &end);
            if (end == optarg || *end)
                sq_fail(&e, SQ_EX_USAGE, "--min-rating: expected a number, got '%s'", optarg);
            o.raw.use_min_rating = 1;
            o.min_rating_text = optarg;
            break;
        }
        case O_DEDUP:
            if (strcmp(optarg, "keep") == 0)
                o.dedup = SQ_DEDUP_KEEP;
            else if (strcmp(optarg, "first") == 0)
                o.dedup = SQ_DEDUP_FIRST;
            else if (strcmp(optarg, "last") == 0)
                o.dedup = SQ_DEDUP_LAST;
            else
                sq_fail(&e, SQ_EX_USAGE, "--dedup: expected keep, first or last, got '%s'", optarg);
            break;
        case O_UCORE: o.ucore = parse_count(optarg, "--user-core", &e); break;
        case O_ICORE: o.icore = parse_count(optarg, "--item-core", &e); break;
        case O_CORE: o.ucore = o.icore = parse_count(optarg, "--core", &e); break;
        case 'o': o.output = optarg; break;
        case 'd': o.dataset = optarg; break;
        case O_MAP: o.map = optarg; break;
        case O_STATS: o.stats = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s %s\n", PROG, SEQREC_VERSION); return 0;
        default: usage(stderr); return SQ_EX_USAGE;
        }
    }
    int is_csv = o.raw.format == SQ_FMT_CSV || o.raw.format == SQ_FMT_TSV;
    if (!e.code && !is_csv && (o.raw.sep || o.raw.header || o.raw.user_col || o.raw.item_col ||
                               o.raw.time_col || o.raw.rating_col))
        sq_fail(&e, SQ_EX_USAGE, "--sep, --header and --*-col go with --format csv or tsv");
    if (e.code)
        return sq_report(PROG, &e);

    const char **inputs = (const char **)argv + optind;
    int n_inputs = argc - optind;
    const char *stdin_only[] = {"-"};
    if (n_inputs == 0) {
        inputs = stdin_only;
        n_inputs = 1;
    }
    char dataset[256];
    if (o.dataset)
        snprintf(dataset, sizeof dataset, "%s", o.dataset);
    else
        dataset_from_path(inputs[0], dataset, sizeof dataset);

    /* --stats on a terminal without -o: there is nothing to pipe the
     * stream into, so print only the statistics. */
    int to_stdout = !o.output || strcmp(o.output, "-") == 0;
    int stream = !(o.stats && to_stdout && isatty(STDOUT_FILENO));
    FILE *stats_f = to_stdout && stream ? stderr : stdout;

    sq_outfile out = {0}, map = {0};
    sq_inter t;
    sq_inter_init(&t);
    sq_header h;
    sq_header_init(&h, SQ_SEQUENCES, 0);
    sq_writer w = {0};
    int rc = 0;
    /* open the outputs first: a bad -o fails before a long read */
    if (stream)
        rc = sq_out_open(&out, o.output, 1, &e);
    if (!rc && o.map)
        rc = sq_out_open(&map, o.map, 0, &e);

    sq_rawinfo *info = calloc((size_t)n_inputs, sizeof *info);
    if (!rc && !info)
        rc = sq_fail(&e, SQ_EX_OSERR, "out of memory");
    uint64_t below = 0;
    for (int i = 0; !rc && i < n_inputs; i++) {
        rc = sq_raw_load(&t, inputs[i], &o.raw, &info[i], &e);
        below += info[i].below_rating;
    }
    uint64_t input = t.n;
    if (!rc && t.n == 0) {
        if (below)
            rc = sq_fail(&e, SQ_EX_DATA, "no interactions left: all %llu are rated below "
                         "--min-rating %s", (unsigned long long)below, o.min_rating_text);
        else
            rc = sq_fail(&e, SQ_EX_DATA, "no interactions in the input");
    }
    if (!rc)
        rc = sq_inter_sort(&t, &e);
    if (!rc)
        rc = sq_inter_dedup(&t, o.dedup, &e);
    if (!rc)
        rc = sq_inter_kcore(&t, (uint32_t)o.ucore, (uint32_t)o.icore, NULL, &e);
    if (!rc && t.n == 0)
        rc = sq_fail(&e, SQ_EX_DATA, "no interactions left after --user-core %ld --item-core %ld "
                     "(%llu before)", o.ucore, o.icore, (unsigned long long)input);
    if (!rc)
        rc = sq_inter_remap(&t, &e);
    if (!rc) {
        h.n_items = t.n_items;
        h.flags = t.has_ts == 1 ? SQ_FLAG_TS : 0;
        rc = add_meta(&h, &o, dataset, inputs, info, n_inputs, &t, &e);
    }
    if (!rc && stream)
        rc = sq_writer_open(&w, out.fp, sq_out_name(o.output), &h, &e);
    if (!rc && stream)
        rc = sq_inter_write(&t, &w, &e);
    if (!rc && stream)
        rc = sq_writer_finish(&w, &e);
    if (!rc && o.map)
        rc = sq_inter_write_map(&t, map.fp, o.map, &e);
    if (!rc && o.map)
        rc = sq_out_commit(&map, &e);
    if (!rc && stream)
        rc = sq_out_commit(&out, &e);
    if (!rc && o.stats) {
        sq_inter_stats s;
        sq_inter_get_stats(&t, &s);
        print_stats(stats_f, dataset, &s, input);
    }
    sq_writer_free(&w);
    sq_header_free(&h);
    sq_inter_free(&t);
    free(info);
    if (rc) {
        sq_out_abort(&map);
        sq_out_abort(&out);
        return sq_report(PROG, &e);
    }
    return 0;
}
