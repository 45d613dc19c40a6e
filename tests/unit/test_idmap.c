/* Unit tests for lib/data/idmap.c: fingerprints of id maps, their text
 * form, and the checks (equal maps, extensions, changed, reordered and
 * shorter maps), on maps parsed from memory and on sq_inter tables. */
#include <stdio.h>
#include <string.h>

#include "dataset.h"
#include "idmap.h"
#include "interactions.h"
#include "unit.h"

static const char MAP_A[] = "user\t1\tann\nuser\t2\tbob\nitem\t1\tx:1\nitem\t2\ty\nitem\t3\tz\n";

/* The fingerprint of a map text (0 ok). */
static int fp_of(const char *text, sq_mapfp *fp, sq_err *e)
{
    sq_idmap m;
    if (sq_idmap_parse(&m, text, strlen(text), "t.map", e))
        return e->code;
    int rc = sq_mapfp_of_map(&m, "t.map", fp, e);
    sq_idmap_free(&m);
    return rc;
}

/* sq_idmap_check_extends of map text against base's items and users. */
static int check(const char *text, const sq_mapfp *base, sq_err *e)
{
    sq_idmap m;
    char w[256] = "";
    memset(e, 0, sizeof *e); /* the first failure's message stays otherwise */
    if (sq_idmap_parse(&m, text, strlen(text), "new.map", e))
        return e->code;
    int rc = sq_idmap_check_extends(&m, "new.map", 1, &base->item, "model", "m.sqm", w,
                                    sizeof w, e) ||
             sq_idmap_check_extends(&m, "new.map", 0, &base->user, "model", "m.sqm", w,
                                    sizeof w, e);
    sq_idmap_free(&m);
    return rc ? e->code : 0;
}

UNIT_TEST(test_idmap_fingerprint_text)
{
    sq_mapfp fp;
    sq_err e = {0};
    CHECK_EQ(fp_of(MAP_A, &fp, &e), 0);
    CHECK_EQ(fp.user.n, 2);
    CHECK_EQ(fp.item.n, 3);
    char buf[32], meta[160];
    sq_idfp_str(&fp.item, buf, sizeof buf);
    CHECK(strncmp(buf, "3:", 2) == 0 && strlen(buf) == 18);
    /* the meta round trip, as a model's config holds it */
    char ub[32];
    snprintf(meta, sizeof meta, "dataset=d\ndata.preprocess.items=3\n"
             "data.preprocess.map_users=%s\ndata.preprocess.map_items=%s\n",
             sq_idfp_str(&fp.user, ub, sizeof ub), buf);
    sq_mapfp back;
    sq_mapfp_from_meta(meta, "data.", &back);
    CHECK(back.item.has && back.user.has && back.preprocessed);
    CHECK_EQ(back.item.hash, fp.item.hash);
    CHECK_EQ(back.user.n, 2);
    sq_mapfp_from_meta(meta, "", &back); /* not a stream's keys */
    CHECK(!back.item.has && !back.preprocessed);
    sq_idfp bad;
    CHECK_EQ(sq_idfp_parse("3:12", &bad), -1);
    CHECK_EQ(sq_idfp_parse("x:0123456789abcdef", &bad), -1);
    CHECK_EQ(sq_idfp_parse("3:0123456789abcdeg", &bad), -1);
    CHECK_EQ(sq_idfp_parse("3:0123456789abcdef", &bad), 0);
    CHECK_EQ(bad.hash, 0x0123456789abcdefULL);
}

UNIT_TEST(test_idmap_equal_and_extension)
{
    sq_mapfp a, b;
    sq_err e = {0};
    CHECK_EQ(fp_of(MAP_A, &a, &e), 0);
    /* the same map in another line order is the same map */
    CHECK_EQ(fp_of("item\t3\tz\nitem\t1\tx:1\nuser\t2\tbob\nitem\t2\ty\nuser\t1\tann\n", &b,
                   &e), 0);
    CHECK_EQ(b.item.hash, a.item.hash);
    CHECK_EQ(b.user.hash, a.user.hash);
    CHECK_EQ(check(MAP_A, &a, &e), 0);
    /* new users and items appended: an extension */
    char ext[256];
    snprintf(ext, sizeof ext, "%suser\t3\tcid\nitem\t4\tw\n", MAP_A);
    CHECK_EQ(check(ext, &a, &e), 0);
    sq_mapfp x;
    CHECK_EQ(fp_of(ext, &x, &e), 0);
    CHECK(x.item.hash != a.item.hash);
    char w[256] = "";
    CHECK_EQ(sq_mapfp_check_same(&x, "new.map", &a, "s.split", w, sizeof w, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "new.map is not the id map of s.split: its users differ") != NULL);
    CHECK_EQ(sq_mapfp_check_same(&a, "a.map", &a, "s.split", w, sizeof w, &e), 0);
}

UNIT_TEST(test_idmap_refused)
{
    sq_mapfp a;
    sq_err e = {0};
    CHECK_EQ(fp_of(MAP_A, &a, &e), 0);
    /* a changed id */
    CHECK_EQ(check("user\t1\tann\nuser\t2\tbob\nitem\t1\tx:1\nitem\t2\tY\nitem\t3\tz\n", &a, &e),
             SQ_EX_DATA);
    CHECK(strstr(e.msg, "new.map is not the id map of m.sqm, nor an extension of it: its first "
                 "3 items differ (model: 3:") != NULL);
    /* reordered items */
    CHECK_EQ(check("user\t1\tann\nuser\t2\tbob\nitem\t1\ty\nitem\t2\tx:1\nitem\t3\tz\n", &a, &e),
             SQ_EX_DATA);
    /* reordered users, items the same */
    CHECK_EQ(check("user\t1\tbob\nuser\t2\tann\nitem\t1\tx:1\nitem\t2\ty\nitem\t3\tz\n", &a, &e),
             SQ_EX_DATA);
    CHECK(strstr(e.msg, "its first 2 users differ") != NULL);
    /* shorter */
    CHECK_EQ(check("user\t1\tann\nuser\t2\tbob\nitem\t1\tx:1\nitem\t2\ty\n", &a, &e),
             SQ_EX_DATA);
    CHECK(strstr(e.msg, "it has 2 items, the model 3") != NULL);
    /* a hole below the largest id */
    CHECK_EQ(check("user\t1\tann\nuser\t2\tbob\nitem\t1\tx:1\nitem\t3\tz\n", &a, &e),
             SQ_EX_DATA);
    CHECK(strstr(e.msg, "no item 2 in the map") != NULL);
}

UNIT_TEST(test_idmap_unknown_warns)
{
    sq_mapfp none = {0}, a;
    sq_err e = {0};
    sq_idmap m;
    char w[256] = "";
    CHECK_EQ(fp_of(MAP_A, &a, &e), 0);
    CHECK_EQ(sq_idmap_parse(&m, MAP_A, strlen(MAP_A), "a.map", &e), 0);
    CHECK_EQ(sq_idmap_check_extends(&m, "a.map", 1, &none.item, "model", "old.sqm", w,
                                    sizeof w, &e), 0);
    CHECK(strstr(w, "cannot check") != NULL && strstr(w, "made before seqrec 0.2?") != NULL);
    sq_idmap_free(&m);
    /* stream against model: both known and equal, both unknown (synthetic
     * data: silent), one preprocessed without a fingerprint (a warning) */
    w[0] = '\0';
    CHECK_EQ(sq_mapfp_check_stream(&a, "m.sqm", &a, "s.split", w, sizeof w, &e), 0);
    CHECK_EQ(sq_mapfp_check_stream(&none, "m.sqm", &none, "s.split", w, sizeof w, &e), 0);
    CHECK_STR(w, "");
    sq_mapfp old = {.preprocessed = 1};
    CHECK_EQ(sq_mapfp_check_stream(&a, "m.sqm", &old, "s.split", w, sizeof w, &e), 0);
    CHECK(strstr(w, "s.split has no id-map fingerprint") != NULL);
    sq_mapfp other = a;
    other.item.hash ^= 1;
    CHECK_EQ(sq_mapfp_check_stream(&a, "m.sqm", &other, "s.split", w, sizeof w, &e),
             SQ_EX_DATA);
    CHECK(strstr(e.msg, "s.split was preprocessed with another id map than m.sqm") != NULL);
}

/* The table's fingerprint is the one of the map it writes; a table read
 * from a map text checks against it. */
UNIT_TEST(test_idmap_inter)
{
    sq_inter tab;
    sq_err e = {0};
    sq_inter_init(&tab);
    CHECK_EQ(sq_inter_read_map_text(&tab, MAP_A, strlen(MAP_A), "a.map", &e), 0);
    CHECK_EQ(sq_inter_add_str(&tab, "cid", 3, "y", 1, 0, &e), 0);
    CHECK_EQ(sq_inter_add_str(&tab, "ann", 3, "w", 1, 0, &e), 0);
    CHECK_EQ(sq_inter_set_ts(&tab, 0, "x", &e), 0);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    CHECK_EQ(sq_inter_remap(&tab, &e), 0);
    sq_mapfp a, fp;
    CHECK_EQ(fp_of(MAP_A, &a, &e), 0);
    char w[256] = "";
    CHECK_EQ(sq_inter_check_map(&tab, "a.map", &a, "m.sqm", w, sizeof w, &e), 0);
    CHECK_EQ(sq_inter_mapfp(&tab, &fp, &e), 0);
    CHECK_EQ(fp.user.n, 3);
    CHECK_EQ(fp.item.n, 4);
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    CHECK(f != NULL);
    CHECK_EQ(sq_inter_write_map(&tab, f, "out.map", &e), 0);
    fclose(f);
    sq_mapfp written;
    CHECK_EQ(fp_of(buf, &written, &e), 0);
    CHECK_EQ(written.item.hash, fp.item.hash);
    CHECK_EQ(written.user.hash, fp.user.hash);
    sq_inter_free(&tab);
    /* a map that is not the model's */
    sq_inter_init(&tab);
    const char *other = "user\t1\tbob\nitem\t1\tx:1\nitem\t2\ty\nitem\t3\tz\n";
    CHECK_EQ(sq_inter_read_map_text(&tab, other, strlen(other), "o.map", &e), 0);
    CHECK_EQ(sq_inter_check_map(&tab, "o.map", &a, "m.sqm", w, sizeof w, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "o.map is not the id map of m.sqm") != NULL);
    sq_inter_free(&tab);
}

UNIT_TEST(test_idmap_dense_id_bound)
{
    /* holes are allowed (test_userlist has a sparse map too) */
    sq_idmap m;
    sq_err e = {0};
    static const char holes[] = "user\t1\ta\nuser\t9\td\nitem\t3\tc\nitem\t1\tx";
    CHECK_EQ(sq_idmap_parse(&m, holes, strlen(holes), "h.map", &e), 0);
    CHECK_STR(sq_idmap_user(&m, 9), "d");
    CHECK(sq_idmap_user(&m, 2) == NULL);
    CHECK_STR(sq_idmap_item(&m, 3), "c");
    sq_idmap_free(&m);
    /* a dense id above the map's size in bytes is refused, not a table of
     * that size allocated */
    static const char big[] = "user\t1\ta\nitem\t4000000000\tx\n";
    CHECK_EQ(sq_idmap_parse(&m, big, strlen(big), "big.map", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "big.map: line 2: dense item id 4000000000 is larger than the map "
                     "itself (27 bytes; a map numbers each kind's ids 1..N, a line each)");
    memset(&e, 0, sizeof e);
    static const char one_over[] = "user\t1\ta\nuser\t20\tc\n"; /* 19 bytes */
    CHECK_EQ(sq_idmap_parse(&m, one_over, strlen(one_over), "o.map", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "o.map: line 2: dense user id 20 is larger than the map itself (19 "
                        "bytes") != NULL);
    static const char at[] = "user\t1\ta\nuser\t19\tc\n";
    CHECK_EQ(sq_idmap_parse(&m, at, strlen(at), "at.map", &e), 0);
    sq_idmap_free(&m);
}
