/* userlist.c - the users file of seqrec-score --users (see userlist.h). */
#include "userlist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cli.h"
#include "fileio.h"

void sq_user_list_free(sq_user_list *u)
{
    for (size_t i = 0; i < u->n; i++)
        free(u->l[i].id);
    free(u->l);
    memset(u, 0, sizeof *u);
}

int sq_user_list_read(sq_user_list *u, const char *path, sq_err *e)
{
    return sq_id_list_read(u, path, "user", e);
}

int sq_id_list_read(sq_user_list *u, const char *path, const char *what, sq_err *e)
{
    memset(u, 0, sizeof *u);
    FILE *f;
    if (sq_in_open(&f, path, e))
        return e->code;
    const char *name = sq_in_name(path);
    char *buf = NULL;
    size_t cap = 0, room = 0;
    ssize_t n;
    int rc = 0;
    for (uint64_t line = 1; (n = getline(&buf, &cap, f)) >= 0; line++) {
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            buf[--n] = '\0';
        /* strlen short of n: a NUL inside the line */
        if (n == 0 || strchr(buf, '\t') || strlen(buf) != (size_t)n) {
            rc = sq_fail(e, SQ_EX_DATA, "%s: line %" PRIu64 ": expected one %s id, got %s",
                         name, line, what, n == 0 ? "an empty line" : "a TAB or NUL");
            break;
        }
        if (u->n == room) {
            room = room ? 2 * room : 256;
            sq_user_line *l = realloc(u->l, room * sizeof *l);
            if (!l) {
                rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
                break;
            }
            u->l = l;
        }
        if (!(u->l[u->n].id = strdup(buf))) {
            rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
            break;
        }
        u->l[u->n++].line = line;
    }
    if (!rc && ferror(f))
        rc = sq_fail(e, SQ_EX_IO, "%s: read error: %s", name, strerror(errno));
    free(buf);
    sq_in_close(f);
    if (rc)
        sq_user_list_free(u);
    return rc;
}

void sq_user_set_free(sq_user_set *s)
{
    free(s->set);
    free(s->skip);
    memset(s, 0, sizeof *s);
}

int sq_named_id_cmp(const void *a, const void *b)
{
    return strcmp(((const sq_named_id *)a)->id, ((const sq_named_id *)b)->id);
}

int sq_user_list_resolve(const sq_user_list *u, const char *file, const sq_idmap *map,
                         const sq_dataset *ds, sq_user_set *s, sq_err *e)
{
    memset(s, 0, sizeof *s);
    uint32_t max = 0;
    for (uint64_t r = 0; r < ds->n_seq; r++)
        max = ds->seq[r].user > max ? ds->seq[r].user : max;
    /* one block: the users ds has, then the users wanted */
    unsigned char *have = calloc((size_t)max + 1, 2);
    sq_named_id *names = map ? malloc(((size_t)map->n_user + 1) * sizeof *names) : NULL;
    /* at most one skip a line: no growing on the way */
    s->skip = malloc((u->n ? u->n : 1) * sizeof *s->skip);
    size_t n_names = 0;
    int rc = 0;
    if (!have || (map && !names) || !s->skip) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
        goto done;
    }
    for (uint64_t r = 0; r < ds->n_seq; r++)
        have[ds->seq[r].user] = 1;
    for (uint32_t d = 1; map && d <= map->n_user; d++)
        if (map->user[d])
            names[n_names++] = (sq_named_id){map->user[d], d};
    if (map)
        qsort(names, n_names, sizeof *names, sq_named_id_cmp);
    unsigned char *want = have + (size_t)max + 1;
    for (size_t i = 0; i < u->n; i++) {
        const sq_user_line *l = &u->l[i];
        uint32_t d;
        if (map) {
            sq_named_id key = {l->id, 0};
            sq_named_id *hit = bsearch(&key, names, n_names, sizeof *names, sq_named_id_cmp);
            if (!hit) {
                s->skip[s->n_skip++] = (sq_user_skip){l, SQ_USER_NOT_IN_MAP};
                continue;
            }
            d = hit->dense;
        } else if (sq_cli_u32(l->id, 1, UINT32_MAX, &d)) {
            rc = sq_fail(e, SQ_EX_DATA, "%s: line %" PRIu64 ": bad user id '%s' (dense ids "
                         "are positive integers; original ids need --map)", file, l->line,
                         l->id);
            goto done;
        }
        if (d > max || !have[d]) {
            s->skip[s->n_skip++] = (sq_user_skip){l, SQ_USER_NO_RECORD};
            continue;
        }
        want[d] = 1;
    }
    /* the set: the second half of the block, moved to its start */
    memmove(have, want, (size_t)max + 1);
    s->set = have;
    s->n = max + 1;
    have = NULL;
done:
    free(have);
    free(names);
    return rc;
}
