/* Unit tests for lib/data/synth.c: determinism, ranges, and that the sequential
 * signal the generator promises is really in the data. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "synth.h"
#include "unit.h"

/* The whole text output of options o in a malloc'ed buffer. */
static char *text_of(const sq_synth_opts *o, size_t *len)
{
    sq_synth s;
    sq_err e = {0};
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    int rc = sq_synth_init(&s, o, &e);
    if (rc == 0)
        rc = sq_synth_write_text(&s, f, "mem", &e);
    sq_synth_free(&s);
    fclose(f);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

UNIT_TEST(test_synth_deterministic)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 300;
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *a = text_of(&o, &n1);
    char *b = text_of(&o, &n2);
    o.seed = 43;
    char *c = text_of(&o, &n3);
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK(n1 > 0);
        CHECK(n1 == n2 && memcmp(a, b, n1) == 0);
        CHECK(n1 != n3 || memcmp(a, c, n1) != 0);
    }
    free(a);
    free(b);
    free(c);
}

/* A user's sequence does not depend on how many users are generated. */
UNIT_TEST(test_synth_users_prefix)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 50;
    size_t n1 = 0, n2 = 0;
    char *a = text_of(&o, &n1);
    o.users = 80;
    char *b = text_of(&o, &n2);
    CHECK(a && b);
    if (a && b) {
        CHECK(n2 > n1);
        CHECK(memcmp(a, b, n1) == 0);
    }
    free(a);
    free(b);
}

UNIT_TEST(test_synth_ranges)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 500;
    o.items = 97;
    o.clusters = 7;
    o.min_len = 3;
    o.mean_len = 12;
    o.max_len = 25;
    sq_synth s;
    sq_err e = {0};
    CHECK_EQ(sq_synth_init(&s, &o, &e), 0);
    int bad_item = 0, bad_len = 0, bad_ts = 0, bad_rating = 0, hit_max = 0;
    for (uint32_t u = 1; u <= o.users; u++) {
        uint32_t len = sq_synth_user(&s, u);
        bad_len += len < o.min_len || len > o.max_len;
        hit_max += len == o.max_len;
        for (uint32_t i = 0; i < len; i++) {
            bad_item += s.items[i] < 1 || s.items[i] > o.items;
            bad_rating += s.rating[i] != 4 && s.rating[i] != 5;
            bad_ts += i > 0 && s.ts[i] <= s.ts[i - 1];
        }
    }
    CHECK_EQ(bad_item, 0);
    CHECK_EQ(bad_len, 0);
    CHECK_EQ(bad_ts, 0);
    CHECK_EQ(bad_rating, 0);
    CHECK(hit_max > 0); /* mean 12, cap 25: some users are clipped */
    /* Every item belongs to exactly one cluster, clusters near-equal. */
    CHECK_EQ(s.start[0], 0);
    CHECK_EQ(s.start[o.clusters], o.items);
    for (uint32_t k = 0; k < o.clusters; k++) {
        uint32_t size = s.start[k + 1] - s.start[k];
        CHECK(size == 13 || size == 14);
        for (uint32_t j = s.start[k]; j < s.start[k + 1]; j++)
            CHECK_EQ(s.cluster_of[s.members[j]], k);
    }
    for (uint32_t i = 1; i <= o.items; i++) {
        CHECK(s.successor[i] != i);
        CHECK(s.successor[i] >= 1 && s.successor[i] <= o.items);
    }
    sq_synth_free(&s);
}

/* Fraction of transitions a -> succ(a), and the mean length. */
static void signal_of(const sq_synth_opts *o, double *frac, double *mean_len)
{
    sq_synth s;
    sq_err e = {0};
    *frac = *mean_len = -1;
    if (sq_synth_init(&s, o, &e))
        return;
    uint64_t succ = 0, trans = 0, total = 0;
    for (uint32_t u = 1; u <= o->users; u++) {
        uint32_t len = sq_synth_user(&s, u);
        total += len;
        for (uint32_t i = 1; i < len; i++) {
            trans++;
            succ += s.items[i] == s.successor[s.items[i - 1]];
        }
    }
    *frac = (double)succ / (double)trans;
    *mean_len = (double)total / o->users;
    sq_synth_free(&s);
}

UNIT_TEST(test_synth_sequential_signal)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 4000; /* ~76,000 transitions: the binomial sd is ~0.002 */
    double frac, mean;
    signal_of(&o, &frac, &mean);
    /* p_next, plus the rare cluster draw that lands on succ(a) by chance. */
    CHECK(frac >= o.p_next - 0.01 && frac <= o.p_next + 0.03);
    /* Mean of min + geometric: 20 (clipping at 200 is negligible). */
    CHECK_NEAR(mean, o.mean_len, 0.02);
    o.p_next = 0.8;
    signal_of(&o, &frac, &mean);
    CHECK(frac >= 0.79 && frac <= 0.83);
    o.p_next = 0.0; /* without the rule only chance remains */
    signal_of(&o, &frac, &mean);
    CHECK(frac >= 0 && frac < 0.03);
    /* Fixed lengths when mean == min. */
    o.min_len = o.mean_len = 7;
    signal_of(&o, &frac, &mean);
    CHECK_NEAR(mean, 7.0, 1e-12);
}

/* p_stay = 1 and p_next = 0: a user never leaves the first cluster. */
UNIT_TEST(test_synth_cluster_stay)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 200;
    o.p_next = 0;
    o.p_stay = 1;
    sq_synth s;
    sq_err e = {0};
    CHECK_EQ(sq_synth_init(&s, &o, &e), 0);
    int moved = 0;
    for (uint32_t u = 1; u <= o.users; u++) {
        uint32_t len = sq_synth_user(&s, u);
        for (uint32_t i = 1; i < len; i++)
            moved += s.cluster_of[s.items[i]] != s.cluster_of[s.items[0]];
    }
    CHECK_EQ(moved, 0);
    sq_synth_free(&s);
}

/* Zipf inside a cluster: with exponent 1 the head item of a cluster is
 * drawn about as often as the 2nd and 3rd together (1 vs 1/2 + 1/3). */
UNIT_TEST(test_synth_zipf)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 3000;
    o.p_next = 0;
    sq_synth s;
    sq_err e = {0};
    CHECK_EQ(sq_synth_init(&s, &o, &e), 0);
    uint64_t *count = calloc((size_t)o.items + 1, sizeof *count);
    CHECK(count != NULL);
    if (!count) {
        sq_synth_free(&s);
        return;
    }
    for (uint32_t u = 1; u <= o.users; u++) {
        uint32_t len = sq_synth_user(&s, u);
        for (uint32_t i = 0; i < len; i++)
            count[s.items[i]]++;
    }
    uint64_t head = 0, next2 = 0;
    for (uint32_t k = 0; k < o.clusters; k++) {
        head += count[s.members[s.start[k]]];
        next2 += count[s.members[s.start[k] + 1]] + count[s.members[s.start[k] + 2]];
    }
    double ratio = (double)head / (double)next2; /* 1 / (5/6) = 1.2 */
    CHECK(ratio > 1.1 && ratio < 1.3);
    free(count);
    sq_synth_free(&s);
}

UNIT_TEST(test_synth_check_options)
{
    sq_synth_opts d, o;
    sq_synth_defaults(&d);
    sq_err e = {0};
    CHECK_EQ(sq_synth_check(&d, &e), 0);
    o = d; o.users = 0; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.items = 1; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.clusters = d.items + 1; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.user_clusters = d.clusters + 1; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.min_len = 0; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.mean_len = 300; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.mean_len = 4; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.mean_len = NAN; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.p_next = 1.5; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.p_stay = -0.1; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.zipf = -1; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    o = d; o.max_len = SQ_MAX_RECORD_ITEMS + 1; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), SQ_EX_USAGE);
    /* The extremes that are allowed. */
    o = d; o.items = 2; o.clusters = 2; o.user_clusters = 2; o.p_next = 1; o.p_stay = 0; e.code = 0;
    CHECK_EQ(sq_synth_check(&o, &e), 0);
}

/* The stream holds exactly what sq_synth_user generates, with its meta. */
UNIT_TEST(test_synth_stream_roundtrip)
{
    sq_synth_opts o;
    sq_synth_defaults(&o);
    o.users = 40;
    o.seed = 7;
    sq_synth s;
    sq_err e = {0};
    CHECK_EQ(sq_synth_init(&s, &o, &e), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f) {
        sq_synth_free(&s);
        return;
    }
    CHECK_EQ(sq_synth_write_stream(&s, f, "mem", &e), 0);
    fclose(f);
    FILE *in = fmemopen(buf, len, "rb");
    CHECK(in != NULL);
    sq_reader r;
    CHECK_EQ(sq_reader_open(&r, in, "mem", &e), 0);
    CHECK_EQ(r.hdr.kind, SQ_SEQUENCES);
    CHECK_EQ(r.hdr.flags, SQ_FLAG_TS);
    CHECK_EQ(r.hdr.n_items, o.items);
    char v[64];
    CHECK(sq_meta_get(&r.hdr, "synth.seed", v, sizeof v));
    CHECK_STR(v, "7");
    CHECK(sq_meta_get(&r.hdr, "synth.p-next", v, sizeof v));
    CHECK_STR(v, "0.5");
    CHECK(sq_meta_get(&r.hdr, "seqrec.version", v, sizeof v));
    CHECK_STR(v, SEQREC_VERSION);
    sq_record rec;
    uint32_t u = 0;
    int got;
    while ((got = sq_reader_next(&r, &rec, &e)) == 1) {
        u++;
        uint32_t n = sq_synth_user(&s, u);
        CHECK_EQ(rec.user, u);
        CHECK_EQ(rec.len, n);
        CHECK(memcmp(rec.items, s.items, n * sizeof *s.items) == 0);
        CHECK(memcmp(rec.ts, s.ts, n * sizeof *s.ts) == 0);
    }
    CHECK_EQ(got, 0);
    CHECK_EQ(u, o.users);
    sq_reader_free(&r);
    fclose(in);
    free(buf);
    sq_synth_free(&s);
}
