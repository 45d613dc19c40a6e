/* rank.h - each row's held-out target ranked against its candidates
 * where the scores are: seqrec-score's ranks and the trainer's validation
 * (every item, or sampled negatives drawn on the host), so that a GPU
 * downloads four counts a user rather than every item's score (for a
 * catalogue of a million items, 1 GB a batch of 256).
 *
 * Row b of sc[B, V1] scores items 1 .. V1 - 1 (column 0 is the padding
 * item, never a candidate); its target is tgt[b] (1 .. V1 - 1). The
 * candidates of row b are the items i != tgt[b] with ok[i] != 0 that are
 * not in its excluded list excl[eoff[b] .. eoff[b+1]) (sorted ascending,
 * repeats allowed, the target may be in it; excl NULL: none). The op
 * writes cnt[4 b ..] = the candidates scoring higher than the target, the
 * candidates scoring the same, the candidates, and 1 when a candidate's or
 * the target's score is NaN (else 0): eval.c's tally of a full ranking,
 * whose rank is 1 + higher (+ same, pessimistic ties) of 1 + candidates.
 * Counts of comparisons, no arithmetic: the GPU's are the CPU twin's.
 *
 * On a CUDA context sc and cnt are device arrays and tgt, ok, excl and
 * eoff host arrays the op uploads. */
#ifndef SQ_RANK_H
#define SQ_RANK_H

#include "ctx.h"

enum { SQ_RANK_ABOVE, SQ_RANK_EQUAL, SQ_RANK_N, SQ_RANK_NAN, SQ_RANK_COUNTS };

/* 0 (the CPU cannot fail); a GPU's failure is the context's sticky error,
 * reported by the download of the counts. */
int sq_rank_rows(const sq_ctx *cx, int *cnt, const float *sc, int B, int V1, const int *tgt,
                 const unsigned char *ok, const int *excl, const int *eoff, sq_err *e);

/* The same counts against given candidates (sampled: --candidates uni:N,
 * pop:N, drawn on the host): row b's are cand[coff[b] .. coff[b+1]) (items
 * 1 .. V1 - 1, the target not among them), each counted once. On a CUDA
 * context tgt, cand and coff are host arrays the op uploads. */
int sq_rank_lists(const sq_ctx *cx, int *cnt, const float *sc, int B, int V1, const int *tgt,
                  const int *cand, const int *coff, sq_err *e);

#endif
