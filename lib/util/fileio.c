#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "signals.h"

static int is_stdio(const char *path) { return path == NULL || strcmp(path, "-") == 0; }

const char *sq_in_name(const char *path) { return is_stdio(path) ? "<stdin>" : path; }
const char *sq_out_name(const char *path) { return is_stdio(path) ? "<stdout>" : path; }

/* The file a chain of symbolic links at path ends at, malloc'd: path itself
 * when it is no link, the name a dangling link points to when that file
 * does not exist. NULL with errno on failure. */
static char *resolve_links(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        char buf[PATH_MAX];
        ssize_t n = hops < 40 ? readlink(cur, buf, sizeof buf - 1) : -1;
        if (n < 0) {
            int err = hops < 40 ? errno : ELOOP;
            free(cur);
            errno = err;
            return NULL;
        }
        buf[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dl = buf[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dl + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dl);
            memcpy(next + dl, buf, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

enum { OUT_FILE, OUT_THROUGH, OUT_DIR };

/* How an output at path is written (fileio.h): through the links. */
static int out_kind(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return OUT_FILE;
    if (S_ISDIR(st.st_mode))
        return OUT_DIR;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode))
        return OUT_THROUGH;
    return OUT_FILE;
}

/* A device or FIFO: written as it is. */
static int open_through(sq_outfile *o, int binary, sq_err *e)
{
    int fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: cannot open for writing: %s", o->path,
                       strerror(errno));
    if (binary && isatty(fd)) {
        close(fd);
        return sq_fail(e, SQ_EX_USAGE, "%s: refusing to write a binary stream to a terminal",
                       o->path);
    }
    if (!(o->fp = fdopen(fd, "wb"))) {
        close(fd);
        return sq_fail(e, SQ_EX_OSERR, "%s: fdopen: %s", o->path, strerror(errno));
    }
    return 0;
}

/* A file (or a link to one): a temp file next to the target. */
static int open_temp(sq_outfile *o, sq_err *e)
{
    if (!(o->target = resolve_links(o->path)))
        return sq_fail(e, errno == ENOMEM ? SQ_EX_OSERR : SQ_EX_CANTCREAT,
                       "%s: cannot create: %s", o->path, strerror(errno));
    size_t n = strlen(o->target) + 32;
    if (!(o->tmp = malloc(n)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    snprintf(o->tmp, n, "%s.tmp.%ld", o->target, (long)getpid());
    /* Registered before it exists, so that no signal can come between. */
    o->slot = sq_tmp_register(o->tmp) + 1;
    /* O_EXCL: never clobber a file we did not create. */
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        sq_tmp_unregister(o->slot - 1);
        o->slot = 0;
        free(o->tmp);
        o->tmp = NULL;
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: cannot create: %s", o->path, strerror(err));
    }
    if (!(o->fp = fdopen(fd, "wb"))) {
        close(fd);
        return sq_fail(e, SQ_EX_OSERR, "%s: fdopen: %s", o->path, strerror(errno));
    }
    return 0;
}

int sq_out_open(sq_outfile *o, const char *path, int binary, sq_err *e)
{
    memset(o, 0, sizeof *o);
    if (is_stdio(path)) {
        if (binary && isatty(STDOUT_FILENO))
            return sq_fail(e, SQ_EX_USAGE,
                           "refusing to write a binary stream to a terminal; "
                           "pipe it to another program or use -o FILE");
        o->fp = stdout;
        return 0;
    }
    int kind = out_kind(path);
    if (kind == OUT_DIR)
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: cannot create: is a directory", path);
    if (!(o->path = strdup(path)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = kind == OUT_THROUGH ? open_through(o, binary, e) : open_temp(o, e);
    if (rc)
        sq_out_abort(o);
    return rc;
}

int sq_out_check_regular(const char *path, const char *opt, sq_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return sq_fail(e, SQ_EX_CANTCREAT, "%s %s: not a regular file", opt, path);
    return 0;
}

int sq_out_check(const char *path, sq_err *e)
{
    if (is_stdio(path))
        return 0;
    int kind = out_kind(path);
    if (kind == OUT_DIR)
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: cannot create: is a directory", path);
    if (kind == OUT_THROUGH)
        return access(path, W_OK) == 0 ? 0 : sq_fail(e, SQ_EX_CANTCREAT,
                                                     "%s: cannot open for writing: %s", path,
                                                     strerror(errno));
    sq_outfile o;
    if (sq_out_open(&o, path, 0, e))
        return e->code;
    sq_out_abort(&o);
    return 0;
}

int sq_out_commit(sq_outfile *o, sq_err *e)
{
    if (!o->fp)
        return sq_fail(e, SQ_EX_SOFTWARE, "output committed twice");
    errno = 0;
    int bad = fflush(o->fp) != 0 || ferror(o->fp);
    int err = errno ? errno : EIO;
    if (!o->path) { /* stdout: flushed, leave it open for the runtime */
        o->fp = NULL;
        if (bad)
            return sq_fail(e, SQ_EX_IO, "<stdout>: write error: %s", strerror(err));
        return 0;
    }
    if (fclose(o->fp) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    o->fp = NULL;
    /* The message first: sq_out_abort frees the name. */
    int rc = 0;
    if (bad)
        rc = sq_fail(e, SQ_EX_IO, "%s: write error: %s", o->path, strerror(err));
    else if (o->tmp && rename(o->tmp, o->target) != 0)
        rc = sq_fail(e, SQ_EX_IO, "%s: cannot rename into place: %s", o->path,
                     strerror(errno));
    else if (o->tmp) { /* renamed: nothing left for the signal handler */
        sq_tmp_unregister(o->slot - 1);
        o->slot = 0;
        free(o->tmp);
        o->tmp = NULL;
    }
    sq_out_abort(o);
    return rc;
}

void sq_out_abort(sq_outfile *o)
{
    if (o->fp && o->path)
        fclose(o->fp);
    else if (o->fp)
        fflush(o->fp);
    o->fp = NULL;
    if (o->tmp)
        unlink(o->tmp);
    sq_tmp_unregister(o->slot - 1);
    o->slot = 0;
    free(o->tmp);
    free(o->target);
    free(o->path);
    o->tmp = o->target = o->path = NULL;
}

int sq_out_write(const char *path, int binary, sq_out_writer fn, void *ctx, sq_err *e)
{
    sq_outfile o = {0};
    if (sq_out_open(&o, path, binary, e))
        return e->code;
    if (fn(ctx, o.fp, sq_out_name(path), e) || sq_out_commit(&o, e)) {
        sq_out_abort(&o);
        return e->code;
    }
    return 0;
}

int sq_in_open(FILE **fp, const char *path, sq_err *e)
{
    *fp = NULL;
    if (is_stdio(path)) {
        *fp = stdin;
        return 0;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        return sq_fail(e, errno == ENOENT || errno == EACCES ? SQ_EX_NOINPUT : SQ_EX_IO,
                       "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return sq_fail(e, SQ_EX_NOINPUT, "%s: is a directory", path);
    }
    *fp = f;
    return 0;
}

void sq_in_close(FILE *fp)
{
    if (fp && fp != stdin)
        fclose(fp);
}
