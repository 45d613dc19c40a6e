// graph.cu - CUDA graphs: a step's work captured once per shape key and
// replayed (HACKING.md, "CUDA graphs").
//
// The caller brackets a step with graph_begin(key) and graph_end; the key
// names the shapes the step's launches depend on (a packed-size bucket).
// A key's steps go:
//   step 0     RECORD: run eagerly; every node's signature (kernel, grid,
//              block, shared memory, arguments; GEMM shapes; copies) into
//              the key's log, and the step's uploads into the key's upload
//              region (slot 0's pinned half, the one device half);
//   step 1, 2  CAPTURE slot 1, then slot 0: the step's host code runs, its
//              work is captured (nothing runs), each node compared with the
//              log; the graph instantiated, then launched;
//   later      PLAN: the host code runs without queuing anything (the
//              uploads land in the slot's pinned half), each node compared
//              with the log, then the slot's graph is launched.
// Two slots, used in turn, so that the host fills one slot's pinned half
// while the other's graph may still be copying out of its own. A node that
// differs from the log (an argument that depends on the batch rather than
// on the key) is the sticky error, and its step is not launched: an op in a
// graph's step must be graph-safe (its launches a function of the shapes;
// what depends on the batch goes up through be_op_upload and is read on
// the device; nothing read back to the host).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.cuh"

struct be_slot {
    cudaGraphExec_t exec; // NULL until captured
    char *pinned;         // the upload region's host half
    cudaEvent_t done;     // after the slot's last work: its pinned half is free
};

struct be_graph {
    uint64_t key;
    unsigned char *log; // entries: name pointer, length (size_t), signature
    size_t log_n, log_cap;
    size_t nodes;       // entries in the log
    size_t used;        // region bytes the first step took
    long steps;         // steps of this key so far (a step recorded again not counted)
    int regrown;        // the recording step moved the region: record again
    // the upload region: one device half for both slots (their graphs run
    // in stream order, so one never overwrites what the other reads, and
    // an address inside is the same in every step, in an argument struct
    // too), a pinned half each (the host fills one while the other's graph
    // may still copy out of its own)
    char *dev;
    size_t bytes;
    struct be_slot slot[2];
};

#define BE_ALIGN(n) (((n) + 255) & ~(size_t)255)

__attribute__((format(printf, 2, 3))) static int gfail(sq_gpu_be *b, const char *fmt, ...)
{
    if (!b->failed) {
        b->failed = 1;
        char msg[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        sq_fail(&b->err, SQ_EX_SOFTWARE, "CUDA graph: %s", msg);
    }
    return 1;
}

uintptr_t be_sig_ptr(const sq_gpu_be *b, const void *p)
{
    const char *c = (const char *)p;
    if (b->gcur) {
        const struct be_slot *s = &b->gcur->slot[b->gslot];
        if (s->pinned && c >= s->pinned && c < s->pinned + b->gcur->bytes)
            return ((uintptr_t)1 << 62) | (uintptr_t)(c - s->pinned);
    }
    return (uintptr_t)p;
}

static int log_put(struct be_graph *g, const char *name, const unsigned char *sig, size_t n)
{
    size_t need = g->log_n + sizeof name + sizeof n + n;
    if (need > g->log_cap) {
        size_t cap = need < 65536 ? 65536 : 2 * need;
        unsigned char *p = (unsigned char *)realloc(g->log, cap);
        if (!p)
            return -1;
        g->log = p;
        g->log_cap = cap;
    }
    memcpy(g->log + g->log_n, &name, sizeof name);
    memcpy(g->log + g->log_n + sizeof name, &n, sizeof n);
    memcpy(g->log + g->log_n + sizeof name + sizeof n, sig, n);
    g->log_n = need;
    g->nodes++;
    return 0;
}

int be_sig_node(sq_gpu_be *b, const char *name, const unsigned char *sig, size_t n)
{
    struct be_graph *g = b->gcur;
    if (b->gmode == BE_G_EAGER || !g)
        return 0;
    if (b->gmode == BE_G_RECORD) {
        if (log_put(g, name, sig, n))
            gfail(b, "out of memory for the signature of %s", name);
        return 0;
    }
    const char *was = NULL;
    size_t wn = 0, at = b->gsig_at;
    if (at + sizeof was + sizeof wn <= g->log_n) {
        memcpy(&was, g->log + at, sizeof was);
        memcpy(&wn, g->log + at + sizeof was, sizeof wn);
        b->gsig_at = at + sizeof was + sizeof wn + wn;
    }
    if (!was)
        gfail(b, "%s is one node more than the key's first step had (%zu)", name, g->nodes);
    else if (strcmp(was, name))
        gfail(b, "%s where the key's first step had another node (%zu nodes): the ops depend "
                 "on the batch", name, g->nodes);
    else if (wn != n || memcmp(g->log + at + sizeof was + sizeof wn, sig, n))
        gfail(b, "%s's launch differs from the key's first step (%zu nodes): an argument "
                 "depends on the batch, not on the key's shapes", name, g->nodes);
    return b->gmode == BE_G_PLAN;
}

void be_memset_async(sq_gpu_be *b, void *p, int v, size_t bytes, const char *what)
{
    if (b->gmode != BE_G_EAGER) {
        unsigned char sig[sizeof(uintptr_t) + sizeof v + sizeof bytes];
        uintptr_t u = be_sig_ptr(b, p);
        memcpy(sig, &u, sizeof u);
        memcpy(sig + sizeof u, &v, sizeof v);
        memcpy(sig + sizeof u + sizeof v, &bytes, sizeof bytes);
        if (be_sig_node(b, what, sig, sizeof sig))
            return;
    }
    be_note(b, cudaMemsetAsync(p, v, bytes, b->stream), what);
}

void be_memcpy_async(sq_gpu_be *b, void *dst, const void *src, size_t bytes,
                     cudaMemcpyKind kind, const char *what)
{
    if (b->gmode != BE_G_EAGER) {
        uintptr_t u[2] = {be_sig_ptr(b, dst), be_sig_ptr(b, src)};
        int k = (int)kind;
        unsigned char sig[sizeof u + sizeof bytes + sizeof k];
        memcpy(sig, u, sizeof u);
        memcpy(sig + sizeof u, &bytes, sizeof bytes);
        memcpy(sig + sizeof u + sizeof bytes, &k, sizeof k);
        if (be_sig_node(b, what, sig, sizeof sig))
            return;
    }
    be_note(b, cudaMemcpyAsync(dst, src, bytes, kind, b->stream), what);
}

int be_graph_no_read(sq_gpu_be *b, const char *what)
{
    if (b->gmode == BE_G_EAGER)
        return 0;
    return gfail(b, "%s inside a graph's step: the step must keep its values on the device",
                 what);
}

static __global__ __launch_bounds__(1) void k_value(double *out, const double *red,
                                                    const double *div)
{
    out[0] = red[0] / div[0];
}

double be_result(sq_gpu_be *b, int slot, double div)
{
    if (b->gmode == BE_G_EAGER)
        return be_download_red(b, slot) / div;
    if (b->n_vals == BE_VALS) {
        gfail(b, "more than %d values in one step", BE_VALS);
        return NAN;
    }
    const double *ddiv = (const double *)be_op_upload(b, &div, sizeof div);
    if (ddiv)
        SQ_LAUNCH(b, k_value, 1, 1, 0, b->vals + b->n_vals, (const double *)(b->red + slot),
                  ddiv);
    b->n_vals++;
    return 0; // a placeholder: a model's step runs its backward on a finite loss
}

// v[0] = sum_i w[i] v[i], i in order, single roundings (ctx.c's host sum;
// the backend is built with --fmad=false, so nothing is fused into an fma)
static __global__ __launch_bounds__(1) void k_mix(double *v, const double *w, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += w[i] * v[i];
    v[0] = s;
}

// A graph's step: its last n values replaced by their weighted sum (the
// step's loss made of several ops' values, sq_ctx_loss_mix); eagerly a
// no-op (the host summed the values it read).
void be_graph_mix(sq_gpu_be *b, const double *w, int n)
{
    if (b->gmode == BE_G_EAGER || n <= 0)
        return;
    if (n > b->n_vals) {
        gfail(b, "a loss of %d values after %d", n, b->n_vals);
        return;
    }
    const double *dw = (const double *)be_op_upload(b, w, (size_t)n * sizeof *w);
    if (dw)
        SQ_LAUNCH(b, k_mix, 1, 1, 0, b->vals + b->n_vals - n, dw, n);
    b->n_vals -= n - 1;
}

// gate = the step's first value (its loss) is finite and at most max_loss
// (0: no bound): the trainer's test before an update, on the device.
static __global__ __launch_bounds__(1) void k_gate(int *gate, const double *loss,
                                                   const double *max_loss)
{
    double l = loss[0], mx = max_loss[0];
    gate[0] = isfinite(l) && (mx <= 0 || l <= mx);
}

// In a graph's step, after its loss: the gate that its update (Adam, in
// the same graph) reads; eagerly a no-op (the host tests the loss).
void be_graph_gate(sq_gpu_be *b, double max_loss)
{
    if (b->gmode == BE_G_EAGER)
        return;
    if (b->n_vals < 1) {
        gfail(b, "%s", "the update's gate before the step's loss");
        return;
    }
    const double *dmax = (const double *)be_op_upload(b, &max_loss, sizeof max_loss);
    if (dmax)
        SQ_LAUNCH(b, k_gate, 1, 1, 0, b->gate, (const double *)b->vals, dmax);
}

// After a graph's step (be_graph_end): its values copied into the next
// turn of pinned doubles, an event after them; a third step unread drops
// the oldest (whose turn it takes: after that step in stream order).
static void queue_values(sq_gpu_be *b)
{
    if (b->vals_pending == 2) {
        b->vals_head = (b->vals_head + 1) % 2;
        b->vals_pending--;
    }
    int k = (b->vals_head + b->vals_pending) % 2;
    b->vals_n[k] = b->n_vals;
    if (b->n_vals > 0)
        be_note(b, cudaMemcpyAsync(b->vals_pin + (size_t)k * BE_VALS, b->vals,
                                   (size_t)b->n_vals * sizeof(double), cudaMemcpyDeviceToHost,
                                   b->stream), "values");
    be_note(b, cudaEventRecord(b->vals_ev[k], b->stream), "values");
    b->vals_pending++;
}

// The values of the oldest graph step not yet read (be_result's, in order):
// waits for that step alone. *got 0 when none is pending.
int be_graph_values(sq_gpu_be *b, double *out, int n, int *got, sq_err *e)
{
    *got = 0;
    if (b->gmode != BE_G_EAGER)
        return sq_fail(e, SQ_EX_SOFTWARE, "CUDA graph: the values read inside the step");
    if (b->vals_pending == 0)
        return b->failed ? sq_fail(e, b->err.code, "%s", b->err.msg) : 0;
    int k = b->vals_head, m = b->vals_n[k] < n ? b->vals_n[k] : n;
    b->vals_head = (k + 1) % 2;
    b->vals_pending--;
    if (!be_wait(b, b->vals_ev[k], "values")) {
        memcpy(out, b->vals_pin + (size_t)k * BE_VALS, (size_t)m * sizeof(double));
        *got = m;
    }
    return b->failed ? sq_fail(e, b->err.code, "%s", b->err.msg) : 0;
}

static void slot_free(struct be_slot *s)
{
    if (s->exec)
        cudaGraphExecDestroy(s->exec);
    cudaFreeHost(s->pinned);
    if (s->done)
        cudaEventDestroy(s->done);
    memset(s, 0, sizeof *s);
}

// Slot s of g ready for a step: its event, the region (a key's first step:
// 64 KiB to grow from) and its pinned half (outside a capture).
static int slot_ready(sq_gpu_be *b, struct be_graph *g, struct be_slot *s)
{
    if (!s->done && be_note(b, cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming),
                            "graph event"))
        return -1;
    if (!g->dev)
        return be_grow_pair(b, &s->pinned, &g->dev, &g->bytes, 0, 65536);
    if (!s->pinned && be_note(b, cudaHostAlloc((void **)&s->pinned, g->bytes,
                                               cudaHostAllocDefault), "graph region"))
        return -1;
    return 0;
}

int be_graph_take(sq_gpu_be *b, size_t bytes, char **host, char **dev)
{
    *host = *dev = NULL;
    struct be_graph *g = b->gcur;
    struct be_slot *s = &g->slot[b->gslot];
    size_t at = b->gused, need = at + BE_ALIGN(bytes);
    if (need > g->bytes) {
        if (b->gmode != BE_G_RECORD)
            return gfail(b, "the step's uploads (%zu bytes) outgrow its key's first step's",
                         need);
        // the first step (slot 0, the only pinned half yet) grows the region
        // keeping what it uploaded so far, at the same offsets; its log
        // holds the old region's addresses (a copy's, a kernel's argument),
        // so the key's next step records again, in a region that fits
        if (be_grow_pair(b, &s->pinned, &g->dev, &g->bytes, at, 2 * need))
            return 1;
        g->regrown = 1;
    }
    *host = s->pinned + at;
    *dev = g->dev + at;
    b->gused = need;
    return 0;
}

static struct be_graph *graph_of(sq_gpu_be *b, uint64_t key)
{
    for (int i = 0; i < b->n_graphs; i++)
        if (b->graphs[i].key == key)
            return &b->graphs[i];
    if (b->n_graphs == b->cap_graphs) {
        int cap = b->cap_graphs ? 2 * b->cap_graphs : 8;
        struct be_graph *p = (struct be_graph *)realloc(b->graphs, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        b->graphs = p;
        b->cap_graphs = cap;
    }
    struct be_graph *g = &b->graphs[b->n_graphs++];
    memset(g, 0, sizeof *g);
    g->key = key;
    return g;
}

// Begins a step of key: RECORD, CAPTURE or PLAN (above).
int be_graph_begin(sq_gpu_be *b, uint64_t key, sq_err *e)
{
    if (b->gmode != BE_G_EAGER)
        return sq_fail(e, SQ_EX_SOFTWARE, "CUDA graph: a step begun inside another");
    if (b->failed)
        return sq_fail(e, b->err.code, "%s", b->err.msg);
    struct be_graph *g = graph_of(b, key);
    if (!g)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for a CUDA graph");
    int k = g->steps == 0 ? 0 : (int)(g->steps % 2);
    struct be_slot *s = &g->slot[k];
    b->gcur = g;
    b->gslot = k;
    b->gsig_at = 0;
    b->gused = 0;
    b->n_range = 0;
    b->n_vals = 0;
    if (slot_ready(b, g, s)) {
        b->gcur = NULL;
        return sq_fail(e, b->err.code, "%s", b->err.msg);
    }
    // the slot's previous work is done with its region before the host
    // rewrites it
    if (s->done && be_wait(b, s->done, "graph slot")) {
        b->gcur = NULL;
        return sq_fail(e, b->err.code, "%s", b->err.msg);
    }
    if (g->steps == 0)
        b->gmode = BE_G_RECORD;
    else if (!s->exec) {
        if (be_note(b, cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal),
                    "cudaStreamBeginCapture")) {
            b->gcur = NULL;
            return sq_fail(e, b->err.code, "%s", b->err.msg);
        }
        b->gmode = BE_G_CAPTURE;
    } else
        b->gmode = BE_G_PLAN;
    return 0;
}

// Ends the step: the log kept (RECORD), the capture instantiated and
// launched (CAPTURE), the slot's graph launched (PLAN); the sticky error
// (a node that differed) launches nothing.
int be_graph_end(sq_gpu_be *b, sq_err *e)
{
    struct be_graph *g = b->gcur;
    int mode = b->gmode;
    if (!g || mode == BE_G_EAGER)
        return sq_fail(e, SQ_EX_SOFTWARE, "CUDA graph: a step ended that was not begun");
    struct be_slot *s = &g->slot[b->gslot];
    b->gmode = BE_G_EAGER;
    b->gcur = NULL;
    if (mode == BE_G_RECORD)
        g->used = b->gused;
    int again = mode == BE_G_RECORD && g->regrown;
    if (mode == BE_G_CAPTURE) {
        cudaGraph_t graph = NULL;
        be_note(b, cudaStreamEndCapture(b->stream, &graph), "cudaStreamEndCapture");
        if (!b->failed && b->gsig_at != g->log_n)
            gfail(b, "the step ended short of its key's first step's %zu nodes", g->nodes);
        if (!b->failed)
            be_note(b, cudaGraphInstantiate(&s->exec, graph, 0), "cudaGraphInstantiate");
        if (graph)
            cudaGraphDestroy(graph);
    } else if (mode == BE_G_PLAN && !b->failed && b->gsig_at != g->log_n)
        gfail(b, "the step ended short of its key's first step's %zu nodes", g->nodes);
    if (!b->failed && mode != BE_G_RECORD)
        be_note(b, cudaGraphLaunch(s->exec, b->stream), "cudaGraphLaunch");
    be_note(b, cudaEventRecord(s->done, b->stream), "graph slot");
    if (!b->failed)
        queue_values(b);
    if (again) { // a fresh log at the next step (the region fits it now)
        g->log_n = 0;
        g->nodes = 0;
        g->regrown = 0;
    } else
        g->steps++;
    return b->failed ? sq_fail(e, b->err.code, "%s", b->err.msg) : 0;
}

// The graphs kept (for the tests): keys, and the steps launched as replays.
int be_graph_stats(sq_gpu_be *b, int *keys, long *replays, sq_err *e)
{
    (void)e;
    *keys = b->n_graphs;
    *replays = 0;
    for (int i = 0; i < b->n_graphs; i++)
        *replays += b->graphs[i].steps > 3 ? b->graphs[i].steps - 3 : 0;
    return 0;
}

void be_graph_close(sq_gpu_be *b)
{
    for (int i = 0; i < b->n_graphs; i++) {
        free(b->graphs[i].log);
        slot_free(&b->graphs[i].slot[0]);
        slot_free(&b->graphs[i].slot[1]);
        cudaFree(b->graphs[i].dev);
    }
    free(b->graphs);
    b->graphs = NULL;
    b->n_graphs = b->cap_graphs = 0;
}
