/* batch.h - training samples and packed batches (the batch builder).
 *
 * SAMPLES. The training part of user u is items[0, n_train). A sample is a
 * pair (u, e), 2 <= e <= n_train: the slice items[s, e) with
 * s = max(0, e - 1 - max_len) gives the inputs items[s, e-1) (len = e-1-s,
 * at most max_len) and the targets items[s+1, e), so input t predicts the
 * item that follows it.
 *   SQ_TARGET_ALL   one sample per user with n_train >= 2, e = n_train; every
 *                   position is trained (SASRec, FPARec's `training_target
 *                   all`): one pass per user and epoch.
 *   SQ_TARGET_WINDOWS the samples e = n_train, n_train - max_len,
 *                   n_train - 2 max_len, ... (e >= 2): windows that tile the
 *                   training part, every position trained (as
 *                   SQ_TARGET_ALL). Every target of the user is trained once
 *                   an epoch, as with SQ_TARGET_LAST, at the cost of about
 *                   one input row per target instead of a whole prefix per
 *                   target; a target near a window's start sees the history
 *                   from that start only (fewer than max_len items), where
 *                   its prefix sample would see max_len. For users of at
 *                   most max_len + 1 training items it is SQ_TARGET_ALL.
 *                   (Cloze: windows items[e - max_len, e) for e = n_train,
 *                   n_train - max_len, ..., e >= 1.)
 *                   With a stride S < max_len (sq_batcher_init_stride,
 *                   --window-stride) the ends step back by S instead:
 *                   e = n_train, n_train - S, ... (e >= 2), overlapping
 *                   windows of which each trains only its newest S
 *                   positions (targets items[e - S, e)) and the oldest one
 *                   every position. Every target is still trained once an
 *                   epoch, now with a history of at least max_len - S + 1
 *                   items where it has that many (RecBole's prefix sample
 *                   has max_len), for about max_len / S input rows per
 *                   target; S = 1 gives every target its whole prefix
 *                   window. S = max_len is the tiling above.
 *   SQ_TARGET_LAST  one sample per prefix, e = 2 .. n_train; only the last
 *                   position of a sample is trained (RecBole's prefix
 *                   augmentation, used by LinRec's published numbers).
 *   SQ_TARGET_RANDOM one sample per user with n_train >= 2 (listed with
 *                   e = n_train, as SQ_TARGET_ALL) whose end is drawn anew
 *                   when it is packed: e uniform in 2 .. n_train from a
 *                   generator seeded by (seed, epoch, user), independent of
 *                   batching and thread count; only the last position of
 *                   that prefix is trained (as SQ_TARGET_LAST). An epoch
 *                   costs one prefix per user, and over the epochs every
 *                   prefix is drawn. The capacity bounds of e = n_train
 *                   bound every prefix; negatives and cloze masks are those
 *                   of the drawn sample (u, e).
 *
 * EPOCHS AND BATCHES. Each epoch shuffles the samples with a generator seeded
 * by (seed, epoch) alone; batch i takes samples order[i*B .. i*B+B-1] and
 * packs their inputs with no padding rows (ops.h: PACKED LAYOUT), positions
 * max_len - len + t (the newest input sits at max_len - 1). Nothing depends
 * on state carried from an earlier epoch, so a run resumed at an epoch
 * boundary draws exactly what the uninterrupted run draws.
 *
 * NEGATIVES (--loss bce). Every trained position gets K negatives drawn
 * uniformly from the items NOT in the user's training part (original
 * SASRec's random_neq over the training set), from a generator seeded by
 * (seed, epoch, user, e): they do not depend on batching or thread count.
 * A user whose training part holds every item gets no negatives (0).
 *
 * CLOZE (BERT4Rec's masked-item task, sq_batcher_init_cloze). Sample (u, e)
 * is the window items[s, e), s = max(0, e - max_len): all len = e - s items
 * are inputs (no shift). Each non-padding item of the window is replaced by
 * the mask token with probability mask_prob; when none is drawn, one
 * non-padding position chosen uniformly is masked, so every sequence trains
 * at least once. The masked rows are the loss entries, each predicting the
 * item it hides. The draws come from a generator seeded by (seed, epoch,
 * user, e), so they do not depend on batching or thread count and a new
 * epoch masks anew. SQ_TARGET_ALL gives one window per user (the newest
 * max_len training items), SQ_TARGET_LAST every prefix e = 2 .. n_train
 * (RecBole's sequential samples, each masked), SQ_TARGET_RANDOM one window
 * per user ending at the drawn e.
 *
 * VIEWS (Blin's two views of a user, sq_batcher_init_views). One sample per
 * user with n_train >= 2 (e = n_train, always SQ_TARGET_ALL); a batch of B'
 * samples packs 2 B' sequences: [0, B') the first views of its users and
 * [B', 2B') their second views in the same order (pb.views = 2). Sample
 * (u, e) is the next-item pairs of inputs items[s, e-1) and targets
 * items[s+1, e) (len <= max_len), and a view is
 *   SQ_VIEW_RANDOMPAD  RandomPad (pad.h, Blin eq. 4) of the inputs and of
 *                      the targets with the same alpha: the row
 *                      [S_in 0 S_in ... 0 S_in] over [S_tg 0 S_tg ... 0 S_tg],
 *                      so every copy is the whole sample and a separator row
 *                      (id 0) has no target; positions as seqrec-pad writes
 *                      them (the newest input at max_len - 1);
 *   SQ_VIEW_CROP       a random run of max(1, floor(eta len)) consecutive
 *                      pairs (CL4SRec's item crop; Blin-ZC), zero-padded.
 * Every row with a target is a loss entry, oldest first; entries [0,
 * pb.n_first) belong to the first views. A view's draws (alpha or the crop's
 * start) and, with K > 0, its negatives come from a generator seeded by
 * (seed, epoch, user, view): fresh views every epoch, independent of
 * batching and thread count.
 *
 * CONTRASTIVE VIEWS (CL4SRec, sq_batcher_init_cl). The samples, their loss
 * entries and negatives are exactly those of sq_batcher_init (any mode);
 * a batch of B' samples packs 3 B' sequences: [0, B') the samples as
 * sq_batcher_init packs them (every loss entry is theirs: pb.n_first =
 * pb.n), then [B', 2B') and [2B', 3B') two augmented views of each
 * sample's inputs, in the same order, with no loss entries (pb.views = 3).
 * Each view draws its kind uniformly among
 *   SQ_VIEW_CROP     a random run of max(1, floor(crop len)) items;
 *   SQ_VIEW_MASK     floor(mask len) positions, chosen without
 *                    replacement, become mask_id;
 *   SQ_VIEW_REORDER  a random run of floor(reorder len) items is shuffled
 *                    (Fisher-Yates);
 * right-aligned like every sequence (the newest at max_len - 1). The draws
 * of view v (kind, start, positions, permutation) come from a generator
 * seeded by (seed, epoch, user, e, v): fresh every epoch, independent of
 * batching and thread count. */
#ifndef SQ_BATCH_H
#define SQ_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sampler.h"

enum sq_target_mode {
    SQ_TARGET_ALL = 0,
    SQ_TARGET_LAST = 1,
    SQ_TARGET_RANDOM = 2,
    SQ_TARGET_WINDOWS = 3
};

/* "all" / "last" / "random" / "windows"; parse returns -1 for an unknown
 * name. */
const char *sq_target_name(int mode);
int sq_target_parse(const char *name);
/* Whether mode trains every position of a sample (all, windows) rather
 * than its last one (last, random). */
static inline int sq_target_every_position(int mode)
{
    return mode == SQ_TARGET_ALL || mode == SQ_TARGET_WINDOWS;
}

/* The training sequences the builder reads (borrowed, not copied). */
typedef struct {
    uint32_t n_users;
    uint32_t n_items;
    const uint32_t *items;   /* every user's items, concatenated */
    const uint64_t *start;   /* user u's items start at items[start[u]] */
    const uint32_t *n_train; /* [n_users] length of the training part */
    const uint32_t *user_id; /* [n_users] the stream's user id of each (NULL:
                                the index) */
} sq_seqs;

/* One packed batch, the input of a model step (ops.h layouts). */
typedef struct {
    int B, T;        /* sequences, token rows */
    int *ids;        /* [T] input item ids (1..n_items; 0 = padding token) */
    int *off;        /* [B+1] row offsets, off[B] = T */
    int *pos;        /* [T] learned-position index, 0..max_len-1 */
    uint32_t *user;  /* [B] user index of each sequence (in sq_seqs) */
    uint32_t *uid;   /* [B] its user id (sq_seqs.user_id) */
    int n;           /* loss entries */
    int *rows;       /* [n] row of entry i; NULL: entry i is row i (n = T) */
    int *targets;    /* [n] the item to predict (0 = none) */
    int K;           /* negatives per entry (0 for --loss ce) */
    int *neg;        /* [n * K] negative items, 0 = none; NULL when K = 0 */
    float *lq;       /* [n * K] a sampled loss's log(K Q) of each negative
                        (sampler.h), NULL for SASRec's BCE negatives */
    int neg_share;   /* SQ_SHARE_* (sampler.h): sequence, every entry of a
                        sample has its first entry's K negatives and lq;
                        batch, every entry entry 0's */
    int views;       /* 1, or 2 (VIEWS: sequences [0, B/2) are first views),
                        or 3 (CONTRASTIVE VIEWS: [0, B/3) the samples) */
    int n_first;     /* VIEWS: entries [0, n_first) are the first views' */
    int pad_seqs;    /* sequences of padding after the views' (sq_packed_pad_to;
                        0 otherwise): a view holds (B - pad_seqs) / views */
} sq_packed;

enum sq_view_kind {
    SQ_VIEW_RANDOMPAD = 0, SQ_VIEW_CROP = 1, SQ_VIEW_MASK = 2, SQ_VIEW_REORDER = 3
};

/* The augmentations of CONTRASTIVE VIEWS: crop keeps floor(crop len)
 * items, mask masks floor(mask len), reorder shuffles floor(reorder len);
 * each ratio in [0, 1] (crop in (0, 1]). */
typedef struct {
    double crop, mask, reorder;
    int mask_id;
} sq_augment;

typedef struct {
    sq_seqs d;
    int mode, max_len, batch, K;
    int stride;          /* windows: items between window ends (max_len) */
    int cloze;           /* CLOZE samples */
    double mask_prob;    /* cloze: probability to mask an item */
    int mask_id;         /* cloze: the mask token's id */
    int views;           /* 2: VIEWS samples (1 otherwise) */
    int view_kind;       /* VIEWS: SQ_VIEW_RANDOMPAD or SQ_VIEW_CROP */
    double crop_eta;     /* VIEWS, crop: the kept fraction */
    sq_augment aug;      /* CONTRASTIVE VIEWS */
    uint32_t *padrow;    /* VIEWS: two rows of max_len for RandomPad */
    uint64_t seed;
    uint64_t n_samples;
    uint64_t *samples;   /* (u << 32) | e, in user order */
    uint64_t *order;     /* this epoch's permutation of samples */
    uint32_t *sorted;    /* every user's training items, sorted (negatives) */
    uint32_t *distinct;  /* [n_users] distinct training items (negatives) */
    uint64_t *seen;      /* [n_items / 64 + 1] bits: a user's items while it
                            draws negatives, else all zero */
    sq_sampler smp;      /* sq_batcher_sampled's negatives (smp_on) */
    int smp_on, smp_v;
    int smp_share;       /* --neg-share: SQ_SHARE_* (sampler.h) */
    int *smp_first;      /* [batch + 1] each sample's first entry (sequence) */
    void *smp_mem;       /* their neg and lq arrays */
    int cap_T;           /* most token rows in one batch (bound) */
    size_t cap_att;      /* most sum(len^2) in one batch (bound) */
    void *mem;           /* one block for the packed batch's arrays */
    sq_packed pb;
} sq_batcher;

/* Lists the samples of d (users with n_train >= 2) and allocates a batch of
 * `batch` samples; K > 0 prepares negative sampling. SQ_EX_USAGE for an
 * unknown mode, SQ_EX_DATA when there is no sample at all, SQ_EX_OSERR when
 * out of memory. */
int sq_batcher_init(sq_batcher *b, const sq_seqs *d, int mode, int max_len,
                    int batch, int K, uint64_t seed, sq_err *e);
/* The same with windows `stride` items apart (SQ_TARGET_WINDOWS, 1 <=
 * stride <= max_len; 0: max_len, as sq_batcher_init). SQ_EX_USAGE for a
 * stride with another mode or out of range. */
int sq_batcher_init_stride(sq_batcher *b, const sq_seqs *d, int mode, int stride,
                           int max_len, int batch, int K, uint64_t seed, sq_err *e);
/* The same for CLOZE samples: masked items become mask_id; 0 < mask_prob
 * <= 1. */
int sq_batcher_init_cloze(sq_batcher *b, const sq_seqs *d, int mode, int max_len,
                          int batch, double mask_prob, int mask_id, uint64_t seed,
                          sq_err *e);
/* The same for VIEWS samples (two views per user; K > 0: negatives per
 * entry as above); 0 < crop_eta <= 1 for SQ_VIEW_CROP. */
int sq_batcher_init_views(sq_batcher *b, const sq_seqs *d, int view_kind, double crop_eta,
                          int max_len, int batch, int K, uint64_t seed, sq_err *e);
/* The same for CONTRASTIVE VIEWS: the samples of sq_batcher_init (mode,
 * K) and two augmented views of each; SQ_EX_USAGE for a ratio out of range. */
int sq_batcher_init_cl(sq_batcher *b, const sq_seqs *d, int mode, int max_len, int batch,
                       int K, const sq_augment *aug, uint64_t seed, sq_err *e);
/* Gives the samples of a builder made with K = 0 (any init but VIEWS) K
 * negatives per loss entry from the sampler v (the packed --neg-sampler,
 * sampler.h) with their log-Q corrections in pb.lq, for the sampled
 * softmax and gBCE: drawn for each sample from its generator (seed, epoch,
 * user, end), in-batch slots from one of (seed, epoch, batch). share
 * (--neg-share, SQ_SHARE_*): position, K for every entry; sequence, K for
 * each sample (its first entry's draws, in-batch slots drawn for each
 * sample in order) copied to its entries; batch, one set of K drawn from
 * the generator of (seed, epoch, batch) for every entry (TensorFlow's
 * sampled_softmax_loss). A step then touches up to n K, B K or K rows of
 * the item table. SQ_EX_USAGE for K out of 1..n_items - 1 or in-batch
 * slots not below --batch (a full batch holds at least `batch` targets),
 * SQ_EX_OSERR. */
int sq_batcher_sampled(sq_batcher *b, int v, int K, int share, sq_err *e);
void sq_batcher_free(sq_batcher *b);

/* Number of batches of an epoch: ceil(n_samples / batch). */
uint64_t sq_batcher_n_batches(const sq_batcher *b);

/* Shuffles the samples for epoch `epoch` (0-based). */
void sq_batcher_shuffle(sq_batcher *b, uint64_t epoch);

/* Packs batch i of the current epoch into b->pb and returns it. */
const sq_packed *sq_batcher_get(sq_batcher *b, uint64_t epoch, uint64_t i);

/* Cuts b into at most P parts by sequence, for data-parallel micro-batches
 * (lib/train/micro.c): part k has the sequences [b_k, b_(k+1)), the token
 * rows off[b_k] .. and the loss entries on those rows, with about T / P
 * rows each: a part has at most ceil(T / P) + 1.5 L rows, L the longest
 * sequence (each cut is the sequence boundary nearer its goal k T / P), and
 * micro.c sizes the workers' buffers by that. The parts point into b, but
 * for their offsets and rows,
 * rebased to start at 0, which go to buf (cap ints, enough with B + P + n).
 * Returns the number of parts, or 0 when b cannot be cut: views packed
 * together (views > 1: their loss pairs sequences), loss entries not in
 * row order, or buf too small. */
int sq_packed_split(const sq_packed *b, int P, sq_packed *parts, int *buf, size_t cap);

/* A packed batch padded to a CUDA graph's bucket (train.c, --cuda-graphs):
 * `segs` more sequences (after every view's) of padding tokens (id 0, positions right-aligned
 * as a history's, each at least one token and at most max_len) bring the
 * rows to a multiple of q, and padding entries (target 0: no loss, on the
 * first padding row, no negatives) bring the entries to a multiple of q
 * at or above n.
 * Nothing of the batch's own sequences changes, and no op's sum over them
 * sees a padding row but as a zero (the padding sequences have no target;
 * their rows attend only to their own). segs is fixed, so that a bucket's
 * batches have one shape: rows, entries and sequences. */
typedef struct {
    sq_packed pb;
    int q, segs, max_len, cap_T, cap_n, cap_B, K;
    void *mem;
} sq_packed_pad;

/* Buffers for batches of at most cap_T rows and entries and cap_B
 * sequences of at most max_len (>= 2) rows, K negatives an entry, padded
 * in steps of q (>= 1). SQ_EX_OSERR when out of memory. */
int sq_packed_pad_init(sq_packed_pad *pp, int cap_T, int cap_B, int q, int max_len, int K,
                       sq_err *e);
void sq_packed_pad_free(sq_packed_pad *pp);
/* b padded into pp->pb, which it returns; NULL (SQ_EX_SOFTWARE in e) for a
 * batch of negatives of another K, or over the capacity. A sampled loss's
 * log-Q corrections (lq) are padded with the negatives (0 for the padding
 * entries, which have no target); negatives shared by sequence become the
 * entries' own (their copies), so that the loss is one op call, whatever
 * the batch's sequences (the same loss, other roundings). A batch of views keeps its views' sequences in place,
 * the padding sequences after them (pad_seqs), and with two views each
 * view's entries padded on their own (n_first a multiple of q too). */
const sq_packed *sq_packed_pad_to(sq_packed_pad *pp, const sq_packed *b, sq_err *e);

/* The scoring input of one history hist[0..n): its newest max_len items as a
 * packed batch of one sequence, positions ending at max_len - 1, its newest
 * row the one entry (an empty history: one padding token, id 0). ints holds
 * ids, pos [max_len], off [2], rows [1]: 2 max_len + 3 entries; the other
 * fields of pb are 0. SQ_EX_DATA on an item outside 1..n_items. */
int sq_packed_one(sq_packed *pb, int *ints, const uint32_t *hist, uint32_t n, int max_len,
                  uint32_t n_items, sq_err *e);

#endif
