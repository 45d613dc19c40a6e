/* Unit tests for lib/util/fileio.c: sq_out_write's commit and abort. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fileio.h"
#include "unit.h"

static int put_hello(void *ctx, FILE *f, const char *name, sq_err *e)
{
    (void)e;
    fprintf(f, "hello %s %s\n", (const char *)ctx, name);
    return 0;
}

static int put_fail(void *ctx, FILE *f, const char *name, sq_err *e)
{
    (void)ctx;
    fputs("half", f);
    return sq_fail(e, SQ_EX_DATA, "%s: refused", name);
}

UNIT_TEST(test_fileio_out_write)
{
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], tmp[160];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    sq_err e = {0};
    CHECK_EQ(sq_out_write(path, 0, put_hello, "x", &e), 0);
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        CHECK(fgets(buf, sizeof buf, f) != NULL);
        fclose(f);
    }
    char want[200];
    snprintf(want, sizeof want, "hello x %s\n", path);
    CHECK_STR(buf, want);
    CHECK(access(tmp, F_OK) != 0); /* renamed into place */
    /* a failing writer leaves neither the file nor its temp file */
    unlink(path);
    CHECK_EQ(sq_out_write(path, 0, put_fail, NULL, &e), SQ_EX_DATA);
    CHECK(access(path, F_OK) != 0);
    CHECK(access(tmp, F_OK) != 0);
    snprintf(want, sizeof want, "%s: refused", path);
    CHECK_STR(e.msg, want);
    /* an output that cannot be created: 73, the writer is not called */
    sq_err e2 = {0};
    snprintf(path, sizeof path, "%s/no/such/dir", dir);
    CHECK_EQ(sq_out_write(path, 0, put_fail, NULL, &e2), SQ_EX_CANTCREAT);
    rmdir(dir);
}
