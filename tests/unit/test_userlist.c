/* Unit tests for lib/data/userlist.c (seqrec-score --users): reading the
 * lines (CR LF, empty lines, TAB, NUL, a missing file), and resolving them
 * to a set of dense users with and without an id map, the skipped lines in
 * file order, a bad dense id. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "userlist.h"
#include "unit.h"

/* A temp file holding text[0, n) at path (room for 64 bytes); 0 or -1. */
static int temp_file(char *path, const char *text, size_t n)
{
    snprintf(path, 64, "/tmp/sq_userlist_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    int ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    return ok ? 0 : -1;
}

/* Reads text as a users file: the code, the list in *u, the message in e. */
static int read_text(const char *text, size_t n, sq_user_list *u, sq_err *e, char *path)
{
    memset(u, 0, sizeof *u);
    memset(e, 0, sizeof *e);
    if (temp_file(path, text, n))
        return -1;
    return sq_user_list_read(u, path, e);
}

UNIT_TEST(test_userlist_read_lines)
{
    /* LF and CR LF, an id with a space, no newline at the end */
    static const char text[] = "7\r\nann\nbob x\r\n00042";
    char path[64];
    sq_err e = {0};
    sq_user_list u;
    CHECK_EQ(read_text(text, sizeof text - 1, &u, &e, path), 0);
    CHECK_EQ(u.n, 4);
    if (u.n == 4) {
        CHECK_STR(u.l[0].id, "7");
        CHECK_STR(u.l[1].id, "ann");
        CHECK_STR(u.l[2].id, "bob x");
        CHECK_STR(u.l[3].id, "00042");
        for (size_t i = 0; i < 4; i++)
            CHECK_EQ(u.l[i].line, i + 1);
    }
    sq_user_list_free(&u);
    CHECK(u.l == NULL && u.n == 0);
    sq_user_list_free(&u); /* twice: harmless */
    unlink(path);
    /* an empty file is an empty list */
    CHECK_EQ(read_text("", 0, &u, &e, path), 0);
    CHECK_EQ(u.n, 0);
    sq_user_list_free(&u);
    unlink(path);
}

/* A bad line: 65 naming the file and the line, nothing kept. */
static void check_bad(unit_ctx *t, const char *text, size_t n, int line, const char *got)
{
    char path[64], want[256];
    sq_err e = {0};
    sq_user_list u = {0};
    CHECK_EQ(read_text(text, n, &u, &e, path), SQ_EX_DATA);
    snprintf(want, sizeof want, "%s: line %d: expected one user id, got %s", path, line, got);
    CHECK_STR(e.msg, want);
    CHECK(u.l == NULL && u.n == 0);
    unlink(path);
}

UNIT_TEST(test_userlist_read_bad_lines)
{
    check_bad(t, "1\n\n2\n", 5, 2, "an empty line");
    check_bad(t, "1\n2\n\r\n", 6, 3, "an empty line"); /* a CR alone is empty */
    check_bad(t, "ann\tbob\n", 8, 1, "a TAB or NUL");
    check_bad(t, "1\n2\0x\n", 6, 2, "a TAB or NUL");
    check_bad(t, "\0\n", 2, 1, "a TAB or NUL");
}

UNIT_TEST(test_userlist_read_missing_file)
{
    sq_err e = {0};
    sq_user_list u = {0};
    CHECK_EQ(sq_user_list_read(&u, "/nonexistent/users.txt", &e), SQ_EX_NOINPUT);
    CHECK(strstr(e.msg, "/nonexistent/users.txt") != NULL);
    CHECK(u.l == NULL && u.n == 0);
}

/* A split dataset of users 1, 2 and 5 (view 0 only, a few items each). */
static int three_users(sq_dataset *ds, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 9);
    int rc = sq_meta_add(&h, e, "dataset", "%s", "u");
    if (!rc)
        rc = sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    static uint32_t items[] = {1, 2, 3, 4};
    static const uint32_t users[] = {2, 1, 5};
    for (int i = 0; i < 3 && !rc; i++) {
        sq_record r = {.user = users[i], .len = 4, .items = items, .n_train = 2, .n_valid = 1};
        rc = sq_dataset_add(ds, &r, e);
    }
    return rc ? rc : sq_dataset_finish(ds, e);
}

/* The users of s->set, as a bit mask over 0..31 (s->n <= 32 here). */
static uint32_t set_bits(const sq_user_set *s)
{
    uint32_t m = 0;
    for (uint32_t u = 0; s->set && u < s->n && u < 32; u++)
        m |= s->set[u] ? 1u << u : 0;
    return m;
}

UNIT_TEST(test_userlist_resolve_dense_ids)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(three_users(&ds, &e), 0);
    char path[64];
    sq_user_list u;
    /* 9: past the largest user; 3: below it but without a record */
    static const char dense[] = "5\n9\n1\n3\n5\n";
    CHECK_EQ(read_text(dense, strlen(dense), &u, &e, path), 0);
    sq_user_set s;
    CHECK_EQ(sq_user_list_resolve(&u, "users.txt", NULL, &ds, &s, &e), 0);
    CHECK_EQ(s.n, 6);
    CHECK_EQ(set_bits(&s), (1u << 1) | (1u << 5));
    CHECK_EQ(s.n_skip, 2);
    if (s.n_skip == 2) {
        CHECK_STR(s.skip[0].user->id, "9");
        CHECK_EQ(s.skip[0].user->line, 2);
        CHECK_EQ(s.skip[0].why, SQ_USER_NO_RECORD);
        CHECK_STR(s.skip[1].user->id, "3");
        CHECK_EQ(s.skip[1].user->line, 4);
        CHECK_EQ(s.skip[1].why, SQ_USER_NO_RECORD);
    }
    sq_user_set_free(&s);
    CHECK(s.set == NULL && s.skip == NULL && s.n_skip == 0);
    sq_user_list_free(&u);
    unlink(path);
    /* an empty list: no user wanted, nothing skipped */
    CHECK_EQ(read_text("", 0, &u, &e, path), 0);
    CHECK_EQ(sq_user_list_resolve(&u, "users.txt", NULL, &ds, &s, &e), 0);
    CHECK_EQ(s.n, 6);
    CHECK(s.set != NULL);
    CHECK_EQ(set_bits(&s), 0);
    CHECK_EQ(s.n_skip, 0);
    sq_user_set_free(&s);
    sq_user_list_free(&u);
    unlink(path);
    sq_dataset_free(&ds);
}

/* A line that is not a dense id (1..UINT32_MAX) is 65 "FILE: line N"; the
 * lines skipped before it are still there for the warnings. */
UNIT_TEST(test_userlist_resolve_bad_dense_id)
{
    static const struct {
        const char *text, *bad;
        int line;
        size_t skipped;
    } cases[] = {
        {"1\nann\n", "ann", 2, 0},
        {"99\n0\n", "0", 2, 1},
        {"4294967296\n", "4294967296", 1, 0},
        {"2\n-1\n", "-1", 2, 0},
        {"8\n7\n 5\n", " 5", 3, 2},
        {"5x\n", "5x", 1, 0},
    };
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(three_users(&ds, &e), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], want[256];
        sq_user_list u;
        CHECK_EQ(read_text(cases[i].text, strlen(cases[i].text), &u, &e, path), 0);
        sq_user_set s;
        CHECK_EQ(sq_user_list_resolve(&u, "u.txt", NULL, &ds, &s, &e), SQ_EX_DATA);
        snprintf(want, sizeof want, "u.txt: line %d: bad user id '%s' (dense ids are positive "
                 "integers; original ids need --map)", cases[i].line, cases[i].bad);
        CHECK_STR(e.msg, want);
        CHECK(s.set == NULL);
        CHECK_EQ(s.n_skip, cases[i].skipped);
        sq_user_set_free(&s);
        sq_user_list_free(&u);
        unlink(path);
    }
    sq_dataset_free(&ds);
}

UNIT_TEST(test_userlist_resolve_through_map)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(three_users(&ds, &e), 0);
    /* zed (7) is in the map but has no record; user 3 has no name */
    static const char map_text[] = "user\t1\tann\nuser\t2\tbob\nuser\t5\teve\nuser\t7\tzed\n"
                                   "item\t1\tapple\n";
    char map_path[64], path[64];
    CHECK_EQ(temp_file(map_path, map_text, sizeof map_text - 1), 0);
    sq_idmap map;
    CHECK_EQ(sq_idmap_read(&map, map_path, &e), 0);
    sq_user_list u;
    /* with a map a dense id is a name like any other: "5" is unknown */
    static const char names[] = "eve\nzoe\nbob\nzed\n5\nann\n";
    CHECK_EQ(read_text(names, strlen(names), &u, &e, path), 0);
    sq_user_set s;
    CHECK_EQ(sq_user_list_resolve(&u, "n.txt", &map, &ds, &s, &e), 0);
    CHECK_EQ(s.n, 6);
    CHECK_EQ(set_bits(&s), (1u << 1) | (1u << 2) | (1u << 5));
    CHECK_EQ(s.n_skip, 3);
    if (s.n_skip == 3) {
        CHECK_STR(s.skip[0].user->id, "zoe");
        CHECK_EQ(s.skip[0].user->line, 2);
        CHECK_EQ(s.skip[0].why, SQ_USER_NOT_IN_MAP);
        CHECK_STR(s.skip[1].user->id, "zed");
        CHECK_EQ(s.skip[1].user->line, 4);
        CHECK_EQ(s.skip[1].why, SQ_USER_NO_RECORD);
        CHECK_STR(s.skip[2].user->id, "5");
        CHECK_EQ(s.skip[2].why, SQ_USER_NOT_IN_MAP);
    }
    sq_user_set_free(&s);
    sq_user_list_free(&u);
    unlink(path);
    /* without the map the same ids are refused: ids need --map */
    CHECK_EQ(read_text("eve\n", strlen("eve\n"), &u, &e, path), 0);
    CHECK_EQ(sq_user_list_resolve(&u, "n.txt", NULL, &ds, &s, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "n.txt: line 1: bad user id 'eve'") != NULL);
    sq_user_set_free(&s);
    sq_user_list_free(&u);
    unlink(path);
    sq_idmap_free(&map);
    unlink(map_path);
    sq_dataset_free(&ds);
}
