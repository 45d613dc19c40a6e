/* batch.c - training samples and packed batches (see batch.h). */
#include "batch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pad.h"
#include "rng.h"

/* Stream ids of the builder's generators (sq_rng_seed's `stream`), kept
 * apart from those of dropout and initialisation. */
#define STREAM_SHUFFLE 0x5348554646000000ull /* "SHUFF" */
#define STREAM_NEG 0x4e45470000000000ull     /* "NEG" */
#define STREAM_MASK 0x4d41534b00000000ull    /* "MASK" */
#define STREAM_VIEW 0x5649455700000000ull    /* "VIEW" */
#define STREAM_RPREF 0x5250524546000000ull   /* "RPREF" */
#define STREAM_AUG 0x4155470000000000ull     /* "AUG" */
#define STREAM_IBN 0x49424e0000000000ull     /* "IBN": in-batch negatives */
#define STREAM_SHN 0x53484e0000000000ull     /* "SHN": shared negatives */

const char *sq_target_name(int mode)
{
    return mode == SQ_TARGET_LAST     ? "last"
           : mode == SQ_TARGET_RANDOM  ? "random"
           : mode == SQ_TARGET_WINDOWS ? "windows"
                                       : "all";
}

int sq_target_parse(const char *name)
{
    if (!strcmp(name, "all"))
        return SQ_TARGET_ALL;
    if (!strcmp(name, "last"))
        return SQ_TARGET_LAST;
    if (!strcmp(name, "random"))
        return SQ_TARGET_RANDOM;
    if (!strcmp(name, "windows"))
        return SQ_TARGET_WINDOWS;
    return -1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_len_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

/* Inputs of sample (u, e): the e - 1 items before the last (next-item), or
 * all e (cloze), at most max_len of them. */
static uint32_t sample_len(uint32_t e, int max_len, int cloze)
{
    uint32_t n = cloze ? e : e - 1;
    return n < (uint32_t)max_len ? n : (uint32_t)max_len;
}

/* Rows of sample (u, end) in the batch: its inputs, or (VIEWS) the most
 * rows one of its views can take (RandomPad with the largest alpha). */
static uint32_t sample_rows(const sq_batcher *b, uint32_t end)
{
    uint32_t len = sample_len(end, b->max_len, b->cloze);
    if (b->views < 2 || b->view_kind != SQ_VIEW_RANDOMPAD)
        return len;
    uint32_t alpha = sq_randompad_max(len, (uint32_t)b->max_len);
    return (alpha + 1) * len + alpha;
}

/* The samples of a user with nt >= 2 training items: one (all, random),
 * one per prefix (last), or the windows over the training part (windows:
 * each ends `stride` items before the next, down to an end of 2, or 1 for
 * cloze windows, which take all their items as inputs). */
static uint32_t sample_count(int mode, uint32_t nt, uint32_t stride, int cloze)
{
    if (mode == SQ_TARGET_LAST)
        return nt - 1;
    if (mode != SQ_TARGET_WINDOWS)
        return 1;
    uint32_t lo = cloze ? 1 : 2;
    return 1 + (nt - lo) / stride;
}

/* The end e of the i-th of a user's m samples, oldest first. */
static uint32_t sample_end(int mode, uint32_t nt, uint32_t stride, uint32_t m, uint32_t i)
{
    if (mode == SQ_TARGET_LAST)
        return 2 + i;
    if (mode != SQ_TARGET_WINDOWS)
        return nt;
    return nt - (m - 1 - i) * stride;
}

/* The first trained input of a sample of len inputs ending at end: 0 for
 * every position (all, and the oldest window of a user), len - 1 for the
 * last (last, random), and for a window that has an older one the newest
 * `stride` inputs, whose targets no newer window reaches with as long a
 * history. */
static uint32_t first_trained(const sq_batcher *b, uint32_t end, uint32_t len)
{
    if (!sq_target_every_position(b->mode))
        return len - 1;
    uint32_t S = (uint32_t)b->stride;
    return b->mode == SQ_TARGET_WINDOWS && end >= 2 + S && len > S ? len - S : 0;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int init(sq_batcher *b, const sq_seqs *d, int mode, int max_len, int batch, int K,
                int cloze, uint64_t seed, sq_err *e)
{
    int views = b->views > 1 ? b->views : 1;
    if (b->stride == 0)
        b->stride = max_len;
    b->views = views;
    b->d = *d;
    b->cloze = cloze;
    b->mode = mode;
    b->max_len = max_len;
    b->batch = batch;
    b->K = K;
    b->seed = seed;
    uint32_t *lens = NULL;
    if (mode != SQ_TARGET_ALL && mode != SQ_TARGET_LAST && mode != SQ_TARGET_RANDOM &&
        mode != SQ_TARGET_WINDOWS)
        return sq_fail(e, SQ_EX_USAGE, "unknown --target mode %d", mode);

    uint64_t n = 0;
    for (uint32_t u = 0; u < d->n_users; u++)
        if (d->n_train[u] >= 2)
            n += sample_count(mode, d->n_train[u], (uint32_t)b->stride, cloze);
    if (n == 0)
        return sq_fail(e, SQ_EX_DATA, "no user has 2 or more training items: nothing to train on");
    b->n_samples = n;
    b->samples = malloc(n * sizeof *b->samples);
    b->order = malloc(n * sizeof *b->order);
    lens = malloc(n * sizeof *lens);
    if (!b->samples || !b->order || !lens)
        goto oom;
    uint64_t k = 0;
    for (uint32_t u = 0; u < d->n_users; u++) {
        uint32_t nt = d->n_train[u];
        if (nt < 2)
            continue;
        uint32_t m = sample_count(mode, nt, (uint32_t)b->stride, cloze);
        for (uint32_t i = 0; i < m; i++) {
            uint32_t end = sample_end(mode, nt, (uint32_t)b->stride, m, i);
            lens[k] = sample_rows(b, end);
            b->samples[k++] = ((uint64_t)u << 32) | end;
        }
    }
    memcpy(b->order, b->samples, n * sizeof *b->order);

    /* Capacity bounds: the `batch` longest samples (each view of one). */
    qsort(lens, n, sizeof *lens, cmp_len_desc);
    uint64_t cap_T = 0, cap_att = 0;
    for (uint64_t i = 0; i < n && i < (uint64_t)batch; i++) {
        cap_T += (uint64_t)views * lens[i];
        cap_att += (uint64_t)views * lens[i] * lens[i];
    }
    free(lens);
    lens = NULL;
    if (cap_T > (uint64_t)INT32_MAX / 2)
        return sq_fail(e, SQ_EX_USAGE, "a batch of %d sequences of up to %d items is too large",
                       batch, max_len);
    b->cap_T = (int)cap_T;
    b->cap_att = (size_t)cap_att;

    if (K > 0) {
        uint64_t total = d->start[d->n_users - 1] + d->n_train[d->n_users - 1];
        b->sorted = malloc((total ? total : 1) * sizeof *b->sorted);
        b->distinct = malloc(d->n_users * sizeof *b->distinct);
        b->seen = calloc(((size_t)d->n_items + 64) / 64, sizeof *b->seen);
        if (!b->sorted || !b->distinct || !b->seen)
            goto oom;
        for (uint32_t u = 0; u < d->n_users; u++) {
            uint32_t *s = b->sorted + d->start[u];
            uint32_t nt = d->n_train[u], m = 0;
            memcpy(s, d->items + d->start[u], nt * sizeof *s);
            qsort(s, nt, sizeof *s, cmp_u32);
            for (uint32_t i = 0; i < nt; i++)
                if (i == 0 || s[i] != s[i - 1])
                    s[m++] = s[i];
            b->distinct[u] = m;
        }
    }

    /* One block for the packed batch: ids, pos, rows, targets [cap_T],
     * off [B+1], user [B], uid [B], neg [cap_T * K], B = views * batch
     * sequences. */
    size_t T = (size_t)b->cap_T, B = (size_t)batch * views, KK = (size_t)K;
    size_t sz_ids = align64(T * sizeof(int)), sz_off = align64((B + 1) * sizeof(int));
    size_t sz_user = align64(B * sizeof(uint32_t)), sz_neg = align64(T * KK * sizeof(int));
    size_t total = 4 * sz_ids + sz_off + 2 * sz_user + sz_neg;
    unsigned char *mem = b->mem = malloc(total);
    if (!mem)
        goto oom;
    b->pb.ids = (int *)mem;
    mem += sz_ids;
    b->pb.pos = (int *)mem;
    mem += sz_ids;
    b->pb.rows = (int *)mem;
    mem += sz_ids;
    b->pb.targets = (int *)mem;
    mem += sz_ids;
    b->pb.off = (int *)mem;
    mem += sz_off;
    b->pb.user = (uint32_t *)mem;
    mem += sz_user;
    b->pb.uid = (uint32_t *)mem;
    mem += sz_user;
    b->pb.neg = K > 0 ? (int *)mem : NULL;
    b->pb.K = K;
    b->pb.views = views;
    return 0;

oom:
    free(lens);
    sq_batcher_free(b);
    return sq_fail(e, SQ_EX_OSERR, "out of memory for the batch builder");
}

int sq_batcher_init(sq_batcher *b, const sq_seqs *d, int mode, int max_len,
                    int batch, int K, uint64_t seed, sq_err *e)
{
    return sq_batcher_init_stride(b, d, mode, 0, max_len, batch, K, seed, e);
}

int sq_batcher_init_stride(sq_batcher *b, const sq_seqs *d, int mode, int stride,
                           int max_len, int batch, int K, uint64_t seed, sq_err *e)
{
    memset(b, 0, sizeof *b);
    if (stride && mode != SQ_TARGET_WINDOWS)
        return sq_fail(e, SQ_EX_USAGE, "--window-stride needs --target windows");
    if (stride < 0 || stride > max_len)
        return sq_fail(e, SQ_EX_USAGE, "--window-stride %d is not in 1..--max-len %d", stride,
                       max_len);
    b->stride = stride;
    return init(b, d, mode, max_len, batch, K, 0, seed, e);
}

int sq_batcher_init_cloze(sq_batcher *b, const sq_seqs *d, int mode, int max_len,
                          int batch, double mask_prob, int mask_id, uint64_t seed,
                          sq_err *e)
{
    memset(b, 0, sizeof *b);
    if (!(mask_prob > 0 && mask_prob <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--mask-prob must be in (0, 1]");
    b->mask_prob = mask_prob;
    b->mask_id = mask_id;
    return init(b, d, mode, max_len, batch, 0, 1, seed, e);
}

int sq_batcher_init_views(sq_batcher *b, const sq_seqs *d, int view_kind, double crop_eta,
                          int max_len, int batch, int K, uint64_t seed, sq_err *e)
{
    memset(b, 0, sizeof *b);
    if (view_kind != SQ_VIEW_RANDOMPAD && view_kind != SQ_VIEW_CROP)
        return sq_fail(e, SQ_EX_USAGE, "unknown kind of view %d", view_kind);
    if (view_kind == SQ_VIEW_CROP && !(crop_eta > 0 && crop_eta <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--crop-eta must be in (0, 1]");
    b->views = 2;
    b->view_kind = view_kind;
    b->crop_eta = crop_eta;
    if (init(b, d, SQ_TARGET_ALL, max_len, batch, K, 0, seed, e))
        return e->code;
    b->padrow = malloc(2 * (size_t)max_len * sizeof *b->padrow);
    if (!b->padrow) {
        sq_batcher_free(b);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the batch builder");
    }
    return 0;
}

int sq_batcher_init_cl(sq_batcher *b, const sq_seqs *d, int mode, int max_len, int batch,
                       int K, const sq_augment *aug, uint64_t seed, sq_err *e)
{
    memset(b, 0, sizeof *b);
    if (!(aug->crop > 0 && aug->crop <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--crop must be in (0, 1]");
    if (!(aug->mask >= 0 && aug->mask <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--mask-ratio must be in [0, 1]");
    if (!(aug->reorder >= 0 && aug->reorder <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--reorder must be in [0, 1]");
    b->views = 3;
    b->aug = *aug;
    return init(b, d, mode, max_len, batch, K, 0, seed, e);
}

int sq_batcher_sampled(sq_batcher *b, int v, int K, int share, sq_err *e)
{
    if (b->K || b->views == 2)
        return sq_fail(e, SQ_EX_SOFTWARE, "sampled negatives on a builder with negatives or views");
    int kb = sq_neg_inbatch_slots(v, K);
    if (kb >= b->batch)
        return sq_fail(e, SQ_EX_USAGE,
                       "--neg-sampler %s draws %d negatives a position from the batch's "
                       "targets: that needs --batch above %d (a batch of %d samples may "
                       "hold only %d targets)",
                       sq_neg_kind(v) == SQ_NEG_MIXED ? "mixed" : "in-batch", kb, kb, b->batch,
                       b->batch);
    const sq_seqs *d = &b->d;
    if (sq_sampler_init(&b->smp, v, K, d->n_items, d->items, d->start, d->n_train, d->n_users,
                        e))
        return e->code;
    size_t slots = (size_t)b->cap_T * (size_t)K;
    b->smp_mem = malloc(slots * (sizeof(int) + sizeof(float)));
    b->smp_first = malloc(((size_t)b->batch + 1) * sizeof *b->smp_first);
    if (!b->smp_mem || !b->smp_first)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %d negatives a position", K);
    b->pb.neg = b->smp_mem;
    b->pb.lq = (float *)(b->pb.neg + slots);
    b->pb.K = b->K = K;
    b->smp_on = 1;
    b->smp_v = v;
    b->smp_share = share;
    return 0;
}

void sq_batcher_free(sq_batcher *b)
{
    sq_sampler_free(&b->smp);
    free(b->smp_mem);
    free(b->smp_first);
    free(b->samples);
    free(b->order);
    free(b->sorted);
    free(b->distinct);
    free(b->seen);
    free(b->mem);
    free(b->padrow);
    memset(b, 0, sizeof *b);
}

uint64_t sq_batcher_n_batches(const sq_batcher *b)
{
    return (b->n_samples + (uint64_t)b->batch - 1) / (uint64_t)b->batch;
}

void sq_batcher_shuffle(sq_batcher *b, uint64_t epoch)
{
    /* Fisher-Yates on the samples in user order: the permutation is a pure
     * function of (seed, epoch). */
    sq_rng r;
    sq_rng_seed(&r, b->seed, STREAM_SHUFFLE ^ epoch);
    memcpy(b->order, b->samples, b->n_samples * sizeof *b->order);
    for (uint64_t i = b->n_samples - 1; i > 0; i--) {
        uint64_t j = sq_rng_below(&r, i + 1);
        uint64_t t = b->order[i];
        b->order[i] = b->order[j];
        b->order[j] = t;
    }
}

static int in_sorted(const uint32_t *s, uint32_t n, uint32_t x)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && s[lo] == x;
}

/* The generator of sample (u, end)'s negatives (stream STREAM_NEG) or masks
 * (STREAM_MASK) in epoch `epoch`. */
static void sample_rng(sq_rng *r, uint64_t stream, uint64_t seed, uint64_t epoch, uint32_t u,
                       uint32_t end)
{
    uint64_t x = (epoch + 1) * 0x9e3779b97f4a7c15ull;
    x ^= ((uint64_t)u << 32 | end) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    sq_rng_seed(r, seed, stream ^ x);
}

/* SQ_TARGET_RANDOM: the end of user u's prefix in epoch `epoch`, uniform in
 * 2 .. nt, drawn from (seed, epoch, u) alone so that no batch size or
 * thread count changes it. */
static uint32_t random_end(const sq_batcher *b, uint64_t epoch, uint32_t u, uint32_t nt)
{
    sq_rng r;
    sample_rng(&r, STREAM_RPREF, b->seed, epoch, u, 0);
    return 2 + (uint32_t)sq_rng_below(&r, (uint64_t)nt - 1);
}

/* Masks the cloze window of rows o .. o+len-1 (items it[0..len)), appending
 * its loss entries at *n. */
static void mask_window(sq_batcher *b, sq_packed *p, int o, uint32_t len, const uint32_t *it,
                        uint64_t epoch, uint32_t u, uint32_t end, int *n)
{
    sq_rng r;
    sample_rng(&r, STREAM_MASK, b->seed, epoch, u, end);
    int n0 = *n, real_items = 0;
    for (uint32_t t = 0; t < len; t++) {
        if (!it[t])
            continue; /* a padding token stays one and is never a target */
        real_items++;
        if (sq_rng_uniform(&r) < b->mask_prob) {
            p->ids[o + (int)t] = b->mask_id;
            p->rows[*n] = o + (int)t;
            p->targets[*n] = (int)it[t];
            (*n)++;
        }
    }
    if (*n > n0 || real_items == 0)
        return;
    uint64_t pick = sq_rng_below(&r, (uint64_t)real_items);
    for (uint32_t t = 0; t < len; t++)
        if (it[t] && pick-- == 0) {
            p->ids[o + (int)t] = b->mask_id;
            p->rows[*n] = o + (int)t;
            p->targets[*n] = (int)it[t];
            (*n)++;
            break;
        }
}

/* K negatives for each entry n0 .. n-1 of user u (NEGATIVES in batch.h).
 * Whether a draw is one of the user's items: a bit of b->seen, set for its
 * items while it draws, when it draws often (a user's every position: one
 * load a draw, where a binary search over hundreds of items mispredicts
 * its way down), else the search. The same answers: the same draws. */
static void draw_negatives(const sq_batcher *b, sq_packed *p, uint32_t u, int n0, int n,
                           sq_rng *r)
{
    int K = b->K;
    uint32_t n_items = b->d.n_items;
    const uint32_t *srt = b->sorted + b->d.start[u];
    uint32_t nd = b->distinct[u];
    uint64_t *seen = (uint64_t)(n - n0) * (uint64_t)K * 16 >= nd ? b->seen : NULL;
    for (uint32_t i = 0; seen && i < nd; i++)
        seen[srt[i] >> 6] |= (uint64_t)1 << (srt[i] & 63);
    for (int m = n0; m < n; m++)
        for (int k = 0; k < K; k++) {
            uint32_t x = 0;
            if (nd < n_items)
                do
                    x = 1 + (uint32_t)sq_rng_below(r, n_items);
                while (seen ? (int)((seen[x >> 6] >> (x & 63)) & 1) : in_sorted(srt, nd, x));
            p->neg[(size_t)m * K + k] = (int)x;
        }
    for (uint32_t i = 0; seen && i < nd; i++) /* clear for the next user */
        seen[srt[i] >> 6] = 0;
}

/* One view of sample (u, end) at rows o.. (VIEWS in batch.h): writes ids,
 * pos and its entries from *n on; returns its number of rows. */
static int put_view(sq_batcher *b, sq_packed *p, int o, uint32_t u, uint32_t end,
                    uint64_t epoch, int view, int *n)
{
    uint32_t N = (uint32_t)b->max_len, len = sample_len(end, b->max_len, 0);
    const uint32_t *in = b->d.items + b->d.start[u] + (end - len - 1), *tg = in + 1;
    sq_rng r;
    sample_rng(&r, STREAM_VIEW, b->seed, epoch, u, (uint32_t)view);
    int rows, n0 = *n;
    if (b->view_kind == SQ_VIEW_RANDOMPAD) {
        /* the same alpha for both rows: the two generators start equal */
        uint32_t *row_in = b->padrow, *row_tg = b->padrow + N;
        sq_rng r2 = r;
        uint32_t span = sq_pad_row(row_in, N, in, len, SQ_PAD_RANDOM, &r);
        sq_pad_row(row_tg, N, tg, len, SQ_PAD_RANDOM, &r2);
        rows = (int)span;
        for (int t = 0; t < rows; t++) {
            uint32_t at = N - span + (uint32_t)t;
            p->ids[o + t] = (int)row_in[at];
            p->pos[o + t] = (int)at;
            if (row_tg[at]) {
                p->rows[*n] = o + t;
                p->targets[*n] = (int)row_tg[at];
                (*n)++;
            }
        }
    } else {
        uint32_t c = (uint32_t)(b->crop_eta * len);
        c = c < 1 ? 1 : c;
        uint32_t s0 = (uint32_t)sq_rng_below(&r, (uint64_t)(len - c) + 1);
        rows = (int)c;
        for (int t = 0; t < rows; t++) {
            p->ids[o + t] = (int)in[s0 + (uint32_t)t];
            p->pos[o + t] = (int)(N - c) + t;
            p->rows[*n] = o + t;
            p->targets[*n] = (int)tg[s0 + (uint32_t)t];
            (*n)++;
        }
    }
    if (b->K > 0)
        draw_negatives(b, p, u, n0, *n, &r);
    return rows;
}

/* View v (1 or 2) of the inputs it[0, len) of sample (u, end) at rows o..
 * (CONTRASTIVE VIEWS in batch.h); returns its number of rows. */
static int put_augmented(const sq_batcher *b, sq_packed *p, int o, const uint32_t *it,
                         uint32_t len, uint64_t epoch, uint32_t u, uint32_t end, int v)
{
    const sq_augment *a = &b->aug;
    int N = b->max_len;
    sq_rng r;
    sample_rng(&r, STREAM_AUG + (uint64_t)v, b->seed, epoch, u, end);
    int kind = SQ_VIEW_CROP + (int)sq_rng_below(&r, 3);
    if (kind == SQ_VIEW_CROP) {
        uint32_t c = (uint32_t)(a->crop * len);
        c = c < 1 ? 1 : c;
        uint32_t s0 = (uint32_t)sq_rng_below(&r, (uint64_t)(len - c) + 1);
        for (uint32_t t = 0; t < c; t++) {
            p->ids[o + (int)t] = (int)it[s0 + t];
            p->pos[o + (int)t] = N - (int)c + (int)t;
        }
        return (int)c;
    }
    int *ids = p->ids + o;
    for (uint32_t t = 0; t < len; t++) {
        ids[t] = (int)it[t];
        p->pos[o + (int)t] = N - (int)len + (int)t;
    }
    if (kind == SQ_VIEW_MASK) {
        /* floor(mask len) distinct positions, each set of them equally
         * likely (selection sampling: keep t with probability left / rest) */
        uint32_t left = (uint32_t)(a->mask * len);
        for (uint32_t t = 0; t < len && left > 0; t++)
            if (sq_rng_below(&r, (uint64_t)(len - t)) < left) {
                ids[t] = a->mask_id;
                left--;
            }
        return (int)len;
    }
    uint32_t rl = (uint32_t)(a->reorder * len);
    uint32_t s0 = (uint32_t)sq_rng_below(&r, (uint64_t)(len - rl) + 1);
    for (uint32_t k = rl; k > 1; k--) {
        uint32_t j = (uint32_t)sq_rng_below(&r, k);
        int x = ids[s0 + k - 1];
        ids[s0 + k - 1] = ids[s0 + j];
        ids[s0 + j] = x;
    }
    return (int)len;
}

/* The two augmented views of the B samples packed first (CONTRASTIVE VIEWS). */
static void put_cl_views(sq_batcher *b, sq_packed *p, uint64_t epoch, uint64_t first, int B,
                         int *T)
{
    for (int v = 1; v <= 2; v++)
        for (int j = 0; j < B; j++) {
            uint64_t s = b->order[first + (uint64_t)j];
            uint32_t u = (uint32_t)(s >> 32), end = (uint32_t)s;
            if (b->mode == SQ_TARGET_RANDOM)
                end = random_end(b, epoch, u, end);
            uint32_t len = sample_len(end, b->max_len, 0);
            const uint32_t *it = b->d.items + b->d.start[u] + (end - len - 1);
            p->user[v * B + j] = u;
            p->uid[v * B + j] = p->uid[j];
            *T += put_augmented(b, p, *T, it, len, epoch, u, end, v);
            p->off[v * B + j + 1] = *T;
        }
}

static const sq_packed *get_views(sq_batcher *b, uint64_t epoch, uint64_t first, int B)
{
    sq_packed *p = &b->pb;
    int T = 0, n = 0;
    p->off[0] = 0;
    for (int v = 0; v < 2; v++) {
        for (int j = 0; j < B; j++) {
            uint64_t s = b->order[first + (uint64_t)j];
            uint32_t u = (uint32_t)(s >> 32), end = (uint32_t)s;
            p->user[v * B + j] = u;
            p->uid[v * B + j] = b->d.user_id ? b->d.user_id[u] : u;
            T += put_view(b, p, T, u, end, epoch, v, &n);
            p->off[v * B + j + 1] = T;
        }
        if (v == 0)
            p->n_first = n;
    }
    p->B = 2 * B;
    p->T = T;
    p->n = n;
    return p;
}

/* Entry m's negatives and corrections from entry m0's, for m in [m0 + 1, m1) */
static void copy_negatives(sq_packed *p, int K, int m0, int m1)
{
    for (int m = m0 + 1; m < m1; m++) {
        memcpy(p->neg + (size_t)m * K, p->neg + (size_t)m0 * K, (size_t)K * sizeof *p->neg);
        memcpy(p->lq + (size_t)m * K, p->lq + (size_t)m0 * K, (size_t)K * sizeof *p->lq);
    }
}

/* Sample (u, end)'s negatives, entries [n0, n): each its own (position),
 * or the sampler's slots of entry n0 alone (sequence: the rest are copied
 * once the in-batch slots are drawn, sampler_finish); nothing for batch */
static void sample_negatives(sq_batcher *b, sq_packed *p, uint64_t epoch, uint32_t u,
                             uint32_t end, int n0, int n)
{
    int K = b->K;
    if (b->smp_on && b->smp_share == SQ_SHARE_BATCH)
        return;
    sq_rng r;
    sample_rng(&r, STREAM_NEG, b->seed, epoch, u, end);
    if (!b->smp_on) {
        draw_negatives(b, p, u, n0, n, &r);
        return;
    }
    int m1 = b->smp_share == SQ_SHARE_SEQUENCE && n > n0 ? n0 + 1 : n;
    for (int m = n0; m < m1; m++)
        sq_sampler_draw(&b->smp, &r, sq_neg_inbatch_slots(b->smp_v, K), p->neg + (size_t)m * K,
                        p->lq + (size_t)m * K);
}

/* The sampler's batch-wide part of batch i's B samples and n entries: the
 * in-batch slots (of every entry, of each sample's first, or of entry 0),
 * then the copies of --neg-share sequence and batch; for batch, its one set
 * of K from the generator of (seed, epoch, i) first */
static void sampler_finish(sq_batcher *b, sq_packed *p, uint64_t epoch, uint64_t i, int B, int n)
{
    int K = b->K, kb = sq_neg_inbatch_slots(b->smp_v, K), share = b->smp_share;
    p->neg_share = share;
    if (n == 0)
        return;
    sq_rng r;
    if (share == SQ_SHARE_BATCH) {
        sq_rng_seed(&r, b->seed, STREAM_SHN ^ ((epoch + 1) * 0x9e3779b97f4a7c15ull) ^ i);
        sq_sampler_draw(&b->smp, &r, kb, p->neg, p->lq);
        if (kb > 0)
            sq_sampler_inbatch(&b->smp, &r, p->targets, n, NULL, 1, p->neg, p->lq);
        copy_negatives(p, K, 0, n);
        return;
    }
    /* the samples with entries: their firsts, in order */
    int *first = b->smp_first, nf = 0;
    for (int j = 0; j < B && share == SQ_SHARE_SEQUENCE; j++)
        if (first[j + 1] > first[j])
            first[nf++] = first[j];
    if (kb > 0) {
        sq_rng_seed(&r, b->seed, STREAM_IBN ^ ((epoch + 1) * 0x9e3779b97f4a7c15ull) ^ i);
        if (share == SQ_SHARE_SEQUENCE)
            sq_sampler_inbatch(&b->smp, &r, p->targets, n, first, nf, p->neg, p->lq);
        else
            sq_sampler_inbatch(&b->smp, &r, p->targets, n, NULL, n, p->neg, p->lq);
    }
    for (int f = 0; f < nf; f++) /* each first's row to the rest of its sample */
        copy_negatives(p, K, first[f], f + 1 < nf ? first[f + 1] : n);
}

const sq_packed *sq_batcher_get(sq_batcher *b, uint64_t epoch, uint64_t i)
{
    sq_packed *p = &b->pb;
    uint64_t first = i * (uint64_t)b->batch;
    uint64_t last = first + (uint64_t)b->batch;
    if (last > b->n_samples)
        last = b->n_samples;
    int B = (int)(last - first), T = 0, n = 0, K = b->K;
    if (b->views == 2)
        return get_views(b, epoch, first, B);
    p->off[0] = 0;
    for (int j = 0; j < B; j++) {
        uint64_t s = b->order[first + (uint64_t)j];
        uint32_t u = (uint32_t)(s >> 32), end = (uint32_t)s;
        if (b->mode == SQ_TARGET_RANDOM)
            end = random_end(b, epoch, u, end); /* listed as e = n_train */
        uint32_t len = sample_len(end, b->max_len, b->cloze);
        const uint32_t *it = b->d.items + b->d.start[u] + (end - len - (b->cloze ? 0 : 1));
        p->user[j] = u;
        p->uid[j] = b->d.user_id ? b->d.user_id[u] : u;
        int o = T;
        for (uint32_t t = 0; t < len; t++) {
            p->ids[o + (int)t] = (int)it[t];
            p->pos[o + (int)t] = b->max_len - (int)len + (int)t;
        }
        T += (int)len;
        p->off[j + 1] = T;
        int n0 = n;
        if (b->smp_on)
            b->smp_first[j] = n0;
        if (b->cloze) {
            mask_window(b, p, o, len, it, epoch, u, end, &n);
        } else { /* the trained positions of this sample, oldest first */
            for (uint32_t t = first_trained(b, end, len); t < len; t++) {
                p->rows[n] = o + (int)t;
                p->targets[n] = (int)it[t + 1];
                n++;
            }
        }
        if (K > 0)
            sample_negatives(b, p, epoch, u, end, n0, n);
    }
    if (b->smp_on) {
        b->smp_first[B] = n;
        sampler_finish(b, p, epoch, i, B, n);
    }
    if (b->views == 3) {
        p->n_first = n;
        put_cl_views(b, p, epoch, first, B, &T);
    }
    p->B = b->views == 3 ? 3 * B : B;
    p->T = T;
    p->n = n;
    return p;
}

int sq_packed_one(sq_packed *pb, int *ints, const uint32_t *hist, uint32_t n, int max_len,
                  uint32_t n_items, sq_err *e)
{
    uint32_t N = (uint32_t)max_len, len = n < N ? n : N;
    const uint32_t *it = hist + (n - len);
    int T = len ? (int)len : 1;
    *pb = (sq_packed){.B = 1, .T = T, .n = 1, .ids = ints, .pos = ints + N,
                      .off = ints + 2 * N};
    pb->rows = pb->off + 2;
    pb->ids[0] = 0;
    for (uint32_t t = 0; t < len; t++) {
        if (it[t] > n_items || it[t] == 0)
            return sq_fail(e, SQ_EX_DATA, "item %" PRIu32 " out of 1..n_items %" PRIu32, it[t],
                           n_items);
        pb->ids[t] = (int)it[t];
    }
    for (int t = 0; t < T; t++)
        pb->pos[t] = (int)N - T + t;
    pb->off[0] = 0;
    pb->off[1] = T;
    pb->rows[0] = T - 1;
    return 0;
}

/* The first entry of b on a row >= r (entries in row order). */
static int first_entry_at(const sq_packed *b, int r)
{
    if (!b->rows)
        return r;
    int lo = 0, hi = b->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (b->rows[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int sq_packed_split(const sq_packed *b, int P, sq_packed *parts, int *buf, size_t cap)
{
    if (b->views > 1 || P < 1 || (size_t)b->B + (size_t)P + (size_t)b->n > cap)
        return 0;
    for (int i = 1; b->rows && i < b->n; i++)
        if (b->rows[i] < b->rows[i - 1])
            return 0;
    int np = 0, b0 = 0;
    for (int k = 0; k < P && b0 < b->B; k++) {
        /* the first sequence of the next part: rows reach (k + 1) T / P */
        long goal = (long)b->T * (k + 1) / P;
        int b1 = b0 + 1;
        while (k < P - 1 && b1 < b->B && b->off[b1] < goal)
            b1++;
        /* the nearer boundary: first-past-the-goal gave part 0 half a
         * sequence more than its share on average */
        if (k < P - 1 && b1 - 1 > b0 && goal - b->off[b1 - 1] < b->off[b1] - goal)
            b1--;
        if (k == P - 1)
            b1 = b->B;
        int r0 = b->off[b0], e0 = first_entry_at(b, r0), e1 = first_entry_at(b, b->off[b1]);
        sq_packed *q = &parts[np++];
        *q = *b;
        q->B = b1 - b0;
        q->T = b->off[b1] - r0;
        q->ids = b->ids + r0;
        q->pos = b->pos + r0;
        q->user = b->user ? b->user + b0 : NULL;
        q->uid = b->uid ? b->uid + b0 : NULL;
        q->off = buf;
        for (int i = 0; i <= q->B; i++)
            q->off[i] = b->off[b0 + i] - r0;
        buf += q->B + 1;
        q->n = e1 - e0;
        q->targets = b->targets + e0;
        q->neg = b->neg ? b->neg + (size_t)e0 * b->K : NULL;
        q->lq = b->lq ? b->lq + (size_t)e0 * b->K : NULL;
        if (b->rows) {
            q->rows = buf;
            for (int i = 0; i < q->n; i++)
                q->rows[i] = b->rows[e0 + i] - r0;
            buf += q->n;
        }
        q->n_first = 0;
        b0 = b1;
    }
    return np;
}

/* ---- padding to a CUDA graph's bucket ---- */

static int round_up(int x, int q)
{
    return (x + q - 1) / q * q;
}

int sq_packed_pad_init(sq_packed_pad *pp, int cap_T, int cap_B, int q, int max_len, int K,
                       sq_err *e)
{
    memset(pp, 0, sizeof *pp);
    if (q < 1 || cap_T < 0 || cap_B < 0 || max_len < 2 || K < 0)
        return sq_fail(e, SQ_EX_SOFTWARE, "padding: bad capacity");
    /* segs sequences of at most max_len hold the most padding, q + segs - 1
     * rows (T + segs rounded up to q) */
    pp->q = q;
    pp->segs = (q - 1 + max_len - 2) / (max_len - 1);
    if (pp->segs < 1)
        pp->segs = 1;
    pp->max_len = max_len;
    pp->cap_T = round_up(cap_T + pp->segs, q);
    pp->cap_n = round_up(cap_T, q) + q; /* two views: each view's entries rounded */
    pp->cap_B = cap_B + pp->segs;
    pp->K = K;
    size_t T = (size_t)pp->cap_T, n = (size_t)pp->cap_n, B = (size_t)pp->cap_B;
    size_t ints = 2 * T + (B + 1) + 2 * n + n * (size_t)K, u32 = 2 * B;
    pp->mem = calloc(ints * sizeof(int) + u32 * sizeof(uint32_t) + n * (size_t)K * sizeof(float),
                     1);
    if (!pp->mem)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for padded batches");
    int *p = pp->mem;
    pp->pb.ids = p;
    pp->pb.pos = p + T;
    pp->pb.off = p + 2 * T;
    pp->pb.rows = pp->pb.off + B + 1;
    pp->pb.targets = pp->pb.rows + n;
    pp->pb.neg = K ? pp->pb.targets + n : NULL;
    pp->pb.user = (uint32_t *)(pp->pb.targets + n + n * (size_t)K);
    pp->pb.uid = pp->pb.user + B;
    pp->pb.lq = K ? (float *)(pp->pb.uid + B) : NULL; /* a sampled loss's corrections */
    return 0;
}

void sq_packed_pad_free(sq_packed_pad *pp)
{
    free(pp->mem);
    memset(pp, 0, sizeof *pp);
}

/* The padding rows [T0, T) as pp->segs sequences from sequence B0 on, as
 * even as can be (each 1..max_len rows), positions right-aligned */
static void pad_rows(sq_packed_pad *pp, sq_packed *o, int T0, int T, int B0, uint32_t user,
                     uint32_t uid)
{
    int pad = T - T0, S = pp->segs, at = T0;
    for (int j = 0; j < S; j++) {
        int len = pad / S + (j < pad % S);
        for (int t = 0; t < len; t++) {
            o->ids[at + t] = 0;
            o->pos[at + t] = pp->max_len - len + t;
        }
        o->user[B0 + j] = user;
        o->uid[B0 + j] = uid;
        at += len;
        o->off[B0 + j + 1] = at;
    }
}

/* Entries [e0, e1) of b at o's entries from `at` on, then padding entries
 * (target 0, no negatives, on padding row r) up to `to`; returns `to` */
static int pad_entries(sq_packed *o, const sq_packed *b, int e0, int e1, int at, int to, int r)
{
    size_t K = (size_t)b->K, m = (size_t)(e1 - e0);
    memcpy(o->rows + at, b->rows + e0, m * sizeof *o->rows);
    memcpy(o->targets + at, b->targets + e0, m * sizeof *o->targets);
    for (int i = at + (int)m; i < to; i++) {
        o->rows[i] = r;
        o->targets[i] = 0;
    }
    if (K) {
        memcpy(o->neg + (size_t)at * K, b->neg + (size_t)e0 * K, m * K * sizeof *o->neg);
        memset(o->neg + (at + m) * K, 0, ((size_t)to - at - m) * K * sizeof *o->neg);
    }
    if (K && b->lq && o->lq) { /* the padding entries' corrections 0 (no target: never read) */
        memcpy(o->lq + (size_t)at * K, b->lq + (size_t)e0 * K, m * K * sizeof *o->lq);
        memset(o->lq + (at + m) * K, 0, ((size_t)to - at - m) * K * sizeof *o->lq);
    }
    return to;
}

const sq_packed *sq_packed_pad_to(sq_packed_pad *pp, const sq_packed *b, sq_err *e)
{
    /* two views: each view's entries padded on their own (its loss is
     * computed on its own); one view or three (CONTRASTIVE VIEWS, whose
     * entries are the samples'): the entries at once */
    int two = b->views == 2, n1 = two ? round_up(b->n_first, pp->q) : 0;
    int T = round_up(b->T + pp->segs, pp->q), n = n1 + round_up(b->n - (two ? b->n_first : 0),
                                                                pp->q);
    int B = b->B + pp->segs;
    if (b->K != pp->K || !b->rows || b->pad_seqs) {
        sq_fail(e, SQ_EX_SOFTWARE, "padding: a batch of negatives of another K, no rows or "
                "padded already");
        return NULL;
    }
    if (T > pp->cap_T || n > pp->cap_n || B > pp->cap_B) {
        sq_fail(e, SQ_EX_SOFTWARE, "padding: a batch of %d rows, %d entries and %d sequences "
                "over the capacity", b->T, b->n, b->B);
        return NULL;
    }
    sq_packed *o = &pp->pb;
    o->lq = b->lq && pp->K ? (float *)(o->uid + pp->cap_B) : NULL; /* pad_entries fills it */
    memcpy(o->ids, b->ids, (size_t)b->T * sizeof *o->ids);
    memcpy(o->pos, b->pos, (size_t)b->T * sizeof *o->pos);
    memcpy(o->off, b->off, ((size_t)b->B + 1) * sizeof *o->off);
    memcpy(o->user, b->user, (size_t)b->B * sizeof *o->user);
    memcpy(o->uid, b->uid, (size_t)b->B * sizeof *o->uid);
    pad_rows(pp, o, b->T, T, b->B, b->B ? b->user[0] : 0, b->B ? b->uid[0] : 0);
    /* the padding entries on the first padding row */
    int at = two ? pad_entries(o, b, 0, b->n_first, 0, n1, b->T) : 0;
    pad_entries(o, b, two ? b->n_first : 0, b->n, at, n, b->T);
    o->B = B;
    o->T = T;
    o->n = n;
    o->K = b->K;
    /* a sequence's entries carry copies of its set (sampler_finish): as
     * their own, the loss is one op call, not one a sequence */
    o->neg_share = b->neg_share == SQ_SHARE_SEQUENCE ? SQ_SHARE_POSITION : b->neg_share;
    o->views = b->views;
    o->n_first = two ? n1 : b->views == 3 ? n : b->n_first;
    o->pad_seqs = pp->segs;
    return o;
}
