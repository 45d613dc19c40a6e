/* synth.h - a seeded generator of interaction logs with learnable
 * sequential structure (the data of `make demo`, the tests and benchmarks).
 *
 * The model (man 1 seqrec-synth documents it to the last random draw):
 *   - the items 1..I are shuffled and cut into C clusters of near-equal size;
 *     inside a cluster the j-th item (shuffled order, j = 0, 1, ...) has
 *     Zipf weight 1/(j+1)^zipf;
 *   - every item i has a fixed successor succ(i) != i, uniform over the
 *     catalogue: the strong, purely sequential signal;
 *   - every user prefers M clusters (M = user_clusters) with weights
 *     proportional to 1, 1/2, ..., 1/M;
 *   - the first item comes from a preferred cluster; then each next item is
 *     succ(current) with probability p_next, else a Zipf draw from the
 *     current item's cluster with probability p_stay, else a Zipf draw from
 *     a newly drawn preferred cluster;
 *   - lengths are min_len + a geometric variable with mean
 *     mean_len - min_len, clipped to max_len.
 * Every user has its own random stream, so the output for user u does not
 * depend on how many users are generated: --users 100 is a prefix of
 * --users 1000 with the same seed. */
#ifndef SQ_SYNTH_H
#define SQ_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "stream.h"

typedef struct {
    uint32_t users;         /* users 1..users */
    uint32_t items;         /* items 1..items */
    uint32_t clusters;      /* latent interest clusters */
    uint32_t user_clusters; /* preferred clusters per user */
    uint32_t min_len, max_len;
    double mean_len;        /* mean length before clipping to max_len */
    double zipf;            /* popularity exponent inside a cluster */
    double p_next;          /* probability of the successor transition */
    double p_stay;          /* else: probability to stay in the cluster */
    uint64_t seed;
} sq_synth_opts;

/* The catalogue drawn from the seed, and the buffers of one user. */
typedef struct {
    sq_synth_opts o;
    uint32_t *cluster_of;  /* [items + 1]: cluster of item i (0-based) */
    uint32_t *successor;   /* [items + 1]: succ(i) */
    uint32_t *members;     /* [items]: items of cluster c are members[start[c], start[c+1]) */
    uint32_t *start;       /* [clusters + 1] */
    double *cdf;           /* [items]: Zipf CDF within each cluster, aligned with members */
    uint32_t *items;       /* [max_len]: the current user's sequence */
    int64_t *ts;           /* [max_len]: its timestamps, strictly increasing */
    uint8_t *rating;       /* [max_len]: its ratings, 4 or 5 */
    uint32_t *pref;        /* [user_clusters]: the current user's clusters */
    double *mix_cdf;       /* [user_clusters]: cumulative 1, 1/2, ..., 1/M */
} sq_synth;

/* Fills the documented defaults (2000 users, 500 items, ...). */
void sq_synth_defaults(sq_synth_opts *o);
/* Checks ranges and relations between the options; SQ_EX_USAGE if bad. */
int sq_synth_check(const sq_synth_opts *o, sq_err *e);

/* Draws the catalogue (clusters, Zipf CDFs, successors) from o->seed. */
int sq_synth_init(sq_synth *s, const sq_synth_opts *o, sq_err *e);
void sq_synth_free(sq_synth *s);

/* Generates the sequence of user (1..users) into s->items, s->ts and
 * s->rating and returns its length. Deterministic in (seed, options, user). */
uint32_t sq_synth_user(sq_synth *s, uint32_t user);

/* Adds "dataset=synth", every synth.* option and seqrec.version to h. */
int sq_synth_meta(const sq_synth_opts *o, sq_header *h, sq_err *e);

/* Writes every user as TSV lines "user\titem\trating\ttimestamp\n"
 * (rating 4 or 5), users in order, each user's lines in time order. */
int sq_synth_write_text(sq_synth *s, FILE *f, const char *name, sq_err *e);
/* Writes every user as a SQ_SEQUENCES stream with SQ_FLAG_TS. */
int sq_synth_write_stream(sq_synth *s, FILE *f, const char *name, sq_err *e);

#endif
