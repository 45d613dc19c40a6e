/* comm.c - the job's processes (see comm.h): launcher detection, the
 * single-process operations and the dispatch to MPI. */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A non-negative integer environment variable, or -1 */
static long env_int(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 ? -1 : v;
}

/* The launchers, most specific first: each names its size, rank and
 * local-rank variables. srun's step variables (not SLURM_NTASKS, which a
 * batch script itself sees) mark a process srun started. */
static const struct {
    const char *name, *size, *rank, *local;
} launchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpiexec", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
    {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"},
    {"env", "WORLD_SIZE", "RANK", "LOCAL_RANK"},
};
#define N_LAUNCHERS (sizeof launchers / sizeof launchers[0])

/* The launcher that started several processes (or an env job of one
 * rank that names its NCCL id file), or -1 */
static int which_launcher(void)
{
    for (size_t i = 0; i < N_LAUNCHERS; i++)
        if (env_int(launchers[i].size) > 1)
            return (int)i;
    const char *id = getenv("SEQREC_NCCL_ID");
    if (env_int("WORLD_SIZE") == 1 && env_int("RANK") == 0 && id && *id)
        return (int)N_LAUNCHERS - 1;
    return -1;
}

int sq_comm_launched(char *launcher, size_t n)
{
    int i = which_launcher();
    snprintf(launcher, n, "%s", i >= 0 ? launchers[i].name : "");
    return i >= 0;
}

int sq_comm_open(sq_comm *c, sq_err *e)
{
    memset(c, 0, sizeof *c);
    c->size = 1;
    int i = which_launcher();
    if (i < 0)
        return 0;
    snprintf(c->launcher, sizeof c->launcher, "%s", launchers[i].name);
    long size = env_int(launchers[i].size), rank = env_int(launchers[i].rank),
         local = env_int(launchers[i].local);
    if (rank < 0 || rank >= size)
        return sq_fail(e, SQ_EX_USAGE, "%s: %s=%s is not a rank of %s=%ld", c->launcher,
                       launchers[i].rank, getenv(launchers[i].rank) ? getenv(launchers[i].rank)
                                                                    : "(unset)",
                       launchers[i].size, size);
    c->rank = (int)rank;
    c->size = (int)size;
    c->local_rank = local >= 0 ? (int)local : 0;
    if (strcmp(c->launcher, "env") == 0) {
        c->kind = SQ_COMM_ENV;
        return 0;
    }
    if (!sq_comm_mpi_built())
        return sq_fail(e, SQ_EX_UNAVAILABLE, "started by %s as %d processes, but this seqrec "
                       "was built without MPI (install Open MPI and rebuild: make MPI=1)",
                       c->launcher, c->size);
    c->kind = SQ_COMM_MPI;
    return sq_comm_mpi_open(c, e);
}

void sq_comm_close(sq_comm *c)
{
    if (c->kind == SQ_COMM_MPI && c->open)
        sq_comm_mpi_close(c);
    c->open = 0;
}

void sq_comm_abort(const sq_comm *c, int code)
{
    if (c->kind == SQ_COMM_MPI && c->open)
        sq_comm_mpi_abort(code);
}

/* Host collectives need MPI, or an env job's sum of bytes */
static int host_ok(const sq_comm *c, const char *what, sq_err *e)
{
    if (c->kind == SQ_COMM_ENV && !c->sum_bytes)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "%s across %d processes started with RANK/"
                       "WORLD_SIZE needs MPI: start them with mpirun or srun", what, c->size);
    return 0;
}

/* An env job's all-gather: each rank's bytes in its slot, zeros elsewhere,
 * summed (exact: one rank gives each byte) */
static int env_allgather(const sq_comm *c, const void *send, void *recv, size_t n, sq_err *e)
{
    size_t all = (size_t)c->size * n;
    unsigned char *buf = calloc(all ? all : 1, 1);
    if (!buf)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(buf + (size_t)c->rank * n, send, n);
    int rc = c->sum_bytes(c->sum_arg, buf, all, e);
    if (!rc)
        memcpy(recv, buf, all);
    free(buf);
    return rc;
}

int sq_comm_allgather(const sq_comm *c, const void *send, void *recv, size_t n, sq_err *e)
{
    if (c->size == 1 && !c->sum_bytes) {
        if (send != recv)
            memmove(recv, send, n);
        return 0;
    }
    if (host_ok(c, "an all-gather", e))
        return e->code;
    if (c->kind == SQ_COMM_ENV)
        return env_allgather(c, send, recv, n, e);
    return sq_comm_mpi_allgather(send, recv, n, e);
}

/* An env job's all-gather of n bytes or fewer a rank: every rank's padded
 * to the largest, then packed */
static int env_allgatherv(const sq_comm *c, const void *send, size_t n, void *recv,
                          const size_t *counts, const size_t *displ, sq_err *e)
{
    size_t max = 0;
    for (int r = 0; r < c->size; r++)
        max = counts[r] > max ? counts[r] : max;
    unsigned char *mine = calloc(max ? max : 1, 1), *all = malloc((size_t)c->size * max + 1);
    int rc = mine && all ? 0 : sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (!rc && n)
        memcpy(mine, send, n);
    if (!rc)
        rc = env_allgather(c, mine, all, max, e);
    for (int r = 0; !rc && r < c->size; r++)
        if (counts[r])
            memcpy((char *)recv + displ[r], all + (size_t)r * max, counts[r]);
    free(mine);
    free(all);
    return rc;
}

int sq_comm_allgatherv(const sq_comm *c, const void *send, size_t n, void **recv,
                       size_t *counts, size_t *displ, sq_err *e)
{
    *recv = NULL;
    if (sq_comm_allgather(c, &n, counts, sizeof n, e))
        return e->code;
    size_t total = 0;
    for (int r = 0; r < c->size; r++) {
        displ[r] = total;
        total += counts[r];
    }
    if (!(*recv = malloc(total ? total : 1)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (c->size == 1 && !c->sum_bytes) {
        if (n)
            memcpy(*recv, send, n);
        return 0;
    }
    if (c->kind == SQ_COMM_ENV)
        return env_allgatherv(c, send, n, *recv, counts, displ, e);
    return sq_comm_mpi_allgatherv(send, n, *recv, counts, displ, c->size, e);
}

int sq_comm_bcast(const sq_comm *c, void *buf, size_t n, int root, sq_err *e)
{
    if (c->size == 1 && !c->sum_bytes)
        return 0;
    if (host_ok(c, "a broadcast", e))
        return e->code;
    if (c->kind == SQ_COMM_ENV) {
        if (c->rank != root)
            memset(buf, 0, n);
        return c->sum_bytes(c->sum_arg, buf, n, e);
    }
    return sq_comm_mpi_bcast(buf, n, root, e);
}

int sq_comm_barrier(const sq_comm *c, sq_err *e)
{
    if (c->size == 1 && !c->sum_bytes)
        return 0;
    if (host_ok(c, "a barrier", e))
        return e->code;
    if (c->kind == SQ_COMM_ENV) {
        unsigned char b = 0;
        return c->sum_bytes(c->sum_arg, &b, 1, e);
    }
    return sq_comm_mpi_barrier(e);
}

int sq_comm_sendrecv(const sq_comm *c, const void *send, size_t ns, int to, void *recv,
                     size_t nr, int from, sq_err *e)
{
    if (to < -1 || to >= c->size || from < -1 || from >= c->size)
        return sq_fail(e, SQ_EX_SOFTWARE, "send to %d, receive from %d: not ranks of %d", to,
                       from, c->size);
    if (c->kind == SQ_COMM_ENV)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "a send between %d processes started with RANK/"
                       "WORLD_SIZE needs MPI: start them with mpirun or srun", c->size);
    if ((to == c->rank) != (from == c->rank) || (to == c->rank && ns != nr))
        return sq_fail(e, SQ_EX_SOFTWARE, "rank %d sends %zu bytes to itself but receives %zu "
                       "(a send to itself is a receive from itself of as many)", c->rank,
                       to == c->rank ? ns : 0, from == c->rank ? nr : 0);
    if (to == c->rank) {
        if (send != recv && ns)
            memmove(recv, send, ns);
        return 0;
    }
    if (to < 0 && from < 0)
        return 0;
    return sq_comm_mpi_sendrecv(send, ns, to, recv, nr, from, e);
}
