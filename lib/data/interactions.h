/* interactions.h - the interaction table that seqrec-preprocess builds.
 *
 * Raw logs name users and items by arbitrary strings ("196", "A1B2C3").
 * Every string is interned once into an sq_ids table (one open-addressing
 * hash table keyed by XXH3-64 of the bytes) and replaced by a "raw id", the
 * order of its first appearance in the input (0, 1, 2, ...). The table
 * holds one row per interaction (raw user, raw item, optional timestamp) in
 * input order, so the row index is the file order used to break ties.
 *
 * The preprocessing steps, in the order seqrec-preprocess applies them:
 *   sq_inter_sort    group rows by user, chronological inside a user, ties
 *                    (and formats without timestamps) in input order
 *   sq_inter_dedup   drop repeated (user, item) pairs: keep first or last
 *   sq_inter_kcore   iterative k-core: drop users and items with too few
 *                    interactions until no more are dropped
 *   sq_inter_remap   dense ids 1..n for the users and items that are left
 *   sq_inter_write   one SEQUENCES record per user, users in dense order
 *
 * STABLE IDS (seqrec-preprocess --map-in). sq_inter_read_map, called before
 * any row is added, interns the ids of an existing map file in dense order,
 * so that raw id r < map_users (map_items) is dense id r + 1. Rows with
 * items the map does not know can be removed (sq_inter_drop_new_items);
 * sq_inter_remap then keeps every map id, present or not, and appends the
 * new users and items that are left after them (n_users, n_items count the
 * whole id space; users_present, items_present those with rows). */
#ifndef SQ_INTERACTIONS_H
#define SQ_INTERACTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "idmap.h"
#include "stream.h"

/* ---- string interning ---- */

typedef struct {
    uint32_t id1; /* raw id + 1; 0 marks an empty slot */
    uint32_t tag; /* high 32 bits of the hash: most misses end here */
} sq_slot;

typedef struct {
    char *bytes;        /* every id string, each NUL-terminated */
    size_t bytes_len, bytes_cap;
    size_t *off;        /* raw id -> offset of its string in bytes */
    uint32_t *len;      /* raw id -> string length */
    uint64_t *hash;     /* raw id -> XXH3-64, kept for rehashing */
    uint32_t n, cap;    /* ids interned, capacity of off/len/hash */
    sq_slot *slots;     /* open addressing, linear probing */
    size_t n_slots;     /* a power of two, at most half full */
} sq_ids;

/* Finds S[0,n) or adds it; *id receives its raw id. 0 or SQ_EX_OSERR. */
int sq_ids_intern(sq_ids *d, const char *s, size_t n, uint32_t *id, sq_err *e);
/* The NUL-terminated string of a raw id (valid until the next intern). */
const char *sq_ids_str(const sq_ids *d, uint32_t id);
void sq_ids_free(sq_ids *d);

/* ---- the interaction table ---- */

enum sq_dedup { SQ_DEDUP_KEEP = 0, SQ_DEDUP_FIRST = 1, SQ_DEDUP_LAST = 2 };

typedef struct {
    sq_ids users, items;
    uint32_t *user;     /* row -> raw user id */
    uint32_t *item;     /* row -> raw item id */
    int64_t *ts;        /* row -> timestamp; NULL when has_ts == 0 */
    size_t n, cap;      /* rows, capacity */
    int has_ts;         /* -1 until the first source says, then 0 or 1 */
    int sorted;         /* rows grouped by user, chronological (sq_inter_sort) */
    /* filled by sq_inter_remap */
    uint32_t n_users, n_items;  /* dense ids are 1..n */
    uint32_t *user_raw;         /* dense user -> raw id ([0] unused) */
    uint32_t *item_raw;         /* dense item -> raw id ([0] unused) */
    uint32_t *item_dense;       /* raw item -> dense id (0 = dropped) */
    size_t *user_start;         /* raw user -> first row; [n_raw] = n */
    int users_numeric, items_numeric; /* ids ordered by numeric value (with a
                                         map: the appended ones) */
    uint32_t users_present, items_present; /* with rows (sq_inter_remap) */
    /* filled by sq_inter_read_map: raw ids below these are the map's */
    uint32_t map_users, map_items;
} sq_inter;

typedef struct {
    uint32_t users, items;
    uint64_t interactions;
    uint32_t min_len, max_len;
    double avg_len;     /* interactions / users */
    double sparsity;    /* 1 - interactions / (users * items) */
} sq_inter_stats;

/* The table starts zeroed ({0}) and has_ts = -1: sq_inter_init does that. */
void sq_inter_init(sq_inter *t);
void sq_inter_free(sq_inter *t);
/* Declares whether the next rows carry timestamps; every source must agree
 * (65 otherwise, with NAME in the message). */
int sq_inter_set_ts(sq_inter *t, int has_ts, const char *name, sq_err *e);
/* Appends a row of already interned raw ids (ts ignored without has_ts). */
int sq_inter_add(sq_inter *t, uint32_t user, uint32_t item, int64_t ts, sq_err *e);
/* Interns both strings and appends the row. */
int sq_inter_add_str(sq_inter *t, const char *user, size_t ulen,
                     const char *item, size_t ilen, int64_t ts, sq_err *e);

/* Groups rows by raw user and orders each user's rows by timestamp; equal
 * timestamps (and tables without them) keep input order. Stable radix and
 * counting sorts, O(n). */
int sq_inter_sort(sq_inter *t, sq_err *e);
/* Removes repeated (user, item) pairs in a sorted table, keeping the first
 * or the last in each user's chronological order. */
int sq_inter_dedup(sq_inter *t, int mode, sq_err *e);
/* Repeatedly removes rows whose user has fewer than ucore rows or whose item
 * has fewer than icore rows, until none is removed (the unique k-core).
 * *passes (may be NULL) receives the number of counting passes. Keeps the
 * order of the rows that stay. */
int sq_inter_kcore(sq_inter *t, uint32_t ucore, uint32_t icore, int *passes, sq_err *e);
/* Gives the users and items present dense ids 1..n: by numeric value when
 * every id of that kind is a decimal number, else by first appearance in
 * the input. Needs a sorted table. After sq_inter_read_map the map's ids
 * keep their dense ids (present or not) and the new ones present follow,
 * ordered by the same rule among themselves. */
int sq_inter_remap(sq_inter *t, sq_err *e);
/* Statistics of the users and items with rows (after sq_inter_remap). */
void sq_inter_get_stats(const sq_inter *t, sq_inter_stats *s);
/* Writes one record per user with rows, in dense order (after
 * sq_inter_remap). */
int sq_inter_write(const sq_inter *t, sq_writer *w, sq_err *e);
/* Writes "user<TAB>dense<TAB>original" lines, then the "item" lines, each
 * in dense order (after sq_inter_remap). NAME is for messages. */
int sq_inter_write_map(const sq_inter *t, FILE *f, const char *name, sq_err *e);

/* Reads a map file as sq_inter_write_map writes it into an empty table
 * (before any row): "user<TAB>dense<TAB>original" lines, then "item"
 * lines, each kind's dense ids 1, 2, ... in order, originals unique within
 * a kind; a final CR is ignored. Sets map_users and map_items. 66 when path
 * cannot be opened; 65 "PATH: line N: reason" for a bad line or an empty
 * map. */
int sq_inter_read_map(sq_inter *t, const char *path, sq_err *e);
/* The same for a map held in memory (text[0, len); name for messages). */
int sq_inter_read_map_text(sq_inter *t, const char *text, size_t len, const char *name,
                           sq_err *e);
/* The fingerprint (idmap.h) of the dense ids (after sq_inter_remap). */
int sq_inter_mapfp(const sq_inter *t, sq_mapfp *fp, sq_err *e);
/* 65 (idmap.h's message) when the map read (sq_inter_read_map) does not
 * extend base, the fingerprint of the model file what; base unknown: *warn. */
int sq_inter_check_map(const sq_inter *t, const char *map_name, const sq_mapfp *base,
                       const char *what, char *warn, size_t warn_n, sq_err *e);
/* Removes the rows whose item is not in the map (raw id >= map_items);
 * *rows and *items (may be NULL) receive the rows removed and the distinct
 * items they named. Keeps the order of the rows that stay. */
int sq_inter_drop_new_items(sq_inter *t, uint64_t *rows, uint32_t *items, sq_err *e);

#endif
