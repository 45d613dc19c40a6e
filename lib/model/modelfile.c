/* modelfile.c - the .sqm container (modelfile.h, man 5 seqrec MODEL FILES).
 *
 * The writer streams the file through the atomic output of fileio.h while
 * hashing every byte; the reader checks the structure as it goes (so a bad
 * field is reported at its own byte), hashes, and checks the trailer last.
 * Nothing is trusted before it is checked: a length is compared with what
 * is left in the file before anything is allocated for it. */
#include "modelfile.h"
#include "kv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "seqrec model files are little-endian; add byte swapping for this host"
#endif

#define MAX_CONFIG (4u << 20)    /* 4 MiB: hyper-parameters and the data meta */
#define MAX_TENSORS 65536
#define MAX_NAME 63

size_t sq_dtype_size(uint8_t dtype)
{
    switch (dtype) {
    case SQ_F32: return 4;
    case SQ_U32: return 4;
    case SQ_U64: return 8;
    case SQ_BYTES: return 1;
    }
    return 0;
}

const char *sq_dtype_name(uint8_t dtype)
{
    switch (dtype) {
    case SQ_F32: return "f32";
    case SQ_U32: return "u32";
    case SQ_U64: return "u64";
    case SQ_BYTES: return "u8";
    }
    return "?";
}

/* bytes = product of shape x dtype size; -1 on overflow or a bad dtype. */
static int tensor_bytes(uint8_t dtype, int ndim, const uint64_t *shape, uint64_t *bytes)
{
    uint64_t n = sq_dtype_size(dtype);
    if (n == 0)
        return -1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && n > UINT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    *bytes = n;
    return 0;
}

/* ---- config ---- */

int sq_modelfile_set(sq_modelfile *mf, sq_err *e, const char *key, const char *fmt, ...)
{
    size_t len = mf->config ? strlen(mf->config) : 0;
    va_list ap;
    va_start(ap, fmt);
    int rc = sq_kv_add(&mf->config, &len, MAX_CONFIG, e, key, fmt, ap);
    va_end(ap);
    return rc;
}

int sq_modelfile_set_kv(void *ctx, const char *key, const char *value, sq_err *e)
{
    return sq_modelfile_set(ctx, e, key, "%s", value);
}

int sq_modelfile_get(const sq_modelfile *mf, const char *key, char *buf, size_t n)
{
    return sq_kv_get(mf->config, key, buf, n);
}

/* ---- tensors ---- */

const sq_tensor *sq_modelfile_find(const sq_modelfile *mf, const char *name)
{
    for (int i = 0; i < mf->n_tensors; i++)
        if (strcmp(mf->tensors[i].name, name) == 0)
            return &mf->tensors[i];
    return NULL;
}

/* A free slot at the end of the tensor list. */
static sq_tensor *push_tensor(sq_modelfile *mf, sq_err *e)
{
    if (mf->n_tensors == mf->cap) {
        int cap = mf->cap ? mf->cap * 2 : 16;
        sq_tensor *t = realloc(mf->tensors, (size_t)cap * sizeof *t);
        if (!t) {
            sq_fail(e, SQ_EX_OSERR, "out of memory");
            return NULL;
        }
        mf->tensors = t;
        mf->cap = cap;
    }
    sq_tensor *t = &mf->tensors[mf->n_tensors];
    memset(t, 0, sizeof *t);
    return t;
}

int sq_modelfile_add(sq_modelfile *mf, const char *name, uint8_t dtype, int ndim,
                     const uint64_t *shape, const void *data, sq_err *e)
{
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen > MAX_NAME)
        return sq_fail(e, SQ_EX_SOFTWARE, "tensor name '%s' must have 1..%d bytes", name, MAX_NAME);
    if (sq_modelfile_find(mf, name))
        return sq_fail(e, SQ_EX_SOFTWARE, "tensor '%s' added twice", name);
    if (ndim < 0 || ndim > 4)
        return sq_fail(e, SQ_EX_SOFTWARE, "tensor '%s': %d dimensions (at most 4)", name, ndim);
    if (mf->n_tensors >= MAX_TENSORS)
        return sq_fail(e, SQ_EX_SOFTWARE, "more than %d tensors", MAX_TENSORS);
    uint64_t bytes;
    if (tensor_bytes(dtype, ndim, shape, &bytes))
        return sq_fail(e, SQ_EX_SOFTWARE, "tensor '%s': bad dtype %u or size overflow", name, dtype);
    if (bytes && !data)
        return sq_fail(e, SQ_EX_SOFTWARE, "tensor '%s': no data", name);
    sq_tensor *t = push_tensor(mf, e);
    if (!t)
        return e->code;
    memcpy(t->name, name, nlen + 1);
    t->dtype = dtype;
    t->ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->bytes = bytes;
    t->data = (void *)data; /* borrowed: the writer only reads it */
    mf->n_tensors++;
    return 0;
}

void sq_modelfile_free(sq_modelfile *mf)
{
    if (mf->owns_data)
        for (int i = 0; i < mf->n_tensors; i++)
            free(mf->tensors[i].data);
    free(mf->tensors);
    free(mf->config);
    memset(mf, 0, sizeof *mf);
}

/* ---- writing ---- */

typedef struct {
    FILE *f;
    XXH3_state_t *h;
    int bad;
} wctx;

static void put(wctx *w, const void *p, size_t n)
{
    if (w->bad || n == 0)
        return;
    XXH3_64bits_update(w->h, p, n);
    if (fwrite(p, 1, n, w->f) != n)
        w->bad = errno ? errno : EIO;
}

int sq_modelfile_write(const char *path, const sq_modelfile *mf, sq_err *e)
{
    const char *name = sq_out_name(path);
    const char *config = mf->config ? mf->config : "";
    size_t clen = strlen(config);
    if (clen > MAX_CONFIG)
        return sq_fail(e, SQ_EX_SOFTWARE, "model config of %zu bytes exceeds %u", clen, MAX_CONFIG);
    sq_outfile out;
    if (sq_out_open(&out, path, 1, e))
        return e->code;
    wctx w = {out.fp, XXH3_createState(), 0};
    if (!w.h) {
        sq_out_abort(&out);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    XXH3_64bits_reset(w.h);
    uint16_t version = SQ_MODEL_VERSION, reserved = 0;
    uint32_t c32 = (uint32_t)clen, nt = (uint32_t)mf->n_tensors;
    put(&w, SQ_MODEL_MAGIC, 4);
    put(&w, &version, 2);
    put(&w, &reserved, 2);
    put(&w, &c32, 4);
    put(&w, config, clen);
    put(&w, &nt, 4);
    for (int i = 0; i < mf->n_tensors; i++) {
        const sq_tensor *t = &mf->tensors[i];
        uint16_t nlen = (uint16_t)strlen(t->name);
        put(&w, &nlen, 2);
        put(&w, t->name, nlen);
        put(&w, &t->dtype, 1);
        put(&w, &t->ndim, 1);
        put(&w, t->shape, (size_t)t->ndim * 8);
        put(&w, &t->bytes, 8);
        put(&w, t->data, t->bytes);
    }
    uint64_t sum = XXH3_64bits_digest(w.h);
    XXH3_freeState(w.h);
    if (!w.bad && fwrite(&sum, 8, 1, w.f) != 1)
        w.bad = errno ? errno : EIO;
    if (w.bad) {
        sq_out_abort(&out);
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(w.bad));
    }
    return sq_out_commit(&out, e);
}

/* ---- reading ---- */

typedef struct {
    FILE *f;
    const char *name;
    XXH3_state_t *h;
    uint64_t off;   /* bytes consumed */
    uint64_t size;  /* file size, or UINT64_MAX when unknown (not a regular file) */
    sq_err *e;
} rctx;

static int truncated(rctx *r)
{
    return sq_fail(r->e, SQ_EX_DATA, "%s: byte %llu: unexpected end of file (truncated model file)",
                   r->name, (unsigned long long)r->off);
}

/* Reads n bytes into p (hashed unless hash == 0). */
static int get(rctx *r, void *p, size_t n, int hash)
{
    if (n == 0)
        return 0;
    size_t got = fread(p, 1, n, r->f);
    if (got != n) {
        if (ferror(r->f))
            return sq_fail(r->e, SQ_EX_IO, "%s: read error: %s", r->name, strerror(errno));
        r->off += got;
        return truncated(r);
    }
    if (hash)
        XXH3_64bits_update(r->h, p, n);
    r->off += n;
    return 0;
}

static int bad(rctx *r, uint64_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(rctx *r, uint64_t at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sq_fail(r->e, SQ_EX_DATA, "%s: byte %llu: %s", r->name, (unsigned long long)at, msg);
}

/* Whether n more bytes (and the 8-byte trailer) can still be in the file. */
static int fits(const rctx *r, uint64_t n)
{
    if (r->size == UINT64_MAX)
        return n <= (1ull << 40); /* not a regular file: a sanity cap */
    return r->off <= r->size && n <= r->size - r->off && r->size - r->off - n >= 8;
}

/* Bytes left before the trailer, for messages. */
static unsigned long long left(const rctx *r)
{
    if (r->size == UINT64_MAX || r->off + 8 > r->size)
        return 0;
    return (unsigned long long)(r->size - r->off - 8);
}

static int read_tensor(rctx *r, sq_modelfile *mf)
{
    uint64_t at = r->off;
    uint16_t nlen;
    if (get(r, &nlen, 2, 1))
        return r->e->code;
    if (nlen == 0 || nlen > MAX_NAME)
        return bad(r, at, "tensor name length %u (must be 1..%d)", nlen, MAX_NAME);
    sq_tensor *t = push_tensor(mf, r->e);
    if (!t)
        return r->e->code;
    if (get(r, t->name, nlen, 1))
        return r->e->code;
    t->name[nlen] = '\0';
    if (strlen(t->name) != nlen)
        return bad(r, at + 2, "NUL byte in a tensor name");
    if (sq_modelfile_find(mf, t->name))
        return bad(r, at + 2, "tensor '%s' appears twice", t->name);
    uint64_t pos = r->off;
    if (get(r, &t->dtype, 1, 1) || get(r, &t->ndim, 1, 1))
        return r->e->code;
    if (!sq_dtype_size(t->dtype))
        return bad(r, pos, "tensor '%s': unknown dtype %u", t->name, t->dtype);
    if (t->ndim > 4)
        return bad(r, pos + 1, "tensor '%s': %u dimensions (at most 4)", t->name, t->ndim);
    pos = r->off;
    if (get(r, t->shape, (size_t)t->ndim * 8, 1))
        return r->e->code;
    uint64_t want;
    if (tensor_bytes(t->dtype, t->ndim, t->shape, &want))
        return bad(r, pos, "tensor '%s': oversize shape (overflows 64 bits)", t->name);
    pos = r->off;
    if (get(r, &t->bytes, 8, 1))
        return r->e->code;
    if (t->bytes != want)
        return bad(r, pos, "tensor '%s': %llu data bytes, its shape and dtype need %llu",
                   t->name, (unsigned long long)t->bytes, (unsigned long long)want);
    if (!fits(r, t->bytes))
        return bad(r, pos, "tensor '%s': %llu data bytes, more than the %llu left in the file "
                   "(truncated or corrupted)", t->name, (unsigned long long)t->bytes, left(r));
    if (t->bytes > SIZE_MAX)
        return bad(r, pos, "tensor '%s' too large for this machine", t->name);
    t->data = malloc(t->bytes ? (size_t)t->bytes : 1);
    if (!t->data)
        return sq_fail(r->e, SQ_EX_OSERR, "%s: out of memory for tensor '%s' (%llu bytes)",
                       r->name, t->name, (unsigned long long)t->bytes);
    mf->n_tensors++; /* owned from here on, freed with the file */
    return get(r, t->data, (size_t)t->bytes, 1);
}

static int read_body(rctx *r, sq_modelfile *mf)
{
    unsigned char hb[12];
    if (get(r, hb, 4, 1))
        return r->e->code;
    if (memcmp(hb, SQ_MODEL_MAGIC, 4) != 0)
        return bad(r, 0, "bad magic (not a seqrec model file)");
    if (get(r, hb + 4, 8, 1))
        return r->e->code;
    uint16_t version, reserved;
    uint32_t clen, nt;
    memcpy(&version, hb + 4, 2);
    memcpy(&reserved, hb + 6, 2);
    memcpy(&clen, hb + 8, 4);
    if (version != SQ_MODEL_VERSION)
        return bad(r, 4, "unsupported model file version %u (this build reads version %u)",
                   version, SQ_MODEL_VERSION);
    if (reserved != 0)
        return bad(r, 6, "reserved field is %u, not 0", reserved);
    if (clen > MAX_CONFIG)
        return bad(r, 8, "oversize config: %u bytes (limit %u)", clen, MAX_CONFIG);
    if (!fits(r, clen))
        return bad(r, 8, "config of %u bytes, more than the %llu left in the file "
                   "(truncated or corrupted)", clen, left(r));
    mf->config = malloc((size_t)clen + 1);
    if (!mf->config)
        return sq_fail(r->e, SQ_EX_OSERR, "out of memory");
    if (get(r, mf->config, clen, 1))
        return r->e->code;
    mf->config[clen] = '\0';
    if (strlen(mf->config) != clen)
        return bad(r, 12 + strlen(mf->config), "NUL byte in the config text");
    if (clen && mf->config[clen - 1] != '\n')
        return bad(r, 12 + clen - 1, "config text does not end in a newline");
    uint64_t at = r->off;
    if (get(r, &nt, 4, 1))
        return r->e->code;
    if (nt > MAX_TENSORS)
        return bad(r, at, "oversize tensor count %u (limit %d)", nt, MAX_TENSORS);
    if (!fits(r, (uint64_t)nt * 12)) /* 12: the smallest tensor entry */
        return bad(r, at, "%u tensors cannot fit in the %llu bytes left in the file "
                   "(truncated or corrupted)", nt, left(r));
    for (uint32_t i = 0; i < nt; i++)
        if (read_tensor(r, mf))
            return r->e->code;
    uint64_t want = XXH3_64bits_digest(r->h), sum;
    at = r->off;
    if (get(r, &sum, 8, 0))
        return r->e->code;
    if (sum != want)
        return bad(r, at, "checksum mismatch (file corrupted): trailer %016llx, computed %016llx",
                   (unsigned long long)sum, (unsigned long long)want);
    unsigned char extra;
    if (fread(&extra, 1, 1, r->f) == 1)
        return bad(r, r->off, "data after the trailer");
    if (ferror(r->f))
        return sq_fail(r->e, SQ_EX_IO, "%s: read error: %s", r->name, strerror(errno));
    return 0;
}

int sq_modelfile_read(const char *path, sq_modelfile *mf, sq_err *e)
{
    memset(mf, 0, sizeof *mf);
    mf->owns_data = 1;
    FILE *f;
    if (sq_in_open(&f, path, e))
        return e->code;
    rctx r = {f, sq_in_name(path), XXH3_createState(), 0, UINT64_MAX, e};
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode))
        r.size = (uint64_t)st.st_size;
    int rc;
    if (!r.h) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    } else {
        XXH3_64bits_reset(r.h);
        rc = read_body(&r, mf);
    }
    XXH3_freeState(r.h);
    sq_in_close(f);
    if (rc)
        sq_modelfile_free(mf);
    return rc;
}

/* ---- looking inside ---- */

int sq_modelfile_sniff(const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char m[4];
    int is = fread(m, 1, 4, f) == 4 && memcmp(m, SQ_MODEL_MAGIC, 4) == 0;
    fclose(f);
    return is;
}

void sq_tensor_shape_str(const sq_tensor *t, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < t->ndim && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%llu", i ? "x" : "",
                         (unsigned long long)t->shape[i]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

int sq_modelfile_list(FILE *f, const sq_modelfile *mf, const char *prefix)
{
    for (int i = 0; i < mf->n_tensors; i++) {
        const sq_tensor *t = &mf->tensors[i];
        char shape[128];
        sq_tensor_shape_str(t, shape, sizeof shape);
        fprintf(f, "%s%s\t%s\t%s\n", prefix, t->name, sq_dtype_name(t->dtype), shape);
    }
    return ferror(f) ? -1 : 0;
}

int sq_modelfile_id_map(const sq_modelfile *mf, const char *path, const char **bytes,
                        size_t *len, sq_err *e)
{
    const sq_tensor *t = sq_modelfile_find(mf, SQ_ID_MAP_TENSOR);
    *bytes = NULL;
    *len = 0;
    if (!t)
        return 1;
    if (t->dtype != SQ_BYTES || t->ndim != 1 || t->bytes == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: tensor %s is not the text of an id map", path,
                       SQ_ID_MAP_TENSOR);
    *bytes = t->data;
    *len = (size_t)t->bytes;
    return 0;
}
