/* gpu_load.c - gpu.h's entry points over libseqrec-cuda.so, loaded on demand.
 *
 * The CUDA backend lives in a shared object (cuda/cuda.mk) that no program
 * links: linking cuBLAS made every start-up load and relocate it (0.2-0.5 s),
 * on hosts that never use a GPU. sq_gpu_probe and sq_gpu_open dlopen it;
 * an sq_gpu owns the handle, the object's table (gpu_ops.h) and the
 * backend's context, and sq_gpu_close releases all three.
 *
 * Where the object is looked for: $SEQREC_CUDA_LIB when set (only there:
 * a wrong path must not fall back quietly to another object), else beside
 * the running program (lib_dirs). Without it, probe answers 0 and open
 * fails with SQ_EX_USAGE, both saying why. */
#include "gpu.h"
#include "gpu_ops.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sq_gpu {
    void *dl;              /* dlopen handle of libseqrec-cuda.so */
    const sq_gpu_ops *ops; /* its table */
    sq_gpu_be *be;         /* the backend's context (device, cuBLAS handle) */
};

/* Relative to the program's directory: build/bin -> build/lib; the unit
 * runner in build/ -> build/lib; make install's PREFIX/bin ->
 * PREFIX/lib/seqrec. */
static const char *const lib_dirs[] = {"../lib", "lib", "../lib/seqrec"};

/* Writes a reason into why[n]; one naming a long path may be cut short,
 * which a message can afford (and gcc's truncation warning cannot see). */
__attribute__((format(printf, 3, 4)))
static void reason(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

/* Opens path and takes its table into g; 0, or -1 with the reason in why
 * (nothing stays open then). RTLD_NOW: a missing symbol or library fails
 * here, not at the first call. RTLD_NODELETE: the CUDA runtime is not made
 * to be unloaded (it keeps its state, about 140 KiB, until exit: unmapped,
 * that leaked on every probe), so dlclose drops the reference and the
 * object stays mapped for the next probe or open. */
static int lib_try(sq_gpu *g, const char *path, char *why, size_t n)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!dl) {
        const char *msg = dlerror();
        reason(why, n, "%s", msg ? msg : "dlopen failed");
        return -1;
    }
    /* POSIX guarantees that dlsym's object pointer converts to a function
     * pointer. */
    sq_gpu_ops_fn get = (sq_gpu_ops_fn)dlsym(dl, SQ_GPU_OPS_SYMBOL);
    const sq_gpu_ops *ops = get ? get() : NULL;
    if (!get)
        reason(why, n, "%s: no %s() in it: not a seqrec CUDA backend", path,
               SQ_GPU_OPS_SYMBOL);
    else if (!ops || ops->hash != sq_gpu_ops_hash() || ops->err_size != sizeof(sq_err))
        reason(why, n, "%s: built for another seqrec (its op list %016llx, this "
               "program's %016llx)", path, ops ? (unsigned long long)ops->hash : 0ull,
               (unsigned long long)sq_gpu_ops_hash());
    else {
        g->dl = dl;
        g->ops = ops;
        return 0;
    }
    dlclose(dl);
    return -1;
}

/* The running program's directory, with its trailing '/'; 0, or -1. */
static int exe_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    if (len <= 0 || (size_t)len >= n - 1)
        return -1; /* no /proc, or a path too long for dir */
    dir[len] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    slash[1] = '\0';
    return 0;
}

/* Tries lib_dirs beside the program. A file that is there but does not
 * load (a missing libcublas, say) is the reason worth reporting; only
 * when there is none is the object "not found". */
static int lib_search(sq_gpu *g, char *why, size_t n)
{
    char dir[PATH_MAX], path[PATH_MAX + 64], err[1024] = "";
    if (exe_dir(dir, sizeof dir) != 0) {
        reason(why, n, "no CUDA backend: cannot tell the program's directory "
                       "(/proc/self/exe); set SEQREC_CUDA_LIB");
        return -1;
    }
    for (size_t i = 0; i < sizeof lib_dirs / sizeof *lib_dirs; i++) {
        int len = snprintf(path, sizeof path, "%s%s/%s", dir, lib_dirs[i], SQ_GPU_LIB_NAME);
        if (len < 0 || (size_t)len >= sizeof path || access(path, F_OK) != 0)
            continue;
        if (lib_try(g, path, err, sizeof err) == 0)
            return 0;
    }
    if (err[0])
        reason(why, n, "no CUDA backend: %s", err);
    else
        reason(why, n, "no CUDA backend: %s not found beside %s (built with CUDA=0?)",
               SQ_GPU_LIB_NAME, dir);
    return -1;
}

/* Loads the object into g; 0, or -1 with the reason in why. */
static int lib_load(sq_gpu *g, char *why, size_t n)
{
    const char *env = getenv("SEQREC_CUDA_LIB");
    if (!env || !*env)
        return lib_search(g, why, n);
    char err[1024];
    if (lib_try(g, env, err, sizeof err) == 0)
        return 0;
    reason(why, n, "no CUDA backend: SEQREC_CUDA_LIB=%s does not load: %s", env, err);
    return -1;
}

int sq_gpu_probe(char *name, size_t n)
{
    sq_gpu g = {0};
    char why[2048];
    if (lib_load(&g, why, sizeof why) != 0) {
        if (n)
            snprintf(name, n, "%s", why);
        return 0;
    }
    int ok = g.ops->probe(name, n);
    dlclose(g.dl);
    return ok;
}

int sq_gpu_open(sq_gpu **g, int device, sq_err *e)
{
    *g = NULL;
    sq_gpu *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    char why[2048];
    if (lib_load(ctx, why, sizeof why) != 0) {
        free(ctx);
        return sq_fail(e, SQ_EX_UNAVAILABLE, "%s", why); /* no backend: no GPU to the user */
    }
    int rc = ctx->ops->open(&ctx->be, device, e);
    if (rc != 0) {
        dlclose(ctx->dl);
        free(ctx);
        return rc;
    }
    *g = ctx;
    return 0;
}

void sq_gpu_close(sq_gpu *g)
{
    if (!g)
        return;
    g->ops->close(g->be);
    dlclose(g->dl); /* nothing to do if it fails: the handle is spent either way */
    free(g);
}

int sq_gpu_alloc(sq_gpu *g, void **ptr, size_t bytes, sq_err *e)
{
    return g->ops->alloc(g->be, ptr, bytes, e);
}

void sq_gpu_free(sq_gpu *g, void *ptr)
{
    g->ops->free(g->be, ptr);
}

/* The forwarders, one per op of the list: sq_gpu_NAME(g, ...) calls the
 * object's NAME with its context. SQ_GPU_RET_void drops the return. */
#define SQ_GPU_RET_void
#define SQ_GPU_RET_int return
#define SQ_GPU_RET_double return
#define SQ_GPU_FWD_X(ret, name, params, args)                 \
    ret sq_gpu_##name(sq_gpu *gpu, SQ_GPU_STRIP params)             \
    {                                                               \
        SQ_GPU_RET_##ret gpu->ops->name(gpu->be, SQ_GPU_STRIP args); \
    }
SQ_GPU_OP_LIST(SQ_GPU_FWD_X)
