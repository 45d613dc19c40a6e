// prof.cu - SEQREC_GPU_PROFILE=FILE: where a run's device time goes, op by
// op, written as CSV when the context closes.
//
// With the variable set, the loader is handed a second table of the one
// op list (gpu.cu) whose entries bracket each op with be_prof_begin and
// be_prof_end: a timing event on the stream before and after the op's
// work, and the host's clock around the call. Events are harvested in
// blocks (one wait per BE_PROF_CAP ops, and at every sq_ctx_sync), so the
// stream is not drained per op and the timings are the run's own. Per
// label (the op's name; a GEMM's adds its shape) the file sums
//   gpu_ms   the device time between the op's two events: its kernels,
//            copies and cuBLAS calls;
//   host_ms  the host's time inside the call (launches, host-side work
//            such as bucketing rows, and any wait the op makes);
// and its header gives the wall time, the device's busy time and its idle
// time between consecutive ops (the stream empty, waiting for the host:
// a launch-bound run shows it here).
//
// Only eager work is timed op by op: the steps of a CUDA graph
// (--cuda-graphs) after its recording step queue nothing op by op, and an
// event recorded in a capture would be a node of the graph. A replay is
// timed whole, as the label "graph replay (a whole step)"; the capturing
// steps (two a key) are not timed. An op called from inside
// another (through the table, never: the backend calls be_NAME directly)
// is counted in its caller's time. Profiling adds two event records a
// call (a few microseconds of host time); the results are the same bits.
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common.cuh"

#define BE_PROF_CAP 4096 // ops between harvests
#define BE_PROF_LABEL 64

struct be_prof_stat {
    char label[BE_PROF_LABEL];
    long calls;
    double gpu_ms, host_ms;
};

struct be_prof {
    FILE *f;
    char path[1024];
    cudaEvent_t ev[2 * BE_PROF_CAP]; // begin, end of each pending op
    char label[BE_PROF_CAP][BE_PROF_LABEL];
    double host0[BE_PROF_CAP];      // the host clock at the call's start
    int n;                          // pending ops
    int open;                       // the op being timed, or -1
    int have_last;                  // last_end holds the previous op's end
    cudaEvent_t last_end;           // of the last op harvested
    struct be_prof_stat *stat;
    int n_stat, cap_stat;
    long ops;
    double busy_ms, idle_ms, wall0;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static struct be_prof_stat *stat_of(struct be_prof *p, const char *label)
{
    for (int i = 0; i < p->n_stat; i++)
        if (!strcmp(p->stat[i].label, label))
            return &p->stat[i];
    if (p->n_stat == p->cap_stat) {
        int cap = p->cap_stat ? 2 * p->cap_stat : 64;
        void *s = realloc(p->stat, (size_t)cap * sizeof *p->stat);
        if (!s)
            return NULL;
        p->stat = (struct be_prof_stat *)s;
        p->cap_stat = cap;
    }
    struct be_prof_stat *s = &p->stat[p->n_stat++];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    return s;
}

// The pending ops' times into the sums: one wait for the last end event.
// An event the stream never reached (a failed run) ends the profile's
// harvest quietly: the sticky error is the run's report.
static void harvest(sq_gpu_be *b)
{
    struct be_prof *p = b->prof;
    if (!p->n)
        return;
    if (!b->failed && !be_wait(b, p->ev[2 * p->n - 1], "the profile's events")) {
        for (int i = 0; i < p->n; i++) {
            float op = 0, gap = 0;
            struct be_prof_stat *s = stat_of(p, p->label[i]);
            if (cudaEventElapsedTime(&op, p->ev[2 * i], p->ev[2 * i + 1]) != cudaSuccess || !s)
                continue;
            s->gpu_ms += op;
            p->busy_ms += op;
            cudaEvent_t prev = i ? p->ev[2 * i - 1] : p->have_last ? p->last_end : NULL;
            if (prev && cudaEventElapsedTime(&gap, prev, p->ev[2 * i]) == cudaSuccess && gap > 0)
                p->idle_ms += gap;
        }
        // the last end event stays, as the next block's first gap's start
        cudaEvent_t t = p->last_end;
        p->last_end = p->ev[2 * p->n - 1];
        p->ev[2 * p->n - 1] = t;
        p->have_last = 1;
    }
    p->n = 0;
}

int be_prof_begin(sq_gpu_be *b, const char *name)
{
    struct be_prof *p = b->prof;
    // a replay's graph_end launches the whole step: timed as one
    int replay = b->gmode == BE_G_PLAN && !strcmp(name, "graph_end");
    if (!p || p->open >= 0 || b->gmode == BE_G_CAPTURE || (b->gmode == BE_G_PLAN && !replay))
        return -1;
    if (p->n == BE_PROF_CAP)
        harvest(b);
    int i = p->n;
    if (cudaEventRecord(p->ev[2 * i], b->stream) != cudaSuccess)
        return -1; // not timed; the op's own work reports what is wrong
    snprintf(p->label[i], BE_PROF_LABEL, "%s", replay ? "graph replay (a whole step)" : name);
    p->host0[i] = now_ms();
    p->open = i;
    return i;
}

void be_prof_end(sq_gpu_be *b, int i)
{
    struct be_prof *p = b->prof;
    if (i < 0 || !p)
        return;
    p->open = -1;
    // the host's time counts either way; an op whose end cannot be recorded
    // is dropped from the device's sums
    struct be_prof_stat *s = stat_of(p, p->label[i]);
    if (s) {
        s->calls++;
        s->host_ms += now_ms() - p->host0[i];
    }
    p->ops++;
    if (cudaEventRecord(p->ev[2 * i + 1], b->stream) == cudaSuccess)
        p->n++;
    if (!strcmp(p->label[i], "sync"))
        harvest(b);
}

void be_prof_label(sq_gpu_be *b, const char *op, const char *fmt, ...)
{
    struct be_prof *p = b->prof;
    if (!p || p->open < 0 || strcmp(p->label[p->open], op))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->label[p->open], BE_PROF_LABEL, fmt, ap);
    va_end(ap);
}

// The file's path: the variable's, each %r the process's rank under a
// launcher (its RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID; 0
// alone), so that the processes of a job write a file each; %% is %.
// 0, or -1 when it is too long.
static int prof_path(char *out, size_t n, const char *v)
{
    const char *names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    const char *rank = "0";
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *r = getenv(names[i]);
        if (r && *r) {
            rank = r;
            break;
        }
    }
    size_t at = 0;
    for (const char *c = v; *c; c++) {
        const char *piece = c[0] != '%' ? NULL : c[1] == 'r' ? rank : c[1] == '%' ? "%" : NULL;
        size_t len = piece ? strlen(piece) : 1;
        if (at + len >= n)
            return -1;
        memcpy(out + at, piece ? piece : c, len);
        at += len;
        c += piece != NULL;
    }
    out[at] = '\0';
    return 0;
}

int be_prof_open(sq_gpu_be *b, sq_err *e)
{
    const char *path = getenv("SEQREC_GPU_PROFILE");
    if (!path || !*path)
        return 0;
    struct be_prof *p = (struct be_prof *)calloc(1, sizeof *p);
    if (!p)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    b->prof = p;
    p->open = -1;
    if (prof_path(p->path, sizeof p->path, path) != 0)
        return sq_fail(e, SQ_EX_USAGE, "SEQREC_GPU_PROFILE: path too long");
    p->f = fopen(p->path, "w");
    if (!p->f)
        return sq_fail(e, SQ_EX_CANTCREAT, "SEQREC_GPU_PROFILE: cannot create %s: %s", p->path,
                       strerror(errno));
    for (int i = 0; i < 2 * BE_PROF_CAP; i++)
        if (cudaEventCreate(&p->ev[i]) != cudaSuccess)
            return sq_fail(e, SQ_EX_SOFTWARE, "SEQREC_GPU_PROFILE: cudaEventCreate failed");
    if (cudaEventCreate(&p->last_end) != cudaSuccess)
        return sq_fail(e, SQ_EX_SOFTWARE, "SEQREC_GPU_PROFILE: cudaEventCreate failed");
    p->wall0 = now_ms();
    return 0;
}

static int by_gpu_time(const void *x, const void *y)
{
    const struct be_prof_stat *a = (const struct be_prof_stat *)x, *c = (const struct be_prof_stat *)y;
    if (a->gpu_ms != c->gpu_ms)
        return a->gpu_ms < c->gpu_ms ? 1 : -1;
    return strcmp(a->label, c->label);
}

// The CSV, busiest label first. A label is one op (a GEMM's with its
// shape: M x N x K and the operands' transposes, row-major as sq_gemm).
static int write_csv(struct be_prof *p)
{
    double wall = now_ms() - p->wall0;
    qsort(p->stat, (size_t)p->n_stat, sizeof *p->stat, by_gpu_time);
    fprintf(p->f, "# seqrec GPU profile: %ld ops timed; wall %.3f ms, device busy %.3f ms "
                  "(%.1f%%), idle between ops %.3f ms\n",
            p->ops, wall, p->busy_ms, wall > 0 ? 100 * p->busy_ms / wall : 0.0, p->idle_ms);
    fprintf(p->f, "op,calls,gpu_ms,gpu_us_per_call,gpu_share,host_ms,host_us_per_call\n");
    for (int i = 0; i < p->n_stat; i++) {
        const struct be_prof_stat *s = &p->stat[i];
        double c = s->calls ? (double)s->calls : 1;
        fprintf(p->f, "%s,%ld,%.3f,%.2f,%.4f,%.3f,%.2f\n", s->label, s->calls, s->gpu_ms,
                1e3 * s->gpu_ms / c, p->busy_ms > 0 ? s->gpu_ms / p->busy_ms : 0.0, s->host_ms,
                1e3 * s->host_ms / c);
    }
    return ferror(p->f) ? -1 : 0;
}

// Writes the file (when the run's work is done: before the stream goes)
// and frees the profile. A file that cannot be written is said on stderr:
// the context is closing, its caller has nothing left to report it to.
void be_prof_close(sq_gpu_be *b)
{
    struct be_prof *p = b->prof;
    if (!p)
        return;
    harvest(b);
    if (p->f) {
        int bad = write_csv(p);
        if (fclose(p->f) != 0 || bad)
            fprintf(stderr, "%s: SEQREC_GPU_PROFILE: cannot write %s: %s\n",
                    program_invocation_short_name, p->path, strerror(errno));
    }
    for (int i = 0; i < 2 * BE_PROF_CAP; i++)
        if (p->ev[i])
            cudaEventDestroy(p->ev[i]);
    if (p->last_end)
        cudaEventDestroy(p->last_end);
    free(p->stat);
    free(p);
    b->prof = NULL;
}
