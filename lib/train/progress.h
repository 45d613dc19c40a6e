/* progress.h - seqrec-train's progress bar on a terminal: the line and its
 * time estimates, as pure functions of what the trainer reported and the
 * clock (the caller reads the clock), so that tests/unit/test_progress.c
 * checks them without a terminal. Nothing here touches the JSON lines.
 *
 * ESTIMATES. While the batches run, the rest of the epoch is the batches
 * left at the mean time of those done, plus the previous epoch's
 * validation time (0 before the first); the run's is that plus the epochs
 * left at the previous epoch's wall time (the first epoch: this epoch's
 * projected time). While validating, the rest of the epoch is the targets
 * left at the mean time of those ranked. The run's estimate assumes every
 * epoch runs: early stopping ends sooner. */
#ifndef SQ_PROGRESS_H
#define SQ_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t epoch;        /* 1-based */
    int epochs;            /* of the run */
    uint64_t done, total;  /* batches, or (validating) targets ranked */
    int validating;
    double loss;           /* the epoch's mean loss so far (batches) */
    double run_s;          /* seconds since the run started */
    double phase_s;        /* since the batches (or the validation) began */
    double train_s;        /* validating: the seconds of this epoch's batches */
    double last_epoch_s;   /* the previous epoch's wall time (0: none) */
    double last_eval_s;    /* and its validation's (0: none) */
    const char *best;      /* " best ndcg@10 0.1234 (epoch 3)", or "" / NULL */
} sq_bar;

/* The seconds left in the epoch and in the run; -1 when not known yet. */
void sq_bar_eta(const sq_bar *b, double *epoch_left, double *run_left);
/* s as "42s", "3m05s" or "2h07m" ("?" when s < 0) into buf. */
const char *sq_bar_time(double s, char *buf, size_t n);
/* The bar's line (no "\r", no newline) into buf:
 *   epoch 3/20 [######              ]  30% loss 4.1234 | 1m02s, ETA epoch 15s, run 4m30s | best ...
 *   epoch 3/20 validating [###      ]  40% of 22363 targets | 1m10s, ETA epoch 3s, run 4m10s | best ... */
const char *sq_bar_line(const sq_bar *b, char *buf, size_t n);

#endif
