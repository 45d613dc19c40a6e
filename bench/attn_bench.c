/* attn_bench - seconds per training step and peak memory of ONE attention
 * sublayer, for one attention kind, sequence length N, width d = C, H heads
 * and a batch of B sequences of length N (packed, ops.h). Run by
 * bench/bench-attn.sh (`make bench-attn`), one configuration per process so
 * that the peak RSS belongs to that configuration alone.
 *
 * THE STEP (float, causal, as training runs it; no layer norm, dropout,
 * residual or optimizer update, which cost O(T C) and are the same for every
 * kind):
 *   forward   inputs of the kind from x [T, C], T = B N:
 *               softmax, linrec, linear, efficient, hydra:
 *                 q = x Wq^T + bq, k = x Wk^T + bk, v = x Wv^T + bv
 *               positional (Rw [H, N, N]), fpositional (R1, R2 [H, N, k]),
 *               average, linear-anneal, exp-anneal:  v = x Wv^T + bv only
 *               mixing: none, its token-mixing MLP (W1, W2 [N, N], b1, b2)
 *                 reads x itself
 *             a = the kind's kernel, y = a Wo^T + bo
 *   backward  dy fixed (random); zero every gradient (as the trainer does
 *             once per step), then the _backward of every op above in
 *             reverse: Wo, the kernel (its parameters too), the projections
 *             down to dx.
 * max_len = N (positions 0 .. N-1, the newest item at N-1).
 *
 * HEADS. Default 2 (hs = d / 2; the positional kinds keep one Rw or R1, R2
 * per head, as the PARec/FPARec code); hydra: H = d (hs = 1, HydraRec);
 * the fixed patterns and mixing have none (reported as 1).
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
 * buffers_mib = the bytes this program allocated for the layer: parameters,
 * their gradients, activations and their gradients, kernel caches and
 * scratch (every page of which is touched; each buffer is its own mmap, so
 * small sizes round up to pages in the RSS). --dry prints only that, without
 * allocating (the driver uses it to skip what would not fit).
 *
 * Output: one CSV line
 *   kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,
 *   reps,kernel_sec
 * kernel_sec: the median over the same steps of the time inside the kind's
 * kernel forward + backward alone (no projections, no zeroing).
 * (--header prints the header line first). */
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

#include "attn_linear.h"
#include "attn_pos.h"
#include "ops.h"
#include "rng.h"
#include "threads.h"

enum fam { F_SOFTMAX, F_LATTN, F_PA, F_FPA, F_FIXED, F_MIXING };

static const struct {
    const char *name;
    enum fam fam;
    int sub; /* sq_lattn_kind or sq_attn_pos_kind */
} KINDS[] = {
    {"softmax", F_SOFTMAX, 0},
    {"linrec", F_LATTN, SQ_LATTN_LINREC},
    {"linear", F_LATTN, SQ_LATTN_LINEAR},
    {"efficient", F_LATTN, SQ_LATTN_EFFICIENT},
    {"hydra", F_LATTN, SQ_LATTN_HYDRA},
    {"positional", F_PA, SQ_ATTN_POSITIONAL},
    {"fpositional", F_FPA, SQ_ATTN_FPOSITIONAL},
    {"average", F_FIXED, SQ_ATTN_AVERAGE},
    {"linear-anneal", F_FIXED, SQ_ATTN_LINEAR_ANNEAL},
    {"exp-anneal", F_FIXED, SQ_ATTN_EXP_ANNEAL},
    {"mixing", F_MIXING, SQ_ATTN_MIXING},
};
#define NKINDS ((int)(sizeof KINDS / sizeof KINDS[0]))

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: attn_bench [OPTION]... KIND N D\n"
        "Time one causal attention sublayer (projections, kernel, output\n"
        "projection, forward and full backward) on B sequences of length N,\n"
        "width D, and print a CSV line\n"
        "  kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,kernel_sec\n"
        "KIND: softmax linrec linear efficient hydra positional fpositional\n"
        "      average linear-anneal exp-anneal mixing\n"
        "\n"
        "  -H, --heads H     heads (default 2; hydra: D); must divide D\n"
        "  -B, --batch B     sequences per step (default 1)\n"
        "  -t, --threads T   OpenMP and OpenBLAS threads (default 2)\n"
        "  -k, --rank K      fpositional rank k (default 40)\n"
        "  -w, --warmup W    untimed steps first (default 1)\n"
        "  -r, --reps R      at least R timed steps (default 3)\n"
        "  -m, --min-time S  and more until S seconds are spent (default 0.5)\n"
        "  -s, --slow S      a first timed step over S seconds is the only\n"
        "                    one (default 2)\n"
        "      --dry         print the CSV line with buffers_mib only, status\n"
        "                    \"dry\", allocating nothing\n"
        "      --header      print the CSV header first\n"
        "  -h, --help        this help\n");
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
/* The layer                                                                */

typedef struct {
    int kind, fam, sub, N, C, H, B, T, k;
    int *off, *len, *pos;
    /* input, output, their gradients */
    float *x, *dx, *y, *dy;
    /* projections (NULL where the kind has none) */
    float *Wq, *bq, *Wk, *bk, *Wv, *bv, *Wo, *bo;
    float *dWq, *dbq, *dWk, *dbk, *dWv, *dbv, *dWo, *dbo;
    float *q, *k_, *v, *a, *dq, *dk, *dv, *da;
    /* kernel state */
    float *att, *cache, *scratch;
    float *Rw, *dRw, *R1, *R2, *dR1, *dR2;
    float *W1, *b1, *W2, *b2, *dW1, *db1, *dW2, *db2;
    /* gradient buffers zeroed every step */
    float *zero[24];
    size_t zero_n[24];
    int nzero;
} layer;

static float *grad(layer *L, size_t n)
{
    float *p = falloc(n, 0);
    L->zero[L->nzero] = p;
    L->zero_n[L->nzero] = n;
    L->nzero++;
    return p;
}

static void layer_alloc(layer *L)
{
    int N = L->N, C = L->C, H = L->H, B = L->B, T = L->T;
    size_t TC = (size_t)T * C, CC = (size_t)C * C;
    double ws = 1.0 / sqrt((double)C);

    L->len = alloc_bytes((size_t)B * sizeof *L->len);
    L->off = alloc_bytes((size_t)(B + 1) * sizeof *L->off);
    L->pos = alloc_bytes((size_t)T * sizeof *L->pos);
    if (!g_dry) {
        for (int b = 0; b < B; b++)
            L->len[b] = N;
        sq_pack_offsets(L->off, L->len, B);
        sq_pack_positions(L->pos, L->off, B, N);
    }
    L->x = falloc(TC, 1);
    L->dy = falloc(TC, 1);
    L->y = falloc(TC, 0);
    L->dx = grad(L, TC);
    L->a = falloc(TC, 0);
    L->da = grad(L, TC);
    L->Wo = falloc(CC, ws);
    L->bo = falloc((size_t)C, 0.1);
    L->dWo = grad(L, CC);
    L->dbo = grad(L, (size_t)C);
    if (L->fam == F_SOFTMAX || L->fam == F_LATTN) {
        L->Wq = falloc(CC, ws);
        L->bq = falloc((size_t)C, 0.1);
        L->Wk = falloc(CC, ws);
        L->bk = falloc((size_t)C, 0.1);
        L->q = falloc(TC, 0);
        L->k_ = falloc(TC, 0);
        L->dWq = grad(L, CC);
        L->dbq = grad(L, (size_t)C);
        L->dWk = grad(L, CC);
        L->dbk = grad(L, (size_t)C);
        L->dq = grad(L, TC);
        L->dk = grad(L, TC);
    }
    if (L->fam != F_MIXING) {
        L->Wv = falloc(CC, ws);
        L->bv = falloc((size_t)C, 0.1);
        L->v = falloc(TC, 0);
        L->dWv = grad(L, CC);
        L->dbv = grad(L, (size_t)C);
        L->dv = grad(L, TC);
    }
    /* Cache sizes need off: in a dry run, build it on the stack. */
    int offd[2] = {0, T}, *off = L->off;
    int *offb = NULL;
    if (g_dry) {
        offb = malloc((size_t)(B + 1) * sizeof *offb);
        if (!offb)
            exit(70);
        for (int b = 0; b <= B; b++)
            offb[b] = b * N;
        off = B == 1 ? offd : offb;
    }
    size_t NN = (size_t)N * N;
    switch (L->fam) {
    case F_SOFTMAX:
        L->att = falloc(sq_attention_cache_size(off, B, H), 0);
        break;
    case F_LATTN:
        L->cache = falloc(sq_lattn_cache_size((sq_lattn_kind)L->sub, off, B, H, C), 0);
        L->scratch = falloc(sq_lattn_scratch_size((sq_lattn_kind)L->sub, off, B, H, C), 0);
        break;
    case F_PA:
        L->Rw = falloc((size_t)H * NN, 1);
        L->dRw = grad(L, (size_t)H * NN);
        L->att = falloc(sq_pa_cache_size(off, B, H), 0);
        break;
    case F_FPA:
        L->R1 = falloc((size_t)H * N * L->k, 0.3);
        L->R2 = falloc((size_t)H * N * L->k, 0.3);
        L->dR1 = grad(L, (size_t)H * N * L->k);
        L->dR2 = grad(L, (size_t)H * N * L->k);
        L->att = falloc(sq_pa_cache_size(off, B, H), 0);
        L->scratch = falloc(sq_fpa_scratch_size(N, H), 0);
        break;
    case F_FIXED:
        break;
    case F_MIXING: {
        double wm = 1.0 / sqrt((double)N);
        L->W1 = falloc(NN, wm);
        L->W2 = falloc(NN, wm);
        L->b1 = falloc((size_t)N, 0.1);
        L->b2 = falloc((size_t)N, 0.1);
        L->dW1 = grad(L, NN);
        L->dW2 = grad(L, NN);
        L->db1 = grad(L, (size_t)N);
        L->db2 = grad(L, (size_t)N);
        L->cache = falloc(sq_mixing_cache_size(T, C), 0);
        L->scratch = falloc(sq_mixing_scratch_size(T, C), 0);
        break;
    }
    }
    free(offb);
}

/* One training step; returns the seconds spent in the kernel's forward and
 * backward alone (the rest is projections and zeroing). */
static double layer_step(layer *L)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    int N = L->N, C = L->C, H = L->H, B = L->B, T = L->T, sub = L->sub;
    const int *off = L->off, *pos = L->pos;

    /* forward */
    if (L->fam == F_SOFTMAX || L->fam == F_LATTN) {
        sq_linear_forward(cx, L->q, L->x, L->Wq, L->bq, T, C, C);
        sq_linear_forward(cx, L->k_, L->x, L->Wk, L->bk, T, C, C);
    }
    if (L->fam != F_MIXING)
        sq_linear_forward(cx, L->v, L->x, L->Wv, L->bv, T, C, C);
    double t0 = now();
    switch (L->fam) {
    case F_SOFTMAX:
        sq_attention_forward(cx, L->a, L->att, L->q, L->k_, L->v, C, off, B, H, C, 1);
        break;
    case F_LATTN:
        sq_lattn_forward(cx, (sq_lattn_kind)sub, L->a, L->cache, L->scratch, L->q, L->k_,
                         L->v, C, off, B, H, C, 1);
        break;
    case F_PA:
        sq_pa_forward(cx, L->a, L->att, L->Rw, L->v, C, off, pos, B, H, C, N, 1);
        break;
    case F_FPA:
        sq_fpa_forward(cx, L->a, L->att, L->scratch, L->R1, L->R2, L->k, L->v, C, off, pos,
                       B, H, C, N, 1);
        break;
    case F_FIXED:
        sq_fixed_forward(cx, L->a, L->v, C, off, pos, B, C, N, sub,
                         (float)SQ_EXP_ANNEAL_DECAY, 1);
        break;
    case F_MIXING:
        sq_mixing_forward(cx, L->a, L->cache, L->x, C, L->W1, L->b1, L->W2, L->b2, off, pos,
                          B, C, N, 1);
        break;
    }
    double tk = now() - t0;
    sq_linear_forward(cx, L->y, L->a, L->Wo, L->bo, T, C, C);

    /* backward */
    for (int i = 0; i < L->nzero; i++)
        memset(L->zero[i], 0, L->zero_n[i] * sizeof(float));
    sq_linear_backward(cx, L->da, L->dWo, L->dbo, L->dy, L->a, L->Wo, T, C, C);
    t0 = now();
    switch (L->fam) {
    case F_SOFTMAX:
        sq_attention_backward(cx, L->dq, L->dk, L->dv, L->da, L->a, L->q, L->k_, L->v,
                              L->att, C, off, B, H, C, 1);
        break;
    case F_LATTN:
        sq_lattn_backward(cx, (sq_lattn_kind)sub, L->dq, L->dk, L->dv, L->scratch, L->da,
                          L->q, L->k_, L->v, L->cache, C, off, B, H, C, 1);
        break;
    case F_PA:
        sq_pa_backward(cx, L->dRw, L->dv, L->da, L->a, L->v, L->att, C, off, pos, B, H, C,
                       N, 1);
        break;
    case F_FPA:
        sq_fpa_backward(cx, L->dR1, L->dR2, L->dv, L->scratch, L->da, L->a, L->v, L->att,
                        L->R1, L->R2, L->k, C, off, pos, B, H, C, N, 1);
        break;
    case F_FIXED:
        sq_fixed_backward(cx, L->dv, L->da, C, off, pos, B, C, N, sub,
                          (float)SQ_EXP_ANNEAL_DECAY, 1);
        break;
    case F_MIXING:
        sq_mixing_backward(cx, L->dx, L->dW1, L->db1, L->dW2, L->db2, L->scratch, L->da,
                           L->x, L->cache, L->W1, L->W2, C, off, pos, B, C, N, 1);
        break;
    }
    tk += now() - t0;
    if (L->fam == F_SOFTMAX || L->fam == F_LATTN) {
        sq_linear_backward(cx, L->dx, L->dWq, L->dbq, L->dq, L->x, L->Wq, T, C, C);
        sq_linear_backward(cx, L->dx, L->dWk, L->dbk, L->dk, L->x, L->Wk, T, C, C);
    }
    if (L->fam != F_MIXING)
        sq_linear_backward(cx, L->dx, L->dWv, L->dbv, L->dv, L->x, L->Wv, T, C, C);
    return tk;
}

/* A finite checksum guards against timing a kernel that produced NaN. */
static int layer_finite(const layer *L)
{
    double s = 0;
    for (size_t i = 0; i < (size_t)L->T * L->C; i++)
        s += (double)L->y[i] + (double)L->dx[i];
    return isfinite(s);
}

/* ------------------------------------------------------------------------ */

enum { OPT_DRY = 256, OPT_HEADER };

int main(int argc, char **argv)
{
    sq_threads_passive(argv);

    int heads = 0, batch = 1, threads = 2, rank = 40, warmup = 1, reps = 3, header = 0;
    double min_time = 0.5, slow = 2.0;
    static const struct option longopts[] = {
        {"heads", required_argument, NULL, 'H'},
        {"batch", required_argument, NULL, 'B'},
        {"threads", required_argument, NULL, 't'},
        {"rank", required_argument, NULL, 'k'},
        {"warmup", required_argument, NULL, 'w'},
        {"reps", required_argument, NULL, 'r'},
        {"min-time", required_argument, NULL, 'm'},
        {"slow", required_argument, NULL, 's'},
        {"dry", no_argument, NULL, OPT_DRY},
        {"header", no_argument, NULL, OPT_HEADER},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "H:B:t:k:w:r:m:s:h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'H': bad = parse_int(optarg, 1, 65536, &heads); break;
        case 'B': bad = parse_int(optarg, 1, 1 << 20, &batch); break;
        case 't': bad = parse_int(optarg, 1, 1024, &threads); break;
        case 'k': bad = parse_int(optarg, 1, 1 << 20, &rank); break;
        case 'w': bad = parse_int(optarg, 0, 1000, &warmup); break;
        case 'r': bad = parse_int(optarg, 1, 100000, &reps); break;
        case 'm': bad = parse_pos_double(optarg, &min_time); break;
        case 's': bad = parse_pos_double(optarg, &slow); break;
        case OPT_DRY: g_dry = 1; break;
        case OPT_HEADER: header = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 64;
        }
        if (bad) {
            fprintf(stderr, "attn_bench: bad value for -%c: %s\n", c, optarg);
            return 64;
        }
    }
    if (argc - optind != 3) {
        usage(stderr);
        return 64;
    }
    layer L;
    memset(&L, 0, sizeof L);
    L.kind = -1;
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(argv[optind], KINDS[i].name))
            L.kind = i;
    if (L.kind < 0) {
        fprintf(stderr, "attn_bench: unknown kind '%s'\n", argv[optind]);
        return 64;
    }
    if (parse_int(argv[optind + 1], 1, 1 << 24, &L.N) ||
        parse_int(argv[optind + 2], 1, 1 << 16, &L.C)) {
        fprintf(stderr, "attn_bench: N and D must be positive integers\n");
        return 64;
    }
    L.fam = KINDS[L.kind].fam;
    L.sub = KINDS[L.kind].sub;
    L.B = batch;
    L.k = rank;
    L.H = heads ? heads : (L.fam == F_LATTN && L.sub == SQ_LATTN_HYDRA) ? L.C : 2;
    if (L.H > L.C || L.C % L.H) {
        fprintf(stderr, "attn_bench: heads %d do not divide D = %d\n", L.H, L.C);
        return 64;
    }
    if ((long long)L.B * L.N > (1LL << 30)) {
        fprintf(stderr, "attn_bench: B * N too large\n");
        return 64;
    }
    L.T = L.B * L.N;
    if (L.fam == F_FIXED || L.fam == F_MIXING)
        L.H = 1; /* no heads: every channel mixes alike */

    if (header)
        printf("kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,kernel_sec\n");
    if (g_dry) {
        layer_alloc(&L);
        printf("%s,%d,%d,%d,%d,,,%.3f,dry,%d,0,\n", KINDS[L.kind].name, L.C, L.N, L.B,
               threads, (double)g_bytes / 1048576.0, L.H);
        return 0;
    }

    /* Thread pools up and OpenBLAS's buffers touched before the baseline. */
    sq_threads_set(threads);
    {
        enum { M = 256 };
        float *a = calloc((size_t)M * M * 3, sizeof *a);
        if (!a)
            return 70;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, M, M, 1, a, M,
                    a + M * M, M, 0, a + 2 * M * M, M);
        double s = 0;
        #pragma omp parallel for reduction(+ : s)
        for (int i = 0; i < M * M; i++)
            s += a[2 * M * M + i];
        free(a);
        if (s != 0)
            return 70;
    }
    int cap = 100000, n = 1;
    double *ts = calloc((size_t)cap, sizeof *ts), *ks = calloc((size_t)cap, sizeof *ks);
    if (!ts || !ks)
        return 70;
    sq_rng_seed(&g_rng, 1, 0);
    double rss0 = reset_peak();
    layer_alloc(&L);

    for (int i = 0; i < warmup; i++)
        layer_step(&L);
    /* The first timed step decides whether more follow. */
    double t0 = now();
    ks[0] = layer_step(&L);
    double tw = now() - t0;
    ts[0] = tw;
    double total = tw;
    if (tw <= slow) {
        while (n < cap && (n < reps || total < min_time)) {
            t0 = now();
            ks[n] = layer_step(&L);
            ts[n] = now() - t0;
            total += ts[n++];
        }
    }
    double med = median(ts, n), kmed = median(ks, n);
    const char *status = layer_finite(&L) ? "ok" : "nonfinite";
    double rss = peak_mib() - rss0;
    printf("%s,%d,%d,%d,%d,%.6g,%.3f,%.3f,%s,%d,%d,%.6g\n", KINDS[L.kind].name, L.C, L.N,
           L.B, threads, med, rss, (double)g_bytes / 1048576.0, status, L.H, n, kmed);
    free(ts);
    free(ks);
    return 0;
}
