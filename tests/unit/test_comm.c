/* Unit tests for lib/util/comm.c and lib/train/ranks.c in one process:
 * which launcher the environment names (and none), a torchrun-style
 * RANK/WORLD_SIZE job that has no host collectives, a bad rank, the
 * single process's collectives as copies, and the data hash that tells
 * two ranks' splits apart. The MPI paths run under mpirun in
 * tests/bats/mpi_train.bats. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "ranks.h"
#include "unit.h"

/* The launcher variables comm.c reads, saved and cleared around a test */
static const char *const vars[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID",
    "SLURM_LOCALID", "WORLD_SIZE", "RANK", "LOCAL_RANK"};
#define N_VARS (sizeof vars / sizeof vars[0])

static void env_save(char **saved)
{
    for (size_t i = 0; i < N_VARS; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
}

static void env_restore(char **saved)
{
    for (size_t i = 0; i < N_VARS; i++) {
        if (saved[i])
            setenv(vars[i], saved[i], 1);
        else
            unsetenv(vars[i]);
        free(saved[i]);
    }
}

/* An env job's sum of bytes that must not be called */
static int env_sum_never(void *arg, void *buf, size_t n, sq_err *e)
{
    (void)arg, (void)buf, (void)n;
    return sq_fail(e, SQ_EX_SOFTWARE, "called");
}

UNIT_TEST(test_comm_launchers)
{
    char *saved[N_VARS], who[32];
    env_save(saved);
    CHECK(!sq_comm_launched(who, sizeof who));
    CHECK_STR(who, "");
    setenv("SLURM_STEP_NUM_TASKS", "1", 1); /* one task: one process */
    CHECK(!sq_comm_launched(who, sizeof who));
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    CHECK(sq_comm_launched(who, sizeof who));
    CHECK_STR(who, "srun");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* mpirun's own variables first */
    CHECK(sq_comm_launched(who, sizeof who));
    CHECK_STR(who, "mpirun");
    env_restore(saved);
    env_save(saved);
    setenv("WORLD_SIZE", "x2", 1); /* not a number: no launcher */
    CHECK(!sq_comm_launched(who, sizeof who));
    env_restore(saved);
}

UNIT_TEST(test_comm_env_and_single)
{
    char *saved[N_VARS];
    env_save(saved);
    sq_comm c;
    sq_err e = {0};
    CHECK_EQ(sq_comm_open(&c, &e), 0); /* no launcher: one process */
    CHECK_EQ(c.size, 1);
    CHECK_EQ(c.rank, 0);
    int v[3] = {7, 8, 9}, w[3] = {0};
    CHECK_EQ(sq_comm_allgather(&c, v, w, sizeof v, &e), 0);
    CHECK(memcmp(v, w, sizeof v) == 0);
    size_t cnt[2];
    void *all = NULL;
    CHECK_EQ(sq_comm_allgatherv(&c, v, sizeof v, &all, cnt, cnt + 1, &e), 0);
    CHECK(all && cnt[0] == sizeof v && cnt[1] == 0 && memcmp(all, v, sizeof v) == 0);
    free(all);
    CHECK_EQ(sq_comm_bcast(&c, v, sizeof v, 0, &e) | sq_comm_barrier(&c, &e), 0);
    sq_comm_abort(&c, 1); /* one process: returns */
    sq_comm_close(&c);

    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "1", 1);
    setenv("LOCAL_RANK", "1", 1);
    CHECK_EQ(sq_comm_open(&c, &e), 0);
    CHECK_EQ(c.kind, SQ_COMM_ENV);
    CHECK(c.rank == 1 && c.size == 2 && c.local_rank == 1);
    CHECK_STR(c.launcher, "env");
    CHECK_EQ(sq_comm_allgather(&c, v, w, sizeof v / 2, &e), SQ_EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "start them with mpirun or srun") != NULL);
    sq_comm_close(&c);

    e = (sq_err){0};
    setenv("RANK", "2", 1); /* not a rank of 2 */
    CHECK_EQ(sq_comm_open(&c, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "RANK=2 is not a rank of WORLD_SIZE=2") != NULL);
    env_restore(saved);
}

/* sq_comm_sendrecv in one process: to and from itself a copy (in place
 * too), to and from nobody nothing, other ranks or unequal sizes refused;
 * an env job refuses it even with a sum of bytes (its host operations
 * involve every rank) */
UNIT_TEST(test_comm_sendrecv_single)
{
    char *saved[N_VARS];
    env_save(saved);
    sq_comm c;
    sq_err e = {0};
    CHECK_EQ(sq_comm_open(&c, &e), 0);
    float a[5] = {1, 2, 3, 4, 5}, b[5] = {0};
    CHECK_EQ(sq_comm_sendrecv(&c, a, sizeof a, 0, b, sizeof b, 0, &e), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_EQ(sq_comm_sendrecv(&c, a, sizeof a, 0, a, sizeof a, 0, &e), 0);
    CHECK(a[0] == 1 && a[4] == 5);
    float z[2] = {7, 8};
    CHECK_EQ(sq_comm_sendrecv(&c, NULL, 0, -1, z, sizeof z, -1, &e), 0);
    CHECK(z[0] == 7 && z[1] == 8); /* nobody: untouched */
    CHECK_EQ(sq_comm_sendrecv(&c, a, sizeof a, 0, b, 2 * sizeof *b, 0, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "sends 20 bytes to itself but receives 8") != NULL);
    e = (sq_err){0};
    CHECK_EQ(sq_comm_sendrecv(&c, a, sizeof a, 0, b, sizeof b, -1, &e), SQ_EX_SOFTWARE);
    e = (sq_err){0};
    CHECK_EQ(sq_comm_sendrecv(&c, a, sizeof a, 1, b, sizeof b, -1, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "send to 1, receive from -1: not ranks of 1") != NULL);
    sq_comm_close(&c);

    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "0", 1);
    e = (sq_err){0};
    CHECK_EQ(sq_comm_open(&c, &e), 0);
    c.sum_bytes = env_sum_never;
    CHECK_EQ(sq_comm_sendrecv(&c, a, sizeof a, 1, b, sizeof b, 1, &e), SQ_EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "needs MPI: start them with mpirun or srun") != NULL);
    sq_comm_close(&c);
    env_restore(saved);
}

UNIT_TEST(test_ranks_single_and_data_hash)
{
    sq_comm one = {.size = 1};
    sq_err e = {0};
    CHECK_EQ(sq_ranks_same_text(&one, "a=1\n", &e), 0);
    float p[2] = {1, 2};
    CHECK_EQ(sq_ranks_same_params(&one, p, 2, 1, &e), 0);
    uint32_t items[5] = {1, 2, 3, 4, 5};
    sq_seq seq[2] = {{.user = 1, .len = 3, .n_train = 1, .n_valid = 1, .off = 0},
                     {.user = 2, .len = 2, .n_train = 1, .n_valid = 1, .off = 3}};
    sq_dataset ds = {.seq = seq, .n_seq = 2, .items = items, .n_items_total = 5};
    ds.hdr.n_items = 5;
    uint64_t h = sq_ranks_data_hash(&ds);
    CHECK_EQ(sq_ranks_data_hash(&ds), h); /* a function of the data */
    items[4] = 1;                          /* one item */
    CHECK(sq_ranks_data_hash(&ds) != h);
    items[4] = 5;
    seq[1].n_train = 0; /* one cut point */
    CHECK(sq_ranks_data_hash(&ds) != h);
    seq[1].n_train = 1;
    CHECK_EQ(sq_ranks_data_hash(&ds), h);
}
