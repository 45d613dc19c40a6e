/* fuzz_model.c - libFuzzer harness for the model-file reader: the input is
 * a whole .sqm file, read by sq_model_load (lib/model/models.h), which
 * runs sq_modelfile_read (lib/model/modelfile.c: header, config, tensors,
 * checksum) and then the loader of the model its config names (config
 * keys, tensor names and shapes). A model that loads is then asked for the
 * scores of two short histories (and its attention maps), which reads every
 * tensor the loader accepted: a shape the loader let through that does not
 * fit the config shows up there.
 *
 * The trailer's XXH3-64 is recomputed over the mutated bytes (the last 8
 * bytes of the input are replaced), or almost no mutation would get past
 * the checksum to the loaders; the mismatch path is the unit tests'.
 *
 * The file lives in a memfd (no file on disk) read by its /proc/self/fd
 * path, since the reader takes a path. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "models.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Scores cost n_items floats per history: skip the step for huge ones. */
#define SCORE_MAX_ITEMS 65536u

static void score(sq_model *m)
{
    if (!m->scores || m->n_items > SCORE_MAX_ITEMS)
        return;
    uint32_t items[5], off[2] = {0, 0}, len[2] = {0, 5};
    for (int i = 0; i < 5; i++)
        items[i] = 1 + (uint32_t)(i * 7) % m->n_items;
    sq_batch b = {.items = items, .off = off, .len = len, .B = 2};
    float *s = malloc(2 * ((size_t)m->n_items + 1) * sizeof *s);
    if (!s)
        abort();
    sq_err e = {0};
    if (m->scores(m, &b, s, &e) != 0 && !e.msg[0])
        __builtin_trap();
    free(s);
    if (m->attention) {
        sq_attn_map a;
        memset(&a, 0, sizeof a);
        sq_err ea = {0};
        if (m->attention(m, items, 5, &a, &ea) == 0)
            sq_attn_map_free(&a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("model.sqm", 0);
    if (fd < 0) {
        perror("memfd_create");
        abort();
    }
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        abort();
    memcpy(buf, data, size);
    if (size >= 8) {
        uint64_t h = XXH3_64bits(buf, size - 8);
        for (int i = 0; i < 8; i++) /* little-endian, as the writer puts it */
            buf[size - 8 + i] = (uint8_t)(h >> (8 * i));
    }
    for (size_t done = 0; done < size;) {
        ssize_t k = write(fd, buf + done, size - done);
        if (k <= 0) {
            perror("memfd write");
            abort();
        }
        done += (size_t)k;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sq_model m;
    sq_err e = {0};
    if (sq_model_load(&m, path, &e) == 0) {
        score(&m);
        sq_model_free(&m);
    } else if (!e.msg[0]) {
        __builtin_trap(); /* every failure names its reason */
    }
    if (getenv("SEQREC_FUZZ_VERBOSE")) /* why an input was refused */
        fprintf(stderr, "%s\n", e.msg[0] ? e.msg : "accepted");
    close(fd);
    free(buf);
    return 0;
}
