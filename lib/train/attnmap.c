/* attnmap.c - attention maps as TSV matrices and a gnuplot heat map (see
 * attnmap.h). Host-only work: the weights come from the model's attention
 * hook, already on host memory. */
#include "attnmap.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval.h"
#include "fileio.h"

/* One n x n matrix as TSV (query rows, key columns) at path, atomically. */
static int write_matrix(const char *path, const float *a, int n, sq_err *e)
{
    sq_outfile o = {0};
    if (sq_out_open(&o, path, 0, e))
        return e->code;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            fprintf(o.fp, "%.7g%c", (double)a[(size_t)i * n + j], j + 1 < n ? '\t' : '\n');
    if (ferror(o.fp)) {
        sq_out_abort(&o);
        return sq_fail(e, SQ_EX_IO, "%s: write error", path);
    }
    return sq_out_commit(&o, e);
}

/* The rows of the input: window position and item (or the mask). */
static int write_items(const char *path, const sq_attn_map *am, sq_err *e)
{
    sq_outfile o = {0};
    if (sq_out_open(&o, path, 0, e))
        return e->code;
    fprintf(o.fp, "row\tposition\titem\n");
    for (int i = 0; i < am->n; i++) {
        if (am->ids[i] == am->mask_id)
            fprintf(o.fp, "%d\t%d\tmask\n", i, am->pos[i]);
        else
            fprintf(o.fp, "%d\t%d\t%d\n", i, am->pos[i], am->ids[i]);
    }
    /* a write error shows at the commit's flush and close (74) */
    int rc = sq_out_commit(&o, e);
    sq_out_abort(&o);
    return rc;
}

/* Every head's matrix and each layer's head mean (in mean[n * n]);
 * *smax = the largest |weight| of the means (the picture's colour range).
 * path has room for the prefix and 64 bytes. */
static int write_layers(const char *prefix, char *path, size_t room, const sq_attn_map *am,
                        float *mean, double *smax, sq_err *e)
{
    int n = am->n, H = am->heads, L = am->layers, rc = 0;
    size_t nn = (size_t)n * n;
    *smax = 0;
    for (int l = 0; l < L && !rc; l++) {
        memset(mean, 0, nn * sizeof *mean);
        for (int h = 0; h < H && !rc; h++) {
            const float *a = am->map + ((size_t)l * H + h) * nn;
            for (size_t i = 0; i < nn; i++)
                mean[i] += a[i] / (float)H;
            snprintf(path, room, "%s.l%d.h%d.tsv", prefix, l + 1, h + 1);
            rc = write_matrix(path, a, n, e);
        }
        if (rc)
            break;
        for (size_t i = 0; i < nn; i++)
            *smax = fabs(mean[i]) > *smax ? fabs(mean[i]) : *smax;
        snprintf(path, room, "%s.l%d.mean.tsv", prefix, l + 1);
        rc = write_matrix(path, mean, n, e);
    }
    return rc;
}

/* The gnuplot script: one panel per layer, the head mean of each, rows =
 * queries (oldest at the top), columns = keys; name = the prefix's last
 * component (gnuplot runs in the prefix's directory). */
static int write_gnuplot(const char *path, const char *name, const char *title, int L, int n,
                         const int *ids, int mask_id, double signed_max, sq_err *e)
{
    sq_outfile o = {0};
    if (sq_out_open(&o, path, 0, e))
        return e->code;
    FILE *f = o.fp;
    int w = 80 + 330 * L;
    fprintf(f, "# %s\n# written by seqrec-score --attention-map; run: gnuplot %s.gp\n", title,
            name);
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size %d,380 font ',9'\n"
               "} else {\n    set terminal png size %d,380\n}\n", w, w);
    fprintf(f, "set output '%s.png'\n", name);
    fprintf(f, "set multiplot layout 1,%d title \"%s\" noenhanced\n", L, title);
    fprintf(f, "set size ratio -1\nset xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\n", n - 1,
            n - 1);
    fprintf(f, "set xlabel 'key'\nset ylabel 'query'\nunset key\n");
    if (signed_max > 0) /* weights of either sign: a diverging palette around 0 */
        fprintf(f, "set palette defined (-1 '#b2182b', 0 'white', 1 '#2166ac')\n"
                   "set cbrange [%.7g:%.7g]\n", -signed_max, signed_max);
    else
        fprintf(f, "set palette defined (0 'white', 1 '#fdd49e', 2 '#d7301f', 3 '#7f0000')\n"
                   "set cbrange [0:*]\n");
    if (n <= 30) { /* item ids as tics */
        for (int axis = 0; axis < 2; axis++) {
            fprintf(f, "set %ctics (", axis ? 'y' : 'x');
            for (int i = 0; i < n; i++) {
                if (ids[i] == mask_id)
                    fprintf(f, "%s\"[M]\" %d", i ? ", " : "", i);
                else
                    fprintf(f, "%s\"%d\" %d", i ? ", " : "", ids[i], i);
            }
            fprintf(f, ")%s\n", axis ? "" : " rotate by 90 right");
        }
    }
    for (int l = 1; l <= L; l++)
        fprintf(f, "set title 'layer %d (mean over heads)'\n"
                   "plot '%s.l%d.mean.tsv' matrix with image\n", l, name, l);
    fprintf(f, "unset multiplot\n");
    if (ferror(f)) {
        sq_out_abort(&o);
        return sq_fail(e, SQ_EX_IO, "%s: write error", path);
    }
    return sq_out_commit(&o, e);
}

/* The last component of prefix (the files' names in the script). */
static const char *base_name(const char *prefix)
{
    const char *slash = strrchr(prefix, '/');
    return slash ? slash + 1 : prefix;
}

int sq_attention_map_write(const sq_model *model, const char *model_path,
                           const sq_dataset *ds, const char *in_name, uint32_t user,
                           int target, const char *prefix, sq_err *e)
{
    if (!model->attention)
        return sq_fail(e, SQ_EX_USAGE, "--attention-map: %s is a %s model, which has no "
                       "attention (sasrec and bert4rec models have)", model_path, model->name);
    uint64_t r;
    for (r = 0; r < ds->n_seq; r++)
        if (ds->seq[r].user == user && ds->seq[r].view == 0)
            break;
    if (r == ds->n_seq)
        return sq_fail(e, SQ_EX_DATA, "--attention-map: %s has no user %" PRIu32, in_name, user);
    /* the history sq_eval_ranks gives this user's first target of the set */
    const sq_seq *q = &ds->seq[r];
    uint32_t end = target == SQ_EVAL_VALID ? q->n_train : q->n_train + q->n_valid;
    if (end > q->len)
        end = q->len;
    const uint32_t *hist = sq_dataset_items(ds, r) + q->hist;
    uint32_t len = end > q->hist ? end - q->hist : 0;
    sq_attn_map am;
    if (model->attention(model, hist, len, &am, e))
        return e->code;
    size_t room = strlen(prefix) + 64;
    char *path = malloc(room);
    float *mean = malloc((size_t)am.n * am.n * sizeof *mean);
    double smax = 0;
    int rc = 0;
    if (!path || !mean) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
        goto done;
    }
    snprintf(path, room, "%s.items.tsv", prefix);
    if ((rc = write_items(path, &am, e)) != 0 ||
        (rc = write_layers(prefix, path, room, &am, mean, &smax, e)) != 0)
        goto done;
    char title[256];
    snprintf(title, sizeof title, "%s, user %" PRIu32 " (%d items)", am.what, user, am.n);
    /* weights of either sign (linrec, hydra: no normaliser; mixing: a
     * Jacobian) get a diverging palette over [-max |w|, max |w|] */
    smax = !am.signed_weights ? 0 : smax > 0 ? smax : 1;
    snprintf(path, room, "%s.gp", prefix);
    rc = write_gnuplot(path, base_name(prefix), title, am.layers, am.n, am.ids, am.mask_id,
                       smax, e);
done:
    free(path);
    free(mean);
    sq_attn_map_free(&am);
    return rc;
}

int sq_attention_map_draw(const char *prefix, int *drawn, sq_err *e)
{
    *drawn = 0;
    const char *name = base_name(prefix);
    size_t dlen = (size_t)(name - prefix); /* the directory, with its '/' */
    char script[4096];
    char *dir = malloc(dlen + 1);
    if (!dir)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(dir, prefix, dlen);
    dir[dlen] = '\0';
    snprintf(script, sizeof script, "%s.gp", name);
    /* the child would write our buffered output a second time */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        free(dir);
        return sq_fail(e, SQ_EX_OSERR, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        if (dir[0] && chdir(dir) != 0)
            _exit(126);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(errno == ENOENT ? 127 : 126);
    }
    int st, rc = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            rc = sq_fail(e, SQ_EX_OSERR, "waitpid: %s", strerror(errno));
            break;
        }
    /* 127: the child's exec found no gnuplot */
    int ran = !rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    if (ran && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
        rc = sq_fail(e, SQ_EX_SOFTWARE, "gnuplot failed on %s%s.gp", dir, name);
    else if (ran)
        *drawn = 1;
    free(dir);
    return rc;
}
