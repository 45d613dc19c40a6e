/* itemlist.c - the item filters of seqrec-score (see itemlist.h). */
#include "itemlist.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void sq_item_filter_free(sq_item_filter *f)
{
    free(f->ok);
    free(f->skip);
    memset(f, 0, sizeof *f);
}


/* Sets mark[d] = val for every listed item; unknown ids go to f->skip. */
static int apply(sq_item_filter *f, const sq_named_id *names, size_t n_names,
                 const sq_user_list *l, const char *file, int allow, unsigned char *mark,
                 unsigned char val, sq_err *e)
{
    for (size_t i = 0; l && i < l->n; i++) {
        const sq_user_line *line = &l->l[i];
        uint32_t d;
        if (names) {
            sq_named_id key = {line->id, 0};
            const sq_named_id *hit =
                bsearch(&key, names, n_names, sizeof *names, sq_named_id_cmp);
            d = hit ? hit->dense : 0;
        } else if (sq_cli_u32(line->id, 1, UINT32_MAX, &d)) {
            return sq_fail(e, SQ_EX_DATA, "%s: line %" PRIu64 ": bad item id '%s' (dense ids "
                           "are positive integers; original ids need --map)", file, line->line,
                           line->id);
        }
        if (d == 0 || d > f->n_items) {
            f->skip[f->n_skip++] = (sq_item_skip){line, allow};
            continue;
        }
        mark[d] = val;
    }
    return SQ_OK;
}

int sq_item_filter_make(sq_item_filter *f, uint32_t n_items, const sq_idmap *map,
                        const sq_user_list *excl, const char *excl_name,
                        const sq_user_list *allow, const char *allow_name, sq_err *e)
{
    memset(f, 0, sizeof *f);
    size_t lines = (excl ? excl->n : 0) + (allow ? allow->n : 0);
    sq_named_id *names = map ? malloc(((size_t)map->n_item + 1) * sizeof *names) : NULL;
    f->ok = calloc((size_t)n_items + 1, 1);
    f->skip = malloc((lines ? lines : 1) * sizeof *f->skip);
    f->n_items = n_items;
    size_t n_names = 0;
    int rc = SQ_OK;
    if (!f->ok || !f->skip || (map && !names)) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", n_items);
        goto done;
    }
    for (uint32_t d = 1; map && d <= map->n_item; d++)
        if (map->item[d])
            names[n_names++] = (sq_named_id){map->item[d], d};
    if (map)
        qsort(names, n_names, sizeof *names, sq_named_id_cmp);
    /* allowed first (every item without a list), then the exclusions win */
    if (allow)
        rc = apply(f, names, n_names, allow, allow_name, 1, f->ok, 1, e);
    else
        memset(f->ok + 1, 1, n_items);
    if (!rc)
        rc = apply(f, names, n_names, excl, excl_name, 0, f->ok, 0, e);
    /* the exclude list's unknown ids first in the report */
    for (size_t i = 0, j = 0; !rc && i < f->n_skip; i++)
        if (!f->skip[i].allow) {
            sq_item_skip t = f->skip[i];
            memmove(f->skip + j + 1, f->skip + j, (i - j) * sizeof t);
            f->skip[j++] = t;
        }
    f->ok[0] = 0;
    for (uint32_t i = 1; !rc && i <= n_items; i++)
        f->n_ok += f->ok[i];
done:
    free(names);
    return rc;
}
