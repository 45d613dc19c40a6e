/* ranks.c - checks and validation across the ranks of a job (see ranks.h). */
#include "ranks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "gpu_ops.h"

uint64_t sq_ranks_data_hash(const sq_dataset *ds)
{
    /* one pass over the records: their fields, then their items */
    uint64_t h = XXH3_64bits_withSeed(&ds->hdr.n_items, sizeof ds->hdr.n_items, ds->n_seq);
    for (uint64_t i = 0; i < ds->n_seq; i++) {
        const sq_seq *q = &ds->seq[i];
        uint32_t f[6] = {q->user, q->view, q->len, q->n_train, q->n_valid, q->hist};
        h = XXH3_64bits_withSeed(f, sizeof f, h);
        h = XXH3_64bits_withSeed(ds->items + q->off, (size_t)q->len * sizeof *ds->items, h);
    }
    return h;
}

/* Line `line` (0-based) of text into out ("(none)" past its end) */
static void line_of(const char *text, int line, char *out, size_t n)
{
    const char *p = text;
    for (int i = 0; i < line && p; i++)
        p = (p = strchr(p, '\n')) ? p + 1 : NULL;
    if (!p || !*p) {
        snprintf(out, n, "(none)");
        return;
    }
    size_t len = strcspn(p, "\n");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

/* The first line where a and b differ, or -1 */
static int first_diff(const char *a, const char *b)
{
    int line = 0;
    for (size_t i = 0;; i++) {
        if (a[i] != b[i])
            return line;
        if (!a[i])
            return -1;
        if (a[i] == '\n')
            line++;
    }
}

int sq_ranks_same_text(const sq_comm *c, const char *text, sq_err *e)
{
    if (c->size == 1)
        return 0;
    size_t *cnt = malloc(2 * (size_t)c->size * sizeof *cnt);
    void *all = NULL;
    if (!cnt)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = sq_comm_allgatherv(c, text, strlen(text) + 1, &all, cnt, cnt + c->size, e);
    for (int r = 1; !rc && r < c->size; r++) {
        const char *t0 = all, *tr = (const char *)all + cnt[c->size + r];
        int line = first_diff(t0, tr);
        if (line < 0)
            continue;
        char a[256], b[256];
        line_of(tr, line, a, sizeof a);
        line_of(t0, line, b, sizeof b);
        rc = sq_fail(e, SQ_EX_USAGE, "the %d processes do not run the same training: rank %d "
                     "has %s, rank 0 %s (every rank needs the same options, threads and "
                     "data)", c->size, r, a, b);
    }
    free(all);
    free(cnt);
    return rc;
}

int sq_ranks_same_params(const sq_comm *c, const float *p, size_t n, uint64_t epoch,
                         sq_err *e)
{
    if (c->size == 1)
        return 0;
    uint64_t *h = malloc((size_t)c->size * sizeof *h);
    if (!h)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    h[c->rank] = XXH3_64bits(p, n * sizeof *p);
    int rc = sq_comm_allgather(c, h + c->rank, h, sizeof *h, e);
    for (int r = 1; !rc && r < c->size; r++)
        if (h[r] != h[0])
            rc = sq_fail(e, SQ_EX_SOFTWARE, "after epoch %" PRIu64 " the parameters of rank %d "
                         "(XXH3 %016" PRIx64 ") differ from rank 0's (%016" PRIx64 "): the ranks "
                         "no longer train one model (another build or library on one node?)",
                         epoch, r, h[r], h[0]);
    free(h);
    return rc;
}

/* The ranks of this rank's users, in dataset order */
typedef struct {
    sq_rank *r;
    size_t n, cap;
} rank_list;

static int keep_rank(void *ctx, const sq_rank *r, sq_err *e)
{
    rank_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        sq_rank *p = realloc(l->r, cap * sizeof *p);
        if (!p)
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
        l->r = p;
        l->cap = cap;
    }
    l->r[l->n++] = *r;
    return 0;
}

/* The ranks of every shard (shard s's at all + displ[s], cnt[s] bytes)
 * into acc in dataset order: record i's targets (sq_eval_record_jobs of
 * them under o, unsharded) are the next entries of its user's shard. */
static int merge_ranks(const sq_comm *c, const sq_model *m, const sq_dataset *ds,
                       const sq_eval_opts *o, const char *all, const size_t *cnt,
                       const size_t *displ, sq_metrics *acc, sq_err *e)
{
    size_t *at = calloc((size_t)c->size, sizeof *at);
    if (!at)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = 0;
    for (uint64_t i = 0; !rc && i < ds->n_seq; i++) {
        uint32_t u = ds->seq[i].user, k = sq_eval_record_jobs(m, ds, o, 0, i);
        int s = (int)(sq_shard_hash(u) % (uint64_t)c->size);
        const sq_rank *l = (const sq_rank *)(const void *)(all + displ[s]);
        size_t n = cnt[s] / sizeof *l;
        if (at[s] + k > n)
            rc = sq_fail(e, SQ_EX_SOFTWARE, "validation: rank %d ranked fewer targets than "
                         "its users have", s);
        for (; !rc && k > 0; k--, at[s]++)
            rc = sq_metrics_add(acc, u, l[at[s]].rank, l[at[s]].n_cand, e);
    }
    for (int s = 0; !rc && s < c->size; s++)
        if (at[s] != cnt[s] / sizeof(sq_rank))
            rc = sq_fail(e, SQ_EX_SOFTWARE, "validation: rank %d ranked users out of the "
                         "stream's order", s);
    free(at);
    return rc;
}

int sq_ranks_eval(const sq_comm *c, sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                  sq_metrics *acc, sq_err *e)
{
    if (c->size == 1)
        return sq_eval_ranks(m, ds, o, NULL, NULL, acc, e);
    sq_eval_opts so = *o;
    so.shard_i = (uint32_t)c->rank;
    so.shard_n = (uint32_t)c->size;
    rank_list mine = {0};
    size_t *cnt = malloc(2 * (size_t)c->size * sizeof *cnt);
    void *all = NULL;
    int rc = cnt ? 0 : sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (!rc)
        rc = sq_eval_ranks(m, ds, &so, keep_rank, &mine, NULL, e);
    /* a rank that failed still takes part, with nothing, so that no rank
     * waits on it; the caller then ends the job */
    sq_err ge = {0};
    if (cnt && sq_comm_allgatherv(c, mine.r, rc ? 0 : mine.n * sizeof *mine.r, &all, cnt,
                                  cnt + c->size, &ge) && !rc)
        rc = sq_fail(e, ge.code, "%s", ge.msg);
    if (!rc)
        rc = merge_ranks(c, m, ds, o, all, cnt, cnt + c->size, acc, e);
    free(all);
    free(cnt);
    free(mine.r);
    return rc;
}

/* c->sum_bytes over NCCL: the bytes up, summed as uint8, down */
static int nccl_bytes(void *arg, void *buf, size_t n, sq_err *e)
{
    const sq_ctx *cx = arg;
    void *dev = sq_ctx_alloc(cx, n ? n : 1, e);
    if (!dev)
        return e->code;
    int rc = sq_ctx_upload(cx, dev, buf, n, e) || sq_ctx_nccl_sum(cx, dev, n, SQ_NCCL_U8, e) ||
             sq_ctx_download(cx, buf, dev, n, e) ? e->code : 0;
    sq_ctx_free(cx, dev);
    return rc;
}

enum { ID_BYTES = 128 }; /* ncclUniqueId */

/* Rank 0 of an env job: the id into path, which must be new */
static int id_write(const char *path, const unsigned char *id, sq_err *e)
{
    if (access(path, F_OK) == 0)
        return sq_fail(e, SQ_EX_USAGE, "SEQREC_NCCL_ID=%s exists: remove it (a stale id would "
                       "join the ranks to another job)", path);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return sq_fail(e, SQ_EX_CANTCREAT, "SEQREC_NCCL_ID: %s: %s", tmp, strerror(errno));
    int ok = fwrite(id, 1, ID_BYTES, f) == ID_BYTES;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return sq_fail(e, SQ_EX_IO, "SEQREC_NCCL_ID: %s: %s", path, strerror(err));
    }
    return 0;
}

/* The other ranks of an env job: the id from path, once rank 0 wrote it */
static int id_read(const char *path, unsigned char *id, sq_err *e)
{
    const char *w = getenv("SEQREC_NCCL_WAIT");
    double wait = w && *w ? atof(w) : 300, waited = 0;
    struct timespec nap = {0, 20 * 1000 * 1000};
    FILE *f;
    while (!(f = fopen(path, "rb"))) {
        if (waited >= wait)
            return sq_fail(e, SQ_EX_UNAVAILABLE, "SEQREC_NCCL_ID=%s: rank 0 did not write "
                           "the NCCL id in %.0f s (SEQREC_NCCL_WAIT)", path, wait);
        nanosleep(&nap, NULL);
        waited += 0.02;
    }
    int ok = fread(id, 1, ID_BYTES, f) == ID_BYTES;
    fclose(f);
    return ok ? 0 : sq_fail(e, SQ_EX_DATA, "SEQREC_NCCL_ID=%s: not an NCCL id", path);
}

int sq_ranks_nccl(sq_comm *c, const sq_ctx *cx, sq_err *e)
{
    unsigned char id[ID_BYTES] = {0};
    const char *path = getenv("SEQREC_NCCL_ID");
    int env = c->kind == SQ_COMM_ENV;
    if (env && (!path || !*path))
        return sq_fail(e, SQ_EX_USAGE, "processes started with RANK/WORLD_SIZE meet through a "
                       "file: set SEQREC_NCCL_ID to a path every rank sees");
    if (c->rank == 0 && sq_ctx_nccl_id(cx, id, sizeof id, e))
        return e->code;
    int rc = env ? (c->rank == 0 ? id_write(path, id, e) : id_read(path, id, e))
                 : sq_comm_bcast(c, id, sizeof id, 0, e);
    if (!rc)
        rc = sq_ctx_nccl_open(cx, id, sizeof id, c->size, c->rank, e);
    if (env && c->rank == 0 && access(path, F_OK) == 0)
        remove(path); /* every rank has joined, or this one failed */
    if (!rc && env) {
        c->sum_bytes = nccl_bytes;
        c->sum_arg = (void *)cx;
    }
    return rc;
}
