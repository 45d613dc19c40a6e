/* modelfile.h - the .sqm model file: a config and named tensors.
 *
 * Layout (little-endian; see man 5 seqrec, section MODEL FILES):
 *   "SQRM" u16 version u16 reserved u32 config_len, config (key=value lines:
 *   model, every hyper-parameter, n_items, the training stream's meta under
 *   "data." keys, seqrec.version), u32 n_tensors, then per tensor:
 *   u16 name_len, name, u8 dtype, u8 ndim, ndim x u64 shape, u64 bytes, data;
 *   trailer u64 XXH3-64 of every byte before it.
 * Written atomically (temp file + rename); a reader checks everything and
 * reports "FILE: byte N: reason" with code 65. A checkpoint for --resume is
 * the same container with the optimizer and RNG state as extra tensors. */
#ifndef SQ_MODELFILE_H
#define SQ_MODELFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "err.h"

#define SQ_MODEL_MAGIC "SQRM"
#define SQ_MODEL_VERSION 1

enum sq_dtype { SQ_F32 = 1, SQ_U32 = 2, SQ_U64 = 3, SQ_BYTES = 4 };

typedef struct {
    char name[64];
    uint8_t dtype;
    uint8_t ndim;
    uint64_t shape[4];
    uint64_t bytes;   /* = product of shape x dtype size */
    void *data;       /* borrowed when writing; owned by the file when read */
} sq_tensor;

typedef struct {
    char *config;     /* owned, NUL-terminated key=value lines */
    sq_tensor *tensors;
    int n_tensors, cap;
    int owns_data;    /* set by sq_modelfile_read */
} sq_modelfile;

/* Appends "key=value\n" to the config (printf-formatted value). */
int sq_modelfile_set(sq_modelfile *mf, sq_err *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Value of the last "key=" line into buf; 1 if found. */
int sq_modelfile_get(const sq_modelfile *mf, const char *key, char *buf, size_t n);
/* sq_opt_write's sink (opt.h) into a model file's config: ctx is the
 * sq_modelfile. */
int sq_modelfile_set_kv(void *ctx, const char *key, const char *value, sq_err *e);
/* Registers a tensor to be written; data is borrowed, not copied. */
int sq_modelfile_add(sq_modelfile *mf, const char *name, uint8_t dtype, int ndim,
                     const uint64_t *shape, const void *data, sq_err *e);
const sq_tensor *sq_modelfile_find(const sq_modelfile *mf, const char *name);
int sq_modelfile_write(const char *path, const sq_modelfile *mf, sq_err *e);
int sq_modelfile_read(const char *path, sq_modelfile *mf, sq_err *e);
void sq_modelfile_free(sq_modelfile *mf);

/* The id map a model carries (seqrec-train --map; man 5 seqrec, MODEL
 * FILES): the text of the map file, as an SQ_BYTES tensor of this name. */
#define SQ_ID_MAP_TENSOR "id_map"
/* *bytes, *len: the map mf carries (borrowed from mf). 0 found; 1 none;
 * 65 naming path when the tensor is not one of bytes. */
int sq_modelfile_id_map(const sq_modelfile *mf, const char *path, const char **bytes,
                        size_t *len, sq_err *e);

/* 1 when the file at PATH starts with the model magic (a named file only:
 * standard input and unreadable files give 0; the reader reports those). */
int sq_modelfile_sniff(const char *path);
/* "f32", "u32", "u64", "u8" (SQ_BYTES), or "?"; bytes per element (0: bad). */
const char *sq_dtype_name(uint8_t dtype);
size_t sq_dtype_size(uint8_t dtype);
/* The shape as "6x8" ("" for a scalar) into buf. */
void sq_tensor_shape_str(const sq_tensor *t, char *buf, size_t n);
/* One line per tensor, "PREFIXname<TAB>dtype<TAB>shape", in file order.
 * Returns 0, or -1 when writing failed (ferror). */
int sq_modelfile_list(FILE *f, const sq_modelfile *mf, const char *prefix);

#endif
