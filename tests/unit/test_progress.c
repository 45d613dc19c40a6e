/* Unit tests for lib/train/progress.c: the progress bar's estimates and line. */
#include <string.h>

#include "progress.h"
#include "unit.h"

UNIT_TEST(test_progress_time)
{
    char b[16];
    CHECK_STR(sq_bar_time(-1, b, sizeof b), "?");
    CHECK_STR(sq_bar_time(0, b, sizeof b), "0s");
    CHECK_STR(sq_bar_time(59.4, b, sizeof b), "59s");
    CHECK_STR(sq_bar_time(59.6, b, sizeof b), "1m00s");
    CHECK_STR(sq_bar_time(185, b, sizeof b), "3m05s");
    CHECK_STR(sq_bar_time(3599, b, sizeof b), "59m59s");
    CHECK_STR(sq_bar_time(7620, b, sizeof b), "2h07m");
}

UNIT_TEST(test_progress_eta_training)
{
    double ep, run;
    /* first epoch of 10, a quarter of the batches in 3 s, nothing known before */
    sq_bar b = {.epoch = 1, .epochs = 10, .done = 25, .total = 100, .phase_s = 3};
    sq_bar_eta(&b, &ep, &run);
    CHECK_NEAR(ep, 9, 1e-12);          /* 75 batches at 0.12 s */
    CHECK_NEAR(run, 9 + 9 * 12, 1e-12); /* 9 more epochs of the projected 12 s */
    /* later: the previous epoch took 20 s, 5 of it validating */
    b = (sq_bar){.epoch = 4, .epochs = 10, .done = 50, .total = 100, .phase_s = 8,
                 .last_epoch_s = 20, .last_eval_s = 5};
    sq_bar_eta(&b, &ep, &run);
    CHECK_NEAR(ep, 8 + 5, 1e-12);
    CHECK_NEAR(run, 13 + 6 * 20, 1e-12);
    /* the last epoch: nothing after it */
    b.epoch = 10;
    sq_bar_eta(&b, &ep, &run);
    CHECK_NEAR(run, ep, 1e-12);
    /* no batch done: unknown */
    b.done = 0;
    sq_bar_eta(&b, &ep, &run);
    CHECK(ep < 0 && run < 0);
}

UNIT_TEST(test_progress_eta_validating)
{
    double ep, run;
    /* 1000 of 4000 targets in 2 s after 10 s of batches, first epoch of 3 */
    sq_bar b = {.epoch = 1, .epochs = 3, .done = 1000, .total = 4000, .validating = 1,
                .phase_s = 2, .train_s = 10};
    sq_bar_eta(&b, &ep, &run);
    CHECK_NEAR(ep, 6, 1e-12);
    CHECK_NEAR(run, 6 + 2 * (10 + 2 + 6), 1e-12);
    /* just started, the previous validation took 7 s: 7 - 1 left */
    b = (sq_bar){.epoch = 2, .epochs = 3, .done = 0, .total = 4000, .validating = 1,
                 .phase_s = 1, .train_s = 10, .last_epoch_s = 17, .last_eval_s = 7};
    sq_bar_eta(&b, &ep, &run);
    CHECK_NEAR(ep, 6, 1e-12);
    CHECK_NEAR(run, 6 + 17, 1e-12);
    /* nothing to go by */
    b.last_eval_s = 0;
    sq_bar_eta(&b, &ep, &run);
    CHECK(ep < 0 && run < 0);
}

UNIT_TEST(test_progress_line)
{
    char line[256];
    sq_bar b = {.epoch = 3, .epochs = 20, .done = 30, .total = 100, .loss = 4.12344,
                .run_s = 62, .phase_s = 3, .last_epoch_s = 20, .last_eval_s = 5,
                .best = " best ndcg@10 0.1234 (epoch 2)"};
    CHECK_STR(sq_bar_line(&b, line, sizeof line),
              "epoch 3/20 [######              ]  30% loss 4.1234 | 1m02s, ETA epoch 12s, "
              "run 5m52s | best ndcg@10 0.1234 (epoch 2)");
    b = (sq_bar){.epoch = 1, .epochs = 2, .done = 40, .total = 100, .validating = 1,
                 .run_s = 5, .phase_s = 2, .train_s = 3, .best = ""};
    CHECK_STR(sq_bar_line(&b, line, sizeof line),
              "epoch 1/2 validating [########            ]  40% of 100 targets | 5s, ETA "
              "epoch 3s, run 11s");
    /* no batch yet: unknown estimates; a short buffer is cut, never overrun */
    b = (sq_bar){.epoch = 1, .epochs = 2, .total = 100};
    CHECK_STR(sq_bar_line(&b, line, sizeof line),
              "epoch 1/2 [                    ]   0% loss 0.0000 | 0s, ETA epoch ?, run ?");
    char small[12];
    CHECK_EQ(strlen(sq_bar_line(&b, small, sizeof small)), 11);
}
