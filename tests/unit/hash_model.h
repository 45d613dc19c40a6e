/* hash_model.h - a model for the evaluation tests whose scores depend on
 * the history: item i scores by a hash of (i, last item, length), in few
 * values, so ranks vary from target to target and ties are many. */
#ifndef SQ_HASH_MODEL_H
#define SQ_HASH_MODEL_H

#include <stdint.h>

#include "model.h"

static inline int hash_model_scores(sq_model *m, const sq_batch *b, float *scores, sq_err *e)
{
    (void)e;
    for (int r = 0; r < b->B; r++) {
        uint32_t last = b->len[r] ? b->items[b->off[r] + b->len[r] - 1] : 0;
        float *s = scores + (size_t)r * (m->n_items + 1);
        s[0] = 0;
        for (uint32_t i = 1; i <= m->n_items; i++) {
            uint32_t h = (i * 2654435761u) ^ (last * 40503u) ^ (b->len[r] * 97u);
            s[i] = (float)((h >> 7) % 13);
        }
    }
    return 0;
}

#endif
