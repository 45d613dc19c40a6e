/* Unit tests for lib/util/fileio.c: sq_out_write's commit and abort, failed
 * commits, outputs that are links, devices or directories, and the temp
 * files a signal removes (signals.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* The temp file of path, as sq_out_open names it. */
static void tmp_of(char *buf, size_t n, const char *path)
{
    snprintf(buf, n, "%s.tmp.%ld", path, (long)getpid());
}

/* A rename that fails at commit (the target became a non-empty directory
 * after the open): 74, and the message names the output, not freed memory
 * (a heap use-after-free under ASan before the fix). */
UNIT_TEST(test_fileio_commit_rename_fails)
{
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], inner[160], tmp[160], want[300];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(inner, sizeof inner, "%s/x", path);
    tmp_of(tmp, sizeof tmp, path);
    sq_outfile o;
    sq_err e = {0};
    CHECK_EQ(sq_out_open(&o, path, 0, &e), 0);
    fputs("data\n", o.fp);
    CHECK_EQ(mkdir(path, 0777), 0);
    FILE *f = fopen(inner, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK_EQ(sq_out_commit(&o, &e), SQ_EX_IO);
    snprintf(want, sizeof want, "%s: cannot rename into place: ", path);
    CHECK(strncmp(e.msg, want, strlen(want)) == 0);
    CHECK(access(tmp, F_OK) != 0);
    sq_out_abort(&o); /* safe after a failed commit */
    unlink(inner);
    rmdir(path);
    rmdir(dir);
}

/* A write that fails at commit (the file size limit, as a full disk would):
 * 74, the message names the output, no file and no temp file are left. */
UNIT_TEST(test_fileio_commit_write_fails)
{
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], tmp[160], want[300];
    snprintf(path, sizeof path, "%s/big.bin", dir);
    tmp_of(tmp, sizeof tmp, path);
    struct rlimit old, lim;
    CHECK_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
    sq_outfile o;
    sq_err e = {0};
    CHECK_EQ(sq_out_open(&o, path, 0, &e), 0);
    lim = old;
    lim.rlim_cur = 1000;
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (int i = 0; i < 1000; i++)
        fputs("0123456789", o.fp);
    CHECK_EQ(sq_out_commit(&o, &e), SQ_EX_IO);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, oldsig);
    snprintf(want, sizeof want, "%s: write error: ", path);
    CHECK(strncmp(e.msg, want, strlen(want)) == 0);
    CHECK(access(path, F_OK) != 0);
    CHECK(access(tmp, F_OK) != 0);
    rmdir(dir);
}

/* An output that is a directory is refused at open (73), nothing created. */
UNIT_TEST(test_fileio_directory_refused)
{
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char tmp[160];
    tmp_of(tmp, sizeof tmp, dir);
    sq_outfile o;
    sq_err e = {0}, e2 = {0};
    CHECK_EQ(sq_out_open(&o, dir, 0, &e), SQ_EX_CANTCREAT);
    CHECK(strstr(e.msg, "is a directory") != NULL);
    CHECK(strncmp(e.msg, dir, strlen(dir)) == 0);
    CHECK_EQ(sq_out_check(dir, &e2), SQ_EX_CANTCREAT);
    CHECK(access(tmp, F_OK) != 0);
    sq_out_abort(&o);
    rmdir(dir);
}

static int read_all(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
    return (int)got;
}

/* A symlink (relative, chained, dangling) is written through: the file it
 * points to gets the content, atomically; the link stays a link. */
UNIT_TEST(test_fileio_symlink_target)
{
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[128], real[160], link1[160], link2[160], dang[160], made[160], buf[256];
    char want[300];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(real, sizeof real, "%s/real.txt", sub);
    snprintf(link1, sizeof link1, "%s/link1", dir);
    snprintf(link2, sizeof link2, "%s/link2", dir);
    snprintf(dang, sizeof dang, "%s/dangling", dir);
    snprintf(made, sizeof made, "%s/new.txt", sub);
    CHECK_EQ(mkdir(sub, 0777), 0);
    FILE *f = fopen(real, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("old\n", f);
        fclose(f);
    }
    CHECK_EQ(symlink("sub/real.txt", link1), 0);
    CHECK_EQ(symlink("link1", link2), 0);
    CHECK_EQ(symlink("sub/new.txt", dang), 0);
    sq_err e = {0};
    CHECK_EQ(sq_out_write(link2, 0, put_hello, "l", &e), 0);
    struct stat st;
    CHECK(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(link2, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(read_all(real, buf, sizeof buf) > 0);
    snprintf(want, sizeof want, "hello l %s\n", link2);
    CHECK_STR(buf, want);
    CHECK_EQ(sq_out_write(dang, 0, put_hello, "d", &e), 0);
    CHECK(lstat(dang, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(read_all(made, buf, sizeof buf) > 0);
    /* a failed write leaves the target as it was */
    CHECK_EQ(sq_out_write(link1, 0, put_fail, NULL, &e), SQ_EX_DATA);
    CHECK(read_all(real, buf, sizeof buf) > 0);
    snprintf(want, sizeof want, "hello l %s\n", link2);
    CHECK_STR(buf, want);
    char tmp[200];
    tmp_of(tmp, sizeof tmp, real);
    CHECK(access(tmp, F_OK) != 0);
    unlink(link1);
    unlink(link2);
    unlink(dang);
    unlink(made);
    unlink(real);
    rmdir(sub);
    rmdir(dir);
}

/* Devices are written through: /dev/null stays a device, /dev/full gives
 * 74 naming it (the full disk of the issue). */
UNIT_TEST(test_fileio_devices)
{
    struct stat st;
    sq_err e = {0};
    if (stat("/dev/null", &st) != 0 || !S_ISCHR(st.st_mode))
        SKIP("no /dev/null");
    CHECK_EQ(sq_out_write("/dev/null", 1, put_hello, "n", &e), 0);
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    CHECK_EQ(sq_out_check("/dev/null", &e), 0);
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
        SKIP("no /dev/full");
    sq_outfile o;
    CHECK_EQ(sq_out_open(&o, "/dev/full", 1, &e), 0);
    CHECK(o.tmp == NULL);
    for (int i = 0; i < 10000; i++)
        fputs("0123456789", o.fp);
    CHECK_EQ(sq_out_commit(&o, &e), SQ_EX_IO);
    CHECK(strncmp(e.msg, "/dev/full: write error: ", 24) == 0);
    CHECK(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode));
}

/* A FIFO is written through (a reader gets the bytes), not replaced. */
UNIT_TEST(test_fileio_fifo)
{
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char fifo[128], buf[256], want[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK_EQ(mkfifo(fifo, 0666), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* the writer */
        sq_err e = {0};
        _exit(sq_out_write(fifo, 0, put_hello, "f", &e));
    }
    CHECK(read_all(fifo, buf, sizeof buf) > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(want, sizeof want, "hello f %s\n", fifo);
    CHECK_STR(buf, want);
    struct stat st;
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    unlink(fifo);
    rmdir(dir);
}

/* SIGTERM, SIGHUP and SIGINT while an output is open remove its temp file,
 * and the program dies of the signal. */
UNIT_TEST(test_fileio_signal_removes_temp)
{
    static const int sigs[] = {SIGTERM, SIGHUP, SIGINT};
    char dir[] = "/tmp/sq_fileio_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], tmp[160];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    for (int i = 0; i < 3; i++) {
        struct sigaction sa;
        if (sigaction(sigs[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
            continue; /* ignored from the start (a background job): stays so */
        int fds[2];
        CHECK_EQ(pipe(fds), 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            sq_outfile o;
            sq_err e = {0};
            if (sq_out_open(&o, path, 1, &e))
                _exit(1);
            fputs("half", o.fp);
            fflush(o.fp);
            char c = 'x';
            if (write(fds[1], &c, 1) != 1)
                _exit(2);
            for (;;)
                pause();
        }
        close(fds[1]);
        char c;
        CHECK_EQ(read(fds[0], &c, 1), 1);
        close(fds[0]);
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
        CHECK_EQ(access(tmp, F_OK), 0);
        kill(pid, sigs[i]);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sigs[i]);
        CHECK(access(tmp, F_OK) != 0);
        CHECK(access(path, F_OK) != 0);
    }
    rmdir(dir);
}
