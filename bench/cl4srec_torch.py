#!/usr/bin/env python3
"""cl4srec_torch.py - CL4SRec as RecBole-DA trains it, in plain PyTorch: an
independent reference for seqrec's cl4srec (issue 34).

RecBole 1.2.1 (what `make bench-recbole` installs) ships no CL4SRec; the
authors' group keeps it in RecBole-DA, whose recipe this script follows so
that the two can run side by side on one split without installing that
fork (an old RecBole with its own dependencies):

  samples     every prefix of every training sequence (RecBole's sequential
              data augmentation): input the newest N items before position
              j, target item j; left-aligned, the state read at the newest
  backbone    RecBole's SASRec: item + position embedding, LayerNorm,
              dropout, post-LN transformer blocks (GELU feed-forward of
              --inner), normal(0, 0.02) initialisation, tied item embedding
              scoring items 1..V (the mask row V+1 is never scored)
  loss        CE over every item + lambda InfoNCE between two views of each
              sample: two different augmentations of crop (eta 0.6), mask
              (gamma 0.3, the mask row) and reorder (beta 0.6), drawn per
              sample; similarity dot (or cos) over tau; each view's
              positive the other view, negatives the 2B - 2 other views
  protocol    leave-one-out, full ranking over every item, history not
              excluded (seqrec-metrics' protocol); validation every epoch,
              the test metrics of the best validation NDCG@10 epoch

Usage: seqrec-cat SPLIT | cl4srec_torch.py [--epochs 10 --threads 1
       --cl-weight 0.1 --tau 1 --sim dot --batch 256 --seed 1 ...]

Prints CSV lines: torch,epoch,E,LOSS,VALID_HR10,VALID_NDCG10,SECONDS for
every epoch, then torch,best,EPOCH,TEST_HR10,TEST_NDCG10. --cl-weight 0 is
RecBole's SASRec on the same samples (one forward a batch)."""
import argparse
import math
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def dropout(x, p, training):
    """Inverted dropout from one uniform draw an element: the same
    distribution as F.dropout, 4 times faster in Debian's torch 1.13 (whose
    bernoulli_ dominated the step)."""
    if not training or p == 0:
        return x
    return x * (torch.rand_like(x) >= p) * (1 / (1 - p))


class Block(nn.Module):
    """RecBole's TransformerLayer: post-LN attention, post-LN GELU FFN."""

    def __init__(self, C, H, inner, p):
        super().__init__()
        self.H = H
        self.qkv = nn.Linear(C, 3 * C)
        self.out = nn.Linear(C, C)
        self.ln1 = nn.LayerNorm(C, eps=1e-12)
        self.ff1 = nn.Linear(C, inner)
        self.ff2 = nn.Linear(inner, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-12)
        self.p = p

    def forward(self, x, bias):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.H, C // self.H).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-1, -2)) / math.sqrt(C // self.H) + bias
        a = dropout(torch.softmax(a, -1), self.p, self.training)
        y = (a @ v).transpose(1, 2).reshape(B, N, C)
        x = self.ln1(x + dropout(self.out(y), self.p, self.training))
        y = self.ff2(F.gelu(self.ff1(x)))
        return self.ln2(x + dropout(y, self.p, self.training))


class SASRec(nn.Module):
    def __init__(self, V, N, C, H, L, inner, p):
        super().__init__()
        self.V = V
        self.item = nn.Embedding(V + 2, C, padding_idx=0)  # row V+1: the mask
        self.pos = nn.Embedding(N, C)
        self.ln = nn.LayerNorm(C, eps=1e-12)
        self.blocks = nn.ModuleList(Block(C, H, inner, p) for _ in range(L))
        self.p = p
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0, 0.02)
            if isinstance(m, nn.Linear):
                m.bias.data.zero_()

    def forward(self, ids, lens):
        """ids [B, N] left-aligned (0 pads at the end): the state at lens-1."""
        N = ids.shape[1]
        x = self.item(ids) + self.pos.weight[None, :N]
        x = dropout(self.ln(x), self.p, self.training)
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool)) & (ids > 0)[:, None, None, :]
        bias = (~keep).float() * -10000.0  # RecBole's additive mask
        for b in self.blocks:
            x = b(x, bias)
        return x[torch.arange(ids.shape[0]), lens - 1]

    def scores(self, h):
        return h @ self.item.weight[1:self.V + 1].t()


def crop(s, eta=0.6):
    n = math.floor(len(s) * eta)
    b = random.randint(0, len(s) - n)
    return s[b:b + n]


def mask(s, mask_id, gamma=0.3):
    s = list(s)
    for i in random.sample(range(len(s)), k=math.floor(len(s) * gamma)):
        s[i] = mask_id
    return s


def reorder(s, beta=0.6):
    s = list(s)
    n = math.floor(len(s) * beta)
    b = random.randint(0, len(s) - n)
    run = s[b:b + n]
    random.shuffle(run)
    s[b:b + n] = run
    return s


def views(seqs, mask_id):
    """Two views of each sequence by two different augmentations (RecBole-DA's
    switch = random.sample(range(3), 2)); a sequence of one item is kept.
    An empty crop (RecBole pads it to length 0 and reads position -1, the
    last pad) is kept as one pad here."""
    out = ([], [])
    for s in seqs:
        ops = random.sample(range(3), k=2) if len(s) > 1 else [3, 3]
        for side, op in zip(out, ops):
            v = crop(s) if op == 0 else mask(s, mask_id) if op == 1 else reorder(s) if op == 2 else s
            side.append(v if v else [0])
    return out


def pack(seqs, N):
    ids = np.zeros((len(seqs), N), np.int64)
    lens = np.zeros(len(seqs), np.int64)
    for r, s in enumerate(seqs):
        s = s[-N:]
        ids[r, :len(s)] = s
        lens[r] = len(s)
    return torch.from_numpy(ids), torch.from_numpy(lens)


def info_nce(z1, z2, tau, sim):
    z = torch.cat([z1, z2])
    if sim == "cos":
        z = F.normalize(z, dim=-1)
    S = z @ z.t() / tau
    M = S.shape[0]
    S = S.masked_fill(torch.eye(M, dtype=torch.bool), float("-inf"))
    pos = torch.cat([torch.arange(M // 2, M), torch.arange(0, M // 2)])
    return F.cross_entropy(S, pos)


@torch.no_grad()
def evaluate(model, hist, targets, N, batch=1024):
    model.eval()
    hr = nd = 0.0
    for i in range(0, len(hist), batch):
        ids, lens = pack(hist[i:i + batch], N)
        s = model.scores(model(ids, lens))
        t = torch.tensor(targets[i:i + batch]) - 1
        rank = (s > s.gather(1, t[:, None])).sum(1)  # items strictly above
        hit = rank < 10
        hr += hit.sum().item()
        nd += (hit.float() / torch.log2(rank.float() + 2)).sum().item()
    model.train()
    return hr / len(hist), nd / len(hist)


def main():
    ap = argparse.ArgumentParser()
    for k, v in (("epochs", 10), ("threads", 1), ("max-len", 50), ("dim", 64), ("inner", 256),
                 ("layers", 2), ("heads", 2), ("batch", 256), ("seed", 1), ("n-items", 0)):
        ap.add_argument("--" + k, type=int, default=v)
    for k, v in (("dropout", 0.5), ("lr", 1e-3), ("cl-weight", 0.1), ("tau", 1.0)):
        ap.add_argument("--" + k, type=float, default=v)
    ap.add_argument("--sim", choices=("dot", "cos"), default="dot")
    o = ap.parse_args()
    torch.set_num_threads(o.threads)
    torch.manual_seed(o.seed)
    random.seed(o.seed)
    rng = np.random.default_rng(o.seed)

    users = []  # (training items, validation target, test target)
    V = o.n_items
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t")
        tr = [int(x) for x in f[1].split()] if f[1] else []
        if tr and f[2] and f[3]:
            users.append((tr, int(f[2]), int(f[3])))
        if o.n_items == 0:
            V = max([V] + [int(x) for x in " ".join(f[1:4]).split()])
    N = o.max_len
    inp, tgt = [], []  # every prefix: RecBole's training samples
    for tr, _, _ in users:
        for j in range(1, len(tr)):
            inp.append(tr[max(0, j - N):j])
            tgt.append(tr[j])
    tgt = np.array(tgt, np.int64)
    vh = [u[0] for u in users]
    vt = [u[1] for u in users]
    th = [u[0] + [u[1]] for u in users]
    tt = [u[2] for u in users]

    model = SASRec(V, N, o.dim, o.heads, o.layers, o.inner, o.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=o.lr)
    best = (-1.0, 0, 0.0, 0.0)  # valid NDCG@10, epoch, test HR@10, NDCG@10
    for epoch in range(1, o.epochs + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(inp))
        total, steps = 0.0, 0
        for i in range(0, len(order), o.batch):
            b = order[i:i + o.batch]
            seqs = [inp[r] for r in b]
            ids, lens = pack(seqs, N)
            loss = F.cross_entropy(model.scores(model(ids, lens)), torch.from_numpy(tgt[b]) - 1)
            if o.cl_weight > 0 and len(b) > 1:
                v1, v2 = views(seqs, V + 1)
                z1 = model(*pack(v1, N))
                z2 = model(*pack(v2, N))
                loss = loss + o.cl_weight * info_nce(z1, z2, o.tau, o.sim)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        secs = time.perf_counter() - t0
        vhr, vnd = evaluate(model, vh, vt, N)
        print("torch,epoch,%d,%.6f,%.4f,%.4f,%.1f" % (epoch, total / steps, vhr, vnd, secs),
              flush=True)
        if vnd > best[0]:
            best = (vnd, epoch) + evaluate(model, th, tt, N)
    print("torch,best,%d,%.4f,%.4f" % best[1:], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
