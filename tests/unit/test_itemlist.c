/* Unit tests for lib/data/itemlist.c (seqrec-score --exclude-items,
 * --allow-items): dense and original ids, precedence, unknown ids kept
 * for the report (the exclude list's first), bad lines. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "itemlist.h"
#include "unit.h"

/* A list of the given ids, as sq_id_list_read would give it. */
static void list_of(sq_user_list *l, sq_user_line *lines, char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lines[i] = (sq_user_line){ids[i], i + 1};
    l->l = lines;
    l->n = n;
}

UNIT_TEST(test_itemlist_dense_precedence_and_unknown)
{
    sq_user_line xl[3], al[4];
    char *xi[3] = {"2", "9", "4"}, *ai[4] = {"1", "2", "3", "12"};
    sq_user_list x, a;
    list_of(&x, xl, xi, 3);
    list_of(&a, al, ai, 4);
    sq_item_filter f;
    sq_err e = {0};
    /* exclude only: 1 3 5 6 left of 6; id 9 unknown */
    CHECK_EQ(sq_item_filter_make(&f, 6, NULL, &x, "x", NULL, NULL, &e), 0);
    CHECK(!f.ok[0] && f.ok[1] && !f.ok[2] && f.ok[3] && !f.ok[4] && f.ok[5] && f.ok[6]);
    CHECK_EQ(f.n_ok, 4);
    CHECK_EQ(f.n_skip, 1);
    CHECK_STR(f.skip[0].line->id, "9");
    sq_item_filter_free(&f);
    /* both: allowed 1 2 3 minus excluded 2: 1 3; unknown 9 (exclude) before 12 (allow) */
    CHECK_EQ(sq_item_filter_make(&f, 6, NULL, &x, "x", &a, "a", &e), 0);
    CHECK(f.ok[1] && !f.ok[2] && f.ok[3] && !f.ok[4] && !f.ok[5] && !f.ok[6]);
    CHECK_EQ(f.n_ok, 2);
    CHECK_EQ(f.n_skip, 2);
    CHECK(f.skip[0].allow == 0 && f.skip[1].allow == 1);
    CHECK_STR(f.skip[1].line->id, "12");
    CHECK_EQ(f.skip[1].line->line, 4);
    sq_item_filter_free(&f);
    /* a bad dense id: 65 with file and line */
    char *bad[2] = {"1", "x1"};
    list_of(&x, xl, bad, 2);
    CHECK_EQ(sq_item_filter_make(&f, 6, NULL, &x, "ex.txt", NULL, NULL, &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "ex.txt: line 2: bad item id 'x1' (dense ids are positive integers; "
                     "original ids need --map)");
    sq_item_filter_free(&f);
}

UNIT_TEST(test_itemlist_original_ids_through_the_map)
{
    static const char map_text[] = "user\t1\tann\nitem\t1\tapple\nitem\t2\tbanana\n"
                                   "item\t3\tcherry\n";
    sq_idmap map;
    sq_err e = {0};
    CHECK_EQ(sq_idmap_parse(&map, map_text, sizeof map_text - 1, "map", &e), 0);
    sq_user_line xl[2];
    char *xi[2] = {"banana", "kiwi"};
    sq_user_list x;
    list_of(&x, xl, xi, 2);
    sq_item_filter f;
    CHECK_EQ(sq_item_filter_make(&f, 3, &map, &x, "x", NULL, NULL, &e), 0);
    CHECK(f.ok[1] && !f.ok[2] && f.ok[3]);
    CHECK_EQ(f.n_skip, 1);
    CHECK_STR(f.skip[0].line->id, "kiwi");
    sq_item_filter_free(&f);
    /* "2" is an original id here, and the map has none */
    char *d[1] = {"2"};
    list_of(&x, xl, d, 1);
    CHECK_EQ(sq_item_filter_make(&f, 3, &map, NULL, NULL, &x, "a", &e), 0);
    CHECK_EQ(f.n_ok, 0);
    CHECK_EQ(f.n_skip, 1);
    sq_item_filter_free(&f);
    sq_idmap_free(&map);
}
