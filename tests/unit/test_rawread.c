/* Unit tests for lib/data/rawread.c: lines across libarchive blocks, line ends,
 * and format guessing (the archive cases are in tests/bats/preprocess.bats). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interactions.h"
#include "rawread.h"
#include "unit.h"

/* Writes TEXT[0,n) to a fresh temp file; the path goes to buf. */
static int temp_file(char *buf, size_t size, const char *text, size_t n)
{
    snprintf(buf, size, "/tmp/seqrec-rawread-XXXXXX");
    int fd = mkstemp(buf);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        return -1;
    }
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? -1 : 0;
}

UNIT_TEST(test_rawread_line_ends)
{
    const char text[] = "a b\r\n\r\n  \nc d\ne f"; /* CRLF, blank lines, no final \n */
    char path[64];
    CHECK_EQ(temp_file(path, sizeof path, text, sizeof text - 1), 0);
    sq_lines L;
    sq_err e = {0};
    CHECK_EQ(sq_lines_open(&L, path, NULL, &e), 0);
    const char *want[] = {"a b", "", "  ", "c d", "e f"};
    const char *s;
    size_t n;
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(sq_lines_next(&L, &s, &n, &e), 1);
        CHECK_EQ(n, strlen(want[i]));
        CHECK(memcmp(s, want[i], n) == 0);
        CHECK_EQ(L.lineno, i + 1);
    }
    CHECK_EQ(sq_lines_next(&L, &s, &n, &e), 0);
    CHECK_EQ(sq_lines_next(&L, &s, &n, &e), 0);
    sq_lines_close(&L);
    unlink(path);
}

/* One S3-Rec line of 400k items (~2.7 MB) spans several 1 MiB blocks. */
UNIT_TEST(test_rawread_long_line_across_blocks)
{
    enum { ITEMS = 400000 };
    size_t cap = (size_t)ITEMS * 8 + 64, len = 0;
    char *text = malloc(cap);
    CHECK(text != NULL);
    if (!text)
        return;
    len += (size_t)snprintf(text, cap, "u1");
    for (int i = 0; i < ITEMS; i++)
        len += (size_t)snprintf(text + len, cap - len, " %d", i % 1000 + 1);
    len += (size_t)snprintf(text + len, cap - len, "\nu2 5 6\n");
    char path[64];
    CHECK_EQ(temp_file(path, sizeof path, text, len), 0);
    free(text);

    sq_inter t_;
    sq_inter_init(&t_);
    sq_rawopts o;
    memset(&o, 0, sizeof o);
    sq_rawinfo info;
    sq_err e = {0};
    CHECK_EQ(sq_raw_load(&t_, path, &o, &info, &e), 0);
    CHECK_EQ(info.format, SQ_FMT_S3REC);
    CHECK_EQ(info.lines, 2);
    CHECK_EQ(t_.n, ITEMS + 2);
    CHECK_EQ(t_.users.n, 2);
    CHECK_EQ(t_.items.n, 1000);
    CHECK_EQ(t_.has_ts, 0);
    CHECK_STR(sq_ids_str(&t_.items, t_.item[ITEMS - 1]), "1000");
    CHECK_STR(sq_ids_str(&t_.items, t_.item[ITEMS + 1]), "6");
    sq_inter_free(&t_);
    unlink(path);
}

static int guess(const char *text, sq_err *e)
{
    char path[64];
    if (temp_file(path, sizeof path, text, strlen(text)))
        return -2;
    sq_inter t_;
    sq_inter_init(&t_);
    sq_rawopts o;
    memset(&o, 0, sizeof o);
    sq_rawinfo info;
    int rc = sq_raw_load(&t_, path, &o, &info, e);
    sq_inter_free(&t_);
    unlink(path);
    return rc ? -1 : info.format;
}

UNIT_TEST(test_rawread_guess_format)
{
    sq_err e = {0};
    CHECK_EQ(guess("1::10::5::978300760\n", &e), SQ_FMT_MOVIELENS);
    CHECK_EQ(guess("196\t242\t3\t881250949\n", &e), SQ_FMT_MOVIELENS);
    CHECK_EQ(guess("userId,movieId,rating,timestamp\n1,2,3.5,4\n", &e), SQ_FMT_MOVIELENS);
    CHECK_EQ(guess("user_id:token\titem_id:token\n1\t2\n", &e), SQ_FMT_RECBOLE);
    CHECK_EQ(guess("1 1\n1 2\n", &e), SQ_FMT_SASREC);
    CHECK_EQ(guess("1 1 2 3\n", &e), SQ_FMT_S3REC);
    CHECK_EQ(e.code, 0);
    CHECK_EQ(guess("1\t2\t3\n", &e), -1);
    CHECK_EQ(e.code, SQ_EX_DATA);
    CHECK(strstr(e.msg, "line 1: cannot tell the format") != NULL);
}

UNIT_TEST(test_rawread_missing_file)
{
    sq_lines L;
    sq_err e = {0};
    CHECK_EQ(sq_lines_open(&L, "/nonexistent/ratings.dat", NULL, &e), SQ_EX_NOINPUT);
    CHECK(strstr(e.msg, "/nonexistent/ratings.dat") != NULL);
    sq_lines_close(&L);
}
