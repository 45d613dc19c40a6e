/* itemlist.h - the item filters of seqrec-score (--exclude-items FILE,
 * --allow-items FILE): which items may be candidates.
 *
 * Each file has one item id a line, read like a --users file
 * (userlist.h: sq_id_list_read): an original id when a map
 * (seqrec-preprocess --map) is given, a dense id (1..N) otherwise. The
 * candidates are the allowed items (every item without --allow-items)
 * minus the excluded ones: an item in both lists is excluded. An id the
 * map does not know (or, without a map, a dense id above the catalogue's
 * N) is not an error: it is counted and listed for the caller to report.
 * A line that is not an id (empty, a TAB or NUL; without a map, not a
 * positive integer) is 65 "FILE: line N: ...". */
#ifndef SQ_ITEMLIST_H
#define SQ_ITEMLIST_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "userlist.h"

typedef struct {
    const sq_user_line *line; /* the line of an unknown id */
    int allow;                /* 1: of the allow list, 0: of the exclude list */
} sq_item_skip;

typedef struct {
    unsigned char *ok;   /* [n_items + 1]: ok[i] = 1 when i may be a candidate; ok[0] = 0 */
    uint32_t n_items;
    uint32_t n_ok;       /* candidates left */
    sq_item_skip *skip;  /* [n_skip] the unknown ids, exclude list's first, in file order */
    size_t n_skip;
} sq_item_filter;

/* The filter of a catalogue of n_items from the lists (either may be
 * NULL; the names are for messages) through map (NULL: dense ids). Free
 * *f with sq_item_filter_free either way. */
int sq_item_filter_make(sq_item_filter *f, uint32_t n_items, const sq_idmap *map,
                        const sq_user_list *excl, const char *excl_name,
                        const sq_user_list *allow, const char *allow_name, sq_err *e);
void sq_item_filter_free(sq_item_filter *f);

#endif
