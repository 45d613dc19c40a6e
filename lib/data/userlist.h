/* userlist.h - a list of users to score (seqrec-score --users FILE).
 *
 * The file has one user id a line: an original id when a map
 * (seqrec-preprocess --map) is given, a dense id otherwise. Reading checks
 * only the lines' shape; resolving turns the ids into the set of dense
 * users of a dataset. An id the map or the dataset lacks is not an error:
 * it is skipped, and the caller hears which lines were (the library does
 * not print; seqrec-score warns). */
#ifndef SQ_USERLIST_H
#define SQ_USERLIST_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "err.h"

/* One line of a users file. */
typedef struct {
    char *id;       /* the line without its newline (and CR) */
    uint64_t line;  /* 1-based, for messages */
} sq_user_line;

typedef struct {
    sq_user_line *l; /* [n], in file order */
    size_t n;
} sq_user_list;

/* Reads the lines of PATH ("-" or NULL = stdin): one id each, not empty,
 * no TAB or NUL; LF or CR LF line ends. 66 when missing, 65 "NAME: line N:
 * expected one user id, got ..." on a bad line (NAME = sq_in_name(PATH)),
 * 74 on a read error. On failure *u is left empty. */
int sq_user_list_read(sq_user_list *u, const char *path, sq_err *e);
/* The same for a list of other ids (what: "item" in the messages). */
int sq_id_list_read(sq_user_list *u, const char *path, const char *what, sq_err *e);
/* Frees the lines; *u is empty after (safe on an empty list). */
void sq_user_list_free(sq_user_list *u);

/* Why a listed user is skipped. */
enum sq_user_skip_why {
    SQ_USER_NOT_IN_MAP = 1, /* a map is given and has no user of that id */
    SQ_USER_NO_RECORD = 2,  /* the dataset has no record of that user */
};

typedef struct {
    const sq_user_line *user; /* points into the resolved list */
    int why;                  /* SQ_USER_* */
} sq_user_skip;

/* The listed users of a dataset, as sq_eval_opts wants them. */
typedef struct {
    unsigned char *set;  /* [n]: set[u] = 1 for a listed user u of the dataset */
    uint32_t n;          /* the largest user id of the dataset + 1 */
    sq_user_skip *skip;  /* [n_skip] the lines skipped, in file order */
    size_t n_skip;
} sq_user_set;

/* Resolves u against ds into *s: through map's original user ids when
 * map is given, else each line is a dense id (1..UINT32_MAX; another line
 * is 65 "FILE: line N: bad user id ..."). Lines whose user the map or ds
 * lacks go to s->skip. On failure s->skip still holds the lines skipped
 * before the bad one (the caller may warn about them) and s->set is NULL;
 * free *s with sq_user_set_free either way. */
int sq_user_list_resolve(const sq_user_list *u, const char *file, const sq_idmap *map,
                         const sq_dataset *ds, sq_user_set *s, sq_err *e);
void sq_user_set_free(sq_user_set *s);

/* An original id and its dense user or item: a map's ids sorted by
 * sq_named_id_cmp for bsearch (the --users and item lists). */
typedef struct {
    const char *id;
    uint32_t dense;
} sq_named_id;
int sq_named_id_cmp(const void *a, const void *b);

#endif
