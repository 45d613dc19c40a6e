/* progress.c - seqrec-train's progress bar (progress.h). */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void sq_bar_eta(const sq_bar *b, double *epoch_left, double *run_left)
{
    *epoch_left = *run_left = -1;
    double per_epoch;
    if (b->validating) {
        if (b->done)
            *epoch_left = b->phase_s * (double)(b->total - b->done) / (double)b->done;
        else if (b->last_eval_s > 0)
            *epoch_left = b->last_eval_s > b->phase_s ? b->last_eval_s - b->phase_s : 0;
        else
            return;
        per_epoch = b->last_epoch_s > 0 ? b->last_epoch_s : b->train_s + b->phase_s + *epoch_left;
    } else {
        if (!b->done || !b->total)
            return;
        double left = b->phase_s * (double)(b->total - b->done) / (double)b->done;
        *epoch_left = left + b->last_eval_s;
        per_epoch = b->last_epoch_s > 0 ? b->last_epoch_s : b->phase_s + *epoch_left;
    }
    uint64_t more = b->epochs > 0 && (uint64_t)b->epochs > b->epoch ? (uint64_t)b->epochs - b->epoch
                                                                    : 0;
    *run_left = *epoch_left + (double)more * per_epoch;
}

const char *sq_bar_time(double s, char *buf, size_t n)
{
    if (s < 0) {
        snprintf(buf, n, "?");
        return buf;
    }
    long t = (long)(s + 0.5);
    if (t < 60)
        snprintf(buf, n, "%lds", t);
    else if (t < 3600)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    return buf;
}

const char *sq_bar_line(const sq_bar *b, char *buf, size_t n)
{
    enum { WIDTH = 20 };
    char hashes[WIDTH + 1], el[16], ee[16], er[16];
    uint64_t total = b->total ? b->total : 1, done = b->done < total ? b->done : total;
    int filled = (int)(WIDTH * done / total), pct = (int)(100 * done / total);
    for (int i = 0; i < WIDTH; i++)
        hashes[i] = i < filled ? '#' : ' ';
    hashes[WIDTH] = '\0';
    double left_epoch, left_run;
    sq_bar_eta(b, &left_epoch, &left_run);
    sq_bar_time(b->run_s, el, sizeof el);
    sq_bar_time(left_epoch, ee, sizeof ee);
    sq_bar_time(left_run, er, sizeof er);
    int w;
    if (b->validating)
        w = snprintf(buf, n, "epoch %" PRIu64 "/%d validating [%s] %3d%% of %" PRIu64
                     " targets", b->epoch, b->epochs, hashes, pct, b->total);
    else
        w = snprintf(buf, n, "epoch %" PRIu64 "/%d [%s] %3d%% loss %.4f", b->epoch, b->epochs,
                     hashes, pct, b->loss);
    if (w >= 0 && (size_t)w < n)
        snprintf(buf + w, n - (size_t)w, " | %s, ETA epoch %s, run %s%s%s", el, ee, er,
                 b->best && *b->best ? " |" : "", b->best ? b->best : "");
    return buf;
}
