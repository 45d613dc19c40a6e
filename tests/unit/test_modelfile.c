/* Model files: round trip, every corruption refused (each flipped byte,
 * each truncation, trailing data, oversize sizes), the model loader's
 * dispatch and dataset check, and the popularity model fitted and loaded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "model.h"
#include "modelfile.h"
#include "models.h"
#include "pop.h"
#include "unit.h"

/* A scratch directory per test, removed with its files by rm_dir. */
static int make_dir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/seqrec-mf-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static void rm_dir(const char *dir, const char *file)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    unlink(p);
    rmdir(dir);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *b = malloc(1 << 16);
    *n = b ? fread(b, 1, 1 << 16, f) : 0;
    fclose(f);
    return b;
}

static int spit(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A small model file with every dtype and 0..3 dimensions. */
static float f32[6] = {0.5f, -1.25f, 3, 4, 5, 6};
static uint32_t u32[4] = {1, 2, 3, 4000000000u};
static uint64_t u64[2] = {7, 1ull << 40};
static const char bytes[5] = "hello";

static int build(sq_modelfile *mf, sq_err *e)
{
    memset(mf, 0, sizeof *mf);
    uint64_t s23[2] = {2, 3}, s4[1] = {4}, s2[3] = {1, 2, 1}, s5[1] = {5}, s0[1] = {0};
    return sq_modelfile_set(mf, e, "model", "test") ||
           sq_modelfile_set(mf, e, "n_items", "%d", 20) ||
           sq_modelfile_set(mf, e, "note", "two\nlines") ||
           sq_modelfile_set(mf, e, "n_items", "%d", 21) || /* the last one wins */
           sq_modelfile_add(mf, "w", SQ_F32, 2, s23, f32, e) ||
           sq_modelfile_add(mf, "ids", SQ_U32, 1, s4, u32, e) ||
           sq_modelfile_add(mf, "big", SQ_U64, 3, s2, u64, e) ||
           sq_modelfile_add(mf, "raw", SQ_BYTES, 1, s5, bytes, e) ||
           sq_modelfile_add(mf, "empty", SQ_F32, 1, s0, NULL, e) ||
           sq_modelfile_add(mf, "scalar", SQ_F32, 0, NULL, f32 + 5, e);
}

UNIT_TEST(test_modelfile_round_trip)
{
    char dir[64], path[128];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/m.sqm", dir);
    sq_err e = {0};
    sq_modelfile mf, rd;
    CHECK_EQ(build(&mf, &e), 0);
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    CHECK_EQ(sq_modelfile_read(path, &rd, &e), 0);
    char buf[64];
    CHECK(sq_modelfile_get(&rd, "n_items", buf, sizeof buf));
    CHECK_STR(buf, "21");
    CHECK(sq_modelfile_get(&rd, "note", buf, sizeof buf));
    CHECK_STR(buf, "two lines");
    CHECK(!sq_modelfile_get(&rd, "nope", buf, sizeof buf));
    CHECK(!sq_modelfile_get(&rd, "n_item", buf, sizeof buf)); /* a prefix is not a key */
    CHECK_EQ(rd.n_tensors, 6);
    const sq_tensor *tn = sq_modelfile_find(&rd, "w");
    CHECK(tn && tn->dtype == SQ_F32 && tn->ndim == 2 && tn->shape[0] == 2 && tn->shape[1] == 3);
    CHECK(tn && tn->bytes == 24 && memcmp(tn->data, f32, 24) == 0);
    tn = sq_modelfile_find(&rd, "ids");
    CHECK(tn && tn->bytes == 16 && memcmp(tn->data, u32, 16) == 0);
    tn = sq_modelfile_find(&rd, "big");
    CHECK(tn && tn->ndim == 3 && tn->bytes == 16 && memcmp(tn->data, u64, 16) == 0);
    tn = sq_modelfile_find(&rd, "raw");
    CHECK(tn && tn->dtype == SQ_BYTES && tn->bytes == 5 && memcmp(tn->data, "hello", 5) == 0);
    tn = sq_modelfile_find(&rd, "empty");
    CHECK(tn && tn->bytes == 0);
    tn = sq_modelfile_find(&rd, "scalar");
    CHECK(tn && tn->ndim == 0 && tn->bytes == 4 && *(float *)tn->data == 6.0f);
    CHECK(sq_modelfile_find(&rd, "W") == NULL);
    sq_modelfile_free(&rd);
    rm_dir(dir, "m.sqm");
}

UNIT_TEST(test_modelfile_add_checks)
{
    sq_err e = {0};
    sq_modelfile mf = {0};
    uint64_t s[5] = {1, 1, 1, 1, 1}, huge[2] = {1ull << 40, 1ull << 40};
    float x = 1;
    CHECK_EQ(sq_modelfile_add(&mf, "a", SQ_F32, 1, s, &x, &e), 0);
    CHECK_EQ(sq_modelfile_add(&mf, "a", SQ_F32, 1, s, &x, &e), SQ_EX_SOFTWARE);
    e.code = 0;
    CHECK_EQ(sq_modelfile_add(&mf, "b", SQ_F32, 5, s, &x, &e), SQ_EX_SOFTWARE);
    e.code = 0;
    CHECK_EQ(sq_modelfile_add(&mf, "c", 9, 1, s, &x, &e), SQ_EX_SOFTWARE);
    e.code = 0;
    CHECK_EQ(sq_modelfile_add(&mf, "d", SQ_F32, 2, huge, &x, &e), SQ_EX_SOFTWARE);
    e.code = 0;
    CHECK_EQ(sq_modelfile_add(&mf, "", SQ_F32, 1, s, &x, &e), SQ_EX_SOFTWARE);
    e.code = 0;
    CHECK_EQ(sq_modelfile_set(&mf, &e, "a=b", "1"), SQ_EX_SOFTWARE);
    CHECK_EQ(mf.n_tensors, 1);
    sq_modelfile_free(&mf);
}

/* Reads path; returns the code, the message in msg. */
static int try_read(const char *path, char *msg, size_t n)
{
    sq_err e = {0};
    sq_modelfile mf;
    int rc = sq_modelfile_read(path, &mf, &e);
    snprintf(msg, n, "%s", e.msg);
    if (!rc)
        sq_modelfile_free(&mf);
    return rc;
}

UNIT_TEST(test_modelfile_every_flipped_byte_refused)
{
    char dir[64], path[128], bad[160], msg[1024];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/m.sqm", dir);
    snprintf(bad, sizeof bad, "%s/bad.sqm", dir);
    sq_err e = {0};
    sq_modelfile mf;
    CHECK_EQ(build(&mf, &e), 0);
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    size_t n;
    unsigned char *b = slurp(path, &n);
    CHECK(b && n > 100);
    int refused = 0, named = 0;
    for (size_t i = 0; b && i < n; i++) {
        for (int bit = 0; bit < 8; bit += 7) { /* the lowest and the highest bit */
            b[i] ^= (unsigned char)(1u << bit);
            CHECK(spit(bad, b, n) == 0);
            int rc = try_read(bad, msg, sizeof msg);
            refused += rc == SQ_EX_DATA;
            named += strstr(msg, ": byte ") != NULL && strncmp(msg, bad, strlen(bad)) == 0;
            if (rc != SQ_EX_DATA)
                fprintf(stderr, "  byte %zu bit %d: accepted (%d)\n", i, bit, rc);
            b[i] ^= (unsigned char)(1u << bit);
        }
    }
    CHECK_EQ(refused, 2 * (long long)n);
    CHECK_EQ(named, 2 * (long long)n);
    /* the untouched file still reads, and the messages say what is wrong */
    CHECK(spit(bad, b, n) == 0);
    CHECK_EQ(try_read(bad, msg, sizeof msg), 0);
    b[0] ^= 1;
    CHECK(spit(bad, b, n) == 0);
    CHECK_EQ(try_read(bad, msg, sizeof msg), SQ_EX_DATA);
    CHECK(strstr(msg, "bad.sqm: byte 0: bad magic") != NULL);
    b[0] ^= 1;
    b[4] = 2;
    CHECK(spit(bad, b, n) == 0);
    CHECK_EQ(try_read(bad, msg, sizeof msg), SQ_EX_DATA);
    CHECK(strstr(msg, "byte 4: unsupported model file version 2") != NULL);
    b[4] = 1;
    b[n - 10] ^= 0x10; /* the last tensor's data: only the checksum can tell */
    CHECK(spit(bad, b, n) == 0);
    CHECK_EQ(try_read(bad, msg, sizeof msg), SQ_EX_DATA);
    char want[64];
    snprintf(want, sizeof want, "byte %zu: checksum mismatch", n - 8);
    CHECK(strstr(msg, want) != NULL);
    free(b);
    unlink(bad);
    rm_dir(dir, "m.sqm");
}

UNIT_TEST(test_modelfile_every_truncation_refused)
{
    char dir[64], path[128], bad[160], msg[1024];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/m.sqm", dir);
    snprintf(bad, sizeof bad, "%s/bad.sqm", dir);
    sq_err e = {0};
    sq_modelfile mf;
    CHECK_EQ(build(&mf, &e), 0);
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    size_t n;
    unsigned char *b = slurp(path, &n);
    int refused = 0, said = 0;
    for (size_t len = 0; b && len < n; len++) {
        CHECK(spit(bad, b, len) == 0);
        refused += try_read(bad, msg, sizeof msg) == SQ_EX_DATA;
        said += strstr(msg, "truncated") != NULL;
    }
    CHECK_EQ(refused, (long long)n);
    CHECK_EQ(said, (long long)n);
    /* trailing data */
    unsigned char *longer = malloc(n + 1);
    CHECK(longer != NULL);
    if (b && longer) {
        memcpy(longer, b, n);
        longer[n] = 0;
        CHECK(spit(bad, longer, n + 1) == 0);
        CHECK_EQ(try_read(bad, msg, sizeof msg), SQ_EX_DATA);
        CHECK(strstr(msg, "data after the trailer") != NULL);
    }
    free(longer);
    free(b);
    unlink(bad);
    rm_dir(dir, "m.sqm");
}

UNIT_TEST(test_modelfile_oversize_and_inconsistent_sizes)
{
    char dir[64], path[128], msg[1024];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/m.sqm", dir);
    sq_err e = {0};
    sq_modelfile mf = {0};
    uint64_t s[1] = {3};
    uint32_t v[3] = {1, 2, 3};
    CHECK_EQ(sq_modelfile_set(&mf, &e, "model", "x"), 0);
    CHECK_EQ(sq_modelfile_add(&mf, "v", SQ_U32, 1, s, v, &e), 0);
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    size_t n;
    unsigned char *b = slurp(path, &n);
    CHECK(b != NULL);
    if (!b)
        return;
    /* layout: 12 header + 8 config ("model=x\n") + 4 count, then the tensor:
     * 2 name_len, 1 name, 1 dtype, 1 ndim, 8 shape, 8 bytes, 12 data */
    size_t shape_at = 12 + 8 + 4 + 2 + 1 + 2, bytes_at = shape_at + 8;
    uint64_t big = 1ull << 40;
    memcpy(b + shape_at, &big, 8);
    CHECK(spit(path, b, n) == 0);
    CHECK_EQ(try_read(path, msg, sizeof msg), SQ_EX_DATA);
    char want[128];
    snprintf(want, sizeof want, "byte %zu: tensor 'v': 12 data bytes, its shape and dtype need", bytes_at);
    CHECK(strstr(msg, want) != NULL);
    memcpy(b + bytes_at, (uint64_t[]){big * 4}, 8);
    CHECK(spit(path, b, n) == 0);
    CHECK_EQ(try_read(path, msg, sizeof msg), SQ_EX_DATA);
    CHECK(strstr(msg, "more than the 12 left in the file (truncated or corrupted)") != NULL);
    uint64_t three = 3, huge = UINT64_MAX / 2;
    memcpy(b + shape_at, &huge, 8);
    CHECK(spit(path, b, n) == 0);
    CHECK_EQ(try_read(path, msg, sizeof msg), SQ_EX_DATA);
    CHECK(strstr(msg, "overflows") != NULL);
    memcpy(b + shape_at, &three, 8);
    memcpy(b + 8, (uint32_t[]){1u << 30}, 4); /* config length */
    CHECK(spit(path, b, n) == 0);
    CHECK_EQ(try_read(path, msg, sizeof msg), SQ_EX_DATA);
    CHECK(strstr(msg, "byte 8: oversize config") != NULL);
    free(b);
    rm_dir(dir, "m.sqm");
}

UNIT_TEST(test_modelfile_missing_is_66)
{
    char msg[1024];
    CHECK_EQ(try_read("/nonexistent/m.sqm", msg, sizeof msg), SQ_EX_NOINPUT);
    sq_err e = {0};
    sq_model m;
    CHECK_EQ(sq_model_load(&m, "/nonexistent/m.sqm", &e), SQ_EX_NOINPUT);
}

/* A split dataset: users 1..3 over 6 items, leave-one-out cut points. */
static int tiny_dataset(sq_dataset *ds, const char *dataset, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 6);
    if (dataset && sq_meta_add(&h, e, "dataset", "%s", dataset))
        return e->code;
    int rc = sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    uint32_t a[] = {1, 2, 2, 3, 6, 6}, b[] = {2, 1, 5}, c[] = {3, 3};
    sq_record r[3] = {{.user = 1, .len = 6, .items = a, .n_train = 4, .n_valid = 1},
                      {.user = 2, .len = 3, .items = b, .n_train = 1, .n_valid = 1},
                      {.user = 3, .len = 2, .items = c, .n_train = 2, .n_valid = 0}};
    for (int i = 0; i < 3 && !rc; i++)
        rc = sq_dataset_add(ds, &r[i], e);
    return rc ? rc : sq_dataset_finish(ds, e);
}

UNIT_TEST(test_pop_fit_counts_training_parts_only)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(tiny_dataset(&ds, "tiny", &e), 0);
    /* train parts: {1,2,2,3}, {2}, {3,3}; 6 and 5 and the second 1 are held out */
    uint64_t want[7] = {0, 1, 3, 3, 0, 0, 0};
    for (int i = 0; i <= 6; i++)
        CHECK_EQ(ds.pop[i], want[i]);
    CHECK_EQ(ds.n_train_total, 7);

    char dir[64], path[128];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/m.sqm", dir);
    sq_modelfile mf;
    CHECK_EQ(sq_pop_fit(&ds, &mf, &e), 0);
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);

    sq_model m;
    CHECK_EQ(sq_model_load(&m, path, &e), 0);
    CHECK_STR(m.name, "pop");
    CHECK_EQ(m.n_items, 6);
    CHECK(m.meta && strstr(m.meta, "dataset=tiny\n") != NULL);
    /* the same scores for every history, a cold one included */
    uint32_t items[3] = {1, 2, 3}, off[2] = {0, 3}, len[2] = {3, 0};
    sq_batch b = {items, off, len, 2, NULL, NULL};
    float s[14];
    CHECK_EQ(m.scores(&m, &b, s, &e), 0);
    for (int i = 1; i <= 6; i++) {
        CHECK_NEAR(s[i], (double)want[i], 0);
        CHECK_NEAR(s[7 + i], (double)want[i], 0);
    }
    /* the dataset check: same dataset passes, another name or size does not */
    CHECK_EQ(sq_model_check_stream(&m, &ds.hdr, "in", &e), 0);
    sq_dataset other;
    CHECK_EQ(tiny_dataset(&other, "other", &e), 0);
    CHECK_EQ(sq_model_check_stream(&m, &other.hdr, "in", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "in: dataset 'other', but the model was trained on 'tiny'") != NULL);
    e.code = 0;
    other.hdr.n_items = 7;
    CHECK_EQ(sq_model_check_stream(&m, &other.hdr, "in", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "7 items, the model was trained on 6") != NULL);
    e.code = 0;
    sq_dataset_free(&other);
    CHECK_EQ(tiny_dataset(&other, NULL, &e), 0); /* no dataset key: size decides */
    CHECK_EQ(sq_model_check_stream(&m, &other.hdr, "in", &e), 0);
    sq_dataset_free(&other);
    sq_model_free(&m);
    sq_dataset_free(&ds);
    rm_dir(dir, "m.sqm");
}

UNIT_TEST(test_model_load_refuses_unknown_model)
{
    char dir[64], path[128];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/m.sqm", dir);
    sq_err e = {0};
    sq_modelfile mf;
    CHECK_EQ(build(&mf, &e), 0); /* model=test */
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    sq_model m;
    CHECK_EQ(sq_model_load(&m, path, &e), SQ_EX_DATA);
    char known[256], want[320];
    snprintf(want, sizeof want, "unknown model 'test' (this build knows %s)",
             sq_models_names(known, sizeof known));
    CHECK(strstr(e.msg, want) != NULL && strstr(want, "sasrec, bert4rec, pop") != NULL);
    /* a pop model without its tensor */
    memset(&mf, 0, sizeof mf);
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 4);
    CHECK_EQ(sq_modelfile_set(&mf, &e, "model", "pop"), 0);
    CHECK_EQ(sq_model_set_data(&mf, &h, &e), 0);
    CHECK_EQ(sq_modelfile_write(path, &mf, &e), 0);
    sq_modelfile_free(&mf);
    e.code = 0;
    CHECK_EQ(sq_model_load(&m, path, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "m.sqm: pop model without a pop.count tensor") != NULL);
    rm_dir(dir, "m.sqm");
}
