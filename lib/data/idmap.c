/* idmap.c - fingerprints of id maps and the checks between maps, streams
 * and models (see idmap.h). */
#include "idmap.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kv.h"

int sq_idfp_compute(sq_id_at at, const void *ctx, uint32_t n, sq_idfp *fp, uint32_t *hole)
{
    memset(fp, 0, sizeof *fp);
    *hole = 0;
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return -1;
    XXH3_64bits_reset(st);
    for (uint32_t d = 1; d <= n; d++) {
        const char *s = at(ctx, d);
        if (!s) {
            *hole = d;
            XXH3_freeState(st);
            return 1;
        }
        XXH3_64bits_update(st, s, strlen(s));
        XXH3_64bits_update(st, "\n", 1);
    }
    fp->n = n;
    fp->hash = XXH3_64bits_digest(st);
    fp->has = 1;
    XXH3_freeState(st);
    return 0;
}

const char *sq_idfp_str(const sq_idfp *fp, char *buf, size_t n)
{
    if (fp->has)
        snprintf(buf, n, "%" PRIu32 ":%016" PRIx64, fp->n, fp->hash);
    else
        snprintf(buf, n, "none");
    return buf;
}

int sq_idfp_parse(const char *s, sq_idfp *fp)
{
    memset(fp, 0, sizeof *fp);
    const char *colon = strchr(s, ':');
    if (!colon || colon == s || colon - s > 10 || strlen(colon + 1) != 16)
        return -1;
    uint64_t n = 0, h = 0;
    for (const char *p = s; p < colon; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    for (const char *p = colon + 1; *p; p++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        h = h << 4 | (uint64_t)v;
    }
    if (n > UINT32_MAX)
        return -1;
    fp->n = (uint32_t)n;
    fp->hash = h;
    fp->has = 1;
    return 0;
}

void sq_mapfp_from_meta(const char *meta, const char *prefix, sq_mapfp *fp)
{
    char key[64], buf[64];
    memset(fp, 0, sizeof *fp);
    if (!meta)
        return;
    snprintf(key, sizeof key, "%s%s", prefix, SQ_MAPFP_USERS);
    if (sq_kv_get(meta, key, buf, sizeof buf))
        sq_idfp_parse(buf, &fp->user);
    snprintf(key, sizeof key, "%s%s", prefix, SQ_MAPFP_ITEMS);
    if (sq_kv_get(meta, key, buf, sizeof buf))
        sq_idfp_parse(buf, &fp->item);
    snprintf(key, sizeof key, "%spreprocess.items", prefix);
    fp->preprocessed = sq_kv_get(meta, key, buf, sizeof buf);
}

static const char *user_at(const void *ctx, uint32_t d)
{
    return sq_idmap_user(ctx, d);
}

static const char *item_at(const void *ctx, uint32_t d)
{
    return sq_idmap_item(ctx, d);
}

/* The fingerprint of the first n ids of a kind of a map (at(ctx, .), name
 * for messages): 65 for a hole. */
static int prefix_fp(sq_id_at at, const void *ctx, const char *name, int kind, uint32_t n,
                     sq_idfp *fp, sq_err *e)
{
    uint32_t hole;
    int rc = sq_idfp_compute(at, ctx, n, fp, &hole);
    if (rc < 0)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (rc)
        return sq_fail(e, SQ_EX_DATA, "%s: no %s %" PRIu32 " in the map (an id map has the "
                       "dense ids 1..N of each kind)", name, kind ? "item" : "user", hole);
    return 0;
}

int sq_mapfp_of_map(const sq_idmap *m, const char *name, sq_mapfp *fp, sq_err *e)
{
    memset(fp, 0, sizeof *fp);
    if (prefix_fp(user_at, m, name, 0, m->users, &fp->user, e) ||
        prefix_fp(item_at, m, name, 1, m->items, &fp->item, e))
        return e->code;
    fp->preprocessed = 1;
    return 0;
}

static const char *kind_word(int kind)
{
    return kind ? "items" : "users";
}

/* The warning of a check that could not be made. */
static void cannot_check(char *warn, size_t n, const char *map_name, const char *what,
                         const char *lacks)
{
    if (warn && n)
        snprintf(warn, n, "cannot check that %s is the id map of %s (or an extension of it): "
                 "%s has no id-map fingerprint (made before seqrec 0.2?)", map_name, what,
                 lacks);
}

/* The check of a map's n ids of a kind (their fingerprint: have) against
 * base; have_n: how many the map has. */
static int extends(const sq_idfp *have, uint32_t have_n, const char *map_name, int kind,
                   const sq_idfp *base, const char *role, const char *what, sq_err *e)
{
    char a[32], b[32];
    if (have_n < base->n)
        return sq_fail(e, SQ_EX_DATA, "%s is not the id map of %s, nor an extension of it: "
                       "it has %" PRIu32 " %s, the %s %" PRIu32 " (%s: %s)", map_name, what,
                       have_n, kind_word(kind), role, base->n, role,
                       sq_idfp_str(base, a, sizeof a));
    if (have->hash != base->hash)
        return sq_fail(e, SQ_EX_DATA, "%s is not the id map of %s, nor an extension of it: "
                       "its first %" PRIu32 " %s differ (%s: %s, map: %s)", map_name, what,
                       base->n, kind_word(kind), role, sq_idfp_str(base, a, sizeof a),
                       sq_idfp_str(have, b, sizeof b));
    return 0;
}

int sq_idfp_check_extends(sq_id_at at, const void *ctx, uint32_t have_n,
                          const char *map_name, int kind, const sq_idfp *base,
                          const char *role, const char *what, char *warn, size_t warn_n,
                          sq_err *e)
{
    if (!base->has) {
        cannot_check(warn, warn_n, map_name, what, what);
        return 0;
    }
    sq_idfp have = {0};
    if (have_n >= base->n && prefix_fp(at, ctx, map_name, kind, base->n, &have, e))
        return e->code;
    return extends(&have, have_n, map_name, kind, base, role, what, e);
}

int sq_idmap_check_extends(const sq_idmap *m, const char *map_name, int kind,
                           const sq_idfp *base, const char *role, const char *what,
                           char *warn, size_t warn_n, sq_err *e)
{
    return sq_idfp_check_extends(kind ? item_at : user_at, m, kind ? m->items : m->users,
                                 map_name, kind, base, role, what, warn, warn_n, e);
}

int sq_mapfp_check_same(const sq_mapfp *map, const char *map_name, const sq_mapfp *stream,
                        const char *stream_name, char *warn, size_t warn_n, sq_err *e)
{
    char a[32], b[32];
    if (!stream->user.has || !stream->item.has) {
        cannot_check(warn, warn_n, map_name, stream_name, stream_name);
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        const sq_idfp *h = k ? &map->item : &map->user, *s = k ? &stream->item : &stream->user;
        if (h->n != s->n || h->hash != s->hash)
            return sq_fail(e, SQ_EX_DATA, "%s is not the id map of %s: its %s differ (stream: "
                           "%s, map: %s)", map_name, stream_name, kind_word(k),
                           sq_idfp_str(s, a, sizeof a), sq_idfp_str(h, b, sizeof b));
    }
    return 0;
}

int sq_mapfp_check_stream(const sq_mapfp *model, const char *model_name,
                          const sq_mapfp *stream, const char *stream_name, char *warn,
                          size_t warn_n, sq_err *e)
{
    char a[32], b[32];
    const sq_idfp *m = &model->item, *s = &stream->item;
    if (m->has && s->has) {
        if (m->n == s->n && m->hash != s->hash)
            return sq_fail(e, SQ_EX_DATA, "%s was preprocessed with another id map than %s: "
                           "its items differ (model: %s, stream: %s; preprocess the log with "
                           "seqrec-preprocess --model %s)", stream_name, model_name,
                           sq_idfp_str(m, a, sizeof a), sq_idfp_str(s, b, sizeof b),
                           model_name);
        return 0;
    }
    if ((model->preprocessed || stream->preprocessed) && warn && warn_n)
        snprintf(warn, warn_n, "cannot check that %s has the id map of %s: %s has no id-map "
                 "fingerprint (made before seqrec 0.2?)", stream_name, model_name,
                 m->has ? stream_name : model_name);
    return 0;
}
