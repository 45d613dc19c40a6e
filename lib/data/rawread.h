/* rawread.h - reading raw interaction logs into an sq_inter table.
 *
 * Every input goes through libarchive, so a plain text file, a compressed
 * one (gz, bz2, xz, zstd, ...) and a member of a zip, tar, 7z or rar archive
 * all read the same way, from a named file or from standard input. Inside an archive
 * the member is the one named by --member, else the first whose base name
 * is a known ratings file (u.data, ratings.dat, ratings.csv, *.inter), else
 * the only regular file of the archive. A named plain gzip file is read with
 * zlib, which checks each member's CRC-32 and length (libarchive does not);
 * a zip member's CRC is checked by libarchive. Either mismatch is exit 65.
 *
 * Formats (one interaction per line unless said otherwise):
 *   movielens  user item rating timestamp, separated by "::" (ml-1m, ml-10m),
 *              a tab (ml-100k u.data) or a comma (ml-20m/25m ratings.csv, whose
 *              header line is skipped)
 *   recbole    RecBole atomic .inter: tab-separated, a typed header line
 *              ("user_id:token  item_id:token  rating:float  timestamp:float");
 *              columns found by field name, float timestamps rounded
 *   sasrec     "user item", whitespace-separated, file order is chronological
 *   s3rec      "user item item ...", one user per line, items chronological
 *   csv, tsv   generic delimited text; columns chosen by 1-based number, or by
 *              name when the first line is a header
 *   auto       guessed from the member or file name, then from the first line */
#ifndef SQ_RAWREAD_H
#define SQ_RAWREAD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "interactions.h"

struct archive;

enum sq_format {
    SQ_FMT_AUTO = 0,
    SQ_FMT_MOVIELENS,
    SQ_FMT_RECBOLE,
    SQ_FMT_SASREC,
    SQ_FMT_S3REC,
    SQ_FMT_CSV,
    SQ_FMT_TSV,
};

const char *sq_format_name(int format); /* "movielens", ...; NULL if unknown */
int sq_format_parse(const char *name);  /* -1 if unknown */

/* ---- lines of one input, through libarchive ---- */

#define SQ_MEMBER_MAX 1024

typedef struct {
    struct archive *a;
    void *gz;                 /* a plain gzip file: read with zlib, which checks
                               * the CRC-32 and length libarchive skips */
    char *gzbuf;
    const char *path;         /* NULL = standard input */
    char name[SQ_MEMBER_MAX + 512]; /* for messages: "PATH" or "PATH(MEMBER)" */
    char member[SQ_MEMBER_MAX];     /* chosen member; "" unless an archive */
    char hint[SQ_MEMBER_MAX];  /* base name to guess the format from */
    const char *blk;          /* current libarchive block */
    size_t blk_len, blk_pos;
    char *buf;                /* a line that spans blocks */
    size_t buf_len, buf_cap;
    uint64_t lineno;          /* of the line last returned, 1-based */
    int eof;
} sq_lines;

/* Opens PATH ("-" or NULL = stdin) and selects the member (MEMBER may be
 * NULL). 66 when the file or the named member is missing. */
int sq_lines_open(sq_lines *L, const char *path, const char *member, sq_err *e);
/* Returns 1 and the next line (without "\n" or "\r\n"; not NUL-terminated,
 * valid until the next call), 0 at the end, or -1 on error (e set). */
int sq_lines_next(sq_lines *L, const char **line, size_t *len, sq_err *e);
void sq_lines_close(sq_lines *L);

/* ---- parsing into the interaction table ---- */

typedef struct {
    int format;              /* enum sq_format */
    const char *member;      /* archive member to read, NULL = choose */
    const char *sep;         /* csv/tsv separator; NULL = "," / tab */
    int header;              /* csv/tsv: the first line names the columns */
    /* csv/tsv columns: a 1-based number, or a name with header; NULL means
     * user 1, item 2, no timestamp, no rating */
    const char *user_col, *item_col, *time_col, *rating_col;
    int use_min_rating;      /* keep only rows with rating >= min_rating */
    double min_rating;
} sq_rawopts;

typedef struct {
    int format;                  /* the format used (auto resolved) */
    char member[SQ_MEMBER_MAX];  /* archive member read, "" if none */
    char sep[8];                 /* separator of delimited formats */
    int has_ts, has_rating;
    uint64_t lines;              /* lines read */
    uint64_t rows;               /* interactions added */
    uint64_t below_rating;       /* dropped by min_rating */
} sq_rawinfo;

/* Reads every interaction of PATH ("-" or NULL = stdin) into T. Bad lines
 * fail with "NAME: line N: reason" and code 65. */
int sq_raw_load(sq_inter *t, const char *path, const sq_rawopts *o,
                sq_rawinfo *info, sq_err *e);

#endif
