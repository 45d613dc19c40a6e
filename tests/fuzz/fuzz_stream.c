/* fuzz_stream.c - libFuzzer harness for the SQRC stream reader
 * (lib/data/stream.c): the input is the whole stream, read through
 * fmemopen the way every program reads standard input: the header, every
 * record, the trailer and its checks. `make fuzz` builds and runs it
 * (tests/fuzz/README.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        abort();
    memcpy(buf, data, size);
    if (size >= 25 && buf[size - 25] == SQ_TRAILER_TAG) {
        uint64_t h = XXH3_64bits(buf, size - 25);
        for (int i = 0; i < 8; i++) /* little-endian, as the writer puts it */
            buf[size - 8 + i] = (uint8_t)(h >> (8 * i));
    }
    /* fmemopen refuses a zero size on some libcs: read an empty file then */
    FILE *f = size ? fmemopen(buf, size, "rb") : fopen("/dev/null", "rb");
    if (!f)
        abort();
    sq_reader r;
    memset(&r, 0, sizeof r);
    sq_err e = {0};
    if (sq_reader_open(&r, f, "fuzz", &e) == 0) {
        sq_record rec;
        memset(&rec, 0, sizeof rec);
        uint64_t sum = 0;
        int rc;
        while ((rc = sq_reader_next(&r, &rec, &e)) == 1) {
            /* touch what the reader hands out, so ASan sees every access
             * (a ranks record has len 1 and no item array) */
            for (uint32_t i = 0; r.hdr.kind != SQ_RANKS && i < rec.len; i++) {
                sum += rec.items[i];
                if (rec.ts)
                    sum += (uint64_t)rec.ts[i];
                if (rec.scores)
                    sum += (uint64_t)(rec.scores[i] != 0.0f);
            }
        }
        /* a record was either fully valid or the read failed with a message */
        if (rc < 0 && !e.msg[0])
            __builtin_trap();
        char val[64];
        sq_meta_get(&r.hdr, "dataset", val, sizeof val);
        (void)sum;
    } else if (!e.msg[0]) {
        __builtin_trap();
    }
    if (getenv("SEQREC_FUZZ_VERBOSE")) /* why an input was refused */
        fprintf(stderr, "%s\n", e.msg[0] ? e.msg : "accepted");
    sq_reader_free(&r);
    fclose(f);
    free(buf);
    return 0;
}
