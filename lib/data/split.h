/* split.h - where each user's sequence is cut into train / validation / test.
 *
 * A split record keeps the whole sequence and adds two cut points:
 * items[0,n_train) train, the next n_valid items are validation targets,
 * the rest test targets (see stream.h). The functions here only compute the
 * cut points for one record; seqrec-split loops reader -> writer. */
#ifndef SQ_SPLIT_H
#define SQ_SPLIT_H

#include <stdint.h>
#include "err.h"
#include "stream.h"

enum sq_split_mode {
    SQ_SPLIT_LOO = 0, /* last item test, second-to-last validation */
    SQ_SPLIT_RATIO,   /* per-user fractions, in order (RecBole rounding) */
    SQ_SPLIT_TIME,    /* global temporal cut(s) on the timestamps */
    SQ_SPLIT_HOLDOUT, /* a hashed fraction of users: last item validation */
};

/* Leave-one-out needs one train item plus the two targets. */
#define SQ_LOO_MIN_LEN 3u

typedef struct {
    enum sq_split_mode mode;
    double ratio[3];  /* train, valid, test (train, test when n_ratio == 2), sum 1 */
    int n_ratio;      /* 3, or 2 (train, test: no validation) */
    int64_t t1, t2;   /* time: ts < t1 train, t1 <= ts < t2 valid, rest test */
    int has_t2;       /* 0: one cut, no validation part */
    double holdout;   /* holdout-users: the fraction F of users held out, (0, 1) */
    uint64_t seed;    /* holdout-users: the seed of the users' hash */
    const char *text; /* the mode's option as given (--ratio, --time, --holdout-users),
                         for the meta; NULL for leave-one-out */
} sq_split_opts;

typedef struct {
    uint32_t n_train, n_valid;
    int is_short;     /* the mode could not give this user a proper split */
} sq_cut;

/* Leave-one-out. Users shorter than SQ_LOO_MIN_LEN are short: all their
 * items are train (n_train = len, n_valid = 0). */
sq_cut sq_split_loo(uint32_t len);

/* Ratio split, rounded the way RecBole's _calcu_split_ids does: every part
 * but the first gets floor(ratio * len) items, train gets the rest; then
 * (test first, then validation) a part whose ratio * len is in (0, 1) takes
 * one item from train while train keeps more than one. Short = no held-out
 * item at all (n_train == len). */
sq_cut sq_split_ratio(uint32_t len, const double *ratio, int n_ratio);

/* Temporal cut on ts[len] (non-decreasing). Short = no train item although
 * the user has items (everything happened at or after t1). Returns 0, or
 * i > 0 when ts[i] < ts[i-1] (the cut would not be a prefix). */
uint32_t sq_split_time(const int64_t *ts, uint32_t len, int64_t t1, int64_t t2,
                       int has_t2, sq_cut *c);

/* Holdout-users: whether dense user u is one of the held-out fraction F
 * (0 < F < 1): XXH3-64 with seed of u as 4 little-endian bytes, its top
 * 53 bits as a number in [0, 1), below F. It depends on u and seed alone,
 * so the same users are held out every day (as long as the dense ids are
 * the same: seqrec-preprocess --map-in). */
int sq_split_holdout_has(uint32_t user, double frac, uint64_t seed);

/* Holdout-users: a held-out user of len >= 2 keeps its last item as the
 * validation target (n_train = len - 1, n_valid = 1, no test target);
 * every other user trains on its whole sequence (n_train = len). A
 * held-out user with fewer than 2 items is short (kept for training). */
sq_cut sq_split_holdout(uint32_t user, uint32_t len, double frac, uint64_t seed);

/* The cut for one record under opts; 65 with "NAME: user U: ..." when the
 * record cannot be cut (timestamps out of order, or missing). */
int sq_split_record(const sq_split_opts *o, const sq_record *rec, const char *name,
                    sq_cut *c, sq_err *e);

/* Parse "0.8,0.1,0.1" (or "0.9,0.1" = train,test) into o (usage error 64:
 * not numbers, negative, train = 0, or a sum other than 1 within 1e-6). */
int sq_split_parse_ratio(sq_split_opts *o, const char *s, sq_err *e);
/* Parse "T1" or "T1,T2" (integers in the stream's timestamp unit, T1 < T2). */
int sq_split_parse_time(sq_split_opts *o, const char *s, sq_err *e);

/* Parse F of --holdout-users: one number with 0 < F < 1 (64 otherwise). */
int sq_split_parse_holdout(sq_split_opts *o, const char *s, sq_err *e);
/* Parse S of --seed: a decimal integer in [0, 2^64) (64 otherwise). */
int sq_split_parse_seed(sq_split_opts *o, const char *s, sq_err *e);

/* "leave-one-out", "ratio", "time", "holdout-users". */
const char *sq_split_mode_name(enum sq_split_mode m);

/* Adds how the stream was cut to h's meta: split.mode, then split.ratio or
 * split.time (o->text), or split.holdout (o->text) and split.seed, then
 * split.short (drop or train). */
int sq_split_meta(sq_header *h, const sq_split_opts *o, int drop_short, sq_err *e);

#endif
