#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_stdio(const char *path) { return path == NULL || strcmp(path, "-") == 0; }

const char *sq_in_name(const char *path) { return is_stdio(path) ? "<stdin>" : path; }
const char *sq_out_name(const char *path) { return is_stdio(path) ? "<stdout>" : path; }

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
    size_t n = strlen(path) + 32;
    o->path = strdup(path);
    o->tmp = malloc(n);
    if (!o->path || !o->tmp) {
        sq_out_abort(o);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    /* O_EXCL: never clobber a file we did not create. */
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        free(o->tmp);
        o->tmp = NULL;
        sq_out_abort(o);
        return sq_fail(e, SQ_EX_CANTCREAT, "%s: cannot create: %s", path, strerror(err));
    }
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        close(fd);
        sq_out_abort(o);
        return sq_fail(e, SQ_EX_OSERR, "%s: fdopen: %s", path, strerror(errno));
    }
    return 0;
}

int sq_out_commit(sq_outfile *o, sq_err *e)
{
    if (!o->fp)
        return sq_fail(e, SQ_EX_SOFTWARE, "output committed twice");
    const char *name = o->path ? o->path : "<stdout>";
    int bad = fflush(o->fp) != 0 || ferror(o->fp);
    int err = errno;
    if (!o->path) { /* stdout: flushed, leave it open for the runtime */
        o->fp = NULL;
        if (bad)
            return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(err));
        return 0;
    }
    if (fclose(o->fp) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    o->fp = NULL;
    if (bad) {
        sq_out_abort(o);
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(err));
    }
    if (rename(o->tmp, o->path) != 0) {
        err = errno;
        sq_out_abort(o);
        return sq_fail(e, SQ_EX_IO, "%s: cannot rename into place: %s", name, strerror(err));
    }
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return 0;
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
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
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
