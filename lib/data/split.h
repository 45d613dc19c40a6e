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
};

/* Leave-one-out needs one train item plus the two targets. */
#define SQ_LOO_MIN_LEN 3u

typedef struct {
    enum sq_split_mode mode;
    double ratio[3];  /* train, valid, test (train, test when n_ratio == 2), sum 1 */
    int n_ratio;      /* 3, or 2 (train, test: no validation) */
    int64_t t1, t2;   /* time: ts < t1 train, t1 <= ts < t2 valid, rest test */
    int has_t2;       /* 0: one cut, no validation part */
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

/* The cut for one record under opts; 65 with "NAME: user U: ..." when the
 * record cannot be cut (timestamps out of order, or missing). */
int sq_split_record(const sq_split_opts *o, const sq_record *rec, const char *name,
                    sq_cut *c, sq_err *e);

/* Parse "0.8,0.1,0.1" (or "0.9,0.1" = train,test) into o (usage error 64:
 * not numbers, negative, train = 0, or a sum other than 1 within 1e-6). */
int sq_split_parse_ratio(sq_split_opts *o, const char *s, sq_err *e);
/* Parse "T1" or "T1,T2" (integers in the stream's timestamp unit, T1 < T2). */
int sq_split_parse_time(sq_split_opts *o, const char *s, sq_err *e);

/* "leave-one-out", "ratio", "time". */
const char *sq_split_mode_name(enum sq_split_mode m);

#endif
