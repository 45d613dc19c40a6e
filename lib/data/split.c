/* split.c - cut points of one user's sequence (see split.h). */
#include "split.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cli.h"

sq_cut sq_split_loo(uint32_t len)
{
    sq_cut c = {len, 0, 0};
    if (len < SQ_LOO_MIN_LEN) {
        c.is_short = 1; /* kept for training only (or dropped by the caller) */
        return c;
    }
    c.n_train = len - 2;
    c.n_valid = 1;
    return c;
}

sq_cut sq_split_ratio(uint32_t len, const double *ratio, int n_ratio)
{
    /* RecBole 1.x Dataset._calcu_split_ids, verbatim in C: int() truncates,
     * so the double products are truncated the same way here. */
    uint32_t cnt[3] = {0, 0, 0};
    uint64_t rest = 0;
    for (int i = 1; i < n_ratio; i++) {
        cnt[i] = (uint32_t)(ratio[i] * (double)len);
        rest += cnt[i];
    }
    if (rest > len) { /* only float slop can get here; never go negative */
        cnt[n_ratio - 1] -= (uint32_t)(rest - len);
        rest = len;
    }
    cnt[0] = len - (uint32_t)rest;
    /* "make sure every part is not empty": test first, then validation. */
    for (int i = 1; i < n_ratio; i++) {
        int part = n_ratio - i;
        if (cnt[0] <= 1)
            break;
        double want = ratio[part] * (double)len;
        if (want > 0 && want < 1) {
            cnt[part]++;
            cnt[0]--;
        }
    }
    sq_cut c = {cnt[0], n_ratio == 3 ? cnt[1] : 0, 0};
    c.is_short = len > 0 && c.n_train == len; /* no held-out item */
    return c;
}

uint32_t sq_split_time(const int64_t *ts, uint32_t len, int64_t t1, int64_t t2,
                       int has_t2, sq_cut *c)
{
    for (uint32_t i = 1; i < len; i++)
        if (ts[i] < ts[i - 1])
            return i;
    uint32_t a = 0, b;
    while (a < len && ts[a] < t1)
        a++;
    b = a;
    if (has_t2)
        while (b < len && ts[b] < t2)
            b++;
    c->n_train = a;
    c->n_valid = b - a;
    /* A user seen only after the cut has no history to predict from. */
    c->is_short = len > 0 && a == 0;
    return 0;
}

int sq_split_holdout_has(uint32_t user, double frac, uint64_t seed)
{
    unsigned char b[4] = {(unsigned char)user, (unsigned char)(user >> 8),
                          (unsigned char)(user >> 16), (unsigned char)(user >> 24)};
    uint64_t h = XXH3_64bits_withSeed(b, sizeof b, seed);
    return (double)(h >> 11) * 0x1p-53 < frac;
}

sq_cut sq_split_holdout(uint32_t user, uint32_t len, double frac, uint64_t seed)
{
    sq_cut c = {len, 0, 0};
    if (!sq_split_holdout_has(user, frac, seed))
        return c; /* the whole sequence trains */
    if (len < 2) {
        c.is_short = 1; /* nothing before the target: kept for training only */
        return c;
    }
    c.n_train = len - 1;
    c.n_valid = 1;
    return c;
}

int sq_split_record(const sq_split_opts *o, const sq_record *rec, const char *name,
                    sq_cut *c, sq_err *e)
{
    switch (o->mode) {
    case SQ_SPLIT_LOO:
        *c = sq_split_loo(rec->len);
        return 0;
    case SQ_SPLIT_RATIO:
        *c = sq_split_ratio(rec->len, o->ratio, o->n_ratio);
        return 0;
    case SQ_SPLIT_TIME:
        if (!rec->ts && rec->len)
            return sq_fail(e, SQ_EX_DATA, "%s: user %u: no timestamps for --time", name,
                           rec->user);
        uint32_t bad = sq_split_time(rec->ts, rec->len, o->t1, o->t2, o->has_t2, c);
        if (bad)
            return sq_fail(e, SQ_EX_DATA,
                           "%s: user %u: timestamps out of order at item %u "
                           "(%" PRId64 " after %" PRId64 "); a temporal cut needs "
                           "time-ordered sequences", name, rec->user, bad,
                           rec->ts[bad], rec->ts[bad - 1]);
        return 0;
    case SQ_SPLIT_HOLDOUT:
        *c = sq_split_holdout(rec->user, rec->len, o->holdout, o->seed);
        return 0;
    }
    return sq_fail(e, SQ_EX_SOFTWARE, "unknown split mode %d", (int)o->mode);
}

/* Strict strtod: the whole string must be one finite number. */
static int parse_double(const char *s, const char *end, double *v)
{
    char buf[64];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *stop;
    errno = 0;
    *v = strtod(buf, &stop);
    return (*stop || errno || !isfinite(*v)) ? -1 : 0;
}

int sq_split_parse_ratio(sq_split_opts *o, const char *s, sq_err *e)
{
    double r[4];
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (n == 4 || parse_double(p, end, &r[n]) || r[n] < 0)
            return sq_fail(e, SQ_EX_USAGE, "--ratio '%s': expected TRAIN,VALID,TEST "
                           "(or TRAIN,TEST) as non-negative numbers", s);
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (n < 2 || n > 3)
        return sq_fail(e, SQ_EX_USAGE, "--ratio '%s': expected 2 or 3 parts, got %d", s, n);
    if (r[0] <= 0)
        return sq_fail(e, SQ_EX_USAGE, "--ratio '%s': the train part must be positive", s);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += r[i];
    if (fabs(sum - 1.0) > 1e-6)
        return sq_fail(e, SQ_EX_USAGE, "--ratio '%s': parts sum to %g, not 1", s, sum);
    /* RecBole normalises by the sum; doing the same keeps the rounding
     * identical for sums like 0.7+0.2+0.1 = 0.9999999999999999. */
    for (int i = 0; i < n; i++)
        o->ratio[i] = r[i] / sum;
    if (n == 2)
        o->ratio[2] = 0;
    o->n_ratio = n;
    o->text = s;
    o->mode = SQ_SPLIT_RATIO;
    return 0;
}

static int parse_i64(const char *s, const char *end, int64_t *v)
{
    char buf[32];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *stop;
    errno = 0;
    long long x = strtoll(buf, &stop, 10);
    if (*stop || errno)
        return -1;
    *v = x;
    return 0;
}

int sq_split_parse_time(sq_split_opts *o, const char *s, sq_err *e)
{
    const char *comma = strchr(s, ',');
    const char *end1 = comma ? comma : s + strlen(s);
    if (parse_i64(s, end1, &o->t1) ||
        (comma && parse_i64(comma + 1, comma + 1 + strlen(comma + 1), &o->t2)))
        return sq_fail(e, SQ_EX_USAGE, "--time '%s': expected T or T1,T2 as integer "
                       "timestamps (the stream's unit, seconds from preprocess)", s);
    o->has_t2 = comma != NULL;
    if (o->has_t2 && o->t2 <= o->t1)
        return sq_fail(e, SQ_EX_USAGE, "--time '%s': T2 must be later than T1", s);
    o->text = s;
    o->mode = SQ_SPLIT_TIME;
    return 0;
}

int sq_split_parse_holdout(sq_split_opts *o, const char *s, sq_err *e)
{
    double f;
    if (parse_double(s, s + strlen(s), &f) || !(f > 0 && f < 1))
        return sq_fail(e, SQ_EX_USAGE, "--holdout-users '%s': expected a fraction F of the "
                       "users with 0 < F < 1 (e.g. 0.05)", s);
    o->holdout = f;
    o->text = s;
    o->mode = SQ_SPLIT_HOLDOUT;
    return 0;
}

int sq_split_parse_seed(sq_split_opts *o, const char *s, sq_err *e)
{
    if (sq_cli_u64(s, 0, UINT64_MAX, &o->seed))
        return sq_fail(e, SQ_EX_USAGE, "--seed '%s': expected an integer from 0 to "
                       "18446744073709551615", s);
    return 0;
}

const char *sq_split_mode_name(enum sq_split_mode m)
{
    switch (m) {
    case SQ_SPLIT_LOO: return "leave-one-out";
    case SQ_SPLIT_RATIO: return "ratio";
    case SQ_SPLIT_TIME: return "time";
    case SQ_SPLIT_HOLDOUT: return "holdout-users";
    }
    return "?";
}

int sq_split_meta(sq_header *h, const sq_split_opts *o, int drop_short, sq_err *e)
{
    const char *text = o->text ? o->text : "?";
    if (sq_meta_add(h, e, "split.mode", "%s", sq_split_mode_name(o->mode)) ||
        (o->text && o->mode == SQ_SPLIT_RATIO && sq_meta_add(h, e, "split.ratio", "%s", text)) ||
        (o->text && o->mode == SQ_SPLIT_TIME && sq_meta_add(h, e, "split.time", "%s", text)) ||
        (o->mode == SQ_SPLIT_HOLDOUT &&
         (sq_meta_add(h, e, "split.holdout", "%s", text) ||
          sq_meta_add(h, e, "split.seed", "%" PRIu64, o->seed))) ||
        sq_meta_add(h, e, "split.short", "%s", drop_short ? "drop" : "train"))
        return e->code;
    return 0;
}
