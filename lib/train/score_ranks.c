/* score_ranks.c - scoring across the ranks of a job (see score_ranks.h). */
#include "score_ranks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ranks.h"

/* ---- one shard's results ---- */

/* Room for n more bytes at the end of p */
static int part_grow(sq_score_part *p, size_t n, sq_err *e)
{
    if (n <= p->cap - p->n)
        return 0;
    size_t cap = p->cap ? p->cap : 4096;
    while (cap - p->n < n) {
        if (cap > SIZE_MAX / 2)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for the results");
        cap *= 2;
    }
    unsigned char *q = realloc(p->p, cap);
    if (!q)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %zu bytes of results", cap);
    p->p = q;
    p->cap = cap;
    return 0;
}

int sq_score_keep_rank(void *part, const sq_rank *r, sq_err *e)
{
    sq_score_part *p = part;
    if (part_grow(p, sizeof *r, e))
        return e->code;
    memcpy(p->p + p->n, r, sizeof *r);
    p->n += sizeof *r;
    if (p->tick)
        p->tick(p->ctx);
    return 0;
}

int sq_score_keep_topk(void *part, uint32_t user, uint32_t k, const uint32_t *items,
                       const float *scores, sq_err *e)
{
    sq_score_part *p = part;
    uint32_t head[2] = {user, k};
    if (part_grow(p, sizeof head + (size_t)k * (sizeof *items + sizeof *scores), e))
        return e->code;
    memcpy(p->p + p->n, head, sizeof head);
    p->n += sizeof head;
    if (k) {
        memcpy(p->p + p->n, items, (size_t)k * sizeof *items);
        p->n += (size_t)k * sizeof *items;
        memcpy(p->p + p->n, scores, (size_t)k * sizeof *scores);
        p->n += (size_t)k * sizeof *scores;
    }
    if (p->tick)
        p->tick(p->ctx);
    return 0;
}

void sq_score_part_free(sq_score_part *p)
{
    free(p->p);
    p->p = NULL;
    p->n = p->cap = 0;
}

/* ---- the merge ---- */

/* The next ranked target of part s (at *at), which must be user's */
static int next_rank(const sq_score_part *p, int s, size_t *at, uint32_t user,
                     const sq_score_out *out, sq_err *e)
{
    sq_rank r;
    if (p->n - *at < sizeof r)
        return sq_fail(e, SQ_EX_SOFTWARE, "rank %d gave fewer ranked targets than its "
                       "users' records hold (user %u)", s, user);
    memcpy(&r, p->p + *at, sizeof r);
    if (r.user != user)
        return sq_fail(e, SQ_EX_SOFTWARE, "rank %d's ranked targets do not follow the "
                       "stream's order (user %u where %u was due)", s, r.user, user);
    *at += sizeof r;
    return out->rank ? out->rank(out->ctx, &r, e) : 0;
}

/* The next top-K list of part s (at *at), which must be user's */
static int next_topk(const sq_score_part *p, int s, size_t *at, uint32_t user,
                     const sq_score_out *out, sq_err *e)
{
    uint32_t head[2];
    size_t left = p->n - *at;
    if (left < sizeof head)
        return sq_fail(e, SQ_EX_SOFTWARE, "rank %d gave fewer top-K lists than its users "
                       "(user %u)", s, user);
    memcpy(head, p->p + *at, sizeof head);
    size_t size = sizeof head + (size_t)head[1] * (sizeof(uint32_t) + sizeof(float));
    if (head[0] != user || left < size)
        return sq_fail(e, SQ_EX_SOFTWARE, "rank %d's top-K lists do not follow the stream's "
                       "order (user %u where %u was due)", s, head[0], user);
    /* every result is a multiple of 4 bytes from a malloc'd start: aligned */
    const uint32_t *items = (const uint32_t *)(const void *)(p->p + *at + sizeof head);
    const float *scores = (const float *)(const void *)(items + head[1]);
    *at += size;
    return out->topk ? out->topk(out->ctx, user, head[1], items, scores, e) : 0;
}

int sq_score_merge(const sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, int topk,
                   const sq_score_part *parts, int n, const sq_score_out *out, sq_err *e)
{
    if (n < 1)
        return sq_fail(e, SQ_EX_SOFTWARE, "sq_score_merge: no parts");
    sq_eval_opts all = *o; /* every user: the records one process scores */
    all.shard_i = 0;
    all.shard_n = 0;
    size_t *at = calloc((size_t)n, sizeof *at);
    if (!at)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = 0;
    for (uint64_t r = 0; !rc && r < ds->n_seq; r++) {
        uint32_t jobs = sq_eval_record_jobs(m, ds, &all, topk, r), user = ds->seq[r].user;
        int s = (int)(sq_shard_hash(user) % (uint64_t)n);
        for (uint32_t j = 0; !rc && j < jobs; j++)
            rc = topk ? next_topk(&parts[s], s, &at[s], user, out, e)
                      : next_rank(&parts[s], s, &at[s], user, out, e);
    }
    for (int s = 0; !rc && s < n; s++)
        if (at[s] != parts[s].n)
            rc = sq_fail(e, SQ_EX_SOFTWARE, "rank %d gave %zu bytes of results more than "
                         "its users' records hold", s, parts[s].n - at[s]);
    free(at);
    return rc;
}

/* ---- the job ---- */

int sq_score_agree(const sq_comm *c, int rc, sq_score_fail *fail, sq_err *e)
{
    *fail = (sq_score_fail){.agreed = 1, .rank = rc ? c->rank : -1};
    if (c->size == 1)
        return rc;
    int32_t mine = rc, *all = malloc((size_t)c->size * sizeof *all);
    sq_err ge = {0};
    if (!all || sq_comm_allgather(c, &mine, all, sizeof mine, &ge)) {
        free(all);
        fail->agreed = 0; /* the others may wait: the caller aborts */
        if (rc)
            return rc;
        return all ? sq_fail(e, ge.code, "%s", ge.msg) : sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    int first = -1;
    for (int r = 0; r < c->size && first < 0; r++)
        if (all[r])
            first = r;
    if (first >= 0 && !rc) {
        fail->remote = 1;
        rc = sq_fail(e, all[first], "rank %d of %d failed (exit %d): nothing written", first,
                     c->size, (int)all[first]);
    }
    fail->rank = first;
    free(all);
    return rc;
}

/* XXH3-64 of the bytes of the file at path */
static int file_hash(const char *path, uint64_t *h, sq_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sq_fail(e, SQ_EX_NOINPUT, "%s: %s", path, strerror(errno));
    XXH3_state_t *st = XXH3_createState();
    unsigned char *buf = malloc(1 << 16);
    int rc = !st || !buf || XXH3_64bits_reset(st) != XXH_OK
                 ? sq_fail(e, SQ_EX_OSERR, "out of memory") : 0;
    size_t n;
    while (!rc && (n = fread(buf, 1, 1 << 16, f)) > 0)
        if (XXH3_64bits_update(st, buf, n) != XXH_OK)
            rc = sq_fail(e, SQ_EX_SOFTWARE, "%s: cannot hash", path);
    if (!rc && ferror(f))
        rc = sq_fail(e, SQ_EX_IO, "%s: read error", path);
    if (!rc)
        *h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    free(buf);
    fclose(f);
    return rc;
}

enum { SAME_MODEL, SAME_INPUT, SAME_USERS, SAME_ITEMS, SAME_OPTIONS, N_SAME };

/* What each rank must have as rank 0 has it, hashed */
static int same_hashes(const char *model_path, const sq_dataset *ds, const sq_eval_opts *o,
                       uint32_t K, uint64_t *h, sq_err *e)
{
    h[SAME_INPUT] = sq_ranks_data_hash(ds);
    h[SAME_USERS] = o->users ? XXH3_64bits_withSeed(o->users, o->n_users, o->n_users + 1) : 0;
    h[SAME_ITEMS] = o->item_ok ? XXH3_64bits(o->item_ok, (size_t)ds->hdr.n_items + 1) : 0;
    uint64_t opt[] = {(uint64_t)o->target, (uint64_t)o->cand, o->n_neg,
                      (uint64_t)o->exclude_history, (uint64_t)o->optimistic, o->seed, K,
                      o->expert_count != NULL, o->unknown_users != NULL,
                      o->filtered_targets != NULL};
    h[SAME_OPTIONS] = XXH3_64bits(opt, sizeof opt);
    return file_hash(model_path, &h[SAME_MODEL], e);
}

int sq_score_same(const sq_comm *c, const char *model_path, const sq_dataset *ds,
                  const sq_eval_opts *o, uint32_t K, sq_score_fail *fail, sq_err *e)
{
    static const char *const what[N_SAME] = {"model file bytes", "input records", "--users",
                                             "item filters (--exclude-items, --allow-items)",
                                             "scoring options"};
    *fail = (sq_score_fail){.agreed = 1, .rank = -1};
    if (c->size == 1)
        return 0;
    uint64_t *h = malloc((size_t)c->size * N_SAME * sizeof *h);
    int rc = h ? same_hashes(model_path, ds, o, K, h + (size_t)c->rank * N_SAME, e)
               : sq_fail(e, SQ_EX_OSERR, "out of memory");
    rc = sq_score_agree(c, rc, fail, e);
    if (!rc && (rc = sq_comm_allgather(c, h + (size_t)c->rank * N_SAME, h,
                                       N_SAME * sizeof *h, e)))
        fail->agreed = 0; /* the exchange itself failed */
    if (rc) {
        free(h);
        return rc;
    }
    for (int r = 1; !rc && r < c->size; r++)
        for (int i = 0; !rc && i < N_SAME; i++)
            if (h[(size_t)r * N_SAME + i] != h[i]) {
                rc = sq_fail(e, SQ_EX_USAGE, "the %d processes do not score the same: rank "
                             "%d has other %s than rank 0 (XXH3 %016" PRIx64 ", rank 0's %016"
                             PRIx64 "): every rank needs the same model, input, --users, item "
                             "filters and options", c->size, r, what[i], h[(size_t)r * N_SAME + i], h[i]);
                *fail = (sq_score_fail){.agreed = 1, .remote = c->rank != 0, .rank = r};
            }
    free(h);
    return rc;
}

/* o's counts (unknown users, filtered targets, then the experts) summed
 * over the ranks, on every rank */
static int sum_counts(const sq_comm *c, const sq_eval_opts *o, uint64_t n_experts, sq_err *e)
{
    size_t n = 2 + (o->expert_count ? (size_t)n_experts : 0), P = (size_t)c->size;
    if (n > SIZE_MAX / sizeof(uint64_t) / P)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %zu expert counts", n);
    uint64_t *all = malloc(n * P * sizeof *all);
    if (!all)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %zu expert counts", n);
    uint64_t *mine = all + (size_t)c->rank * n; /* in place */
    mine[0] = o->unknown_users ? *o->unknown_users : 0;
    mine[1] = o->filtered_targets ? *o->filtered_targets : 0;
    if (n > 2)
        memcpy(mine + 2, o->expert_count, (n - 2) * sizeof *mine);
    int rc = sq_comm_allgather(c, mine, all, n * sizeof *all, e);
    for (size_t i = 0; !rc && i < n; i++) {
        uint64_t sum = 0;
        for (size_t r = 0; r < P; r++)
            sum += all[r * n + i];
        if (i == 0 && o->unknown_users)
            *o->unknown_users = sum;
        else if (i == 1 && o->filtered_targets)
            *o->filtered_targets = sum;
        else if (i > 1)
            o->expert_count[i - 2] = sum;
    }
    free(all);
    return rc;
}

/* Rank 0's room for every rank's results (sizes sz[]), or NULL elsewhere */
static int parts_new(const sq_comm *c, const uint64_t *sz, sq_score_part **parts, sq_err *e)
{
    *parts = NULL;
    if (c->rank != 0)
        return 0;
    sq_score_part *p = calloc((size_t)c->size, sizeof *p);
    if (!p)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *parts = p;
    for (int r = 0; r < c->size; r++) {
        if (sz[r] > SIZE_MAX || !(p[r].p = malloc(sz[r] ? (size_t)sz[r] : 1)))
            return sq_fail(e, SQ_EX_OSERR, "out of memory for rank %d's %llu bytes of "
                           "results", r, (unsigned long long)sz[r]);
        p[r].cap = (size_t)sz[r];
    }
    return 0;
}

/* One round: bytes [off, off + per) of each rank's results, appended to
 * rank 0's parts */
static int gather_round(const sq_comm *c, const sq_score_part *mine, size_t off, size_t per,
                        sq_score_part *parts, size_t *cnt, sq_err *e)
{
    size_t len = mine->n > off ? mine->n - off : 0;
    if (len > per)
        len = per;
    void *recv = NULL;
    int rc = sq_comm_allgatherv(c, len ? mine->p + off : NULL, len, &recv, cnt,
                                cnt + c->size, e);
    for (int r = 0; !rc && parts && r < c->size; r++) {
        if (cnt[r] > parts[r].cap - parts[r].n) {
            rc = sq_fail(e, SQ_EX_SOFTWARE, "rank %d sent more results than it announced", r);
            break;
        }
        if (cnt[r])
            memcpy(parts[r].p + parts[r].n, (const char *)recv + cnt[c->size + r], cnt[r]);
        parts[r].n += cnt[r];
    }
    free(recv);
    return rc;
}

int sq_score_gather(const sq_comm *c, const sq_score_part *mine, size_t round,
                    sq_score_part **parts, sq_score_fail *fail, sq_err *e)
{
    size_t P = (size_t)c->size, per = (round ? round : SQ_SCORE_ROUND) / P;
    if (per == 0)
        per = 1;
    uint64_t n = mine->n, *sz = malloc(P * sizeof *sz);
    size_t *cnt = malloc(2 * P * sizeof *cnt);
    *parts = NULL;
    if (!sz || !cnt) {
        free(sz);
        free(cnt);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    int rc = sq_comm_allgather(c, &n, sz, sizeof n, e);
    if (!rc) { /* rank 0 may lack the room: say so to every rank */
        rc = sq_score_agree(c, parts_new(c, sz, parts, e), fail, e);
        uint64_t rounds = 0;
        for (size_t r = 0; !rc && r < P; r++)
            if ((sz[r] + per - 1) / per > rounds)
                rounds = (sz[r] + per - 1) / per;
        for (uint64_t k = 0; !rc && k < rounds; k++)
            rc = gather_round(c, mine, (size_t)k * per, per, *parts, cnt, e);
    }
    free(sz);
    free(cnt);
    return rc;
}

void sq_score_parts_free(sq_score_part *parts, int n)
{
    for (int r = 0; parts && r < n; r++)
        sq_score_part_free(&parts[r]);
    free(parts);
}

int sq_score_run(const sq_comm *c, sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                 uint32_t K, sq_score_out *out, sq_err *e)
{
    out->fail = (sq_score_fail){.agreed = 1, .rank = -1};
    if (c->size > 1 && o->shard_n > 1)
        return sq_fail(e, SQ_EX_USAGE, "a shard of its own (--shard) and a job's ranks do "
                       "not go together");
    if (c->size == 1) {
        int rc = K ? sq_eval_topk(m, ds, o, K, out->topk, out->ctx, e)
                   : sq_eval_ranks(m, ds, o, out->rank, out->ctx, NULL, e);
        out->fail.rank = rc ? 0 : -1;
        return rc;
    }
    sq_eval_opts so = *o;
    so.shard_i = (uint32_t)c->rank;
    so.shard_n = (uint32_t)c->size;
    sq_score_part mine = {.tick = c->rank == 0 ? out->tick : NULL, .ctx = out->ctx};
    sq_score_part *parts = NULL;
    int rc = K ? sq_eval_topk(m, ds, &so, K, sq_score_keep_topk, &mine, e)
               : sq_eval_ranks(m, ds, &so, sq_score_keep_rank, &mine, NULL, e);
    /* a rank that failed still takes part: every rank learns it here */
    rc = sq_score_agree(c, rc, &out->fail, e);
    if (!rc && (rc = sum_counts(c, o, out->n_experts, e)))
        out->fail.agreed = 0;
    if (!rc && (rc = sq_score_gather(c, &mine, out->round_bytes, &parts, &out->fail, e)) &&
        out->fail.rank < 0)
        out->fail.agreed = 0; /* a collective failed, not a rank's own part */
    sq_score_part_free(&mine);
    if (!rc && c->rank == 0) {
        /* the other ranks are done with rank 0: a failure here is its own */
        rc = sq_score_merge(m, ds, o, K != 0, parts, c->size, out, e);
        out->fail = (sq_score_fail){.agreed = 1, .rank = rc ? 0 : -1};
    }
    sq_score_parts_free(parts, c->rank == 0 ? c->size : 0);
    return rc;
}
