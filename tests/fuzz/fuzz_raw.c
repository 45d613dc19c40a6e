/* fuzz_raw.c - libFuzzer harness for the raw log reader: lib/data/rawread.c
 * (every input goes through libarchive, so gzip, bzip2, xz, zip, tar, ...
 * are reached from the same entry point) and lib/data/interactions.c, in the
 * order seqrec-preprocess runs them: sq_raw_load, sort, dedup, k-core,
 * remap, then the sequences stream and the id map (to /dev/null).
 *
 * Input: two option bytes, then the file's bytes.
 *   byte 0  bits 0-2 format (0 auto, 1 movielens, 2 recbole, 3 sasrec,
 *                    4 s3rec, 5 csv, 6 tsv, 7 auto)
 *           bit 3    csv/tsv: --header
 *           bits 4-5 csv/tsv: column choice (defaults, numbers, names, ...)
 *           bit 6    --min-rating 3 (movielens/recbole/csv with a rating)
 *           bit 7    csv/tsv: --sep ";" (else the default)
 *   byte 1  bits 0-2 the file name (hints the format: u.data, ratings.dat,
 *                    ratings.csv, x.inter, Beauty.txt, u.data.gz, log.zip, log)
 *           bits 3-4 --dedup keep, first, last, (keep)
 *           bits 5-6 --core 0, 1, 2, 3
 *           bit 7    --member u.data
 * The file is written to a private directory under /dev/shm (a path,
 * because the reader takes one and guesses from its name) and removed after
 * every run. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interactions.h"
#include "rawread.h"
#include "stream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];

static void cleanup(void)
{
    if (dir[0])
        rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/seqrec-fuzz-raw-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        exit(1);
    }
    atexit(cleanup);
    return 0;
}

static const char *const names[8] = {"u.data", "ratings.dat", "ratings.csv", "x.inter",
                                     "Beauty.txt", "u.data.gz", "log.zip", "log"};
static const char *const cols[4][4] = {
    /* user, item, time, rating */
    {NULL, NULL, NULL, NULL},
    {"1", "2", "4", "3"},
    {"user", "item", "timestamp", "rating"},
    {"2", "1", NULL, "3"},
};

static int write_all(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int bad = n && fwrite(p, 1, n, f) != n;
    return fclose(f) || bad ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t b0 = data[0], b1 = data[1];
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, names[b1 & 7]);
    if (write_all(path, data + 2, size - 2)) {
        perror(path);
        abort();
    }

    sq_rawopts o;
    memset(&o, 0, sizeof o);
    o.format = (b0 & 7) == 7 ? SQ_FMT_AUTO : b0 & 7;
    if (o.format == SQ_FMT_CSV || o.format == SQ_FMT_TSV) {
        o.header = (b0 >> 3) & 1;
        const char *const *c = cols[(b0 >> 4) & 3];
        o.user_col = c[0];
        o.item_col = c[1];
        o.time_col = c[2];
        o.rating_col = c[3];
        if (b0 & 0x80)
            o.sep = ";";
    }
    if (b0 & 0x40) {
        o.use_min_rating = 1;
        o.min_rating = 3;
    }
    if (b1 & 0x80)
        o.member = "u.data";
    int dedup = (b1 >> 3) & 3;
    if (dedup == 3)
        dedup = SQ_DEDUP_KEEP;
    uint32_t core = (b1 >> 5) & 3;

    sq_inter t;
    sq_inter_init(&t);
    sq_rawinfo info;
    sq_err e = {0};
    int rc = sq_raw_load(&t, path, &o, &info, &e);
    unlink(path);
    if (!rc && t.n > 0 &&
        !(rc = sq_inter_sort(&t, &e)) && !(rc = sq_inter_dedup(&t, dedup, &e)) &&
        !(rc = sq_inter_kcore(&t, core, core, NULL, &e)) && t.n > 0 &&
        !(rc = sq_inter_remap(&t, &e))) {
        sq_inter_stats s;
        sq_inter_get_stats(&t, &s);
        FILE *out = fopen("/dev/null", "wb");
        if (!out)
            abort();
        sq_header h;
        sq_header_init(&h, SQ_SEQUENCES, t.n_items);
        h.flags = t.has_ts == 1 ? SQ_FLAG_TS : 0;
        sq_writer w;
        memset(&w, 0, sizeof w);
        /* the writer checks every record as the next program's reader
         * would: a refusal here is a preprocess bug */
        if (sq_writer_open(&w, out, "out", &h, &e) || sq_inter_write(&t, &w, &e) ||
            sq_writer_finish(&w, &e)) {
            fprintf(stderr, "fuzz_raw: the writer refused the table: %s\n", e.msg);
            abort();
        }
        if (sq_inter_write_map(&t, out, "map", &e)) {
            fprintf(stderr, "fuzz_raw: the map failed: %s\n", e.msg);
            abort();
        }
        sq_writer_free(&w);
        sq_header_free(&h);
        fclose(out);
    }
    if (getenv("SEQREC_FUZZ_VERBOSE")) /* why an input was refused */
        fprintf(stderr, "%s\n", e.msg[0] ? e.msg : "accepted");
    if (rc && !e.msg[0])
        __builtin_trap(); /* every failure names its reason */
    sq_inter_free(&t);
    return 0;
}
