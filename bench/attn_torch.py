#!/usr/bin/env python3
"""attn_torch.py - PyTorch's twin of attn_bench (bench/attn_bench.c) for the
GPU comparison of issue 37: seconds per training step and memory of ONE
causal softmax attention sublayer on B sequences of length N, width D, H
heads, as PyTorch runs it at its best.

Usage: attn_torch.py [--device cpu|cuda[:N]] [--precision fp32|tf32|bf16]
       [-H 2] [-B 1] [-t 2] [-w 1] [-r 3] [-m 0.5] [-s 2] [--header] N D

THE LAYER: x [B, N, D] -> Q, K, V = nn.Linear(D, D)(x) (weights and biases,
PyTorch's default init, seed 1), split into H heads of D / H,
o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
(PyTorch's fused kernels on a GPU: flash attention for bf16 inputs, the
memory-efficient kernel for fp32 and tf32; neither keeps the N x N map),
y = nn.Linear(D, D)(o with the heads joined): the projections and kernel of
attn_bench's softmax kind, without a layer norm, dropout or residual. On a
torch without scaled_dot_product_attention (before 2.0) the kernel is the
plain masked softmax (the math every kernel computes) and the kind is
"torch-math", not "torch-sdpa".

THE STEP (attn_bench's): every parameter gradient and dx zeroed (the
gradients exist from the warm-up on, as the C layer's are allocated up
front), then forward and backward from a fixed dy into every parameter
gradient and dx. x and dy uniform in [-1, 1) (seed 1). --precision: the
GPU's matrix products in fp32, tf32 (default; torch.backends allow_tf32) or
bf16 (torch.autocast around the forward, as the twin of bench-gpu does);
on the CPU tf32 is fp32 and bf16 autocasts on the CPU.

TIMING (attn_bench's policy): --warmup untimed steps, then timed steps, at
least --reps, more until --min-time seconds are spent, only the first when
it took over --slow seconds; the median is reported. On a GPU every time is
taken after torch.cuda.synchronize().

Output: one CSV line, attn_bench's columns
  kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,
  reps,kernel_sec,device,device_mib,precision
kind "torch-sdpa" (or "torch-math"); threads: torch's CPU threads (-t);
kernel_sec: forward + backward without the zeroing; peak_rss_mib: the
host's peak resident set over the baseline before the layer is built
(VmHWM reset through /proc/self/clear_refs, as attn_bench); buffers_mib:
the tensors this script allocates (parameters, their gradients, x, dx, y,
dy; what autograd keeps is PyTorch's); device_mib (GPU only):
torch.cuda.max_memory_allocated over the step, its peak statistics reset
before the layer is allocated (the caching allocator's tensors: everything
the layer, autograd and the kernels hold, not the CUDA context or cuBLAS's
workspace). --header prints the header first. Exit 64 on a bad option."""
import argparse
import math
import sys
import time

HEADER = ("kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,"
          "kernel_sec,device,device_mib,precision")


def status_mib(key):
    """A VmRSS: or VmHWM: line of /proc/self/status in MiB, -1 if unreadable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return float(line.split()[1]) / 1024.0
    except OSError:
        pass
    return -1.0


def reset_peak():
    """The peak resident set reset to the current one (1 when allowed)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status_mib("VmRSS:") >= 0
    except OSError:
        return False


def median(v):
    v = sorted(v)
    h = len(v) // 2
    return v[h] if len(v) % 2 else 0.5 * (v[h - 1] + v[h])


def make_layer(torch, d, heads):
    """The timed sublayer; torch is imported by main once the options are
    good, so a usage error costs no import (seconds)."""
    F, nn = torch.nn.functional, torch.nn

    def causal_math(q, k, v):
        """The plain masked softmax attention (torch before 2.0)."""
        n = q.shape[-2]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = heads
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            sdpa = getattr(F, "scaled_dot_product_attention", None)
            self.kind = "torch-sdpa" if sdpa else "torch-math"
            self.attn = (lambda q, k, v: sdpa(q, k, v, is_causal=True)) if sdpa else causal_math

        def forward(self, x):
            b, n, _ = x.shape
            split = lambda t: t.view(b, n, self.h, d // self.h).transpose(1, 2)  # noqa: E731
            o = self.attn(split(self.q(x)), split(self.k(x)), split(self.v(x)))
            return self.o(o.transpose(1, 2).reshape(b, n, d))

    return Layer()


def usage_error(ap, msg):
    print(f"attn_torch.py: {msg}", file=sys.stderr)
    ap.print_usage(sys.stderr)
    sys.exit(64)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's exit 2 -> attn_bench's 64
        usage_error(self, message)


def parse(argv):
    ap = Parser(description="PyTorch's causal softmax attention sublayer, timed as attn_bench")
    ap.add_argument("N", type=int)
    ap.add_argument("D", type=int)
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    ap.add_argument("--precision", default="tf32", choices=("fp32", "tf32", "bf16"))
    for short, name, kind, default in (("-H", "--heads", int, 2), ("-B", "--batch", int, 1),
                                       ("-t", "--threads", int, 2), ("-w", "--warmup", int, 1),
                                       ("-r", "--reps", int, 3), ("-m", "--min-time", float, 0.5),
                                       ("-s", "--slow", float, 2.0)):
        ap.add_argument(short, name, type=kind, default=default)
    ap.add_argument("--header", action="store_true")
    o = ap.parse_args(argv)
    dev = o.device
    if not (dev == "cpu" or dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        usage_error(ap, f"--device '{dev}': expected cpu, cuda or cuda:N")
    if min(o.N, o.D, o.heads, o.batch, o.threads, o.reps) < 1 or o.warmup < 0 or \
            o.min_time < 0 or o.slow < 0:
        usage_error(ap, "N, D, heads, batch, threads and reps must be positive")
    if o.D % o.heads:
        usage_error(ap, f"heads {o.heads} do not divide D = {o.D}")
    return o


def main(argv):
    o = parse(argv)
    import torch
    dev = torch.device(o.device)
    gpu = dev.type == "cuda"
    if gpu and not torch.cuda.is_available():
        print("attn_torch.py: no CUDA device", file=sys.stderr)
        return 69
    torch.set_num_threads(o.threads)
    torch.backends.cuda.matmul.allow_tf32 = o.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = o.precision == "tf32"
    prec = o.precision if gpu or o.precision == "bf16" else "fp32"
    amp = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16, enabled=prec == "bf16"))
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    torch.manual_seed(1)
    hwm = reset_peak()
    rss0 = status_mib("VmRSS:") if hwm else 0.0
    if gpu:
        torch.cuda.set_device(dev)
        sync()
        torch.cuda.reset_peak_memory_stats()
        mem0 = torch.cuda.memory_allocated()
    layer = make_layer(torch, o.D, o.heads).to(dev)
    g = torch.Generator().manual_seed(1)
    x = (2 * torch.rand(o.batch, o.N, o.D, generator=g) - 1).to(dev).requires_grad_()
    dy = (2 * torch.rand(o.batch, o.N, o.D, generator=g) - 1).to(dev)
    params = list(layer.parameters())
    for p in params + [x]:
        p.grad = torch.zeros_like(p)
    n_floats = 2 * sum(p.numel() for p in params) + 4 * x.numel()  # + dx, y, dy
    y = None

    def step():
        nonlocal y
        sync()
        t0 = time.perf_counter()
        for p in params + [x]:
            p.grad.zero_()
        sync()
        t1 = time.perf_counter()
        with amp():
            y = layer(x)
        y.backward(dy)
        sync()
        t2 = time.perf_counter()
        return t2 - t0, t2 - t1

    for _ in range(o.warmup):
        step()
    t, k = step()  # the first timed step decides whether more follow
    ts, ks = [t], [k]
    if t <= o.slow:
        while len(ts) < 100000 and (len(ts) < o.reps or sum(ts) < o.min_time):
            t, k = step()
            ts.append(t)
            ks.append(k)
    dev_mib = ""
    if gpu:
        dev_mib = "%.3f" % ((torch.cuda.max_memory_allocated() - mem0) / 1048576.0)
    s = float(y.detach().float().abs().sum() + x.grad.abs().sum())
    status = "ok" if math.isfinite(s) else "nonfinite"
    rss = (status_mib("VmHWM:") - rss0) if hwm else -1.0
    if o.header:
        print(HEADER)
    print("%s,%d,%d,%d,%d,%.6g,%.3f,%.3f,%s,%d,%d,%.6g,%s,%s,%s" % (
        layer.kind, o.D, o.N, o.batch, o.threads, median(ts), rss, n_floats * 4 / 1048576.0, status,
        o.heads, len(ts), median(ks), o.device, dev_mib, prec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
