/* idmap.h - the identity of an id map (issue 31): which original ids the
 * dense ids 1..N of a stream or a model stand for.
 *
 * FINGERPRINT. For users and for items separately: the count N and the
 * XXH3-64 of the original ids in dense order 1..N, each followed by '\n';
 * as text "N:%016llx". seqrec-preprocess writes the fingerprint of the ids
 * it assigned into the stream's meta (preprocess.map_users,
 * preprocess.map_items); seqrec-train copies it into the model's config
 * (data.preprocess.map_users, data.preprocess.map_items).
 *
 * EXTENSION. Map B extends map A when B's first N_A users and first N_A
 * items hash to A's (seqrec-preprocess --map-in appends new users and items
 * after the map's): a map extends itself.
 *
 * A stream or model made before seqrec 0.2 has no fingerprint: the checks
 * then say so in a warning (*warn, for the caller to print) and pass. */
#ifndef SQ_IDMAP_H
#define SQ_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "err.h"

typedef struct {
    uint32_t n;      /* ids of the kind */
    uint64_t hash;   /* XXH3-64 of "id1\nid2\n...idN\n" */
    int has;         /* 0: not known */
} sq_idfp;

typedef struct {
    sq_idfp user, item;
    int preprocessed; /* the meta says seqrec-preprocess made the data */
} sq_mapfp;

/* The meta keys (a model's config has them under "data."). */
#define SQ_MAPFP_USERS "preprocess.map_users"
#define SQ_MAPFP_ITEMS "preprocess.map_items"

/* The original id of dense id d (1..n) of ctx, or NULL where there is none. */
typedef const char *(*sq_id_at)(const void *ctx, uint32_t d);

/* The fingerprint of ids 1..n of at(ctx, .): 0; 1 with *hole the first
 * dense id without an original; -1 out of memory. */
int sq_idfp_compute(sq_id_at at, const void *ctx, uint32_t n, sq_idfp *fp, uint32_t *hole);
/* "N:HEX" into buf (at least 28 bytes); "none" when !fp->has. */
const char *sq_idfp_str(const sq_idfp *fp, char *buf, size_t n);
/* Parses "N:HEX" (16 hex digits); -1 when malformed. */
int sq_idfp_parse(const char *s, sq_idfp *fp);

/* The fingerprints of meta text ("key=value" lines): keys prefix +
 * SQ_MAPFP_USERS / ITEMS (prefix "" for a stream, "data." for a model
 * file's config). A malformed value counts as absent. */
void sq_mapfp_from_meta(const char *meta, const char *prefix, sq_mapfp *fp);
/* The fingerprint of the whole map m (file name for messages): 65 for a
 * map with a hole (a dense id missing below the largest). */
int sq_mapfp_of_map(const sq_idmap *m, const char *name, sq_mapfp *fp, sq_err *e);

/* A map's ids of a kind (0 users, 1 items; at(ctx, d) for d in 1..have_n,
 * map_name for messages) against base, the ids of what (a model or stream
 * file, role "model" or "stream"): 0 when they extend base (or base is not
 * known: then *warn says that nothing was checked); else 65 "MAP is not the
 * id map of WHAT, nor an extension of it: its first N items differ (model:
 * N:HEX, map: N:HEX)" or "...: it has N items, the model M (...)". */
int sq_idfp_check_extends(sq_id_at at, const void *ctx, uint32_t have_n,
                          const char *map_name, int kind, const sq_idfp *base,
                          const char *role, const char *what, char *warn, size_t warn_n,
                          sq_err *e);
/* The same for the ids of a map read with sq_idmap_read. */
int sq_idmap_check_extends(const sq_idmap *m, const char *map_name, int kind,
                           const sq_idfp *base, const char *role, const char *what,
                           char *warn, size_t warn_n, sq_err *e);
/* 0 when the map's fingerprint is exactly the stream's (seqrec-train
 * --map), else 65 naming both; a stream without one: *warn. */
int sq_mapfp_check_same(const sq_mapfp *map, const char *map_name, const sq_mapfp *stream,
                        const char *stream_name, char *warn, size_t warn_n, sq_err *e);
/* A stream against the model that scores it: when both have an item
 * fingerprint of the same count they must be equal (65 "STREAM was
 * preprocessed with another id map than MODEL ..."); when one of them was
 * made by seqrec-preprocess and one has no fingerprint, *warn. */
int sq_mapfp_check_stream(const sq_mapfp *model, const char *model_name,
                          const sq_mapfp *stream, const char *stream_name, char *warn,
                          size_t warn_n, sq_err *e);

#endif
