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

/* The launcher that started several processes, or -1 */
static int which_launcher(void)
{
    for (size_t i = 0; i < N_LAUNCHERS; i++)
        if (env_int(launchers[i].size) > 1)
            return (int)i;
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

/* Host collectives need MPI (or one process) */
static int host_ok(const sq_comm *c, const char *what, sq_err *e)
{
    if (c->kind == SQ_COMM_ENV)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "%s across %d processes started with RANK/"
                       "WORLD_SIZE needs MPI: start them with mpirun or srun", what, c->size);
    return 0;
}

int sq_comm_allgather(const sq_comm *c, const void *send, void *recv, size_t n, sq_err *e)
{
    if (c->size == 1) {
        if (send != recv)
            memmove(recv, send, n);
        return 0;
    }
    if (host_ok(c, "an all-gather", e))
        return e->code;
    return sq_comm_mpi_allgather(send, recv, n, e);
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
    if (c->size == 1) {
        if (n)
            memcpy(*recv, send, n);
        return 0;
    }
    return sq_comm_mpi_allgatherv(send, n, *recv, counts, displ, c->size, e);
}

int sq_comm_bcast(const sq_comm *c, void *buf, size_t n, int root, sq_err *e)
{
    if (c->size == 1)
        return 0;
    if (host_ok(c, "a broadcast", e))
        return e->code;
    return sq_comm_mpi_bcast(buf, n, root, e);
}

int sq_comm_barrier(const sq_comm *c, sq_err *e)
{
    if (c->size == 1)
        return 0;
    if (host_ok(c, "a barrier", e))
        return e->code;
    return sq_comm_mpi_barrier(e);
}
