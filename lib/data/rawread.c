/* rawread.c - libarchive line reader and the raw log formats. */
#include "rawread.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>
#include <zlib.h>

#include "fileio.h"

#define SQ_BLOCK (1 << 20)             /* libarchive read block */
#define SQ_MAX_LINE ((size_t)1 << 28)  /* refuse lines over 256 MiB */
#define SQ_MAX_COLS 256                /* columns a delimited line may name */

static const char *const format_names[] = {
    "auto", "movielens", "recbole", "sasrec", "s3rec", "csv", "tsv",
};

const char *sq_format_name(int format)
{
    if (format < 0 || format >= (int)(sizeof format_names / sizeof format_names[0]))
        return NULL;
    return format_names[format];
}

int sq_format_parse(const char *name)
{
    for (int f = 0; f < (int)(sizeof format_names / sizeof format_names[0]); f++)
        if (strcmp(name, format_names[f]) == 0)
            return f;
    return -1;
}

/* ---- the line reader ---- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The ratings files of the MovieLens and RecBole layouts. */
static int known_member(const char *path)
{
    const char *b = base_name(path);
    return strcmp(b, "u.data") == 0 || strcmp(b, "ratings.dat") == 0 ||
           strcmp(b, "ratings.csv") == 0 || ends_with(b, ".inter");
}

/* --member NAME matches the whole path or its last components. */
static int member_matches(const char *path, const char *want)
{
    size_t n = strlen(path), k = strlen(want);
    if (n == k)
        return strcmp(path, want) == 0;
    return n > k && path[n - k - 1] == '/' && strcmp(path + n - k, want) == 0;
}

/* libarchive errors: EIO is an I/O failure, the rest (bad gzip, truncated
 * zip, unknown format) means the data is bad. */
static int arc_fail(sq_lines *L, sq_err *e, const char *what)
{
    int en = archive_errno(L->a);
    const char *msg = archive_error_string(L->a);
    int code = en == ENOMEM ? SQ_EX_OSERR : en == EIO ? SQ_EX_IO : SQ_EX_DATA;
    return sq_fail(e, code, "%s: %s", L->name, msg ? msg : what);
}

static int arc_open(sq_lines *L, sq_err *e)
{
    L->a = archive_read_new();
    if (!L->a)
        return sq_fail(e, SQ_EX_OSERR, "out of memory (libarchive)");
    archive_read_support_filter_all(L->a);
    /* The archive formats a dataset comes in, not format_all: its mtree
     * reader bids on plain text and takes "1::1193::5::978300760" or a CSV
     * header for a list of file names. */
    archive_read_support_format_zip(L->a);
    archive_read_support_format_tar(L->a);
    archive_read_support_format_7zip(L->a);
    archive_read_support_format_rar(L->a);
    archive_read_support_format_rar5(L->a);
    archive_read_support_format_empty(L->a);
    archive_read_support_format_raw(L->a); /* plain or compressed text */
    int r = L->path ? archive_read_open_filename(L->a, L->path, SQ_BLOCK)
                    : archive_read_open_fd(L->a, 0, SQ_BLOCK);
    if (r != ARCHIVE_OK) {
        /* a system errno means the file could not be opened; anything else
         * comes from reading the first bytes (a truncated gzip header) */
        int en = archive_errno(L->a);
        if (en == ENOMEM)
            return sq_fail(e, SQ_EX_OSERR, "out of memory (libarchive)");
        if (en > 0 && en != EILSEQ && en != EINVAL)
            return sq_fail(e, SQ_EX_NOINPUT, "%s: cannot open: %s", L->name, strerror(en));
        return arc_fail(L, e, "cannot read");
    }
    return 0;
}

/* Advances to the member called WANT (exact path), or, with WANT NULL, to
 * the member that o_member names or that looks like a ratings file.
 * Sets *found; counts regular files in *n_reg and keeps the first name. */
static int select_member(sq_lines *L, const char *o_member, const char *want,
                         int *found, int *is_archive, int *n_reg, char *first, sq_err *e)
{
    struct archive_entry *ent;
    *found = *is_archive = *n_reg = 0;
    for (;;) {
        int r = archive_read_next_header(L->a, &ent);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return arc_fail(L, e, "cannot read the archive");
        if (archive_format(L->a) == ARCHIVE_FORMAT_RAW) {
            *found = 1; /* not an archive: the data itself */
            return 0;
        }
        *is_archive = 1;
        const char *p = archive_entry_pathname(ent);
        if (!p || archive_entry_filetype(ent) != AE_IFREG)
            continue;
        if (++*n_reg == 1)
            snprintf(first, SQ_MEMBER_MAX, "%s", p);
        int hit = want ? strcmp(p, want) == 0
                : o_member ? member_matches(p, o_member) : known_member(p);
        if (hit) {
            snprintf(L->member, sizeof L->member, "%s", p);
            *found = 1;
            return 0;
        }
    }
}

/* libarchive's gzip filter ignores the CRC-32 and length of each member
 * (a damaged file reads as changed data): a named plain gzip file is read
 * with zlib instead, whose gzread checks both. */
static int gz_switch(sq_lines *L, sq_err *e)
{
    if (!L->path || archive_filter_count(L->a) != 2 ||
        archive_filter_code(L->a, 0) != ARCHIVE_FILTER_GZIP)
        return 0;
    L->gzbuf = malloc(SQ_BLOCK);
    if (!L->gzbuf)
        return sq_fail(e, SQ_EX_OSERR, "out of memory (gzip buffer)");
    gzFile g = gzopen(L->path, "rb");
    if (!g)
        return sq_fail(e, SQ_EX_NOINPUT, "%s: cannot open: %s", L->name,
                       errno ? strerror(errno) : "out of memory");
    archive_read_free(L->a);
    L->a = NULL;
    L->gz = g;
    return 0;
}

/* gzerror's message starts with the path, which L->name already gives */
static const char *gz_msg(const sq_lines *L, int *zerr)
{
    const char *msg = gzerror((gzFile)L->gz, zerr);
    size_t k = strlen(L->path);
    if (strncmp(msg, L->path, k) == 0 && strncmp(msg + k, ": ", 2) == 0)
        msg += k + 2;
    return msg;
}

static int gz_block(sq_lines *L, sq_err *e)
{
    int n = gzread((gzFile)L->gz, L->gzbuf, SQ_BLOCK);
    if (n < 0) {
        int zerr;
        const char *msg = gz_msg(L, &zerr);
        if (zerr == Z_ERRNO)
            return sq_fail(e, SQ_EX_IO, "%s: read failed: %s", L->name, strerror(errno));
        if (zerr == Z_MEM_ERROR)
            return sq_fail(e, SQ_EX_OSERR, "out of memory (zlib)");
        return sq_fail(e, SQ_EX_DATA, "%s: bad gzip data: %s", L->name, msg);
    }
    if (n == 0) {
        /* a member cut short reads as a clean end; gzerror says otherwise */
        int zerr;
        const char *msg = gz_msg(L, &zerr);
        if (zerr != Z_OK)
            return sq_fail(e, SQ_EX_DATA, "%s: bad gzip data: %s", L->name, msg);
        L->eof = 1;
    }
    L->blk = L->gzbuf;
    L->blk_len = (size_t)n;
    L->blk_pos = 0;
    return 0;
}

int sq_lines_open(sq_lines *L, const char *path, const char *member, sq_err *e)
{
    memset(L, 0, sizeof *L);
    if (path && strcmp(path, "-") == 0)
        path = NULL;
    L->path = path;
    snprintf(L->name, sizeof L->name, "%s", sq_in_name(path));
    struct stat st;
    if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return sq_fail(e, SQ_EX_NOINPUT, "%s: is a directory", L->name);
    if (arc_open(L, e))
        return e->code;
    char first[SQ_MEMBER_MAX] = "";
    int found, is_archive, n_reg;
    if (select_member(L, member, NULL, &found, &is_archive, &n_reg, first, e))
        return e->code;
    if (!found && is_archive && !member && n_reg == 1 && path) {
        /* no ratings file by name, but only one file: reopen and take it */
        archive_read_free(L->a);
        L->a = NULL;
        char again[SQ_MEMBER_MAX];
        if (arc_open(L, e) ||
            select_member(L, NULL, first, &found, &is_archive, &n_reg, again, e))
            return e->code;
    }
    if (!found && is_archive) {
        if (member)
            return sq_fail(e, SQ_EX_NOINPUT, "%s: no member %s in the archive", L->name, member);
        if (n_reg == 0)
            return sq_fail(e, SQ_EX_DATA, "%s: the archive holds no files", L->name);
        return sq_fail(e, SQ_EX_USAGE,
                       "%s: no u.data, ratings.dat, ratings.csv or *.inter member "
                       "(the first file is %s): name one with --member", L->name, first);
    }
    if (!found) {
        L->eof = 1; /* empty input */
        return 0;
    }
    if (!is_archive && member)
        return sq_fail(e, SQ_EX_USAGE, "%s: --member %s: not an archive", L->name, member);
    if (is_archive) {
        snprintf(L->name, sizeof L->name, "%s(%s)", sq_in_name(path), L->member);
        snprintf(L->hint, sizeof L->hint, "%s", base_name(L->member));
    } else if (path) {
        /* "u.data.gz" hints like "u.data" */
        snprintf(L->hint, sizeof L->hint, "%s", base_name(path));
        if (gz_switch(L, e))
            return e->code;
        static const char *const zext[] = {".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".Z"};
        for (size_t i = 0; i < sizeof zext / sizeof zext[0]; i++)
            if (ends_with(L->hint, zext[i])) {
                L->hint[strlen(L->hint) - strlen(zext[i])] = '\0';
                break;
            }
    }
    return 0;
}

static int buf_append(sq_lines *L, const char *p, size_t n, sq_err *e)
{
    if (L->buf_len + n > SQ_MAX_LINE)
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: longer than %zu bytes", L->name,
                       (unsigned long long)L->lineno + 1, SQ_MAX_LINE);
    if (L->buf_len + n > L->buf_cap) {
        size_t c = L->buf_cap ? L->buf_cap : 4096;
        while (c < L->buf_len + n)
            c *= 2;
        char *b = realloc(L->buf, c);
        if (!b)
            return sq_fail(e, SQ_EX_OSERR, "out of memory (line buffer)");
        L->buf = b;
        L->buf_cap = c;
    }
    memcpy(L->buf + L->buf_len, p, n);
    L->buf_len += n;
    return 0;
}

int sq_lines_next(sq_lines *L, const char **line, size_t *len, sq_err *e)
{
    int spanning = 0; /* part of the line is already in buf */
    L->buf_len = 0;
    for (;;) {
        if (L->blk_pos == L->blk_len) {
            if (L->eof) {
                if (!spanning)
                    return 0;
                *line = L->buf; /* a last line without "\n" */
                *len = L->buf_len;
                break;
            }
            if (L->gz) {
                if (gz_block(L, e))
                    return -1;
                continue;
            }
            const void *b;
            size_t n;
            la_int64_t off;
            int r = archive_read_data_block(L->a, &b, &n, &off);
            if (r == ARCHIVE_EOF) {
                L->eof = 1;
                continue;
            }
            /* a warning here is a member whose CRC does not match (zip):
             * the data read is not what was stored */
            if (r != ARCHIVE_OK) {
                arc_fail(L, e, "read failed");
                return -1;
            }
            L->blk = b;
            L->blk_len = n;
            L->blk_pos = 0;
            continue;
        }
        const char *p = L->blk + L->blk_pos;
        size_t avail = L->blk_len - L->blk_pos;
        const char *nl = memchr(p, '\n', avail);
        if (!nl) {
            if (buf_append(L, p, avail, e))
                return -1;
            spanning = 1;
            L->blk_pos = L->blk_len;
            continue;
        }
        size_t n = (size_t)(nl - p);
        L->blk_pos += n + 1;
        if (!spanning) {
            *line = p; /* the common case: no copy */
            *len = n;
        } else {
            if (buf_append(L, p, n, e))
                return -1;
            *line = L->buf;
            *len = L->buf_len;
        }
        break;
    }
    L->lineno++;
    if (*len && (*line)[*len - 1] == '\r')
        (*len)--;
    if (L->lineno == 1 && *len >= 3 && memcmp(*line, "\xEF\xBB\xBF", 3) == 0) {
        *line += 3; /* a UTF-8 byte order mark would hide the first header name */
        *len -= 3;
    }
    return 1;
}

void sq_lines_close(sq_lines *L)
{
    if (L->a)
        archive_read_free(L->a);
    if (L->gz)
        gzclose((gzFile)L->gz);
    free(L->buf);
    free(L->gzbuf);
    L->a = NULL;
    L->gz = NULL;
    L->buf = NULL;
    L->gzbuf = NULL;
}

/* ---- fields and numbers ---- */

typedef struct {
    const char *s;
    size_t n;
} sq_field;

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* Splits on runs of blanks; stores up to max fields, returns the count. */
static size_t split_ws(const char *s, size_t n, sq_field *f, size_t max)
{
    size_t k = 0, i = 0;
    for (;;) {
        while (i < n && is_ws(s[i]))
            i++;
        if (i == n)
            return k;
        size_t j = i;
        while (j < n && !is_ws(s[j]))
            j++;
        if (k < max) {
            f[k].s = s + i;
            f[k].n = j - i;
        }
        k++;
        i = j;
    }
}

/* Splits on SEP; fields lose surrounding spaces and one pair of quotes. */
static size_t split_sep(const char *s, size_t n, const char *sep, size_t seplen,
                        sq_field *f, size_t max)
{
    size_t k = 0, i = 0;
    for (;;) {
        size_t j = i;
        if (seplen == 1) {
            const char *q = memchr(s + i, sep[0], n - i);
            j = q ? (size_t)(q - s) : n;
        } else {
            while (j < n && !(j + seplen <= n && memcmp(s + j, sep, seplen) == 0))
                j++;
        }
        if (k < max) {
            size_t a = i, b = j;
            while (a < b && s[a] == ' ')
                a++;
            while (b > a && s[b - 1] == ' ')
                b--;
            if (b - a >= 2 && s[a] == '"' && s[b - 1] == '"') {
                a++;
                b--;
            }
            f[k].s = s + a;
            f[k].n = b - a;
        }
        k++;
        if (j >= n)
            return k;
        i = j + seplen;
    }
}

static int parse_i64(const char *s, size_t n, int64_t *v)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (i == n || n - i > 19)
        return -1;
    uint64_t x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x > (uint64_t)INT64_MAX)
        return -1;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return 0;
}

/* Integers the fast way, anything else ("4.5", "9.7e8") through strtod. */
static int parse_f64(const char *s, size_t n, double *v)
{
    int64_t i;
    if (parse_i64(s, n, &i) == 0) {
        *v = (double)i;
        return 0;
    }
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    for (size_t k = 0; k < n; k++) /* no hex, inf or nan */
        if (!strchr("0123456789+-.eE", tmp[k]))
            return -1;
    char *end;
    errno = 0;
    double d = strtod(tmp, &end);
    if (end != tmp + n || errno == ERANGE || !isfinite(d))
        return -1;
    *v = d;
    return 0;
}

/* Seconds as in the file; fractional (RecBole float) values are rounded. */
/* -1: not a number, -2: a number beyond 64-bit seconds. */
static int parse_ts(const char *s, size_t n, int64_t *v)
{
    if (parse_i64(s, n, v) == 0)
        return 0;
    double d;
    if (parse_f64(s, n, &d)) {
        size_t k = n && (s[0] == '-' || s[0] == '+');
        while (k < n && s[k] >= '0' && s[k] <= '9')
            k++;
        return k == n && n > 1 ? -2 : -1; /* all digits: too many of them */
    }
    if (!(fabs(d) < 9.2e18))
        return -2;
    *v = (int64_t)llround(d);
    return 0;
}

/* A number however long (an id need not fit in 64 bits): optional sign,
 * then digits. Only a first field that is not one makes a header. */
static int all_digits(const char *s, size_t n)
{
    size_t i = n && (s[0] == '-' || s[0] == '+');
    if (i == n)
        return 0;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* ---- the parser ---- */

typedef struct {
    int format;
    char sep[8];
    size_t seplen;            /* 0: runs of blanks */
    int skip_header;          /* the next non-blank line is a header */
    int col_user, col_item, col_time, col_rating; /* 0-based, -1 = none */
    const char *name_user, *name_item, *name_time, *name_rating; /* by header */
    uint32_t last_user;       /* consecutive lines often share the user */
    int have_last;
} sq_parser;

static int fail_line(const sq_lines *L, sq_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "NAME: line N: why", code 65 */
static int fail_line(const sq_lines *L, sq_err *e, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return sq_fail(e, SQ_EX_DATA, "%s: line %llu: %s", L->name,
                   (unsigned long long)L->lineno, why);
}

static int find_sub(const char *s, size_t n, const char *sub)
{
    size_t k = strlen(sub);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, sub, k) == 0)
            return 1;
    return 0;
}

/* auto: the member or file name first, then the shape of the first line. */
static int guess_format(const char *hint, const char *s, size_t n)
{
    if (strcmp(hint, "u.data") == 0 || strcmp(hint, "ratings.dat") == 0 ||
        strcmp(hint, "ratings.csv") == 0)
        return SQ_FMT_MOVIELENS;
    if (ends_with(hint, ".inter") || find_sub(s, n, ":token") || find_sub(s, n, ":float"))
        return SQ_FMT_RECBOLE;
    if (find_sub(s, n, "::"))
        return SQ_FMT_MOVIELENS;
    sq_field f[8];
    if (memchr(s, '\t', n) && split_sep(s, n, "\t", 1, f, 8) == 4)
        return SQ_FMT_MOVIELENS;
    if (memchr(s, ',', n) && split_sep(s, n, ",", 1, f, 8) == 4)
        return SQ_FMT_MOVIELENS;
    size_t k = split_ws(s, n, f, 8);
    if (k == 2)
        return SQ_FMT_SASREC;
    if (k >= 3 && !memchr(s, '\t', n) && !memchr(s, ',', n))
        return SQ_FMT_S3REC;
    return -1;
}

/* A column option: a 1-based number, or a name to look up in the header. */
static int column_opt(const char *spec, int dflt, int header, int *col,
                      const char **name, const char *opt, sq_err *e)
{
    *name = NULL;
    *col = dflt;
    if (!spec)
        return 0;
    int64_t v;
    if (parse_i64(spec, strlen(spec), &v) == 0) {
        if (v < 1 || v > SQ_MAX_COLS)
            return sq_fail(e, SQ_EX_USAGE, "%s %s: columns are numbered 1 to %d", opt, spec,
                           SQ_MAX_COLS);
        *col = (int)v - 1;
        return 0;
    }
    if (!header)
        return sq_fail(e, SQ_EX_USAGE, "%s %s: a column name needs --header", opt, spec);
    *name = spec;
    *col = -1;
    return 0;
}

/* Sets up the parser once the format is known (first non-blank line). */
static int parser_setup(sq_parser *p, const sq_rawopts *o, const sq_lines *L,
                        const char *s, size_t n, sq_err *e)
{
    p->col_time = p->col_rating = -1;
    p->col_user = 0;
    p->col_item = 1;
    switch (p->format) {
    case SQ_FMT_MOVIELENS: {
        /* "::" (ml-1m/10m), tab (ml-100k) or comma with a header (ml-20m+) */
        const char *sep = find_sub(s, n, "::") ? "::" : memchr(s, '\t', n) ? "\t" : ",";
        snprintf(p->sep, sizeof p->sep, "%s", sep);
        p->seplen = strlen(p->sep);
        p->col_rating = 2;
        p->col_time = 3;
        sq_field f[1];
        split_sep(s, n, p->sep, p->seplen, f, 1);
        p->skip_header = !all_digits(f[0].s, f[0].n);
        break;
    }
    case SQ_FMT_RECBOLE:
        snprintf(p->sep, sizeof p->sep, "\t");
        p->seplen = 1;
        p->skip_header = 1;
        p->col_user = p->col_item = -1;
        p->name_user = "user_id";
        p->name_item = "item_id";
        p->name_time = "timestamp";
        p->name_rating = "rating";
        break;
    case SQ_FMT_SASREC:
    case SQ_FMT_S3REC:
        p->seplen = 0;
        break;
    case SQ_FMT_CSV:
    case SQ_FMT_TSV:
        snprintf(p->sep, sizeof p->sep, "%s", o->sep ? o->sep : p->format == SQ_FMT_CSV ? "," : "\t");
        p->seplen = strlen(p->sep);
        if (p->seplen == 0 || (o->sep && strlen(o->sep) >= sizeof p->sep))
            return sq_fail(e, SQ_EX_USAGE, "--sep: give 1 to %zu characters", sizeof p->sep - 1);
        p->skip_header = o->header;
        if (column_opt(o->user_col, 0, o->header, &p->col_user, &p->name_user, "--user-col", e) ||
            column_opt(o->item_col, 1, o->header, &p->col_item, &p->name_item, "--item-col", e) ||
            column_opt(o->time_col, -1, o->header, &p->col_time, &p->name_time, "--time-col", e) ||
            column_opt(o->rating_col, -1, o->header, &p->col_rating, &p->name_rating,
                       "--rating-col", e))
            return e->code;
        break;
    default:
        return sq_fail(e, SQ_EX_USAGE, "%s: unknown format", L->name);
    }
    return 0;
}

/* Resolves column names from a header line. RecBole names carry a type
 * ("user_id:token"): the name is the part before the colon. */
static int parse_header(sq_parser *p, const sq_lines *L, const char *s, size_t n, sq_err *e)
{
    sq_field f[SQ_MAX_COLS];
    size_t k = split_sep(s, n, p->sep, p->seplen, f, SQ_MAX_COLS);
    if (k > SQ_MAX_COLS)
        k = SQ_MAX_COLS;
    const char **names[4] = {&p->name_user, &p->name_item, &p->name_time, &p->name_rating};
    int *cols[4] = {&p->col_user, &p->col_item, &p->col_time, &p->col_rating};
    if (p->format == SQ_FMT_RECBOLE && !memchr(s, ':', n))
        return fail_line(L, e, "not a RecBole header (name:type fields)");
    for (int c = 0; c < 4; c++) {
        if (!*names[c])
            continue;
        size_t want = strlen(*names[c]);
        for (size_t i = 0; i < k; i++) {
            size_t len = f[i].n;
            if (p->format == SQ_FMT_RECBOLE) {
                const char *colon = memchr(f[i].s, ':', f[i].n);
                if (colon)
                    len = (size_t)(colon - f[i].s);
            }
            if (len == want && memcmp(f[i].s, *names[c], want) == 0) {
                *cols[c] = (int)i;
                break;
            }
        }
        /* RecBole's rating and timestamp are optional; the rest are not */
        int optional = p->format == SQ_FMT_RECBOLE && c >= 2;
        if (*cols[c] < 0 && !optional)
            return fail_line(L, e, "no column named %s in the header", *names[c]);
    }
    return 0;
}

static int intern_user(sq_inter *t, sq_parser *p, const sq_field *f, uint32_t *u, sq_err *e)
{
    /* logs are mostly grouped by user: skip the hash for a repeated user */
    if (p->have_last && t->users.len[p->last_user] == f->n &&
        memcmp(sq_ids_str(&t->users, p->last_user), f->s, f->n) == 0) {
        *u = p->last_user;
        return 0;
    }
    if (sq_ids_intern(&t->users, f->s, f->n, u, e))
        return e->code;
    p->last_user = *u;
    p->have_last = 1;
    return 0;
}

#define SHOW(f) (int)((f).n > 40 ? 40 : (f).n), (f).s

/* One line of a delimited format (movielens, recbole, csv, tsv, sasrec). */
static int parse_delimited(sq_inter *t, sq_parser *p, const sq_rawopts *o, sq_rawinfo *info,
                           const sq_lines *L, const char *s, size_t n, sq_err *e)
{
    sq_field f[SQ_MAX_COLS];
    int need = p->col_user;
    if (p->col_item > need)
        need = p->col_item;
    if (p->col_time > need)
        need = p->col_time;
    if (p->col_rating > need)
        need = p->col_rating;
    size_t k = p->seplen ? split_sep(s, n, p->sep, p->seplen, f, (size_t)need + 1)
                         : split_ws(s, n, f, (size_t)need + 1);
    if (p->format == SQ_FMT_SASREC && k != 2)
        return fail_line(L, e, "expected 2 fields (user item), found %zu", k);
    if (k < (size_t)need + 1)
        return fail_line(L, e, "expected at least %d fields, found %zu", need + 1, k);
    const sq_field *fu = &f[p->col_user], *fi = &f[p->col_item];
    if (fu->n == 0)
        return fail_line(L, e, "empty user id");
    if (fi->n == 0)
        return fail_line(L, e, "empty item id");
    int64_t ts = 0;
    int bad = p->col_time >= 0 ? parse_ts(f[p->col_time].s, f[p->col_time].n, &ts) : 0;
    if (bad)
        return fail_line(L, e, "timestamp '%.*s' %s", SHOW(f[p->col_time]),
                         bad == -2 ? "is too large (beyond 64-bit seconds)" : "is not a number");
    if (p->col_rating >= 0) {
        double r;
        if (parse_f64(f[p->col_rating].s, f[p->col_rating].n, &r))
            return fail_line(L, e, "rating '%.*s' is not a number", SHOW(f[p->col_rating]));
        if (o->use_min_rating && !(r >= o->min_rating)) {
            info->below_rating++;
            return 0;
        }
    }
    uint32_t u, i;
    if (intern_user(t, p, fu, &u, e) || sq_ids_intern(&t->items, fi->s, fi->n, &i, e) ||
        sq_inter_add(t, u, i, ts, e))
        return e->code;
    info->rows++;
    return 0;
}

/* One S3-Rec line: the user, then its items in order. */
static int parse_s3rec(sq_inter *t, sq_parser *p, sq_rawinfo *info, const sq_lines *L,
                       const char *s, size_t n, sq_err *e)
{
    sq_field f[1];
    size_t i = 0;
    while (i < n && is_ws(s[i]))
        i++;
    size_t j = i;
    while (j < n && !is_ws(s[j]))
        j++;
    f[0].s = s + i;
    f[0].n = j - i;
    uint32_t u;
    if (intern_user(t, p, &f[0], &u, e))
        return e->code;
    size_t items = 0;
    for (i = j;;) {
        while (i < n && is_ws(s[i]))
            i++;
        if (i == n)
            break;
        j = i;
        while (j < n && !is_ws(s[j]))
            j++;
        uint32_t it;
        if (sq_ids_intern(&t->items, s + i, j - i, &it, e) || sq_inter_add(t, u, it, 0, e))
            return e->code;
        items++;
        i = j;
    }
    if (items == 0)
        return fail_line(L, e, "user %.*s has no items", SHOW(f[0]));
    info->rows += items;
    return 0;
}

/* "NAME: line N: out of memory (WHAT) after K interactions" */
static void at_oom(const sq_lines *L, uint64_t rows, sq_err *e)
{
    char why[sizeof e->msg];
    memcpy(why, e->msg, sizeof why);
    int k = snprintf(e->msg, sizeof e->msg, "%.400s: line %llu: ", L->name,
                     (unsigned long long)L->lineno);
    if (k > 0 && (size_t)k < sizeof e->msg)
        snprintf(e->msg + k, sizeof e->msg - (size_t)k, "%.500s after %llu interactions", why,
                 (unsigned long long)rows);
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_ws(s[i]))
            return 0;
    return 1;
}

int sq_raw_load(sq_inter *t, const char *path, const sq_rawopts *o,
                sq_rawinfo *info, sq_err *e)
{
    memset(info, 0, sizeof *info);
    sq_lines L;
    int rc = sq_lines_open(&L, path, o->member, e);
    if (rc) {
        sq_lines_close(&L);
        return rc;
    }
    snprintf(info->member, sizeof info->member, "%s", L.member);
    sq_parser p;
    memset(&p, 0, sizeof p);
    p.format = -1; /* decided by the first non-blank line */
    int ready = 0;  /* columns known, table told about timestamps */
    const char *s;
    size_t n;
    int r = 0;
    while (rc == 0 && (r = sq_lines_next(&L, &s, &n, e)) == 1) {
        /* ids are kept as C strings: "a\0b" would become "a" */
        const char *nul = memchr(s, '\0', n);
        if (nul) {
            rc = fail_line(&L, e, "a NUL byte (byte %zu of the line)", (size_t)(nul - s) + 1);
            break;
        }
        if (blank(s, n))
            continue;
        if (p.format < 0) {
            p.format = o->format != SQ_FMT_AUTO ? o->format : guess_format(L.hint, s, n);
            if (p.format < 0) {
                rc = fail_line(&L, e, "cannot tell the format from this line: use --format");
                break;
            }
            if ((rc = parser_setup(&p, o, &L, s, n, e)))
                break;
            info->format = p.format;
            snprintf(info->sep, sizeof info->sep, "%s", p.sep);
        }
        if (p.skip_header) {
            p.skip_header = 0;
            rc = parse_header(&p, &L, s, n, e);
            continue;
        }
        if (!ready) {
            info->has_ts = p.col_time >= 0;
            info->has_rating = p.col_rating >= 0;
            if (o->use_min_rating && !info->has_rating) {
                rc = sq_fail(e, SQ_EX_USAGE, "%s: --min-rating: the %s input has no rating column",
                             L.name, sq_format_name(p.format));
                break;
            }
            if ((rc = sq_inter_set_ts(t, info->has_ts, L.name, e)))
                break;
            ready = 1;
        }
        rc = p.format == SQ_FMT_S3REC ? parse_s3rec(t, &p, info, &L, s, n, e)
                                      : parse_delimited(t, &p, o, info, &L, s, n, e);
    }
    if (rc == 0 && r < 0)
        rc = e->code;
    if (rc == SQ_EX_OSERR) /* say where: the input has no size cap (man page, BOUNDS) */
        at_oom(&L, info->rows, e);
    info->lines = L.lineno;
    sq_lines_close(&L);
    return rc;
}
