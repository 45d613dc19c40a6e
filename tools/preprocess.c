/* seqrec-preprocess - raw interaction logs -> a `sequences` stream.
 * See man/man1/seqrec-preprocess.1. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "idmap.h"
#include "interactions.h"
#include "modelfile.h"
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
"                        kind user or item (with --map-in: the extended map;\n"
"                        FILE may be the --map-in file)\n"
"      --map-in FILE     take dense ids from an existing map (from --map):\n"
"                        known users and items keep their ids, new users get\n"
"                        the next ids, n_items is the map's (plus appended)\n"
"      --model M         take the dataset name and the id map from the model\n"
"                        file M (the map it carries: seqrec-train --map), as\n"
"                        --map-in does; with --map-in FILE, FILE must be M's\n"
"                        map or an extension of it (65 otherwise)\n"
"      --new-items MODE  with --map-in or --model, interactions with items the\n"
"                        map does not know: drop (default) or append (next ids)\n"
"      --stats           print users, items, interactions, lengths and sparsity\n"
"                        (to stdout with -o, else to stderr; on a terminal\n"
"                        without -o only the statistics are printed)\n"
"\n"
"Sequences are ordered by timestamp, ties and formats without timestamps\n"
"in file order. Users and items get dense ids 1..n in numeric order of\n"
"their original ids when all are numbers, else in order of first appearance\n"
"(with --map-in: the new ones, after the map's).\n"
"\n"
"  -h, --help            this help      -V, --version   print the version\n"
"\n"
"Exit status: 0 ok, 64 usage, 65 bad or empty data, 66 missing input,\n"
"73 cannot create output, 74 I/O error. See seqrec-preprocess(1).\n");
}

/* --dedup's words, by enum sq_dedup. */
static const char *const dedup_names[] = {"keep", "first", "last"};

/* --new-items's words. */
enum { NEW_DROP = 0, NEW_APPEND = 1 };
static const char *const new_items_names[] = {"drop", "append"};

typedef struct {
    sq_rawopts raw;
    const char *output, *map, *map_in, *dataset, *model;
    const char *min_rating_text;
    long ucore, icore;
    int dedup;
    int new_items;      /* NEW_*; -1: not given */
    int stats;
} opts;

/* What --map-in (or --model) did, for --stats and the meta. */
typedef struct {
    uint64_t dropped_rows;
    uint32_t dropped_items, new_users, new_items;
    const char *base;   /* the map's name for messages: --map-in, or "M's id map" */
    char base_buf[512];
} mapinfo;

/* A --*-core option. */
static int parse_count(const char *s, const char *opt, long *v)
{
    if (sq_cli_long(s, 0, UINT32_MAX, v) == 0)
        return 0;
    if (s[0] && strspn(s, "0123456789") == strlen(s))
        return sq_cli_usage_error(PROG, "%s: %s is too large (at most %lu)", opt, s,
                                  (unsigned long)UINT32_MAX);
    return sq_cli_usage_error(PROG, "%s: expected a non-negative number, got '%s'", opt, s);
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

static void print_stats(FILE *f, const char *dataset, const sq_inter_stats *s, uint64_t input,
                        const opts *o, const mapinfo *mi)
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
    if (o->map_in || o->model)
        fprintf(f,
                "new_users\t%u\n"
                "new_items\t%u\n"
                "dropped_new_items\t%u\n"
                "dropped_interactions\t%llu\n",
                mi->new_users, mi->new_items, mi->dropped_items,
                (unsigned long long)mi->dropped_rows);
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
                    const sq_rawinfo *info, int n_inputs, const sq_inter *t,
                    const mapinfo *mi, sq_err *e)
{
    int mapped = o->map_in || o->model;
    sq_mapfp fp;
    char x[32];
    if (sq_meta_add(h, e, "dataset", "%s", dataset) ||
        sq_meta_add(h, e, "seqrec.version", "%s", SEQREC_VERSION))
        return e->code;
    for (int i = 0; i < n_inputs; i++)
        if (add_source_meta(h, o, inputs[i], &info[i], e))
            return e->code;
    if (sq_meta_add(h, e, "preprocess.min_rating", "%s",
                    o->raw.use_min_rating ? o->min_rating_text : "none") ||
        sq_meta_add(h, e, "preprocess.dedup", "%s", dedup_names[o->dedup]) ||
        sq_meta_add(h, e, "preprocess.user_core", "%ld", o->ucore) ||
        sq_meta_add(h, e, "preprocess.item_core", "%ld", o->icore) ||
        sq_meta_add(h, e, "preprocess.order", "%s",
                    t->has_ts == 1 ? "timestamp,file" : "file") ||
        sq_meta_add(h, e, "preprocess.user_ids", "%s%s", mapped ? "map," : "",
                    t->users_numeric ? "numeric" : "appearance") ||
        sq_meta_add(h, e, "preprocess.item_ids", "%s%s", mapped ? "map," : "",
                    t->items_numeric ? "numeric" : "appearance") ||
        sq_meta_add(h, e, "preprocess.users", "%u", t->n_users) ||
        sq_meta_add(h, e, "preprocess.items", "%u", t->n_items) ||
        sq_meta_add(h, e, "preprocess.interactions", "%zu", t->n) ||
        sq_inter_mapfp(t, &fp, e) ||
        sq_meta_add(h, e, SQ_MAPFP_USERS, "%s", sq_idfp_str(&fp.user, x, sizeof x)) ||
        sq_meta_add(h, e, SQ_MAPFP_ITEMS, "%s", sq_idfp_str(&fp.item, x, sizeof x)))
        return e->code;
    if (o->model) {
        const char *b = strrchr(o->model, '/');
        if (sq_meta_add(h, e, "preprocess.model", "%s", b ? b + 1 : o->model))
            return e->code;
    }
    if (mapped) {
        const char *b = o->map_in ? strrchr(o->map_in, '/') : NULL;
        if ((o->map_in &&
             sq_meta_add(h, e, "preprocess.map_in", "%s", b ? b + 1 : o->map_in)) ||
            sq_meta_add(h, e, "preprocess.new_items", "%s", new_items_names[o->new_items]) ||
            sq_meta_add(h, e, "preprocess.new_users", "%u", mi->new_users) ||
            sq_meta_add(h, e, "preprocess.appended_items", "%u", mi->new_items) ||
            sq_meta_add(h, e, "preprocess.dropped_interactions", "%llu",
                        (unsigned long long)mi->dropped_rows))
            return e->code;
    }
    return 0;
}

/* The options into *o; 0, or the exit status (-1: --help or --version, 0). */
static int parse_args(int argc, char **argv, opts *o)
{
    enum { O_SEP = 256, O_HEADER, O_UCOL, O_ICOL, O_TCOL, O_RCOL, O_MINR, O_DEDUP,
           O_UCORE, O_ICORE, O_CORE, O_MAP, O_STATS, O_MAP_IN, O_NEW_ITEMS, O_MODEL };
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
        {"map-in", required_argument, 0, O_MAP_IN},
        {"new-items", required_argument, 0, O_NEW_ITEMS},
        {"model", required_argument, 0, O_MODEL},
        {"version", no_argument, 0, 'V'},        {0, 0, 0, 0},
    };
    sq_rawopts *r = &o->raw;
    int c, rc = 0;
    while (!rc && (c = getopt_long(argc, argv, "f:m:o:d:hV", longs, NULL)) != -1) {
        switch (c) {
        case 'f':
            if ((r->format = sq_format_parse(optarg)) < 0)
                rc = sq_cli_usage_error(PROG, "--format: unknown format '%s' (auto, movielens, "
                                        "recbole, sasrec, s3rec, csv, tsv)", optarg);
            break;
        case 'm': r->member = optarg; break;
        case O_SEP: r->sep = optarg; break;
        case O_HEADER: r->header = 1; break;
        case O_UCOL: r->user_col = optarg; break;
        case O_ICOL: r->item_col = optarg; break;
        case O_TCOL: r->time_col = optarg; break;
        case O_RCOL: r->rating_col = optarg; break;
        case O_MINR:
            if (sq_cli_real(optarg, &r->min_rating))
                rc = sq_cli_usage_error(PROG, "--min-rating: expected a number, got '%s'",
                                        optarg);
            r->use_min_rating = 1;
            o->min_rating_text = optarg;
            break;
        case O_DEDUP:
            o->dedup = -1;
            for (int i = 0; i < 3; i++)
                if (strcmp(optarg, dedup_names[i]) == 0)
                    o->dedup = i;
            if (o->dedup < 0)
                rc = sq_cli_usage_error(PROG, "--dedup: expected keep, first or last, got '%s'",
                                        optarg);
            break;
        case O_UCORE: rc = parse_count(optarg, "--user-core", &o->ucore); break;
        case O_ICORE: rc = parse_count(optarg, "--item-core", &o->icore); break;
        case O_CORE:
            rc = parse_count(optarg, "--core", &o->ucore);
            o->icore = o->ucore;
            break;
        case 'o': o->output = optarg; break;
        case 'd': o->dataset = optarg; break;
        case O_MAP: o->map = optarg; break;
        case O_STATS: o->stats = 1; break;
        case O_MAP_IN: o->map_in = optarg; break;
        case O_MODEL: o->model = optarg; break;
        case O_NEW_ITEMS:
            o->new_items = strcmp(optarg, "drop") == 0 ? NEW_DROP
                         : strcmp(optarg, "append") == 0 ? NEW_APPEND : -2;
            if (o->new_items < 0)
                rc = sq_cli_usage_error(PROG, "--new-items: expected drop or append, got '%s'",
                                        optarg);
            break;
        case 'h': usage(stdout); return -1;
        case 'V': sq_cli_version(PROG); return -1;
        default: usage(stderr); return SQ_EX_USAGE;
        }
    }
    int is_csv = r->format == SQ_FMT_CSV || r->format == SQ_FMT_TSV;
    if (!rc && !is_csv && (r->sep || r->header || r->user_col || r->item_col || r->time_col ||
                           r->rating_col))
        rc = sq_cli_usage_error(PROG, "--sep, --header and --*-col go with --format csv or tsv");
    if (!rc && o->new_items >= 0 && !o->map_in && !o->model)
        rc = sq_cli_usage_error(PROG, "--new-items goes with --map-in or --model");
    if (o->new_items < 0)
        o->new_items = NEW_DROP;
    return rc;
}

/* The inputs for a message: "a.txt", or "a.txt, b.txt, ...". */
static void input_names(const char **inputs, int n, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k < size; i++) {
        int w = snprintf(buf + k, size - k, "%s%s", i ? ", " : "", sq_in_name(inputs[i]));
        if (w < 0)
            break;
        k += (size_t)w;
    }
    if (k >= size && size > 4)
        memcpy(buf + size - 4, "...", 4);
}

/* The base map into t: --map-in (which must extend the map of --model
 * when both are given), or the map the model mf carries. */
static int read_base(sq_inter *t, const opts *o, const sq_modelfile *mf, mapinfo *mi,
                     sq_err *e)
{
    mi->base = o->map_in;
    if (!o->model)
        return o->map_in ? sq_inter_read_map(t, o->map_in, e) : 0;
    sq_mapfp fp;
    sq_mapfp_from_meta(mf->config, "data.", &fp);
    if (o->map_in) {
        char w[768] = "";
        if (sq_inter_read_map(t, o->map_in, e) ||
            sq_inter_check_map(t, sq_in_name(o->map_in), &fp, o->model, w, sizeof w, e))
            return e->code;
        if (w[0])
            fprintf(stderr, "%s: warning: %s\n", PROG, w);
        return 0;
    }
    const char *bytes;
    size_t len;
    int rc = sq_modelfile_id_map(mf, o->model, &bytes, &len, e);
    if (rc == 1)
        return sq_fail(e, SQ_EX_DATA, "%s carries no id map (train it with seqrec-train --map "
                       "FILE, or give --map-in)", o->model);
    snprintf(mi->base_buf, sizeof mi->base_buf, "the id map of %s", o->model);
    mi->base = mi->base_buf;
    return rc ? rc : sq_inter_read_map_text(t, bytes, len, mi->base, e);
}

/* Reads the map (--map-in, --model) and every input into t, then drops new
 * items (--new-items drop), sorts, deduplicates, k-cores and remaps it;
 * *input: the interactions read (rated high enough). */
static int load(sq_inter *t, const opts *o, const sq_modelfile *mf, const char **inputs,
                int n_inputs, sq_rawinfo *info, uint64_t *input, mapinfo *mi, sq_err *e)
{
    uint64_t below = 0;
    char names[256];
    input_names(inputs, n_inputs, names, sizeof names);
    if (read_base(t, o, mf, mi, e))
        return e->code;
    for (int i = 0; i < n_inputs; i++) {
        if (sq_raw_load(t, inputs[i], &o->raw, &info[i], e))
            return e->code;
        below += info[i].below_rating;
    }
    *input = t->n;
    if (t->n == 0 && below)
        return sq_fail(e, SQ_EX_DATA, "%s: no interactions left: all %llu are rated below "
                       "--min-rating %s", names, (unsigned long long)below, o->min_rating_text);
    if (t->n == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: no interactions in the input", names);
    if (mi->base && o->new_items == NEW_DROP &&
        sq_inter_drop_new_items(t, &mi->dropped_rows, &mi->dropped_items, e))
        return e->code;
    if (t->n == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: no interactions left: all %llu are with items that "
                       "%s does not know (--new-items drop)", names,
                       (unsigned long long)*input, mi->base);
    if (sq_inter_sort(t, e) || sq_inter_dedup(t, o->dedup, e) ||
        sq_inter_kcore(t, (uint32_t)o->ucore, (uint32_t)o->icore, NULL, e))
        return e->code;
    if (t->n == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: no interactions left after --user-core %ld "
                       "--item-core %ld (%llu before)", names, o->ucore, o->icore,
                       (unsigned long long)*input);
    if (sq_inter_remap(t, e))
        return e->code;
    mi->new_users = t->n_users - t->map_users;
    mi->new_items = t->n_items - t->map_items;
    return 0;
}

/* Writes the stream (when stream) and the map (with --map), both opened
 * before the long read so that a bad path fails first. */
static int run(const opts *o, const sq_modelfile *mf, const char **inputs, int n_inputs,
               const char *dataset, int stream, FILE *stats_f, sq_err *e)
{
    sq_outfile out = {0}, map = {0};
    sq_inter t;
    sq_inter_init(&t);
    sq_header h;
    sq_header_init(&h, SQ_SEQUENCES, 0);
    sq_writer w = {0};
    uint64_t input = 0;
    mapinfo mi = {0};
    sq_rawinfo *info = calloc((size_t)n_inputs, sizeof *info);
    int rc = info ? 0 : sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (!rc && ((stream && sq_out_open(&out, o->output, 1, e)) ||
                (o->map && sq_out_open(&map, o->map, 0, e)) ||
                load(&t, o, mf, inputs, n_inputs, info, &input, &mi, e)))
        rc = e->code;
    if (!rc) {
        h.n_items = t.n_items;
        h.flags = t.has_ts == 1 ? SQ_FLAG_TS : 0;
        rc = add_meta(&h, o, dataset, inputs, info, n_inputs, &t, &mi, e);
    }
    if (!rc && stream &&
        (sq_writer_open(&w, out.fp, sq_out_name(o->output), &h, e) ||
         sq_inter_write(&t, &w, e) || sq_writer_finish(&w, e)))
        rc = e->code;
    if (!rc && o->map && (sq_inter_write_map(&t, map.fp, o->map, e) || sq_out_commit(&map, e)))
        rc = e->code;
    if (!rc && stream)
        rc = sq_out_commit(&out, e);
    if (!rc && o->stats) {
        sq_inter_stats s;
        sq_inter_get_stats(&t, &s);
        print_stats(stats_f, dataset, &s, input, o, &mi);
    }
    sq_writer_free(&w);
    sq_header_free(&h);
    sq_inter_free(&t);
    free(info);
    if (rc) {
        sq_out_abort(&map);
        sq_out_abort(&out);
    }
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    memset(&o, 0, sizeof o);
    o.new_items = -1;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? sq_cli_info_done(PROG) : rc;

    const char **inputs = (const char **)argv + optind;
    int n_inputs = argc - optind;
    const char *stdin_only[] = {"-"};
    if (n_inputs == 0) {
        inputs = stdin_only;
        n_inputs = 1;
    }
    char dataset[256], md[256];
    sq_modelfile mf = {0};
    sq_err e = {0};
    if (o.model && sq_modelfile_read(o.model, &mf, &e))
        return sq_report(PROG, &e);
    int has_md = o.model && sq_modelfile_get(&mf, "data.dataset", md, sizeof md);
    if (has_md && o.dataset && strcmp(md, o.dataset) != 0) {
        sq_modelfile_free(&mf);
        return sq_cli_usage_error(PROG, "--dataset %s: the model %s was trained on dataset "
                                  "'%s' (leave --dataset out to take the model's)", o.dataset,
                                  o.model, md);
    }
    if (o.dataset || has_md)
        snprintf(dataset, sizeof dataset, "%s", o.dataset ? o.dataset : md);
    else
        dataset_from_path(inputs[0], dataset, sizeof dataset);

    /* --stats on a terminal without -o: there is nothing to pipe the
     * stream into, so print only the statistics. */
    int to_stdout = !o.output || strcmp(o.output, "-") == 0;
    int stream = !(o.stats && to_stdout && isatty(STDOUT_FILENO));
    FILE *stats_f = to_stdout && stream ? stderr : stdout;
    rc = run(&o, &mf, inputs, n_inputs, dataset, stream, stats_f, &e);
    sq_modelfile_free(&mf);
    return rc ? sq_report(PROG, &e) : 0;
}
