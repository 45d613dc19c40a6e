/* fuzz_text.c - libFuzzer harness for the text readers: the text form of
 * stream records (lib/data/text.c, lib/data/textenc.c: what
 * `seqrec-cat --from-text` and seqrec-metrics's text ranks read), id maps
 * (sq_idmap_parse: seqrec-preprocess --map, seqrec-score --map) and id
 * lists (sq_id_list_read and the item filter: seqrec-score --users,
 * --exclude-items, --allow-items).
 *
 * Input: two option bytes, then the text.
 *   byte 0  bits 0-2 what: 0-4 records of kind sequences, split, padded,
 *                    ranks, topk; 5 an id map; 6-7 an id list
 *           bit 3    records: a timestamps field
 *           bit 4    records: n_items is byte 1 (else the largest item)
 *           bit 5    records: max_len is byte 1 (else variable lengths)
 *           bit 6    id list: the allow list (else the exclude list)
 *   byte 1  records: n_items and max_len as above; id list: the
 *           catalogue's n_items
 *
 * Records are checked for more than not crashing: text that encodes into
 * a stream S must come back from it unchanged. S is read back, printed
 * with sq_text_write (seqrec-cat's printer) and encoded again with S's
 * n_items and max_len; the two streams must be the same bytes. A failure
 * must name its reason. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"
#include "idmap.h"
#include "itemlist.h"
#include "stream.h"
#include "text.h"
#include "textenc.h"
#include "userlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void verbose(const sq_err *e)
{
    if (getenv("SEQREC_FUZZ_VERBOSE")) /* why an input was refused */
        fprintf(stderr, "%s\n", e->msg[0] ? e->msg : "accepted");
}

/* Encodes text[0, n) into a malloc'd stream *out (*out_n bytes); the
 * encoder's status. */
static int encode(const char *text, size_t n, const sq_text_encode_opts *o, char **out,
                  size_t *out_n, sq_err *e)
{
    FILE *in = n ? fmemopen((void *)text, n, "r") : fopen("/dev/null", "r");
    FILE *f = open_memstream(out, out_n);
    if (!in || !f)
        abort();
    int rc = sq_text_encode(in, "fuzz", o, f, "fuzz.out", e);
    fclose(in);
    if (fclose(f) != 0)
        abort();
    return rc;
}

/* Prints stream s[0, n) as text (as seqrec-cat does), with its header's
 * n_items and max_len in *o. */
static char *print(char *s, size_t n, sq_text_encode_opts *o, size_t *text_n)
{
    FILE *in = fmemopen(s, n, "r");
    char *text = NULL;
    FILE *out = open_memstream(&text, text_n);
    if (!in || !out)
        abort();
    sq_reader r;
    memset(&r, 0, sizeof r);
    sq_err e = {0};
    if (sq_reader_open(&r, in, "fuzz.out", &e) != 0)
        __builtin_trap(); /* the encoder wrote a stream its reader refuses */
    o->n_items = (long)r.hdr.n_items;
    o->max_len = (long)r.hdr.max_len;
    sq_record rec;
    memset(&rec, 0, sizeof rec);
    int rc;
    while ((rc = sq_reader_next(&r, &rec, &e)) == 1)
        if (sq_text_write(out, &r.hdr, &rec) != 0)
            abort();
    if (rc != 0)
        __builtin_trap();
    sq_reader_free(&r);
    fclose(in);
    if (fclose(out) != 0)
        abort();
    return text;
}

static void records(const uint8_t *opt, const char *text, size_t n)
{
    sq_text_encode_opts o = {
        .kind = (uint16_t)(SQ_SEQUENCES + (opt[0] & 7)),
        .with_ts = (opt[0] >> 3) & 1,
        .n_items = (opt[0] & 0x10) ? opt[1] : -1,
        .max_len = (opt[0] & 0x20) ? opt[1] : 0,
    };
    char *s1 = NULL;
    size_t n1 = 0;
    sq_err e = {0};
    int rc = encode(text, n, &o, &s1, &n1, &e);
    verbose(&e);
    if (rc != 0 && !e.msg[0])
        __builtin_trap(); /* every failure names its reason */
    if (rc == 0) {
        size_t tn = 0;
        char *t2 = print(s1, n1, &o, &tn);
        char *s2 = NULL;
        size_t n2 = 0;
        sq_err e2 = {0};
        if (encode(t2, tn, &o, &s2, &n2, &e2) != 0) {
            fprintf(stderr, "the printed text does not encode: %s\n", e2.msg);
            __builtin_trap();
        }
        if (n1 != n2 || memcmp(s1, s2, n1) != 0) {
            fprintf(stderr, "text -> stream -> text -> stream changed the stream\n");
            __builtin_trap();
        }
        free(t2);
        free(s2);
    }
    free(s1);
}

static void idmap(const char *text, size_t n)
{
    sq_idmap m;
    memset(&m, 0, sizeof m);
    sq_err e = {0};
    if (sq_idmap_parse(&m, text, n, "fuzz.map", &e) == 0) {
        size_t sum = 0; /* touch every id the map hands out */
        for (uint32_t d = 0; d <= m.users + 1; d++) {
            const char *id = sq_idmap_user(&m, d);
            sum += id ? strlen(id) : 0;
        }
        for (uint32_t d = 0; d <= m.items + 1; d++) {
            const char *id = sq_idmap_item(&m, d);
            sum += id ? strlen(id) : 0;
        }
        sq_mapfp fp;
        sq_err ef = {0};
        if (sq_mapfp_of_map(&m, "fuzz.map", &fp, &ef) != 0 && !ef.msg[0])
            __builtin_trap();
        (void)sum;
        sq_idmap_free(&m);
    } else if (!e.msg[0]) {
        __builtin_trap();
    }
    verbose(&e);
}

/* The list is read from a path (as the programs read --users FILE): a
 * memfd's /proc path, so nothing is left on disk. */
static void idlist(const uint8_t *opt, const char *text, size_t n)
{
    int fd = memfd_create("ids", 0);
    if (fd < 0)
        abort();
    for (size_t done = 0; done < n;) {
        ssize_t k = write(fd, text + done, n - done);
        if (k <= 0)
            abort();
        done += (size_t)k;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sq_user_list u;
    memset(&u, 0, sizeof u);
    sq_err e = {0};
    if (sq_id_list_read(&u, path, "item", &e) == 0) {
        int allow = (opt[0] >> 6) & 1;
        sq_item_filter f;
        memset(&f, 0, sizeof f);
        sq_err ef = {0};
        int rc = sq_item_filter_make(&f, opt[1], NULL, allow ? NULL : &u, "fuzz.ids",
                                     allow ? &u : NULL, "fuzz.ids", &ef);
        if (rc != 0 && !ef.msg[0])
            __builtin_trap();
        if (rc == 0) { /* the filter's count is its table's */
            uint32_t ok = 0;
            for (uint32_t i = 0; i <= f.n_items; i++)
                ok += f.ok[i];
            if (ok != f.n_ok || f.ok[0])
                __builtin_trap();
        }
        sq_item_filter_free(&f);
        e = ef;
    } else if (!e.msg[0]) {
        __builtin_trap();
    }
    verbose(&e);
    sq_user_list_free(&u);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    unsigned what = data[0] & 7;
    if (what <= 4)
        records(data, text, n);
    else if (what == 5)
        idmap(text, n);
    else
        idlist(data, text, n);
    return 0;
}
