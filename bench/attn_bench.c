/* attn_bench - seconds per training step and peak memory of ONE token-mixer
 * sublayer (an attention kind, `seqrec-train --attn KIND`), for sequence
 * length N, width d = C, H heads and a batch of B sequences of length N
 * (packed, ops.h), on the CPU or (--device cuda[:N]) a GPU. Run by
 * bench/bench-attn.sh (`make bench-attn`, the CPU) and by gpu-check's attn
 * part (tests/gpu/check.sh, `make bench-gpu`: every kind on the GPU beside
 * bench/attn_torch.py, PyTorch's fused attention), one configuration per
 * process so that the peak memory belongs to that configuration alone.
 *
 * THE KINDS are the registered mixers (lib/model/mixer.h, mixers.c): KIND
 * is looked up with sq_mixer_find, so every kind of the table, a future one
 * too, is benchmarked with no edit here (--list prints them). The layer is
 * the mixer's own sublayer, as the backbone (sasrec.c) runs it: its
 * per-layer tensors sized from its tensor table (sq_mixer_tensors with the
 * dims C = d, N, H, K = the kind's first integer option, L = 1), its cache and scratch from its
 * cache_size/scratch_size for a training workspace of B sequences of N
 * rows, its options at their defaults (sq_mixer_defaults), except that
 * --rank sets the kind's "rank" option where it has one (fpositional).
 *
 * THE STEP (float, causal, as training runs it; no layer norm, dropout,
 * residual or optimizer update, which cost O(T C) and are the same for every
 * kind):
 *   zero      every parameter gradient and dx (the trainer zeroes its
 *             gradient block once per step; the mixer's backward adds)
 *   forward   y = MIX(x, x) on x [T, C], T = B N: the mixer's forward (its
 *             projections, e.g. Q/K/V/O for softmax and the linear family,
 *             V only for the positional family, none for mixing, and its
 *             kernel)
 *   backward  dy fixed (random): the mixer's backward, into every
 *             parameter gradient and dx.
 * max_len = N (positions 0 .. N-1, the newest item at N-1).
 *
 * ON A GPU (--device cuda[:N], lib/ops/device.h; --precision fp32|tf32|bf16
 * for its GEMMs, default tf32): the context of sq_device_open, as
 * seqrec-train's. Every buffer of the layer (parameters, gradients, x, dx,
 * y, dy, cache, scratch) is device memory (sq_ctx_alloc), filled by
 * sq_ctx_upload from host copies initialised as on the CPU; the cache and
 * scratch are sized for a GPU's workspace (sq_mixer_cap.gpu: softmax keeps
 * a log-sum-exp, not the probabilities). A step zeroes the gradients and dx
 * with sq_zero on the context, stages the batch's offsets and positions
 * (sq_ctx_stage, as sq_packed_stage does for the trainer every step) and
 * runs the mixer; the ops only queue work, so each timed part ends with
 * sq_ctx_sync, which waits for the stream and reports a kernel's failure
 * (exit 70, 71 out of device memory). A kind without GPU kernels is refused
 * (64); no GPU is 69.
 *
 * HEADS. Default: the kind's default_heads (hydra: H = d, hs = 1), else 2
 * (hs = d / 2; the positional kinds keep one R or R1, R2 per head, as the
 * PARec/FPARec code). The heads column is the H the mixer was given; kinds
 * whose kernel has no heads (the fixed patterns, mixing) ignore it.
 *
 * INIT. The mixer's tensors are drawn as its table says (sq_tensors_init,
 * seed 1: Xavier normal weights, the kind's truncated normals, zero
 * biases); x and dy uniform in [-1, 1) from a generator seeded 1.
 *
 * TIMING. --warmup untimed steps (every buffer is already touched when it
 * is allocated, so they only warm caches and OpenBLAS), then timed steps:
 * at least --reps, more until --min-time seconds have passed (small N), but
 * only the first when it took longer than --slow seconds; the median is
 * reported.
 *
 * MEMORY. peak_rss_mib = the peak resident set at the end minus the
 * resident set just before the buffers are allocated (after the thread
 * pools and OpenBLAS have been warmed up by a small GEMM, so their own
 * buffers are in the baseline). The peak is VmHWM of /proc/self/status,
 * reset to the current RSS at the baseline (echo 5 > /proc/self/clear_refs),
 * so start-up peaks cannot mask the layer's; where the reset is not
 * allowed, getrusage's ru_maxrss before and after (which can read low for
 * layers smaller than the start-up peak).
 * buffers_mib = the bytes this program allocated for the layer: the batch's
 * offsets and positions, parameters, their gradients, x, y and their
 * gradients, the mixer's cache (its activations: projections, kernel cache)
 * and scratch (their gradients, kernel scratch), every page of which is
 * touched; each buffer is its own mmap, so small sizes round up to pages in
 * the RSS. --dry prints only that, without allocating (the driver uses it
 * to skip what would not fit; with --device cuda the GPU's workspace, no
 * device opened). On a GPU buffers_mib is the same count (the device's
 * buffers; their host copies are not counted again), and peak_rss_mib
 * stays the host's.
 * device_mib (GPU only) = the device's used bytes after the timed steps
 * minus those before the buffers were allocated (the backend's mem_used:
 * cudaMemGetInfo's total - free): the layer's buffers, the staging mirror
 * of its offsets and positions and what the ops upload; the context's
 * cuBLAS workspace is fixed at open and the kernels allocate nothing. Not
 * the layer's, but inside the difference: the code of kernels and cuBLAS
 * loaded on their first launch (CUDA's lazy module loading, a few MiB
 * at most), the driver's 2 MiB granularity, and each buffer's rounding up
 * to its size class (cuda/alloc.cu: at most an eighth more; blocks kept
 * after a free are not counted); no other process should share the GPU.
 *
 * Output: one CSV line
 *   kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,
 *   reps,kernel_sec,device,device_mib,precision
 * kernel_sec: the median over the same steps of the time inside the
 * mixer's forward + backward (projections and kernel: the kernel alone is
 * inside the mixer and no longer timed apart); sec_per_step adds the
 * zeroing of the gradients (and on a GPU the staging). status: ok, or
 * nonfinite when the last step's y or dx (downloaded from a GPU) is not
 * finite. device: --device as given; device_mib empty on the CPU;
 * precision: the GEMMs' (the CPU's is fp32 whatever --precision says).
 * --header prints the header line first; --checksum a second line
 *   checksum,sum(y),sum|y|,sum(dx),sum|dx|
 * of the last step, so that a GPU's layer can be compared with the CPU's
 * (tests/bats/bench_attn.bats, on the simulated device). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <cblas.h>
#include <omp.h>

#include "device.h"
#include "gpu.h"
#include "mixer.h"
#include "ops.h"
#include "rng.h"
#include "threads.h"

static void usage(FILE *f)
{
    char names[1024];
    fprintf(f,
        "Usage: attn_bench [OPTION]... KIND N D\n"
        "Time one causal token-mixer sublayer (the registered mixer KIND: its\n"
        "projections and kernel, forward and full backward) on B sequences of\n"
        "length N, width D, and print a CSV line\n"
        "  kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,kernel_sec,\n"
        "  device,device_mib,precision\n"
        "KIND: %s\n"
        "\n"
        "  -d, --device DEV  cpu (default), cuda or cuda:N: the layer's buffers\n"
        "                    and kernels on that GPU\n"
        "  -p, --precision P the GPU's GEMMs: fp32, tf32 (default) or bf16\n"
        "  -H, --heads H     heads (default 2; hydra: D); must divide D\n"
        "  -B, --batch B     sequences per step (default 1)\n"
        "  -t, --threads T   OpenMP and OpenBLAS threads (default 2)\n"
        "  -k, --rank K      the kind's rank (fpositional; default 40)\n"
        "  -w, --warmup W    untimed steps first (default 1)\n"
        "  -r, --reps R      at least R timed steps (default 3)\n"
        "  -m, --min-time S  and more until S seconds are spent (default 0.5)\n"
        "  -s, --slow S      a first timed step over S seconds is the only\n"
        "                    one (default 2)\n"
        "      --dry         print the CSV line with buffers_mib only, status\n"
        "                    \"dry\", allocating nothing\n"
        "      --header      print the CSV header first\n"
        "      --checksum    then a line checksum,sum(y),sum|y|,sum(dx),sum|dx|\n"
        "      --list        print the kinds, one a line, and exit\n"
        "  -h, --help        this help\n",
        sq_mixer_names(names, sizeof names));
}

/* ------------------------------------------------------------------------ */
/* Buffers: counted, and (unless dry) allocated and filled                  */

static size_t g_bytes;
static int g_dry;
static sq_rng g_rng;

static void *alloc_bytes(size_t n)
{
    g_bytes += n;
    if (g_dry)
        return NULL;
    /* Straight from the kernel, not the heap: the RSS then grows by the
     * pages the layer touches, not by what the heap had free already. */
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "attn_bench: out of memory (%zu bytes)\n", n);
        exit(70);
    }
    return p;
}

/* n floats, uniform in [-a, a) (a = 0: zeros; every page touched). */
static float *falloc(size_t n, double a)
{
    float *p = alloc_bytes(n * sizeof *p);
    if (!p)
        return NULL;
    if (a == 0) {
        memset(p, 0, n * sizeof *p);
    } else {
        for (size_t i = 0; i < n; i++)
            p[i] = (float)(a * (2 * sq_rng_uniform(&g_rng) - 1));
    }
    return p;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A VmRSS: or VmHWM: line of /proc/self/status in MiB, -1 if unreadable. */
static double proc_status_mib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) {
            v = strtod(line + n, NULL) / 1024.0; /* kB */
            break;
        }
    fclose(f);
    return v;
}

/* Peak RSS since the last reset_peak() in MiB: VmHWM, which the kernel lets
 * us reset (clear_refs 5), so that neither the process's start-up (the
 * re-exec of sq_threads_passive, freed warm-up buffers) nor page reuse
 * hides the layer's pages; ru_maxrss (getrusage) where that fails. */
static int g_hwm_reset;

static double peak_mib(void)
{
    if (g_hwm_reset) {
        double v = proc_status_mib("VmHWM:");
        if (v >= 0)
            return v;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* Resets the peak to the current RSS; returns that baseline. */
static double reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    g_hwm_reset = f && fputs("5", f) >= 0;
    if (f && fclose(f) != 0)
        g_hwm_reset = 0;
    if (g_hwm_reset) {
        double v = proc_status_mib("VmRSS:");
        if (v >= 0)
            return v;
        g_hwm_reset = 0;
    }
    return peak_mib();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of x[0..n-1] (sorts x). */
static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static int parse_int(const char *s, int lo, int hi, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi)
        return -1;
    *v = (int)x;
    return 0;
}

static int parse_pos_double(const char *s, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (!*s || *end || errno || !(x >= 0))
        return -1;
    *v = x;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The layer: one registered mixer                                          */

typedef struct {
    const sq_mixer *mx;
    sq_mixer_cfg cfg;
    sq_mixer_env env;
    sq_tensor_set ts;            /* the mixer's tensors, L = 1 */
    int N, C, B, T;
    size_t cache_n, scratch_n;
    sq_packed b;                 /* off, pos, B, T */
    float *P, *G;                /* parameters, their gradients (ts.total) */
    float *x, *dx, *y, *dy, *cache, *scratch;
    int gpu;                     /* --device cuda: the pointers above are the
                                    device's, hy and hdx the host copies */
    float *hy, *hdx;
    sq_ctx cx;                   /* main's context (sq_device_open) */
    sq_mix_args a;
} layer;

/* The kind's config, env, tensors and sizes (nothing allocated); 64 with
 * a message when the kind refuses the configuration. */
static int layer_setup(layer *L, int kind, int heads, int rank)
{
    sq_err e = {0};
    L->mx = sq_mixer_get(kind);
    sq_mixer_defaults(&L->cfg, kind);
    const sq_opt *o = L->mx->opts ? sq_opt_find(L->mx->opts, "rank") : NULL;
    char buf[32];
    snprintf(buf, sizeof buf, "%d", rank);
    if (o && sq_opt_set(o, &L->cfg, buf, SQ_EX_USAGE, NULL, &e))
        goto fail;
    if (!heads) {
        heads = L->mx->default_heads ? L->mx->default_heads(L->C) : 0;
        heads = heads > 0 ? heads : 2;
    }
    if (heads > L->C || L->C % heads) {
        fprintf(stderr, "attn_bench: heads %d do not divide D = %d\n", heads, L->C);
        return 64;
    }
    L->env = (sq_mixer_env){.dim = L->C, .heads = heads, .max_len = L->N, .layers = 1,
                            .causal = 1, .m = &L->cfg, .self = L->mx};
    if (sq_mixer_check(&L->env, &e))
        goto fail;
    sq_dims d = {{0}};
    sq_dims_set(&d, 'C', (uint64_t)L->C);
    sq_dims_set(&d, 'N', (uint64_t)L->N);
    sq_dims_set(&d, 'H', (uint64_t)heads);
    memset(&L->ts, 0, sizeof L->ts);
    if (L->mx->n_tensors > SQ_MIXER_MAXT) {
        fprintf(stderr, "attn_bench: %s: too many tensors\n", L->mx->name);
        return 70;
    }
    if (sq_mixer_tensors(&L->env, &L->ts, &d, 0, &e))
        goto fail;
    sq_tensors_layout(&L->ts);
    sq_mixer_cap cap = {.B = L->B, .T = L->T, .att = (size_t)L->B * L->N * L->N, .train = 1,
                        .gpu = L->gpu};
    L->cache_n = L->mx->cache_size(&L->env, &cap);
    L->scratch_n = L->mx->scratch_size(&L->env, &cap);
    if (L->cache_n == (size_t)-1 || L->scratch_n == (size_t)-1) {
        fprintf(stderr, "attn_bench: %s: cache or scratch too large\n", L->mx->name);
        return 64;
    }
    return 0;
fail:
    fprintf(stderr, "attn_bench: %s: %s\n", L->mx->name, e.msg);
    return e.code == SQ_EX_USAGE ? 64 : 70;
}

/* The sd of the kind's truncated-normal tensors (sq_init_rule hook). */
static double trunc_sd(const void *ctx, const sq_tensor_set *s, int i)
{
    const sq_mixer_env *env = ctx;
    return env->self->trunc_sd ? env->self->trunc_sd(env, s->desc[i]->name) : 0.01;
}

/* Counts (and unless dry allocates and fills) the layer's buffers. */
static void layer_alloc(layer *L)
{
    int B = L->B, N = L->N, T = L->T;
    size_t TC = (size_t)T * L->C;
    int *len = alloc_bytes((size_t)B * sizeof *len);
    L->b.off = alloc_bytes((size_t)(B + 1) * sizeof *L->b.off);
    L->b.pos = alloc_bytes((size_t)T * sizeof *L->b.pos);
    L->b.B = B;
    L->b.T = T;
    L->P = alloc_bytes(L->ts.total * sizeof *L->P);
    L->G = falloc(L->ts.total, 0);
    L->x = falloc(TC, 1);
    L->dy = falloc(TC, 1);
    L->y = falloc(TC, 0);
    L->dx = falloc(TC, 0);
    L->cache = falloc(L->cache_n, 0);
    L->scratch = falloc(L->scratch_n, 0);
    if (g_dry)
        return;
    for (int b = 0; b < B; b++)
        len[b] = N;
    sq_pack_offsets(L->b.off, len, B);
    sq_pack_positions(L->b.pos, L->b.off, B, N);
    sq_init_rule rule = {.xavier = 1, .trunc_sd = trunc_sd, .ctx = &L->env};
    sq_tensors_init(&L->ts, L->P, &rule, 1);
}

/* --device cuda: each buffer's device twin (sq_ctx_alloc), filled from its
 * host copy, which layer_alloc initialised as on the CPU; L's pointers then
 * name the device's, and hy, hdx the host copies y and dx come back to. */
static int layer_to_device(layer *L, sq_err *e)
{
    size_t TC = (size_t)L->T * L->C;
    float **p[] = {&L->P, &L->G, &L->x, &L->dx, &L->y, &L->dy, &L->cache, &L->scratch};
    size_t n[] = {L->ts.total, L->ts.total, TC, TC, TC, TC, L->cache_n, L->scratch_n};
    L->hy = L->y;
    L->hdx = L->dx;
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        float *d = sq_ctx_alloc(&L->cx, n[i] * sizeof *d, e);
        if (!d || sq_ctx_upload(&L->cx, d, *p[i], n[i] * sizeof *d, e))
            return e->code;
        *p[i] = d;
    }
    return 0;
}

/* The mixer's view of its one layer (sq_sasrec_mix_args), on L's buffers. */
static void layer_args(layer *L)
{
    L->a.cx = &L->cx;
    L->a.env = &L->env;
    L->a.b = &L->b;
    for (int j = 0; j < L->ts.n; j++) {
        L->a.P[j] = L->P + L->ts.off[j];
        L->a.G[j] = L->G + L->ts.off[j];
    }
    L->a.cache = L->cache;
    L->a.scratch = L->scratch;
    L->a.cap_T = L->T;
    L->a.train = 1;
}

/* One training step; *kernel gets the seconds spent in the mixer's forward
 * and backward (the rest is the zeroing of the gradients and, on a GPU, the
 * staging of the batch's offsets and positions, as the trainer's
 * sq_packed_stage does every step). On a GPU the ops only queue work: each
 * part is timed up to sq_ctx_sync, which waits for the stream (and reports
 * a kernel's failure). */
static int layer_step(layer *L, double *kernel, sq_err *e)
{
    sq_zero(&L->cx, L->G, L->ts.total);
    sq_zero(&L->cx, L->dx, (size_t)L->T * L->C);
    const void *host[] = {L->b.off, L->b.pos};
    size_t bytes[] = {((size_t)L->B + 1) * sizeof *L->b.off, (size_t)L->T * sizeof *L->b.pos};
    if (sq_ctx_stage(&L->cx, host, bytes, 2, e) || sq_ctx_sync(&L->cx, e))
        return e->code;
    double t0 = now();
    L->mx->forward(&L->a, L->y, L->x, L->x);
    L->mx->backward(&L->a, L->y, L->dy, L->x, L->x, L->dx, L->dx);
    if (sq_ctx_sync(&L->cx, e))
        return e->code;
    *kernel = now() - t0;
    return 0;
}

/* s = sum(y), sum|y|, sum(dx), sum|dx| of the last step (from the device
 * first on a GPU): a finite sum guards against timing a kernel that
 * produced NaN, and --checksum compares devices. */
static int layer_sums(layer *L, double s[4], sq_err *e)
{
    size_t n = (size_t)L->T * L->C;
    const float *y = L->y, *dx = L->dx;
    if (L->gpu) {
        if (sq_ctx_download(&L->cx, L->hy, L->y, n * sizeof *y, e) ||
            sq_ctx_download(&L->cx, L->hdx, L->dx, n * sizeof *dx, e))
            return e->code;
        y = L->hy;
        dx = L->hdx;
    }
    s[0] = s[1] = s[2] = s[3] = 0;
    for (size_t i = 0; i < n; i++) {
        s[0] += y[i];
        s[1] += fabs(y[i]);
        s[2] += dx[i];
        s[3] += fabs(dx[i]);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */

enum { OPT_DRY = 256, OPT_HEADER, OPT_LIST, OPT_CHECKSUM };

typedef struct {
    int heads, batch, threads, rank, warmup, reps, header, checksum, precision;
    double min_time, slow;
    const char *device;          /* as given: "cpu", "cuda", "cuda:N" */
} options;

/* The options into o, the kind and sizes into L (L->gpu from --device);
 * -1 when done (--help, --list), else 0 or the exit code. */
static int parse_args(int argc, char **argv, options *o, layer *L, int *kind)
{
    static const struct option longopts[] = {
        {"heads", required_argument, NULL, 'H'},
        {"batch", required_argument, NULL, 'B'},
        {"threads", required_argument, NULL, 't'},
        {"rank", required_argument, NULL, 'k'},
        {"warmup", required_argument, NULL, 'w'},
        {"reps", required_argument, NULL, 'r'},
        {"min-time", required_argument, NULL, 'm'},
        {"slow", required_argument, NULL, 's'},
        {"device", required_argument, NULL, 'd'},
        {"precision", required_argument, NULL, 'p'},
        {"dry", no_argument, NULL, OPT_DRY},
        {"header", no_argument, NULL, OPT_HEADER},
        {"checksum", no_argument, NULL, OPT_CHECKSUM},
        {"list", no_argument, NULL, OPT_LIST},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, backend = SQ_BACKEND_CPU, index;
    sq_err e = {0};
    while ((c = getopt_long(argc, argv, "H:B:t:k:w:r:m:s:d:p:h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'H': bad = parse_int(optarg, 1, 65536, &o->heads); break;
        case 'B': bad = parse_int(optarg, 1, 1 << 20, &o->batch); break;
        case 't': bad = parse_int(optarg, 1, 1024, &o->threads); break;
        case 'k': bad = parse_int(optarg, 1, 1 << 20, &o->rank); break;
        case 'w': bad = parse_int(optarg, 0, 1000, &o->warmup); break;
        case 'r': bad = parse_int(optarg, 1, 100000, &o->reps); break;
        case 'm': bad = parse_pos_double(optarg, &o->min_time); break;
        case 's': bad = parse_pos_double(optarg, &o->slow); break;
        case 'd':
            if (sq_device_parse(optarg, &backend, &index, &e))
                goto usage_error;
            o->device = optarg;
            break;
        case 'p':
            if (sq_precision_parse(optarg, &o->precision, &e))
                goto usage_error;
            break;
        case OPT_DRY: g_dry = 1; break;
        case OPT_HEADER: o->header = 1; break;
        case OPT_CHECKSUM: o->checksum = 1; break;
        case OPT_LIST:
            for (int k = 0; k < sq_mixer_count(); k++)
                printf("%s\n", sq_mixer_get(k)->name);
            return -1;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 64;
        }
        if (bad) {
            fprintf(stderr, "attn_bench: bad value for -%c: %s\n", c, optarg);
            return 64;
        }
    }
    L->gpu = backend == SQ_BACKEND_CUDA;
    if (argc - optind != 3) {
        usage(stderr);
        return 64;
    }
    *kind = sq_mixer_find(argv[optind]);
    if (*kind < 0) {
        char names[1024];
        fprintf(stderr, "attn_bench: unknown kind '%s' (kinds: %s)\n", argv[optind],
                sq_mixer_names(names, sizeof names));
        return 64;
    }
    if (parse_int(argv[optind + 1], 1, 1 << 24, &L->N) ||
        parse_int(argv[optind + 2], 1, 1 << 16, &L->C)) {
        fprintf(stderr, "attn_bench: N and D must be positive integers\n");
        return 64;
    }
    L->B = o->batch;
    if ((long long)L->B * L->N > (1LL << 30)) {
        fprintf(stderr, "attn_bench: B * N too large\n");
        return 64;
    }
    L->T = L->B * L->N;
    return 0;
usage_error:
    fprintf(stderr, "attn_bench: %s\n", e.msg);
    return 64;
}

/* The precision the layer computes in: the CPU's is fp32 whatever
 * --precision says (it sets the GPU's GEMMs). */
static const char *precision_name(const layer *L, const options *o)
{
    static const char *const names[] = {"fp32", "tf32", "bf16"};
    return L->gpu ? names[o->precision] : "fp32";
}

/* Thread pools up and OpenBLAS's buffers touched before the baseline. */
static int warm_up(int threads)
{
    enum { M = 256 };
    sq_threads_set(threads);
    float *a = calloc((size_t)M * M * 3, sizeof *a);
    if (!a)
        return 70;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, M, M, 1, a, M, a + M * M, M, 0,
                a + 2 * M * M, M);
    double s = 0;
    #pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < M * M; i++)
        s += a[2 * M * M + i];
    free(a);
    return s != 0 ? 70 : 0;
}

/* The device's used bytes (cuda; 0 on the CPU). */
static int device_used(const layer *L, size_t *used, sq_err *e)
{
    *used = 0;
    return L->gpu ? sq_gpu_mem_used(L->cx.gpu, used, e) : 0;
}

/* Warm-up steps, then the timed ones (the policy of the header comment):
 * their medians into *step and *kernel, their count into *n. */
static int time_steps(layer *L, const options *o, double *step, double *kernel, int *n,
                      sq_err *e)
{
    int cap = 100000, rc = 0;
    double *ts = calloc((size_t)cap, sizeof *ts), *ks = calloc((size_t)cap, sizeof *ks);
    if (!ts || !ks) {
        free(ts);
        free(ks);
        return sq_fail(e, 70, "out of memory");
    }
    double k;
    for (int i = 0; i < o->warmup && !rc; i++)
        rc = layer_step(L, &k, e);
    /* The first timed step decides whether more follow. */
    double t0 = now(), total = 0;
    if (!rc)
        rc = layer_step(L, &ks[0], e);
    ts[0] = now() - t0;
    total = ts[0];
    *n = 1;
    if (!rc && ts[0] <= o->slow) {
        while (!rc && *n < cap && (*n < o->reps || total < o->min_time)) {
            t0 = now();
            rc = layer_step(L, &ks[*n], e);
            ts[*n] = now() - t0;
            total += ts[(*n)++];
        }
    }
    *step = median(ts, *n);
    *kernel = median(ks, *n);
    free(ts);
    free(ks);
    return rc;
}

/* The layer built, on the device of cx, timed and measured; its CSV line
 * (and --checksum's). */
static int run(layer *L, const options *o, const char *name)
{
    sq_err e = {0};
    size_t used0 = 0, used1 = 0;
    int n = 0, rc;
    double med = 0, kmed = 0, s[4] = {0};
    sq_rng_seed(&g_rng, 1, 0);
    if (device_used(L, &used0, &e))
        goto fail;
    double rss0 = reset_peak();
    layer_alloc(L);
    if (L->gpu && layer_to_device(L, &e))
        goto fail;
    layer_args(L);
    if (time_steps(L, o, &med, &kmed, &n, &e) || device_used(L, &used1, &e) ||
        layer_sums(L, s, &e))
        goto fail;
    const char *status = isfinite(s[0] + s[1] + s[2] + s[3]) ? "ok" : "nonfinite";
    double rss = peak_mib() - rss0;
    printf("%s,%d,%d,%d,%d,%.6g,%.3f,%.3f,%s,%d,%d,%.6g,%s,", name, L->C, L->N, L->B,
           o->threads, med, rss, (double)g_bytes / 1048576.0, status, L->env.heads, n, kmed,
           o->device);
    if (L->gpu)
        printf("%.3f", (double)(used1 - used0) / 1048576.0);
    printf(",%s\n", precision_name(L, o));
    if (o->checksum)
        printf("checksum,%.9g,%.9g,%.9g,%.9g\n", s[0], s[1], s[2], s[3]);
    return 0;
fail:
    rc = e.code ? e.code : 70;
    fprintf(stderr, "attn_bench: %s: %s\n", name, e.msg);
    return rc;
}

int main(int argc, char **argv)
{
    sq_threads_passive(argv);

    options o = {.batch = 1, .threads = 2, .rank = 40, .warmup = 1, .reps = 3,
                 .precision = SQ_PREC_TF32, .min_time = 0.5, .slow = 2.0, .device = "cpu"};
    layer L;
    memset(&L, 0, sizeof L);
    int kind = 0, rc = parse_args(argc, argv, &o, &L, &kind);
    if (rc)
        return rc < 0 ? 0 : rc;
    if ((rc = layer_setup(&L, kind, o.heads, o.rank)))
        return rc;
    const char *name = L.mx->name;
    if (L.gpu && !L.mx->gpu) {
        fprintf(stderr, "attn_bench: %s runs on the CPU only (no GPU kernels)\n", name);
        return 64;
    }

    if (o.header)
        printf("kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,"
               "kernel_sec,device,device_mib,precision\n");
    if (g_dry) {
        layer_alloc(&L);
        printf("%s,%d,%d,%d,%d,,,%.3f,dry,%d,0,,%s,,%s\n", name, L.C, L.N, L.B, o.threads,
               (double)g_bytes / 1048576.0, L.env.heads, o.device, precision_name(&L, &o));
        return 0;
    }

    if ((rc = warm_up(o.threads)))
        return rc;
    sq_err e = {0};
    if (sq_device_open(&L.cx, o.device, o.precision, o.threads, &e)) {
        fprintf(stderr, "attn_bench: %s\n", e.msg);
        return e.code;
    }
    rc = run(&L, &o, name);
    sq_device_close(&L.cx);
    return rc;
}
