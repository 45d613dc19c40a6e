/* comm_mpi.c - comm.h's operations over MPI_COMM_WORLD. Compiled with
 * SQ_HAVE_MPI and MPI's include path when the build found MPI (Makefile:
 * MPI=auto|0|1); without it, stubs that say so.
 *
 * Only the main thread calls MPI (MPI_THREAD_FUNNELED: OpenMP teams run
 * between the calls). Errors return (MPI_ERRORS_RETURN) so that the
 * message names the operation; the program then ends every rank with
 * sq_comm_abort. A message is at most INT_MAX bytes a rank (MPI's int
 * counts): 512M floats of gradient, more than any model here. */
#include "comm.h"

#ifdef SQ_HAVE_MPI
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

int sq_comm_mpi_built(void) { return 1; }

static int mpi_fail(sq_err *e, int rc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        len = 0;
    s[len] = 0;
    return sq_fail(e, SQ_EX_IO, "MPI %s failed: %s", what, len ? s : "unknown error");
}

static int too_large(size_t n, sq_err *e)
{
    if (n > (size_t)INT_MAX)
        return sq_fail(e, SQ_EX_SOFTWARE, "%zu bytes are too many for one MPI message "
                       "(at most %d a rank)", n, INT_MAX);
    return 0;
}

int sq_comm_mpi_open(sq_comm *c, sq_err *e)
{
    int provided = 0, rank = 0, size = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED,
                                                                &provided);
    if (rc != MPI_SUCCESS)
        return mpi_fail(e, rc, "initialisation");
    c->open = 1;
    if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(MPI_COMM_WORLD, &size)) != MPI_SUCCESS)
        return mpi_fail(e, rc, "setup");
    if (rank != c->rank || size != c->size)
        return sq_fail(e, SQ_EX_SOFTWARE, "MPI says rank %d of %d, %s's environment %d of %d",
                       rank, size, c->launcher, c->rank, c->size);
    return 0;
}

void sq_comm_mpi_close(sq_comm *c)
{
    (void)c;
    MPI_Finalize();
}

void sq_comm_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int sq_comm_mpi_allgather(const void *send, void *recv, size_t n, sq_err *e)
{
    if (too_large(n, e))
        return e->code;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const void *s = send == (const char *)recv + (size_t)rank * n ? MPI_IN_PLACE : send;
    int rc = MPI_Allgather(s, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "all-gather");
}

int sq_comm_mpi_allgatherv(const void *send, size_t n, void *recv, const size_t *counts,
                           const size_t *displ, int size, sq_err *e)
{
    int *ic = malloc(2 * (size_t)size * sizeof *ic);
    if (!ic)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = 0;
    for (int r = 0; r < size && !rc; r++) {
        if (too_large(displ[r] + counts[r], e))
            rc = e->code;
        ic[r] = (int)counts[r];
        ic[size + r] = (int)displ[r];
    }
    if (!rc && (rc = MPI_Allgatherv(send, (int)n, MPI_BYTE, recv, ic, ic + size, MPI_BYTE,
                                    MPI_COMM_WORLD)) != MPI_SUCCESS)
        rc = mpi_fail(e, rc, "all-gather");
    free(ic);
    return rc;
}

int sq_comm_mpi_bcast(void *buf, size_t n, int root, sq_err *e)
{
    if (too_large(n, e))
        return e->code;
    int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "broadcast");
}

int sq_comm_mpi_barrier(sq_err *e)
{
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "barrier");
}

int sq_comm_mpi_sendrecv(const void *send, size_t ns, int to, void *recv, size_t nr, int from,
                         sq_err *e)
{
    if (too_large(ns, e) || too_large(nr, e))
        return e->code;
    /* one tag: between two ranks, messages arrive in the order sent */
    int rc = MPI_Sendrecv(send, (int)ns, MPI_BYTE, to < 0 ? MPI_PROC_NULL : to, 0, recv,
                          (int)nr, MPI_BYTE, from < 0 ? MPI_PROC_NULL : from, 0,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "send/receive");
}

#else /* no MPI in this build */

int sq_comm_mpi_built(void) { return 0; }

int sq_comm_mpi_open(sq_comm *c, sq_err *e)
{
    (void)c;
    return sq_fail(e, SQ_EX_UNAVAILABLE, "this seqrec was built without MPI (make MPI=1)");
}

void sq_comm_mpi_close(sq_comm *c) { (void)c; }
void sq_comm_mpi_abort(int code) { (void)code; }

static int none(sq_err *e)
{
    return sq_fail(e, SQ_EX_SOFTWARE, "no MPI in this build");
}

int sq_comm_mpi_allgather(const void *send, void *recv, size_t n, sq_err *e)
{
    (void)send, (void)recv, (void)n;
    return none(e);
}

int sq_comm_mpi_allgatherv(const void *send, size_t n, void *recv, const size_t *counts,
                           const size_t *displ, int size, sq_err *e)
{
    (void)send, (void)n, (void)recv, (void)counts, (void)displ, (void)size;
    return none(e);
}

int sq_comm_mpi_bcast(void *buf, size_t n, int root, sq_err *e)
{
    (void)buf, (void)n, (void)root;
    return none(e);
}

int sq_comm_mpi_barrier(sq_err *e) { return none(e); }

int sq_comm_mpi_sendrecv(const void *send, size_t ns, int to, void *recv, size_t nr, int from,
                         sq_err *e)
{
    (void)send, (void)ns, (void)to, (void)recv, (void)nr, (void)from;
    return none(e);
}

#endif
