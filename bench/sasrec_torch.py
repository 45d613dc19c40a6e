#!/usr/bin/env python3
"""sasrec_torch.py - time SASRec training epochs in PyTorch, the same model
as the C engine (the oracle's SASRec class from tests/reference/sasrec_ref.py,
plus the C model's dropout sites), on the same data and thread count.

Usage: seqrec-cat SPLIT | sasrec_torch.py --epochs 2 --threads 2 [--loss bce|ce
       --n-items V --max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1
       --dropout 0.5 --batch 128]

--n-items: the items of the model (the split header's n_items, which the C
model takes; default: the largest item id in the records).

Prints three CSV lines per epoch: torch,epoch_seconds,S (training steps
only: forward, backward and Adam; batches are built with numpy before the
clock starts, as SASRec.pytorch's sampler works in separate processes),
torch,seq_per_s,X and torch,loss,L (the mean of the batch losses).
Loss (--loss): bce (default), BCE with one uniform negative per position
outside the user's training items, mean over real positions (lib/ops/ops.h
sq_bce_sampled); ce, the full softmax cross-entropy over every item but the
padding item 0, logits h E^T with the tied item embedding and no bias, mean
over real positions (lib/ops/ops.c sq_ce_full, as lib/model/sasrec.c calls
it for SASRec)."""
import argparse
import contextlib
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import sasrec_ref  # noqa: E402


class TrainSASRec(sasrec_ref.SASRec):
    """The oracle's model with dropout where lib/model/sasrec.c applies it: after
    the embeddings, on the attention output and in the feed-forward."""

    def __init__(self, cfg, arrays, p):
        super().__init__(cfg, arrays)
        self.drop = p

    def forward(self, ids, valid):
        p, C, N = self.p, self.C, self.N
        d = lambda t: F.dropout(t, self.drop, self.training)  # noqa: E731
        x = F.embedding(ids, p["item_emb"], padding_idx=0) * math.sqrt(C) + p["pos_emb"][None]
        x = d(x)
        dev = ids.device
        causal = torch.tril(torch.ones(N, N, dtype=torch.bool, device=dev))
        allowed = (causal[None] & valid[:, None, :]) | torch.eye(N, dtype=torch.bool, device=dev)[None]
        for l in range(self.L):
            q_in = F.layer_norm(x, (C,), p["ln1_w"][l], p["ln1_b"][l], self.eps)
            x = q_in + d(self.mha(l, q_in, x, allowed))
            y = F.layer_norm(x, (C,), p["ln2_w"][l], p["ln2_b"][l], self.eps)
            h = d(torch.relu(F.linear(y, p["w1"][l], p["b1"][l])))
            x = y + d(F.linear(h, p["w2"][l], p["b2"][l]))
        return F.layer_norm(x, (C,), p["lnf_w"], p["lnf_b"], self.eps)


def init_arrays(V, N, C, F_, L, rng):
    def xavier(*shape):
        fan = shape[-2] + shape[-1]
        return rng.normal(0, math.sqrt(2.0 / fan), size=shape).astype(np.float32)
    a = {"item_emb": xavier(V + 1, C), "pos_emb": xavier(N, C)}
    a["item_emb"][0] = 0
    for w, shp in (("wq", (C, C)), ("wk", (C, C)), ("wv", (C, C)), ("wo", (C, C)),
                   ("w1", (F_, C)), ("w2", (C, F_))):
        a[w] = np.stack([xavier(*shp) for _ in range(L)])
    for b, n in (("bq", C), ("bk", C), ("bv", C), ("bo", C), ("b1", F_), ("b2", C),
                 ("ln1_b", C), ("ln2_b", C)):
        a[b] = np.zeros((L, n), np.float32)
    a["ln1_w"] = np.ones((L, C), np.float32)
    a["ln2_w"] = np.ones((L, C), np.float32)
    a["lnf_w"] = np.ones(C, np.float32)
    a["lnf_b"] = np.zeros(C, np.float32)
    return a


def common_args(ap):
    """The options both twins take (bert4rec_torch.py imports this file)."""
    for k, v in (("epochs", 2), ("threads", 2), ("max-len", 50), ("dim", 64), ("ffn", 64),
                 ("layers", 2), ("heads", 1), ("batch", 128), ("seed", 1), ("n-items", 0)):
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (bench-gpu)")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="tf32",
                    help="on the GPU: the matrix products' precision (bf16: autocast)")


def setup(o):
    """The device, the autocast context (bf16) and numpy's generator, with
    torch's threads, seed and TF32 switches set from the options."""
    dev = torch.device(o.device)
    # bf16 autocast on a GPU only: a CPU-only torch cannot even build a
    # disabled CUDA autocast (it asks the CUDA runtime whether bf16 exists)
    use_bf16 = o.precision == "bf16" and dev.type == "cuda"
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if use_bf16 else contextlib.nullcontext
    torch.backends.cuda.matmul.allow_tf32 = o.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = o.precision == "tf32"
    torch.set_num_threads(o.threads)
    torch.manual_seed(o.seed)
    torch.set_default_dtype(torch.float32)
    return dev, amp, np.random.default_rng(o.seed)


def read_train(f, n_items):
    """The training items (a split record's first list) of every user with
    two or more, as seqrec-train takes them; and the model's item count: the
    split header's n_items when given, else the largest item id."""
    train, V = [], n_items
    for line in f:
        fl = line.rstrip("\n").split("\t")
        items = [int(x) for x in fl[1].split()] if fl[1] else []
        if len(items) >= 2:
            train.append(np.array(items, np.int64))
        if n_items == 0:
            V = max([V] + [int(x) for x in " ".join(fl[1:4]).split()])
    return train, V


def report(dev, secs, U, total, steps):
    """An epoch's CSV lines: peak device memory (GPU), seconds, sequences a
    second, the mean of the batch losses."""
    if dev.type == "cuda":
        print("torch,peak_mib,%.1f" % (torch.cuda.max_memory_allocated() / 2**20), flush=True)
    print("torch,epoch_seconds,%.3f" % secs, flush=True)
    print("torch,seq_per_s,%.1f" % (U / secs), flush=True)
    print("torch,loss,%.6f" % (total / steps), flush=True)


def run_epoch(o, dev, model, opt, rng, U, arrays, loss_of):
    """One timed epoch: the U examples shuffled by rng into batches of
    o.batch, each batch's rows of every array in `arrays` sent to dev,
    loss_of(those tensors) its loss, then Adam's step; report's lines."""
    order = rng.permutation(U)
    batches = [order[i:i + o.batch] for i in range(0, U, o.batch)]
    model.train()
    t0 = time.perf_counter()
    total = 0.0
    for b in batches:
        loss = loss_of(*(torch.from_numpy(a[b]).to(dev, non_blocking=True) for a in arrays))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    report(dev, time.perf_counter() - t0, U, total, len(batches))


def main():
    ap = argparse.ArgumentParser()
    common_args(ap)
    ap.add_argument("--loss", choices=("bce", "ce"), default="bce")
    o = ap.parse_args()
    dev, amp, rng = setup(o)
    train, V = read_train(sys.stdin, o.n_items)
    N = o.max_len
    cfg = {"layers": o.layers, "heads": o.heads, "dim": o.dim, "max_len": N, "ln_eps": 1e-8}
    model = TrainSASRec(cfg, init_arrays(V, N, o.dim, o.ffn, o.layers, rng), o.dropout)
    for k in model.p:
        model.p[k].data = model.p[k].data.float().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))

    # SASRec.pytorch's sample: input = the newest N+1 training items but the
    # last, target = the next item, one negative outside the user's items.
    U = len(train)
    ids = np.zeros((U, N), np.int64)
    pos = np.zeros((U, N), np.int64)
    for u, t in enumerate(train):
        s = t[-(N + 1):]
        ids[u, N - len(s) + 1:] = s[:-1]
        pos[u, N - len(s) + 1:] = s[1:]
    sets = [set(t.tolist()) for t in train]

    def loss_of(bi, bp, bn):  # a batch's ids, targets and negatives
        valid = bi != 0
        with amp():
            h = model(bi, valid)
        E = model.p["item_emb"]
        keep = bp != 0
        if o.loss == "ce":
            # logits of items 1..V (item 0 is out of the softmax): target i -> class i-1
            with amp():
                logits = (h[keep] @ E[1:].t()).float()
            return F.cross_entropy(logits, bp[keep] - 1)
        h = h.float()
        s_pos = (h * E[bp]).sum(-1)
        s_neg = (h * E[bn]).sum(-1)
        return (F.softplus(-s_pos)[keep].sum() + F.softplus(s_neg)[keep].sum()) / keep.sum()

    neg = np.zeros((U, N), np.int64)  # CE: unused
    for epoch in range(1, o.epochs + 1):
        if o.loss == "bce":
            neg = rng.integers(1, V + 1, size=(U, N))
            for u in range(U):  # redraw the few negatives that hit the user's items
                bad = [i for i in range(N) if pos[u, i] and neg[u, i] in sets[u]]
                for i in bad:
                    while neg[u, i] in sets[u]:
                        neg[u, i] = rng.integers(1, V + 1)
        run_epoch(o, dev, model, opt, rng, U, (ids, pos, neg), loss_of)
    return 0


if __name__ == "__main__":
    sys.exit(main())
