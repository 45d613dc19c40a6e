/* comm.h - the processes of one job: who this process is among them, and
 * the few collective operations data-parallel training and scoring need.
 *
 * One interface, three implementations:
 *   single  one process (no launcher): rank 0 of 1, every operation a copy;
 *   mpi     started by mpirun/mpiexec (Open MPI: OMPI_COMM_WORLD_*), srun
 *           (SLURM_PROCID with SLURM_NTASKS > 1) or any PMI/PMIx launcher:
 *           MPI_COMM_WORLD (comm_mpi.c; a build with MPI=1, Makefile);
 *   env     torchrun-style RANK / WORLD_SIZE / LOCAL_RANK without MPI: only
 *           the GPU backend's NCCL can run over it (the ranks meet through
 *           a file, SEQREC_NCCL_ID); its host collectives are sums of bytes
 *           over NCCL (sum_bytes), and a CPU run refuses it. WORLD_SIZE=1
 *           with SEQREC_NCCL_ID set is a job of one rank: the NCCL path
 *           checked on one GPU.
 *
 * Every operation is exact: bytes are moved, never added. A sum across
 * ranks is done by the caller, in rank order: each rank adds its own
 * terms to the partial sum it receives from the rank before it and sends
 * it on (sq_comm_sendrecv), so it is the same bits as one process that
 * ran every rank's part itself (lib/train/micro.c). Failure: a collective
 * that fails, or a rank that fails and calls sq_comm_abort, ends every
 * rank (MPI_Abort): no rank waits forever on one that is gone. */
#ifndef SQ_COMM_H
#define SQ_COMM_H

#include <stddef.h>

#include "err.h"

enum { SQ_COMM_SINGLE = 0, SQ_COMM_MPI = 1, SQ_COMM_ENV = 2 };

typedef struct {
    int kind;            /* SQ_COMM_* */
    int rank, size;      /* this process among size (0 of 1: single) */
    int local_rank;      /* among the processes of this node (its GPU) */
    char launcher[32];   /* "mpirun", "srun", "env" or "" (single) */
    int open;            /* MPI was initialised here (finalise at close) */
    /* env jobs: an exact sum of buf[n] bytes over the ranks, where one rank
     * gives each byte and the others zeros (lib/train/ranks.c sets it to the
     * GPU's NCCL); the host collectives of an env job are made of it */
    int (*sum_bytes)(void *arg, void *buf, size_t n, sq_err *e);
    void *sum_arg;
} sq_comm;

/* Whether c is a job of ranks (several processes, or an env job of one
 * rank: comm.h env), not one plain process. */
static inline int sq_comm_ranks(const sq_comm *c)
{
    return c && (c->size > 1 || c->kind != SQ_COMM_SINGLE);
}

/* Whether this process was started by a launcher with more than one
 * process, and which (name into launcher, "" when not). */
int sq_comm_launched(char *launcher, size_t n);

/* Opens the job's communicator: MPI when a launcher started several
 * processes and seqrec was built with it (SQ_EX_UNAVAILABLE naming the
 * launcher and `make MPI=1` otherwise), env for RANK/WORLD_SIZE alone,
 * single else. */
int sq_comm_open(sq_comm *c, sq_err *e);
/* Finalises MPI (a rank that fails calls sq_comm_abort instead). */
void sq_comm_close(sq_comm *c);
/* Ends every rank of the job with exit status code (never returns when
 * size > 1 under MPI; returns at once for a single process). */
void sq_comm_abort(const sq_comm *c, int code);

/* Every rank gets every rank's n bytes, in rank order: recv [size * n].
 * send may be recv + rank * n (in place). */
int sq_comm_allgather(const sq_comm *c, const void *send, void *recv, size_t n, sq_err *e);
/* As sq_comm_allgather with a length per rank: counts[size] and the
 * result's rank r at recv + displ[r], displ computed here (bytes);
 * *recv malloc'd (the caller frees it). */
int sq_comm_allgatherv(const sq_comm *c, const void *send, size_t n, void **recv,
                       size_t *counts, size_t *displ, sq_err *e);
/* root's n bytes into every rank's buf. */
int sq_comm_bcast(const sq_comm *c, void *buf, size_t n, int root, sq_err *e);
/* Waits for every rank. */
int sq_comm_barrier(const sq_comm *c, sq_err *e);
/* Point to point, at once both ways (no deadlock in a chain of ranks):
 * send's ns bytes to rank `to` and nr bytes from rank `from` into recv,
 * either rank -1 for none (send or recv then not read). The rank at the
 * other end calls it with the same sizes. To and from this rank itself
 * (both, ns == nr): a copy. Not in an env job (SQ_EX_UNAVAILABLE: its
 * host operations are sums over all ranks). */
int sq_comm_sendrecv(const sq_comm *c, const void *send, size_t ns, int to, void *recv,
                     size_t nr, int from, sq_err *e);

/* The MPI implementation (comm_mpi.c): the same contracts, for
 * c->kind == SQ_COMM_MPI. Without MPI in the build, open answers
 * SQ_EX_UNAVAILABLE and the rest are never called. */
int sq_comm_mpi_open(sq_comm *c, sq_err *e);
void sq_comm_mpi_close(sq_comm *c);
void sq_comm_mpi_abort(int code);
int sq_comm_mpi_allgather(const void *send, void *recv, size_t n, sq_err *e);
int sq_comm_mpi_allgatherv(const void *send, size_t n, void *recv, const size_t *counts,
                           const size_t *displ, int size, sq_err *e);
int sq_comm_mpi_bcast(void *buf, size_t n, int root, sq_err *e);
int sq_comm_mpi_barrier(sq_err *e);
int sq_comm_mpi_sendrecv(const void *send, size_t ns, int to, void *recv, size_t nr, int from,
                         sq_err *e);
/* Whether this build has MPI (1) or not (0). */
int sq_comm_mpi_built(void);

#endif
