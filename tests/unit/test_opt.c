/* Unit tests for lib/util/opt.c: option tables bound into a struct. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"
#include "unit.h"

typedef struct {
    int n, mode, flag, kind;
    double x;
    uint64_t seed;
} cfg;

static const char *const words[] = {"alpha", "beta", "gamma"};
static int word_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, words[i]))
            return i;
    return -1;
}
static const char *word_name(int v) { return v >= 0 && v < 3 ? words[v] : NULL; }

static const sq_opt table[] = {
    {.name = "n-items", .type = SQ_OPT_INT, .offset = offsetof(cfg, n), .def = "5", .lo = 1,
     .hi = 10, .arg = "N", .help = "items (default 5)\nsecond line"},
    {.name = "mode", .key = "train.mode", .type = SQ_OPT_CHOICE, .offset = offsetof(cfg, mode),
     .def = "b", .choices = "a|b|c", .help = "a mode"},
    {.name = "flag", .type = SQ_OPT_FLAG, .offset = offsetof(cfg, flag), .def = "0",
     .help = "a flag"},
    {.name = "kind", .type = SQ_OPT_ENUM, .offset = offsetof(cfg, kind), .def = "beta",
     .parse = word_parse, .word = word_name, .help = "a kind"},
    {.name = "x", .type = SQ_OPT_REAL, .offset = offsetof(cfg, x), .def = "0.5", .lo = 0,
     .hi = 1, .lo_open = 1, .help = "in (0, 1]"},
    {.name = "seed", .type = SQ_OPT_U64, .offset = offsetof(cfg, seed), .def = "7",
     .help = "a seed"},
    {.name = "threads", .type = SQ_OPT_INT, .offset = offsetof(cfg, n), .lo = 1, .hi = 8,
     .cli_only = 1, .help = "not in files"},
    {0},
};

UNIT_TEST(test_opt_defaults_and_set)
{
    cfg c;
    memset(&c, 0xff, sizeof c);
    sq_opt_defaults(table, &c);
    CHECK_EQ(c.n, 0); /* threads (no default) comes last and zeroes n */
    sq_opt_defaults(table, &c);
    c.n = 5;
    CHECK_EQ(c.mode, 1);
    CHECK_EQ(c.flag, 0);
    CHECK_EQ(c.kind, 1);
    CHECK(c.x == 0.5);
    CHECK(c.seed == 7);
    sq_err e = {0};
    CHECK_EQ(sq_opt_set(&table[0], &c, "10", SQ_EX_USAGE, NULL, &e), 0);
    CHECK_EQ(c.n, 10);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[0], &c, "11", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--n-items") && strstr(e.msg, "1..10"));
    CHECK_EQ(c.n, 10);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[1], &c, "d", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "a|b|c") != NULL);
    CHECK_EQ(sq_opt_set(&table[1], &c, "c", SQ_EX_USAGE, NULL, &e), 0);
    CHECK_EQ(c.mode, 2);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[2], &c, "2", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK_EQ(sq_opt_set(&table[3], &c, "gamma", SQ_EX_USAGE, NULL, &e), 0);
    CHECK_EQ(c.kind, 2);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[3], &c, "delta", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    /* open and closed ends of a real range */
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[4], &c, "0", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK_EQ(sq_opt_set(&table[4], &c, "1", SQ_EX_USAGE, NULL, &e), 0);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[4], &c, "nan", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[4], &c, "0.3x", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK_EQ(sq_opt_set(&table[5], &c, "18446744073709551615", SQ_EX_USAGE, NULL, &e), 0);
    CHECK(c.seed == UINT64_MAX);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[5], &c, "-1", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    /* from a file: the key and the file are named, with the code given */
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(&table[1], &c, "z", SQ_EX_DATA, "m.sqm", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "m.sqm: bad train.mode=z") != NULL);
}

static int collect(void *ctx, const char *key, const char *value, sq_err *e)
{
    (void)e;
    char *buf = ctx;
    size_t n = strlen(buf);
    snprintf(buf + n, 512 - n, "%s=%s\n", key, value);
    return 0;
}

UNIT_TEST(test_opt_write_apply_round_trip)
{
    cfg a, b;
    sq_opt_defaults(table, &a);
    a.n = 3;
    a.mode = 0;
    a.flag = 1;
    a.kind = 2;
    a.x = 0.1;
    a.seed = 12345678901234ull;
    char text[512] = "";
    sq_err e = {0};
    CHECK_EQ(sq_opt_write(table, &a, collect, text, &e), 0);
    CHECK_STR(text, "n_items=3\ntrain.mode=a\nflag=1\nkind=gamma\nx=0.10000000000000001\n"
                    "seed=12345678901234\n");
    sq_opt_defaults(table, &b);
    CHECK_EQ(sq_opt_apply(table, &b, text, 1, SQ_EX_DATA, "f", &e), 0);
    CHECK_EQ(b.n, 3);
    CHECK_EQ(b.mode, 0);
    CHECK_EQ(b.flag, 1);
    CHECK_EQ(b.kind, 2);
    CHECK(b.x == a.x);
    CHECK(b.seed == a.seed);
    /* a required key that is missing is named; optional ones keep their value */
    e = (sq_err){0};
    CHECK_EQ(sq_opt_apply(table, &b, "n_items=4\n", 1, SQ_EX_DATA, "f", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "f: config has no train.mode") != NULL);
    sq_opt_defaults(table, &b);
    CHECK_EQ(sq_opt_apply(table, &b, "x=0.25\nx=0.75\n", 0, SQ_EX_USAGE, NULL, &e), 0);
    CHECK(b.x == 0.75); /* the last line wins */
    CHECK_EQ(b.mode, 1);
}

UNIT_TEST(test_opt_names_and_help)
{
    char buf[64];
    CHECK_STR(sq_opt_key(&table[0], buf, sizeof buf), "n_items");
    CHECK_STR(sq_opt_key(&table[1], buf, sizeof buf), "train.mode");
    CHECK_STR(sq_opt_name_of_key("train.mask_prob", buf, sizeof buf), "mask-prob");
    CHECK(sq_opt_find(table, "flag") == &table[2]);
    CHECK(sq_opt_find(table, "nope") == NULL);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(f != NULL);
    if (!f)
        return;
    sq_opt_help(table, f);
    fclose(f);
    CHECK(strstr(out, "  --n-items N         items (default 5)\n"
                      "                      second line\n") != NULL);
    CHECK(strstr(out, "  --flag              a flag\n") != NULL);
    free(out);
}

/* SQ_OPT_SQUARE: "NxN" (or "N") in, "NxN" out; NxM refused as such, a
 * side out of range or junk with the range. */
typedef struct {
    int pool, other;
} sqcfg;

static const sq_opt square_table[] = {
    {.name = "pool", .type = SQ_OPT_SQUARE, .offset = offsetof(sqcfg, pool), .def = "8x8",
     .lo = 1, .hi = 64, .arg = "NxN", .help = "interest pool (default 8x8)"},
    {.name = "a-rather-long-option", .key = "other", .type = SQ_OPT_SQUARE,
     .offset = offsetof(sqcfg, other), .def = "2", .lo = 1, .hi = 4, .arg = "NxN",
     .help = "its head is wider\nthan the column"},
    {0},
};

UNIT_TEST(test_opt_square)
{
    sqcfg c;
    sq_opt_defaults(square_table, &c);
    CHECK_EQ(c.pool, 8);
    CHECK_EQ(c.other, 2);
    const sq_opt *o = &square_table[0];
    sq_err e = {0};
    static const char *const good[] = {"16x16", "16", "1x1", "64x64"};
    static const int want[] = {16, 16, 1, 64};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(sq_opt_set(o, &c, good[i], SQ_EX_USAGE, NULL, &e), 0);
        CHECK_EQ(c.pool, want[i]);
    }
    CHECK_EQ(e.code, 0);
    CHECK_EQ(sq_opt_set(o, &c, "16x8", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "'16x8'") && strstr(e.msg, "--pool") &&
          strstr(e.msg, "both sides must be equal"));
    CHECK_EQ(c.pool, 64); /* a refused value leaves the field as it was */
    static const char *const bad[] = {"65x65", "65", "0", "0x0", "x16", "16x", "16x16x16",
                                      "abc", "16 x 16", "", "-4x-4", "16X16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (sq_err){0};
        CHECK_EQ(sq_opt_set(o, &c, bad[i], SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
        CHECK(strstr(e.msg, "1..64") != NULL);
    }
    /* from a file: the key and the file named, with the code given */
    e = (sq_err){0};
    CHECK_EQ(sq_opt_set(o, &c, "4x2", SQ_EX_DATA, "m.sqm", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "m.sqm: bad pool=4x2") && strstr(e.msg, "both sides must be equal"));
    /* written "NxN", read back the same; a config built in code is checked */
    char buf[32], text[128] = "";
    c.pool = 16;
    c.other = 3;
    CHECK_STR(sq_opt_format(o, &c, buf, sizeof buf), "16x16");
    CHECK_EQ(sq_opt_write(square_table, &c, collect, text, &e), 0);
    CHECK_STR(text, "pool=16x16\nother=3x3\n");
    sqcfg d;
    sq_opt_defaults(square_table, &d);
    e = (sq_err){0};
    CHECK_EQ(sq_opt_apply(square_table, &d, text, 1, SQ_EX_DATA, "f", &e), 0);
    CHECK(d.pool == 16 && d.other == 3);
    CHECK_EQ(sq_opt_check(square_table, &d, SQ_EX_USAGE, &e), 0);
    d.pool = 65;
    CHECK_EQ(sq_opt_check(square_table, &d, SQ_EX_USAGE, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--pool") != NULL);
    /* --help: like any option; a head wider than its column on a line of its own */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(f != NULL);
    if (!f)
        return;
    sq_opt_help(square_table, f);
    fclose(f);
    CHECK_STR(out, "  --pool NxN          interest pool (default 8x8)\n"
                   "  --a-rather-long-option NxN\n"
                   "                      its head is wider\n"
                   "                      than the column\n");
    free(out);
}
