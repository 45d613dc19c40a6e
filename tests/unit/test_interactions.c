/* Unit tests for lib/data/interactions.c: interning, the stable chronological
 * sort, dedup, iterative k-core, remapping, stats and the map file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "interactions.h"
#include "rng.h"
#include "unit.h"

/* Adds "user item ts" rows given as parallel arrays. */
static void add_rows(unit_ctx *t, sq_inter *tab, const char *const *users,
                     const char *const *items, const int64_t *ts, size_t n)
{
    sq_err e = {0};
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(sq_inter_add_str(tab, users[i], strlen(users[i]), items[i], strlen(items[i]),
                                  ts ? ts[i] : 0, &e), 0);
}

/* The table as "user:item@ts user:item@ts ..." in row order (raw strings). */
static void rows_str(const sq_inter *tab, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < tab->n && k < n; i++) {
        int w;
        if (tab->has_ts == 1)
            w = snprintf(buf + k, n - k, "%s%s:%s@%lld", i ? " " : "",
                         sq_ids_str(&tab->users, tab->user[i]), sq_ids_str(&tab->items, tab->item[i]),
                         (long long)tab->ts[i]);
        else
            w = snprintf(buf + k, n - k, "%s%s:%s", i ? " " : "",
                         sq_ids_str(&tab->users, tab->user[i]), sq_ids_str(&tab->items, tab->item[i]));
        if (w < 0)
            return;
        k += (size_t)w;
    }
}

/* The map sq_inter_write_map writes for t (malloc'd), NULL on failure. */
static char *map_text(const sq_inter *t)
{
    char *map = NULL;
    size_t len = 0;
    sq_err e = {0};
    FILE *f = open_memstream(&map, &len);
    if (!f)
        return NULL;
    int rc = sq_inter_write_map(t, f, "map", &e);
    fclose(f);
    if (rc) {
        free(map);
        return NULL;
    }
    return map;
}

UNIT_TEST(test_interactions_intern_many)
{
    sq_ids d = {0};
    sq_err e = {0};
    char s[32];
    uint32_t id;
    /* enough ids to force several rehashes */
    for (int i = 0; i < 5000; i++) {
        snprintf(s, sizeof s, "id%d", i * 7);
        CHECK_EQ(sq_ids_intern(&d, s, strlen(s), &id, &e), 0);
        CHECK_EQ(id, i);
    }
    CHECK_EQ(d.n, 5000);
    for (int i = 4999; i >= 0; i--) {
        snprintf(s, sizeof s, "id%d", i * 7);
        CHECK_EQ(sq_ids_intern(&d, s, strlen(s), &id, &e), 0);
        CHECK_EQ(id, i);
        CHECK_STR(sq_ids_str(&d, id), s);
    }
    CHECK_EQ(d.n, 5000);
    /* the empty string and a prefix are ids of their own */
    CHECK_EQ(sq_ids_intern(&d, "", 0, &id, &e), 0);
    CHECK_EQ(id, 5000);
    CHECK_EQ(sq_ids_intern(&d, "id7x", 3, &id, &e), 0); /* "id7" */
    CHECK_EQ(id, 1);
    CHECK_EQ(e.code, 0);
    sq_ids_free(&d);
}

UNIT_TEST(test_interactions_sort_stable_ties)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 1, "test", &e), 0);
    /* users interleaved; b has a tie at 5 (y before z in the file), a has
     * the extreme timestamps so that every radix pass is exercised */
    const char *u[] = {"b", "a", "b", "a", "b", "a", "b", "a"};
    const char *it[] = {"x", "p", "y", "q", "z", "r", "w", "s"};
    int64_t ts[] = {9, INT64_MAX, 5, -3, 5, INT64_MIN, 1, -3};
    add_rows(t, &tab, u, it, ts, 8);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    char buf[512];
    rows_str(&tab, buf, sizeof buf);
    /* raw user order (b first seen first), then time, ties in file order */
    char want[512];
    snprintf(want, sizeof want, "b:w@1 b:y@5 b:z@5 b:x@9 a:r@%lld a:q@-3 a:s@-3 a:p@%lld",
             (long long)INT64_MIN, (long long)INT64_MAX);
    CHECK_STR(buf, want);
    CHECK_EQ(tab.sorted, 1);
    sq_inter_free(&tab);
}

UNIT_TEST(test_interactions_sort_without_ts_keeps_file_order)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 0, "test", &e), 0);
    const char *u[] = {"2", "1", "2", "1", "2"};
    const char *it[] = {"c", "a", "b", "d", "a"};
    add_rows(t, &tab, u, it, NULL, 5);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    char buf[256];
    rows_str(&tab, buf, sizeof buf);
    CHECK_STR(buf, "2:c 2:b 2:a 1:a 1:d");
    sq_inter_free(&tab);
}

typedef struct {
    uint32_t user;
    int64_t ts;
    uint32_t row;
    uint32_t item;
} ref_row;

static int cmp_ref(const void *pa, const void *pb)
{
    const ref_row *a = pa, *b = pb;
    if (a->user != b->user)
        return a->user < b->user ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->row < b->row ? -1 : a->row > b->row;
}

/* The radix + counting sort against qsort on (user, ts, row). */
UNIT_TEST(test_interactions_sort_matches_reference)
{
    enum { N = 20000 };
    sq_rng r;
    sq_rng_seed(&r, 7, 0);
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 1, "test", &e), 0);
    ref_row *ref = malloc(N * sizeof *ref);
    CHECK(ref != NULL);
    if (!ref)
        return;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t u = (uint32_t)sq_rng_below(&r, 300);
        uint32_t it = (uint32_t)sq_rng_below(&r, 1000);
        /* a wide range with many ties: several radix passes, stable */
        int64_t ts = (int64_t)sq_rng_below(&r, 50) * 1000003 - 20000000;
        char us[16], is[16];
        snprintf(us, sizeof us, "u%u", u);
        snprintf(is, sizeof is, "i%u", it);
        CHECK_EQ(sq_inter_add_str(&tab, us, strlen(us), is, strlen(is), ts, &e), 0);
        ref[i].user = tab.user[i];
        ref[i].ts = ts;
        ref[i].row = i;
        ref[i].item = tab.item[i];
    }
    qsort(ref, N, sizeof *ref, cmp_ref);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    int bad = 0;
    for (uint32_t i = 0; i < N; i++)
        bad += tab.user[i] != ref[i].user || tab.ts[i] != ref[i].ts || tab.item[i] != ref[i].item;
    CHECK_EQ(bad, 0);
    free(ref);
    sq_inter_free(&tab);
}

static void dedup_case(unit_ctx *t, int mode, const char *want)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 1, "test", &e), 0);
    /* u: x@1 y@2 x@3 z@4 y@5 (file order shuffled); v has x once */
    const char *u[] = {"u", "v", "u", "u", "u", "u"};
    const char *it[] = {"y", "x", "x", "z", "x", "y"};
    int64_t ts[] = {5, 1, 3, 4, 1, 2};
    add_rows(t, &tab, u, it, ts, 6);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    CHECK_EQ(sq_inter_dedup(&tab, mode, &e), 0);
    char buf[256];
    rows_str(&tab, buf, sizeof buf);
    CHECK_STR(buf, want);
    sq_inter_free(&tab);
}

UNIT_TEST(test_interactions_dedup_modes)
{
    dedup_case(t, SQ_DEDUP_KEEP, "u:x@1 u:y@2 u:x@3 u:z@4 u:y@5 v:x@1");
    dedup_case(t, SQ_DEDUP_FIRST, "u:x@1 u:y@2 u:z@4 v:x@1");
    dedup_case(t, SQ_DEDUP_LAST, "u:x@3 u:z@4 u:y@5 v:x@1");
}

/* With ucore = icore = 2 the removals cascade: pass 1 drops A-x and C-w
 * (items seen once), which leaves A and C with one interaction each; pass 2
 * drops A-y and C-z, which leaves y and z with one each (B's); pass 3 drops
 * B-y and B-z; pass 4 finds nothing to drop. Only the D/E block is left. */
UNIT_TEST(test_interactions_kcore_iterative)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 0, "test", &e), 0);
    const char *u[] = {"A", "A", "B", "B", "C", "C", "D", "D", "E", "E"};
    const char *it[] = {"x", "y", "y", "z", "z", "w", "p", "q", "p", "q"};
    add_rows(t, &tab, u, it, NULL, 10);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    int passes = 0;
    CHECK_EQ(sq_inter_kcore(&tab, 2, 2, &passes, &e), 0);
    CHECK_EQ(passes, 4);
    char buf[256];
    rows_str(&tab, buf, sizeof buf);
    CHECK_STR(buf, "D:p D:q E:p E:q");

    sq_inter one;
    sq_inter_init(&one);
    add_rows(t, &one, u, it, NULL, 10);
    CHECK_EQ(sq_inter_kcore(&one, 1, 1, &passes, &e), 0);
    CHECK_EQ(passes, 0);
    CHECK_EQ(one.n, 10);
    /* user-only core: items are not counted */
    CHECK_EQ(sq_inter_kcore(&one, 2, 0, &passes, &e), 0);
    CHECK_EQ(one.n, 10);
    CHECK_EQ(sq_inter_kcore(&one, 3, 0, &passes, &e), 0);
    CHECK_EQ(one.n, 0);
    sq_inter_free(&one);
    sq_inter_free(&tab);
}

UNIT_TEST(test_interactions_remap_numeric_and_appearance)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 0, "test", &e), 0);
    /* numeric user ids (order 7, 007, 9, 10, 100); items not all numeric */
    const char *u[] = {"10", "9", "100", "007", "7", "10", "gone"};
    const char *it[] = {"b", "20", "a", "b", "a", "a", "zz"};
    add_rows(t, &tab, u, it, NULL, 7);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    /* drop the non-numeric user so that the users left are all numbers */
    CHECK_EQ(sq_inter_kcore(&tab, 0, 2, NULL, &e), 0);
    CHECK_EQ(tab.n, 5);
    CHECK_EQ(sq_inter_remap(&tab, &e), 0);
    CHECK_EQ(tab.n_users, 4);
    CHECK_EQ(tab.n_items, 2);
    CHECK_EQ(tab.users_numeric, 1);
    CHECK_EQ(tab.items_numeric, 0);
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[1]), "7");
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[2]), "007");
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[3]), "10");
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[4]), "100");
    /* items in order of first appearance in the input: b then a */
    CHECK_STR(sq_ids_str(&tab.items, tab.item_raw[1]), "b");
    CHECK_STR(sq_ids_str(&tab.items, tab.item_raw[2]), "a");

    char *map = map_text(&tab);
    CHECK_STR(map ? map : "", "user\t1\t7\nuser\t2\t007\nuser\t3\t10\nuser\t4\t100\n"
                              "item\t1\tb\nitem\t2\ta\n");
    free(map);

    sq_inter_stats s;
    sq_inter_get_stats(&tab, &s);
    CHECK_EQ(s.users, 4);
    CHECK_EQ(s.items, 2);
    CHECK_EQ(s.interactions, 5);
    CHECK_EQ(s.min_len, 1);
    CHECK_EQ(s.max_len, 2);
    CHECK_NEAR(s.avg_len, 1.25, 1e-12);
    CHECK_NEAR(s.sparsity, 1.0 - 5.0 / 8.0, 1e-12);
    sq_inter_free(&tab);
}

/* Written records: users in dense order, items remapped, ts carried. */
UNIT_TEST(test_interactions_write_stream)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 1, "test", &e), 0);
    const char *u[] = {"2", "1", "2", "1"};
    const char *it[] = {"30", "10", "10", "20"};
    int64_t ts[] = {7, 3, 6, 2};
    add_rows(t, &tab, u, it, ts, 4);
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);
    CHECK_EQ(sq_inter_remap(&tab, &e), 0);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    sq_header h;
    sq_header_init(&h, SQ_SEQUENCES, tab.n_items);
    h.flags = SQ_FLAG_TS;
    sq_writer w = {0};
    CHECK_EQ(sq_writer_open(&w, f, "tmp", &h, &e), 0);
    CHECK_EQ(sq_inter_write(&tab, &w, &e), 0);
    CHECK_EQ(sq_writer_finish(&w, &e), 0);
    sq_writer_free(&w);
    sq_header_free(&h);
    rewind(f);
    sq_reader r;
    sq_record rec;
    CHECK_EQ(sq_reader_open(&r, f, "tmp", &e), 0);
    CHECK_EQ(r.hdr.n_items, 3);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 1); /* user "1": 20@2, 10@3 */
    CHECK_EQ(rec.user, 1);
    CHECK_EQ(rec.len, 2);
    CHECK_EQ(rec.items[0], 2);
    CHECK_EQ(rec.items[1], 1);
    CHECK_EQ(rec.ts[0], 2);
    CHECK_EQ(rec.ts[1], 3);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 1); /* user "2": 10@6, 30@7 */
    CHECK_EQ(rec.user, 2);
    CHECK_EQ(rec.len, 2);
    CHECK_EQ(rec.items[0], 1);
    CHECK_EQ(rec.items[1], 3);
    CHECK_EQ(sq_reader_next(&r, &rec, &e), 0);
    CHECK_EQ(e.code, 0);
    sq_reader_free(&r);
    fclose(f);
    sq_inter_free(&tab);
}

UNIT_TEST(test_interactions_ts_must_agree)
{
    sq_inter tab;
    sq_inter_init(&tab);
    sq_err e = {0};
    CHECK_EQ(sq_inter_set_ts(&tab, 1, "a.tsv", &e), 0);
    CHECK_EQ(sq_inter_set_ts(&tab, 1, "b.tsv", &e), 0);
    CHECK_EQ(sq_inter_set_ts(&tab, 0, "c.txt", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "c.txt") != NULL);
    sq_inter_free(&tab);
}

/* ---- --map-in: reading a map, dropping new items, remapping through it ---- */

/* Writes text to a new temporary file; its path into path (>= 32 bytes). */
static int temp_file(char *path, const char *text)
{
    strcpy(path, "/tmp/sq_map_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* Reads text as a map; the exit code, the message into msg. */
static int read_map_text(const char *text, sq_inter *tab, char *msg, size_t n)
{
    char path[32];
    sq_err e = {0};
    if (temp_file(path, text))
        return -1;
    int rc = sq_inter_read_map(tab, path, &e);
    snprintf(msg, n, "%s", e.msg);
    unlink(path);
    return rc;
}

UNIT_TEST(test_interactions_read_map)
{
    sq_inter tab;
    sq_inter_init(&tab);
    char msg[1100];
    CHECK_EQ(read_map_text("user\t1\tu7\r\nuser\t2\tu3\n\nitem\t1\tx y\nitem\t2\tz\n"
                           "item\t3\t7", &tab, msg, sizeof msg), 0);
    CHECK_EQ(tab.map_users, 2);
    CHECK_EQ(tab.map_items, 3);
    CHECK_STR(sq_ids_str(&tab.users, 0), "u7"); /* the CR is not part of the id */
    CHECK_STR(sq_ids_str(&tab.users, 1), "u3");
    CHECK_STR(sq_ids_str(&tab.items, 0), "x y");
    CHECK_STR(sq_ids_str(&tab.items, 2), "7");
    sq_inter_free(&tab);

    /* bad maps: 65 with the line */
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"user\t1\ta\nuser\t1\tb\n", "line 2: user dense id 1, expected 2"},
        {"user\t1\ta\nitem\t2\tb\n", "line 2: item dense id 2, expected 1"},
        {"user\t1\ta\nuser\t2\ta\n", "line 2: user 'a' already has dense id 1"},
        {"user\t1\ta\nitem 1 b\n", "line 2: expected kind<TAB>dense<TAB>original"},
        {"user\t1\ta\nitems\t1\tb\n", "line 2: kind must be user or item, not 'items'"},
        {"user\t1\ta\nitem\t1\t\n", "line 2: empty original item id"},
        {"user\t1\ta\nitem\t99999999999999\tb\n", "line 2: bad dense id '99999999999999'"},
        {"user\t1\ta\n", "not an id map: no item lines"},
        {"", "not an id map: no user lines"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_inter_init(&tab);
        CHECK_EQ(read_map_text(bad[i].text, &tab, msg, sizeof msg), SQ_EX_DATA);
        CHECK(strstr(msg, bad[i].want) != NULL);
        CHECK(strstr(msg, "/tmp/sq_map_") != NULL);
        sq_inter_free(&tab);
    }
    sq_err e = {0};
    sq_inter_init(&tab);
    CHECK_EQ(sq_inter_read_map(&tab, "/nonexistent/map.tsv", &e), SQ_EX_NOINPUT);
    CHECK(strstr(e.msg, "/nonexistent/map.tsv") != NULL);
    sq_inter_free(&tab);

    /* one reader of the format: seqrec-score's map (sq_idmap_read) reads
     * what --map-in reads, an original id with a tab included */
    const char *text = "user\t1\tu\t7\r\n\nitem\t1\tx\ty\nitem\t2\tz\n";
    sq_inter_init(&tab);
    CHECK_EQ(read_map_text(text, &tab, msg, sizeof msg), 0);
    CHECK_STR(sq_ids_str(&tab.users, 0), "u\t7");
    CHECK_STR(sq_ids_str(&tab.items, 0), "x\ty");
    sq_inter_free(&tab);
    char path[] = "/tmp/sq_idmap_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    sq_idmap m;
    CHECK_EQ(sq_idmap_read(&m, path, &e), 0);
    CHECK_STR(sq_idmap_user(&m, 1), "u\t7");
    CHECK_STR(sq_idmap_item(&m, 1), "x\ty");
    CHECK_STR(sq_idmap_item(&m, 2), "z");
    sq_idmap_free(&m);
    unlink(path);
    sq_inter_init(&tab);
    CHECK_EQ(sq_inter_read_map(&tab, "/nonexistent/map.tsv", &e), SQ_EX_NOINPUT);
    CHECK(strstr(e.msg, "/nonexistent/map.tsv") != NULL);
    sq_inter_free(&tab);
}

/* Map ids stay (present or not), new users and items follow in numeric
 * order among themselves; a map user without rows gets no record. */
UNIT_TEST(test_interactions_remap_through_map)
{
    sq_inter tab;
    sq_inter_init(&tab);
    char msg[1100];
    CHECK_EQ(read_map_text("user\t1\t50\nuser\t2\t9\nuser\t3\tgone\n"
                           "item\t1\tb\nitem\t2\ta\nitem\t3\tunused\n", &tab, msg, sizeof msg), 0);
    const char *u[] = {"9", "12", "50", "9", "11", "12", "50"};
    const char *it[] = {"a", "n2", "b", "n1", "a", "b", "n2"};
    add_rows(t, &tab, u, it, NULL, 7);
    sq_err e = {0};
    CHECK_EQ(sq_inter_sort(&tab, &e), 0);

    /* append: the new items get ids 4, 5 in first appearance (not numbers) */
    CHECK_EQ(sq_inter_remap(&tab, &e), 0);
    CHECK_EQ(tab.n_users, 5); /* 50, 9, gone, then 11, 12 in numeric order */
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[1]), "50");
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[3]), "gone");
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[4]), "11");
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[5]), "12");
    CHECK_EQ(tab.n_items, 5);
    CHECK_STR(sq_ids_str(&tab.items, tab.item_raw[3]), "unused");
    CHECK_STR(sq_ids_str(&tab.items, tab.item_raw[4]), "n2");
    CHECK_STR(sq_ids_str(&tab.items, tab.item_raw[5]), "n1");
    CHECK_EQ(tab.users_present, 4);
    CHECK_EQ(tab.items_present, 4);
    sq_inter_stats s;
    sq_inter_get_stats(&tab, &s);
    CHECK_EQ(s.users, 4);
    CHECK_EQ(s.items, 4);
    CHECK_EQ(s.min_len, 1);
    CHECK_EQ(s.max_len, 2);

    /* the extended map: the old lines first, unchanged */
    char *map = map_text(&tab);
    CHECK_STR(map ? map : "", "user\t1\t50\nuser\t2\t9\nuser\t3\tgone\nuser\t4\t11\n"
                              "user\t5\t12\nitem\t1\tb\nitem\t2\ta\nitem\t3\tunused\n"
                              "item\t4\tn2\nitem\t5\tn1\n");
    free(map);

    /* drop: the rows of n1 and n2 go, the ids stay the map's */
    uint64_t rows = 0;
    uint32_t items = 0;
    CHECK_EQ(sq_inter_drop_new_items(&tab, &rows, &items, &e), 0);
    CHECK_EQ(rows, 3);
    CHECK_EQ(items, 2);
    CHECK_EQ(tab.n, 4);
    CHECK_EQ(sq_inter_remap(&tab, &e), 0);
    CHECK_EQ(tab.n_items, 3);
    CHECK_EQ(tab.n_users, 5); /* 12 keeps b */
    CHECK_STR(sq_ids_str(&tab.users, tab.user_raw[4]), "11");
    CHECK_EQ(tab.items_present, 2);
    sq_inter_free(&tab);
}
