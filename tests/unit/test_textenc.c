/* Unit tests for lib/data/textenc.c (seqrec-cat --from-text): records
 * printed by sq_text_write encode back to the same records, the header
 * (n_items, max_len, meta, cat.from_text), comment and empty lines,
 * messages naming the input line for a line that does not parse and for a
 * record the writer refuses, empty input, ranks and topk, bad meta, read
 * and write errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "text.h"
#include "textenc.h"
#include "unit.h"

/* A stream encoded in memory, and the outcome. */
typedef struct {
    int rc;
    sq_err e;
    char *buf;
    size_t len;
} encoded;

/* Encodes text[0, n) (named "in.txt") into r->buf. */
static void encode_text(const char *text, size_t n, const sq_text_encode_opts *o, encoded *r)
{
    memset(r, 0, sizeof *r);
    r->rc = -1;
    FILE *in = tmpfile(); /* not fmemopen, which may refuse an empty buffer */
    FILE *out = open_memstream(&r->buf, &r->len);
    if (in && out && fwrite(text, 1, n, in) == n && fseek(in, 0, SEEK_SET) == 0)
        r->rc = sq_text_encode(in, "in.txt", o, out, "out.sqr", &r->e);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

/* text (no NUL inside) is refused with 65 and msg; the bytes written */
static size_t refused(unit_ctx *t, const char *text, const sq_text_encode_opts *o,
                      const char *msg)
{
    encoded s;
    encode_text(text, strlen(text), o, &s);
    CHECK_EQ(s.rc, SQ_EX_DATA);
    CHECK_STR(s.e.msg, msg);
    free(s.buf);
    return s.len;
}

/* A stream read back: its header and records (arrays copied). */
typedef struct {
    int rc;            /* 0: read to the verified trailer */
    sq_header h;
    sq_record rec[16];
    uint32_t items[16][16];
    int64_t ts[16][16];
    float scores[16][16];
    int n;
} decoded;

static void decode(const encoded *s, decoded *d)
{
    memset(d, 0, sizeof *d);
    d->rc = -1;
    FILE *f = s->len ? fmemopen(s->buf, s->len, "rb") : NULL;
    if (!f)
        return;
    sq_err e = {0};
    sq_reader r;
    sq_record rec;
    int st = -1;
    if (!sq_reader_open(&r, f, "mem", &e) && !sq_header_copy(&d->h, &r.hdr, &e)) {
        while ((st = sq_reader_next(&r, &rec, &e)) == 1 && d->n < 16 && rec.len <= 16) {
            d->rec[d->n] = rec;
            if (rec.items)
                memcpy(d->items[d->n], rec.items, rec.len * sizeof *rec.items);
            if (rec.ts)
                memcpy(d->ts[d->n], rec.ts, rec.len * sizeof *rec.ts);
            if (rec.scores)
                memcpy(d->scores[d->n], rec.scores, rec.len * sizeof *rec.scores);
            d->n++;
        }
    }
    d->rc = st;
    sq_reader_free(&r);
    fclose(f);
}

/* text encodes (0) into a stream that reads back into *d */
static void accepted(unit_ctx *t, const char *text, size_t n, const sq_text_encode_opts *o,
                     decoded *d)
{
    encoded s;
    encode_text(text, n, o, &s);
    CHECK_EQ(s.rc, 0);
    decode(&s, d);
    CHECK_EQ(d->rc, 0);
    free(s.buf);
}

/* Prints recs as text with sq_text_write, the way seqrec-cat does (with
 * timestamps only when h has them). */
static char *as_text(const sq_header *h, const sq_record *recs, int n, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        sq_record r = recs[i];
        if (!(h->flags & SQ_FLAG_TS))
            r.ts = NULL;
        rc = sq_text_write(f, h, &r);
    }
    if (fclose(f) || rc) {
        free(text);
        return NULL;
    }
    return text;
}

/* Checks that d holds exactly recs, of kind h->kind. */
static void check_records(unit_ctx *t, const decoded *d, const sq_header *h,
                          const sq_record *recs, int n)
{
    CHECK_EQ(d->rc, 0);
    CHECK_EQ(d->n, n);
    for (int i = 0; i < n && i < d->n; i++) {
        const sq_record *a = &recs[i], *b = &d->rec[i];
        CHECK_EQ(b->user, a->user);
        CHECK_EQ(b->len, a->len);
        CHECK_EQ(b->n_train, a->n_train);
        CHECK_EQ(b->n_valid, a->n_valid);
        CHECK_EQ(b->view, a->view);
        CHECK_EQ(b->item, a->item);
        CHECK_EQ(b->rank, a->rank);
        CHECK_EQ(b->n_cand, a->n_cand);
        for (uint32_t j = 0; j < a->len && j < 16 && h->kind != SQ_RANKS; j++) {
            CHECK_EQ(d->items[i][j], a->items[j]);
            if (h->flags & SQ_FLAG_TS)
                CHECK_EQ(d->ts[i][j], a->ts[j]);
            if (h->kind == SQ_TOPK)
                CHECK(d->scores[i][j] == a->scores[j]);
        }
    }
}

static void check_meta(unit_ctx *t, const sq_header *h, const char *key, const char *want)
{
    char val[256] = "";
    CHECK(sq_meta_get(h, key, val, sizeof val));
    CHECK_STR(val, want);
}

UNIT_TEST(test_textenc_roundtrip_sequences)
{
    static uint32_t it[3][5] = {{3, 1, 4, 1, 5}, {9, 2, 6}, {53}};
    static int64_t ts[3][5] = {{10, 20, 20, 30, 40}, {-5, 0, 1700000000000}, {7}};
    sq_record recs[4] = {{0}};
    for (int i = 0; i < 3; i++) {
        recs[i].user = (uint32_t)(i + 1) * 10;
        recs[i].len = i == 0 ? 5 : i == 1 ? 3 : 1;
        recs[i].items = it[i];
        recs[i].ts = ts[i];
    }
    recs[3].user = 99; /* an empty sequence: refused (seqrec(5): len >= 1) */
    recs[3].ts = ts[2];
    for (int with_ts = 0; with_ts <= 1; with_ts++) {
        sq_header h;
        sq_header_init(&h, SQ_SEQUENCES, 60);
        h.flags = with_ts ? SQ_FLAG_TS : 0;
        size_t n = 0;
        char *text = as_text(&h, recs, 4, &n);
        CHECK(text != NULL);
        sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .with_ts = with_ts,
                                 .n_items = -1, .max_len = -1};
        if (text)
            refused(t, text, &o, "in.txt: line 4: empty record (a user with no items)");
        free(text);
        text = as_text(&h, recs, 3, &n);
        CHECK(text != NULL);
        decoded d;
        accepted(t, text ? text : "", text ? n : 0, &o, &d);
        check_records(t, &d, &h, recs, 3);
        CHECK_EQ(d.h.kind, SQ_SEQUENCES);
        CHECK_EQ(d.h.flags, h.flags);
        CHECK_EQ(d.h.n_items, 53); /* the largest item, not the 60 above */
        CHECK_EQ(d.h.max_len, 0);
        CHECK_STR(d.h.meta, "cat.from_text=in.txt\n");
        sq_header_free(&d.h);
        sq_header_free(&h);
        free(text);
    }
}

UNIT_TEST(test_textenc_roundtrip_split_padded)
{
    static uint32_t it[2][6] = {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10}};
    static int64_t ts[2][6] = {{1, 2, 3, 4, 5, 6}, {1, 1, 2, 3}};
    static uint32_t row[2][6] = {{0, 0, 5, 6, 7, 8}, {1, 2, 3, 4, 9, 3}};
    sq_record sp[2] = {{0}}, pd[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        sp[i] = (sq_record){.user = (uint32_t)i + 1, .len = i ? 4 : 6, .items = it[i],
                            .ts = ts[i], .n_train = i ? 2 : 4, .n_valid = 1};
        pd[i] = (sq_record){.user = (uint32_t)i + 1, .len = 6, .items = row[i],
                            .n_train = 4, .n_valid = i, .view = (uint32_t)i + 2};
    }
    for (int c = 0; c < 3; c++) {
        int padded = c == 2, with_ts = c == 1;
        sq_header h;
        sq_header_init(&h, padded ? SQ_PADDED : SQ_SPLIT, 10);
        h.flags = with_ts ? SQ_FLAG_TS : 0;
        h.max_len = padded ? 4 : 0;
        const sq_record *recs = padded ? pd : sp;
        size_t n = 0;
        char *text = as_text(&h, recs, 2, &n);
        CHECK(text != NULL);
        sq_text_encode_opts o = {.kind = h.kind, .with_ts = with_ts, .n_items = -1,
                                 .max_len = padded ? 4 : -1};
        decoded d;
        accepted(t, text ? text : "", text ? n : 0, &o, &d);
        check_records(t, &d, &h, recs, 2);
        CHECK_EQ(d.h.kind, h.kind);
        CHECK_EQ(d.h.flags, h.flags);
        CHECK_EQ(d.h.n_items, padded ? 9 : 10);
        CHECK_EQ(d.h.max_len, padded ? 4 : 0);
        sq_header_free(&d.h);
        sq_header_free(&h);
        free(text);
    }
}

UNIT_TEST(test_textenc_header_options)
{
    static const char text[] = "1\t1 2 3\n2\t4 5\n";
    const char *meta[3] = {"dataset=tiny", "a.b=x=y", "empty="};
    sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .n_items = 1000, .max_len = 3,
                             .meta = meta, .n_meta = 3};
    decoded d;
    accepted(t, text, sizeof text - 1, &o, &d);
    CHECK_EQ(d.n, 2);
    CHECK_EQ(d.h.n_items, 1000); /* given, not the largest item (5) */
    CHECK_EQ(d.h.max_len, 3);
    CHECK_EQ(d.h.flags, 0);
    /* the meta in order, then where the text came from */
    CHECK_STR(d.h.meta, "dataset=tiny\na.b=x=y\nempty=\ncat.from_text=in.txt\n");
    check_meta(t, &d.h, "a.b", "x=y");
    /* the caller's strings are not cut at '=' */
    CHECK_STR(meta[1], "a.b=x=y");
    sq_header_free(&d.h);
    /* n_items 0 given is 0, not "the largest item": item 1 is out of range */
    o = (sq_text_encode_opts){.kind = SQ_SEQUENCES, .n_items = 0};
    refused(t, text, &o, "in.txt: line 1: item id 1 out of range (n_items 0)");
}

UNIT_TEST(test_textenc_comments_and_empty_lines)
{
    /* the last line has no newline; "#" only at the start makes a comment */
    static const char text[] = "# header\n\n1\t3 4 5\n#\t9 9\n\n\n2\t9 1";
    sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .n_items = -1, .max_len = -1};
    decoded d;
    accepted(t, text, sizeof text - 1, &o, &d);
    CHECK_EQ(d.n, 2);
    CHECK_EQ(d.rec[0].user, 1);
    CHECK_EQ(d.rec[0].len, 3);
    CHECK_EQ(d.items[0][2], 5);
    CHECK_EQ(d.rec[1].user, 2);
    CHECK_EQ(d.rec[1].len, 2);
    CHECK_EQ(d.items[1][0], 9);
    CHECK_EQ(d.h.n_items, 9);
    sq_header_free(&d.h);
    /* skipped lines still count: the bad line is line 6 */
    static const char bad[] = "# c\n\n1\t2\n#\n\n2\t3\t4\n";
    refused(t, bad, &o, "in.txt: line 6: expected 2 tab-separated fields for a "
                        "sequences record, found 3");
}

UNIT_TEST(test_textenc_malformed_line)
{
    sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .n_items = -1, .max_len = -1};
    static const char fields[] = "1\t1 2\n2\t3\t4\n3\t5\n";
    CHECK_EQ(refused(t, fields, &o, "in.txt: line 2: expected 2 tab-separated fields for a "
                                    "sequences record, found 3"),
             0); /* nothing written */
    static const char item[] = "1\t1 2\n2\t3\n3\t5 x\n";
    CHECK_EQ(refused(t, item, &o, "in.txt: line 3: bad number in the items field"), 0);
    o.with_ts = 1;
    static const char ts[] = "1\t1 2\t10 20\n2\t3 4\t30\n";
    refused(t, ts, &o, "in.txt: line 2: 1 timestamps for 2 items");
}

UNIT_TEST(test_textenc_writer_refusal_names_line)
{
    /* the writer says "out.sqr: record 1: ..."; the message names the line */
    static const char text[] = "1\t1 2\n# c\n2\t4 99 5\n";
    sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .n_items = 5, .max_len = -1};
    refused(t, text, &o, "in.txt: line 3: item id 99 out of range (n_items 5)");
    static const char zero[] = "1\t1 2\n\n\n2\t4 0 5\n";
    o.n_items = -1;
    refused(t, zero, &o, "in.txt: line 4: item id 0 (padding) outside a padded row");
    o.max_len = 2;
    static const char longer[] = "1\t1 2\n2\t1 2 3\n";
    refused(t, longer, &o, "in.txt: line 2: oversize record: 3 items exceeds max_len 2");
    /* a header the writer refuses keeps the writer's message */
    sq_text_encode_opts r = {.kind = SQ_RANKS, .with_ts = 1, .n_items = -1};
    static const char rk[] = "1\t1\t10\t3\t77\n";
    refused(t, rk, &r, "out.sqr: record 0: timestamps flag on a ranks stream");
}

UNIT_TEST(test_textenc_empty_input)
{
    for (int given = 0; given <= 1; given++) {
        sq_text_encode_opts o = {.kind = SQ_SPLIT, .with_ts = 1,
                                 .n_items = given ? 7 : -1, .max_len = -1};
        decoded d;
        accepted(t, "", 0, &o, &d);
        CHECK_EQ(d.n, 0);
        CHECK_EQ(d.h.kind, SQ_SPLIT);
        CHECK_EQ(d.h.flags, SQ_FLAG_TS);
        CHECK_EQ(d.h.n_items, given ? 7 : 0);
        check_meta(t, &d.h, "cat.from_text", "in.txt");
        sq_header_free(&d.h);
    }
    /* only comments: the same */
    sq_text_encode_opts o = {.kind = SQ_TOPK, .n_items = -1};
    decoded d;
    accepted(t, "# nothing\n\n", 11, &o, &d);
    CHECK_EQ(d.n, 0);
    CHECK_EQ(d.h.kind, SQ_TOPK);
    sq_header_free(&d.h);
}

/* When every record is empty the item arrays are never allocated: the
 * records still encode (no offset from a NULL array; UBSan checks). */
UNIT_TEST(test_textenc_all_records_empty)
{
    sq_text_encode_opts o = {.kind = SQ_TOPK, .n_items = 5};
    decoded d;
    accepted(t, "1\t\n2\t\n", 6, &o, &d);
    CHECK_EQ(d.n, 2);
    CHECK_EQ(d.rec[0].len, 0);
    CHECK_EQ(d.rec[1].user, 2);
    sq_header_free(&d.h);
    /* an empty sequence or split (with timestamps or without) is refused
     * by the writer, named by its line */
    o = (sq_text_encode_opts){.kind = SQ_SEQUENCES, .n_items = -1};
    refused(t, "1\t \n", &o, "in.txt: line 1: empty record (a user with no items)");
    o = (sq_text_encode_opts){.kind = SQ_SPLIT, .with_ts = 1, .n_items = -1};
    refused(t, "1\t\t\t\t\n", &o, "in.txt: line 1: empty record (a user with no items)");
}

UNIT_TEST(test_textenc_ranks_topk)
{
    /* ranks text: user rank n_cand item; n_items = the largest target */
    static const char ranks[] = "1\t5\t100\t42\n2\t1\t100\t7\n";
    sq_text_encode_opts o = {.kind = SQ_RANKS, .n_items = -1};
    decoded d;
    accepted(t, ranks, sizeof ranks - 1, &o, &d);
    CHECK_EQ(d.n, 2);
    CHECK_EQ(d.h.n_items, 42);
    CHECK_EQ(d.rec[0].user, 1);
    CHECK_EQ(d.rec[0].rank, 5);
    CHECK_EQ(d.rec[0].n_cand, 100);
    CHECK_EQ(d.rec[0].item, 42);
    CHECK_EQ(d.rec[1].item, 7);
    CHECK_EQ(d.rec[1].rank, 1);
    sq_header_free(&d.h);
    o.n_items = 10;
    refused(t, ranks, &o, "in.txt: line 1: target item id 42 out of range (n_items 10)");

    /* topk text: user item:score,...; an empty list is a record too */
    static const char topk[] = "3\t42:0.5,7:0.25,9:-1.5\n4\t\n5\t1:3.25e-05\n";
    sq_record want[3] = {{.user = 3, .len = 3}, {.user = 4}, {.user = 5, .len = 1}};
    uint32_t it0[3] = {42, 7, 9}, it2[1] = {1};
    float sc0[3] = {0.5f, 0.25f, -1.5f}, sc2[1] = {3.25e-05f};
    want[0].items = it0;
    want[0].scores = sc0;
    want[2].items = it2;
    want[2].scores = sc2;
    o = (sq_text_encode_opts){.kind = SQ_TOPK, .n_items = -1};
    accepted(t, topk, sizeof topk - 1, &o, &d);
    check_records(t, &d, &d.h, want, 3);
    CHECK_EQ(d.h.n_items, 42);
    sq_header_free(&d.h);
}

UNIT_TEST(test_textenc_bad_meta)
{
    static const char text[] = "1\t1\n";
    const char *nokey[1] = {"=v"}, *noeq[1] = {"novalue"}, *nl[1] = {"a\nb=c"};
    const char *const *cases[3] = {nokey, noeq, nl};
    for (int i = 0; i < 3; i++) {
        sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .n_items = -1, .meta = cases[i],
                                 .n_meta = 1};
        encoded s;
        encode_text(text, sizeof text - 1, &o, &s);
        CHECK_EQ(s.rc, SQ_EX_SOFTWARE);
        CHECK_EQ(s.len, 0);
        free(s.buf);
    }
}

UNIT_TEST(test_textenc_io_errors)
{
    sq_text_encode_opts o = {.kind = SQ_SEQUENCES, .n_items = -1};
    sq_err e = {0};
    /* an input that cannot be read (opened for writing only) */
    char path[] = "/tmp/sq_textenc_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *in = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(in != NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CHECK(out != NULL);
    if (in && out) {
        CHECK_EQ(sq_text_encode(in, "in.txt", &o, out, "out.sqr", &e), SQ_EX_IO);
        CHECK_STR(e.msg, "in.txt: read error");
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    free(buf);
    remove(path);
    /* an output that cannot be written */
    out = fopen("/dev/full", "wb");
    if (!out)
        SKIP("no /dev/full");
    in = tmpfile();
    CHECK(in != NULL);
    if (in && fputs("1\t1 2\n", in) >= 0 && fseek(in, 0, SEEK_SET) == 0) {
        e = (sq_err){0};
        CHECK_EQ(sq_text_encode(in, "in.txt", &o, out, "full", &e), SQ_EX_IO);
        CHECK(strncmp(e.msg, "full: write error", 17) == 0);
    }
    if (in)
        fclose(in);
    fclose(out);
}
