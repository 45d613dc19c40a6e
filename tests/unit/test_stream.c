/* Stream format: round trips of every kind, and every corruption a reader
 * must refuse (each single flipped byte, each truncation, trailing data). */
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "unit.h"

/* Writes a small stream of the given kind into a malloc'd buffer. */
static unsigned char *make_stream(uint16_t kind, uint32_t flags, size_t *size)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return NULL;
    sq_err e = {0};
    sq_header h;
    sq_header_init(&h, kind, 20);
    h.flags = flags;
    h.max_len = kind == SQ_PADDED ? 4 : 0;
    sq_meta_add(&h, &e, "dataset", "unit");
    sq_meta_add(&h, &e, "test.note", "two\nlines");
    sq_writer w;
    int rc = sq_writer_open(&w, f, "mem", &h, &e);
    uint32_t items[3][6] = {{1, 2, 3, 4, 5, 6}, {7, 8, 9}, {0, 11, 12, 13, 14, 15}};
    uint32_t lens[3] = {6, 3, 6};
    int64_t ts[6] = {10, 20, 30, 40, 50, 60};
    float scores[6] = {0.5f, 0.25f, -1, 2, 3, 4};
    for (uint32_t u = 0; u < 3 && !rc; u++) {
        sq_record r = {0};
        r.user = u + 1;
        r.items = items[u];
        r.len = lens[u];
        if (kind != SQ_PADDED && u == 2)
            r.items = items[0];
        r.ts = ts;
        r.scores = scores;
        if (kind == SQ_SPLIT) {
            r.n_train = r.len - 2;
            r.n_valid = 1;
        }
        if (kind == SQ_PADDED) {
            if (r.len < 4)
                continue;
            r.n_train = 4;
            r.n_valid = 1;
            r.view = u;
        }
        r.item = 3 + u;
        r.rank = 1 + u;
        r.n_cand = 10;
        rc = sq_write(&w, &r, &e);
    }
    if (!rc)
        rc = sq_writer_finish(&w, &e);
    sq_writer_free(&w);
    sq_header_free(&h);
    fclose(f);
    if (rc) {
        free(mem);
        return NULL;
    }
    *size = len;
    return (unsigned char *)mem;
}

/* Reads a whole stream; returns records read, or -code on error. */
static long read_all(const unsigned char *buf, size_t n, sq_err *e, sq_header *hdr_out)
{
    FILE *f = n ? fmemopen((void *)buf, n, "rb") : fopen("/dev/null", "rb");
    if (!f)
        return -1000;
    sq_reader r;
    long count = 0;
    if (sq_reader_open(&r, f, "mem", e) == 0) {
        sq_record rec;
        int st;
        while ((st = sq_reader_next(&r, &rec, e)) == 1)
            count++;
        if (st < 0)
            count = -e->code;
        if (hdr_out && st == 0)
            sq_header_copy(hdr_out, &r.hdr, e);
    } else {
        count = -e->code;
    }
    sq_reader_free(&r);
    fclose(f);
    return count;
}

UNIT_TEST(test_stream_roundtrip_all_kinds)
{
    for (uint16_t kind = SQ_SEQUENCES; kind <= SQ_TOPK; kind++) {
        uint32_t flags = (kind == SQ_SEQUENCES || kind == SQ_SPLIT) ? SQ_FLAG_TS : 0;
        size_t n = 0;
        unsigned char *buf = make_stream(kind, flags, &n);
        CHECK(buf != NULL);
        if (!buf)
            continue;
        sq_err e = {0};
        sq_header h = {0};
        long got = read_all(buf, n, &e, &h);
        CHECK_EQ(got, kind == SQ_PADDED ? 2 : 3);
        if (got < 0)
            fprintf(stderr, "  kind %u: %s\n", kind, e.msg);
        char val[64];
        CHECK(sq_meta_get(&h, "dataset", val, sizeof val));
        CHECK_STR(val, "unit");
        CHECK(sq_meta_get(&h, "test.note", val, sizeof val));
        CHECK_STR(val, "two lines");
        CHECK(!sq_meta_get(&h, "missing", val, sizeof val));
        sq_header_free(&h);
        free(buf);
    }
}

UNIT_TEST(test_stream_record_contents)
{
    size_t n = 0;
    unsigned char *buf = make_stream(SQ_SPLIT, SQ_FLAG_TS, &n);
    CHECK(buf != NULL);
    if (!buf)
        return;
    FILE *f = fmemopen(buf, n, "rb");
    sq_reader r;
    sq_err e = {0};
    sq_record rec;
    CHECK_EQ(sq_reader_open(&r, f, "mem", &e), 0);
    CHECK_EQ(r.hdr.kind, SQ_SPLIT);
    CHECK_EQ(r.hdr.n_items, 20);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 1);
    CHECK_EQ(rec.user, 1);
    CHECK_EQ(rec.len, 6);
    CHECK_EQ(rec.items[5], 6);
    CHECK_EQ(rec.ts[5], 60);
    CHECK_EQ(rec.n_train, 4);
    CHECK_EQ(rec.n_valid, 1);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 1);
    CHECK_EQ(rec.items[2], 9);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 1);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 0);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 0);
    sq_reader_free(&r);
    fclose(f);
    free(buf);
}

/* Any single flipped bit anywhere must be refused with 65, never crash. */
UNIT_TEST(test_stream_every_flipped_byte_is_refused)
{
    for (uint16_t kind = SQ_SEQUENCES; kind <= SQ_TOPK; kind++) {
        size_t n = 0;
        unsigned char *buf = make_stream(kind, 0, &n);
        CHECK(buf != NULL);
        if (!buf)
            continue;
        int missed = 0;
        for (size_t i = 0; i < n; i++) {
            for (int bit = 0; bit < 8; bit += 7) {
                buf[i] ^= (unsigned char)(1u << bit);
                sq_err e = {0};
                long got = read_all(buf, n, &e, NULL);
                if (got != -SQ_EX_DATA) {
                    missed++;
                    fprintf(stderr, "  kind %u byte %zu bit %d: got %ld\n", kind, i, bit, got);
                }
                buf[i] ^= (unsigned char)(1u << bit);
            }
        }
        CHECK_EQ(missed, 0);
        free(buf);
    }
}

UNIT_TEST(test_stream_every_truncation_is_refused)
{
    size_t n = 0;
    unsigned char *buf = make_stream(SQ_SEQUENCES, SQ_FLAG_TS, &n);
    CHECK(buf != NULL);
    if (!buf)
        return;
    int missed = 0;
    for (size_t cut = 0; cut < n; cut++) {
        sq_err e = {0};
        if (read_all(buf, cut, &e, NULL) != -SQ_EX_DATA)
            missed++;
        if (cut == n - 1) /* the last cut loses a trailer byte */
            CHECK(strstr(e.msg, "truncated") != NULL);
        if (cut == 0)
            CHECK(strstr(e.msg, "empty input") != NULL);
    }
    CHECK_EQ(missed, 0);
    /* trailing garbage after a valid trailer */
    unsigned char *more = malloc(n + 1);
    CHECK(more != NULL);
    if (more) {
        memcpy(more, buf, n);
        more[n] = 0;
        sq_err e = {0};
        CHECK_EQ(read_all(more, n + 1, &e, NULL), -SQ_EX_DATA);
        CHECK(strstr(e.msg, "after the trailer") != NULL);
        free(more);
    }
    free(buf);
}

UNIT_TEST(test_stream_messages_name_the_byte)
{
    size_t n = 0;
    unsigned char *buf = make_stream(SQ_SEQUENCES, 0, &n);
    CHECK(buf != NULL);
    if (!buf)
        return;
    sq_err e = {0};
    buf[0] = 'X';
    CHECK_EQ(read_all(buf, n, &e, NULL), -SQ_EX_DATA);
    CHECK_STR(e.msg, "mem: byte 0: bad magic (not a seqrec stream)");
    buf[0] = 'S';
    memset(&e, 0, sizeof e);
    buf[4] = 9;
    CHECK_EQ(read_all(buf, n, &e, NULL), -SQ_EX_DATA);
    CHECK(strstr(e.msg, "byte 4: unsupported stream version 9") != NULL);
    buf[4] = 1;
    /* First item of the first record: header + meta + tag + user + len. */
    uint32_t meta_len;
    memcpy(&meta_len, buf + 20, 4);
    size_t item0 = SQ_HEADER_FIXED + meta_len + 1 + 4 + 4;
    uint32_t big = 999;
    memcpy(buf + item0 + 4, &big, 4);
    memset(&e, 0, sizeof e);
    CHECK_EQ(read_all(buf, n, &e, NULL), -SQ_EX_DATA);
    char want[128];
    snprintf(want, sizeof want, "mem: byte %zu: item id 999 out of range (n_items 20)", item0 + 4);
    CHECK_STR(e.msg, want);
    free(buf);
}

UNIT_TEST(test_stream_writer_refuses_bad_records)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    sq_err e = {0};
    sq_header h;
    sq_header_init(&h, SQ_SEQUENCES, 5);
    sq_writer w;
    CHECK_EQ(sq_writer_open(&w, f, "out", &h, &e), 0);
    uint32_t items[2] = {1, 6};
    sq_record r = {.user = 1, .len = 2, .items = items};
    CHECK_EQ(sq_write(&w, &r, &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "out: record 0: item id 6 out of range (n_items 5)");
    sq_writer_free(&w);
    fclose(f);
    free(mem);
}

/* Issue 40: meta text whose last line lacks "\n". A reader refuses it (the
 * next program's key would join that line); sq_meta_add never merges. */
UNIT_TEST(test_stream_meta_without_final_newline)
{
    sq_err e = {0};
    sq_header h;
    sq_header_init(&h, SQ_SEQUENCES, 20);
    h.meta = strdup("split.short=train");
    h.meta_len = h.meta ? (uint32_t)strlen(h.meta) : 0;
    CHECK(h.meta != NULL);
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    CHECK(f != NULL);
    if (!f || !h.meta) {
        sq_header_free(&h);
        return;
    }
    sq_writer w;
    CHECK_EQ(sq_writer_open(&w, f, "mem", &h, &e), 0);
    CHECK_EQ(sq_writer_finish(&w, &e), 0);
    sq_writer_free(&w);
    fclose(f);
    memset(&e, 0, sizeof e);
    CHECK_EQ(read_all((unsigned char *)mem, len, &e, NULL), -SQ_EX_DATA);
    CHECK_STR(e.msg, "mem: byte 40: the meta text does not end with a newline");
    free(mem);
    /* adding to such a text starts a new line */
    CHECK_EQ(sq_meta_add(&h, &e, "pad.len", "%d", 10), 0);
    CHECK_STR(h.meta, "split.short=train\npad.len=10\n");
    CHECK_EQ(h.meta_len, strlen(h.meta));
    char val[64] = "";
    CHECK(sq_meta_get(&h, "split.short", val, sizeof val));
    CHECK_STR(val, "train");
    sq_header_free(&h);
}

/* Issue 40: one wrong-kind message, naming the kind found and those taken. */
UNIT_TEST(test_stream_expect_kind_message)
{
    sq_header h;
    sq_header_init(&h, SQ_RANKS, 5);
    sq_err e = {0};
    CHECK_EQ(sq_expect_kind(&h, "in.sqr", SQ_KIND_BIT(SQ_RANKS), NULL, &e), 0);
    CHECK_EQ(sq_expect_kind(&h, "in.sqr", SQ_KIND_BIT(SQ_SPLIT) | SQ_KIND_BIT(SQ_PADDED), NULL,
                            &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "in.sqr: byte 6: expected a split or padded stream, got ranks");
    memset(&e, 0, sizeof e);
    h.kind = SQ_TOPK;
    CHECK_EQ(sq_expect_kind(&h, "x", SQ_KIND_BIT(SQ_SEQUENCES) | SQ_KIND_BIT(SQ_SPLIT) |
                            SQ_KIND_BIT(SQ_PADDED), "why", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "x: byte 6: expected a sequences, split or padded stream, got topk (why)");
    memset(&e, 0, sizeof e);
    CHECK_EQ(sq_expect_kind(&h, "x", SQ_KIND_BIT(SQ_SEQUENCES), NULL, &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "x: byte 6: expected a sequences stream, got topk");
    sq_header_free(&h);
}

/* sq_reader_each's callback: counts records, fails on user 2 */
static int fail_on_two(void *ctx, const sq_record *rec, sq_err *e)
{
    ++*(int *)ctx;
    return rec->user == 2 ? sq_fail(e, SQ_EX_DATA, "user %u refused", rec->user) : 0;
}

static int count_all(void *ctx, const sq_record *rec, sq_err *e)
{
    (void)rec, (void)e;
    ++*(int *)ctx;
    return 0;
}

/* sq_reader_each: every record to the trailer; a callback's failure stops
 * it, the message naming the stream and the byte of its record. */
UNIT_TEST(test_stream_each)
{
    size_t n = 0;
    unsigned char *buf = make_stream(SQ_RANKS, 0, &n);
    CHECK(buf != NULL);
    if (!buf)
        return;
    for (int failing = 0; failing < 2; failing++) {
        FILE *f = fmemopen(buf, n, "rb");
        sq_reader r;
        sq_err e = {0};
        int seen = 0;
        CHECK_EQ(sq_reader_open(&r, f, "mem", &e), 0);
        int rc = sq_reader_each(&r, "mem", failing ? fail_on_two : count_all, &seen, &e);
        CHECK_EQ(rc, failing ? SQ_EX_DATA : SQ_OK);
        CHECK_EQ(seen, failing ? 2 : 3);
        if (failing) {
            CHECK(strncmp(e.msg, "mem: byte ", 10) == 0);
            CHECK(strstr(e.msg, ": user 2 refused") != NULL);
        }
        sq_reader_free(&r);
        fclose(f);
    }
    free(buf);
}
