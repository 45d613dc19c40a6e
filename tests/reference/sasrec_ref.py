#!/usr/bin/env python3
"""sasrec_ref.py - the PyTorch oracle for the C SASRec and BERT4Rec
(lib/model/sasrec.c, softmax attention).

Usage: sasrec_ref.py DIR

DIR holds what the C side dumped (format: tests/reference/README.md): the
config, every parameter tensor and one packed batch. This script rebuilds
the same SASRec from those weights with ordinary PyTorch modules on the
usual left-padded [B, N] layout (not the packed one the C code uses), in
float64, and writes to DIR:

  h            the final states of the batch's real tokens, packed order
  loss_ce      softmax cross-entropy over items 1..n_items (mean)
  grad_ce.X    d loss_ce / d X for every parameter X
  loss_bce     BCE with the batch's negatives (mean over positives)
  grad_bce.X   d loss_bce / d X

With "config model bert4rec" the model is BERT4Rec built from PyTorch's own
nn.TransformerEncoderLayer (post-LN, GELU: the block of sasrec.h, an
independent implementation of it) and the loss is the cloze cross-entropy
over items 1..n_items at the batch's rows (loss_ce, grad_ce.X; no bce).

Dropout is not modelled (the C side dumps with dropout 0).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}

PARAMS = ["item_emb", "pos_emb", "wq", "wk", "wv", "wo", "w1", "w2",
          "bq", "bk", "bv", "bo", "b1", "b2",
          "ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnf_w", "lnf_b"]


def read_dir(d):
    """index.txt: 'config KEY VALUE' lines and 'tensor NAME DTYPE D0 D1 ...'
    lines, each tensor's data raw little-endian in NAME.bin."""
    cfg, arrays = {}, {}
    with open(os.path.join(d, "index.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "config":
                cfg[parts[1]] = parts[2]
            elif parts[0] == "tensor":
                name, dt, shape = parts[1], parts[2], [int(x) for x in parts[3:]]
                dtype = np.dtype(DTYPES[dt]).newbyteorder("<")
                a = np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype)
                arrays[name] = a.reshape(shape)
    return cfg, arrays


def write(d, index, name, arr):
    arr = np.ascontiguousarray(arr, dtype="<f8")
    arr.tofile(os.path.join(d, name + ".bin"))
    index.append("tensor %s f64 %s\n" % (name, " ".join(str(s) for s in arr.shape)))


class SASRec(torch.nn.Module):
    """The model of sasrec.h in plain PyTorch (SASRec.pytorch's structure:
    the query is LN1(x), keys and values are x; residual around the
    attention from the normalised query; FFN residual from LN2's output)."""

    def __init__(self, cfg, arrays):
        super().__init__()
        self.L = int(cfg["layers"])
        self.H = int(cfg["heads"])
        self.C = int(cfg["dim"])
        self.N = int(cfg["max_len"])
        self.eps = float(cfg["ln_eps"])
        self.p = torch.nn.ParameterDict(
            {k: torch.nn.Parameter(torch.tensor(arrays[k], dtype=torch.float64))
             for k in PARAMS})

    def mha(self, l, q_in, x, allowed):
        p, B, N, C, H = self.p, x.shape[0], x.shape[1], self.C, self.H
        hs = C // H
        Q = F.linear(q_in, p["wq"][l], p["bq"][l]).view(B, N, H, hs).transpose(1, 2)
        K = F.linear(x, p["wk"][l], p["bk"][l]).view(B, N, H, hs).transpose(1, 2)
        V = F.linear(x, p["wv"][l], p["bv"][l]).view(B, N, H, hs).transpose(1, 2)
        s = Q @ K.transpose(-1, -2) / math.sqrt(hs)
        s = s.masked_fill(~allowed[:, None], float("-inf"))
        a = torch.softmax(s, dim=-1) @ V
        a = a.transpose(1, 2).reshape(B, N, C)
        return F.linear(a, p["wo"][l], p["bo"][l])

    def forward(self, ids, valid):
        """ids [B, N] left-padded item ids, valid [B, N] real-token mask."""
        p, C, N = self.p, self.C, self.N
        x = F.embedding(ids, p["item_emb"], padding_idx=0) * math.sqrt(C)
        x = x + p["pos_emb"][None, :, :]
        causal = torch.tril(torch.ones(N, N, dtype=torch.bool))
        allowed = causal[None] & valid[:, None, :]
        # padding rows attend to themselves only (their outputs are unused)
        allowed = allowed | torch.eye(N, dtype=torch.bool)[None]
        for l in range(self.L):
            q_in = F.layer_norm(x, (C,), p["ln1_w"][l], p["ln1_b"][l], self.eps)
            x = q_in + self.mha(l, q_in, x, allowed)
            y = F.layer_norm(x, (C,), p["ln2_w"][l], p["ln2_b"][l], self.eps)
            x = y + F.linear(torch.relu(F.linear(y, p["w1"][l], p["b1"][l])),
                             p["w2"][l], p["b2"][l])
        return F.layer_norm(x, (C,), p["lnf_w"], p["lnf_b"], self.eps)


BERT_PARAMS = ["item_emb", "pos_emb", "wq", "wk", "wv", "wo", "w1", "w2", "head_w",
               "bq", "bk", "bv", "bo", "b1", "b2", "ln1_w", "ln1_b", "ln2_w", "ln2_b",
               "embln_w", "embln_b", "head_b", "headln_w", "headln_b", "out_b"]


class BERT4Rec(torch.nn.Module):
    """BERT4Rec of sasrec.h with torch.nn.TransformerEncoderLayer blocks
    (norm_first=False: x = LN1(x + MHA(x)); x = LN2(x + FFN(x)))."""

    def __init__(self, cfg, arrays):
        super().__init__()
        self.L = int(cfg["layers"])
        self.H = int(cfg["heads"])
        self.C = int(cfg["dim"])
        self.N = int(cfg["max_len"])
        self.eps = float(cfg["ln_eps"])
        self.causal = int(cfg.get("causal", "0"))
        self.p = torch.nn.ParameterDict(
            {k: torch.nn.Parameter(torch.tensor(arrays[k], dtype=torch.float64))
             for k in BERT_PARAMS})
        C, F_ = self.C, arrays["w1"].shape[1]
        self.blocks = torch.nn.ModuleList()
        for _ in range(self.L):
            self.blocks.append(torch.nn.TransformerEncoderLayer(
                C, self.H, F_, dropout=0.0, activation="gelu", layer_norm_eps=self.eps,
                batch_first=True, norm_first=False))

    def load_blocks(self):
        """The blocks' weights as views of the parameters (gradients flow to p)."""
        p = self.p
        for l, blk in enumerate(self.blocks):
            sa = blk.self_attn
            del sa.in_proj_weight, sa.in_proj_bias
            sa.in_proj_weight = torch.cat([p["wq"][l], p["wk"][l], p["wv"][l]], 0)
            sa.in_proj_bias = torch.cat([p["bq"][l], p["bk"][l], p["bv"][l]], 0)
            for mod, w, b in ((sa.out_proj, "wo", "bo"), (blk.linear1, "w1", "b1"),
                              (blk.linear2, "w2", "b2"), (blk.norm1, "ln1_w", "ln1_b"),
                              (blk.norm2, "ln2_w", "ln2_b")):
                del mod.weight, mod.bias
                mod.weight = p[w][l]
                mod.bias = p[b][l]

    def forward(self, ids, valid):
        p, C, N, H = self.p, self.C, self.N, self.H
        self.load_blocks()
        x = F.embedding(ids, p["item_emb"], padding_idx=0) + p["pos_emb"][None]
        x = F.layer_norm(x, (C,), p["embln_w"], p["embln_b"], self.eps)
        allowed = valid[:, None, :].expand(-1, N, -1)
        if self.causal:
            allowed = allowed & torch.tril(torch.ones(N, N, dtype=torch.bool))[None]
        allowed = allowed | torch.eye(N, dtype=torch.bool)[None]
        mask = torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed,
                                                                           float("-inf"))
        mask = mask.repeat_interleave(H, dim=0)  # [B*H, N, N]
        for blk in self.blocks:
            x = blk(x, src_mask=mask)
        return x

    def head(self, h):
        p = self.p
        t = F.gelu(F.linear(h, p["head_w"], p["head_b"]))
        return F.layer_norm(t, (self.C,), p["headln_w"], p["headln_b"], self.eps)


def main_bert(d, cfg, a):
    model = BERT4Rec(cfg, a)
    N = model.N
    off = a["off"].astype(np.int64)
    ids_packed = a["ids"].astype(np.int64)
    rows = a["rows"].astype(np.int64)
    targets = a["targets"].astype(np.int64)
    B = len(off) - 1
    ids = torch.zeros(B, N, dtype=torch.long)
    valid = torch.zeros(B, N, dtype=torch.bool)
    where = []
    for b in range(B):
        n = int(off[b + 1] - off[b])
        for t in range(n):
            ids[b, N - n + t] = int(ids_packed[off[b] + t])
            valid[b, N - n + t] = True
            where.append((b, N - n + t))
    bi = torch.tensor([w[0] for w in where])
    ci = torch.tensor([w[1] for w in where])
    index = []
    h = model(ids, valid)[bi, ci]
    t = model.head(h[torch.tensor(rows)])
    n_items = int(cfg["n_items"])
    E, ob = model.p["item_emb"], model.p["out_b"]
    logits = t @ E[1:n_items + 1].T + ob[1:]
    keep = torch.tensor(targets != 0)
    loss = F.cross_entropy(logits[keep], torch.tensor(targets)[keep] - 1)
    loss.backward()
    write(d, index, "h", h.detach().numpy())
    write(d, index, "loss_ce", np.array([loss.item()]))
    for k in BERT_PARAMS:
        g = model.p[k].grad
        write(d, index, "grad_ce." + k,
              (g if g is not None else torch.zeros_like(model.p[k])).numpy())
    with open(os.path.join(d, "torch.txt"), "w") as f:
        f.writelines(index)
    return 0


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 64
    d = sys.argv[1]
    cfg, a = read_dir(d)
    if cfg.get("model", "sasrec") == "bert4rec":
        return main_bert(d, cfg, a)
    model = SASRec(cfg, a)
    N = model.N
    off = a["off"].astype(np.int64)
    ids_packed = a["ids"].astype(np.int64)
    rows = a["rows"].astype(np.int64)
    targets = a["targets"].astype(np.int64)
    neg = a["neg"].astype(np.int64)
    B, T = len(off) - 1, int(off[-1])

    # left-padded layout: token t of sequence b sits in column N - len + t
    ids = torch.zeros(B, N, dtype=torch.long)
    valid = torch.zeros(B, N, dtype=torch.bool)
    where = []  # packed row -> (b, column)
    for b in range(B):
        n = int(off[b + 1] - off[b])
        for t in range(n):
            ids[b, N - n + t] = int(ids_packed[off[b] + t])
            valid[b, N - n + t] = True
            where.append((b, N - n + t))
    bi = torch.tensor([w[0] for w in where])
    ci = torch.tensor([w[1] for w in where])

    index = []
    E = model.p["item_emb"]
    for loss_name in ("ce", "bce"):
        model.zero_grad()
        h = model(ids, valid)[bi, ci]  # [T, C], packed order
        hr = h[torch.tensor(rows)]
        keep = torch.tensor(targets != 0)
        if loss_name == "ce":
            logits = hr @ E[1:].T
            loss = F.cross_entropy(logits[keep], torch.tensor(targets)[keep] - 1)
        else:
            tg = torch.tensor(targets)
            s_pos = (hr * E[tg]).sum(-1)
            K = neg.shape[1]
            ng = torch.tensor(neg)
            s_neg = (hr[:, None, :] * E[ng]).sum(-1)  # [n, K]
            nmask = (ng != 0) & keep[:, None]
            total = F.softplus(-s_pos)[keep].sum() + F.softplus(s_neg)[nmask].sum()
            loss = total / keep.sum()
            assert K >= 1
        loss.backward()
        if loss_name == "ce":
            write(d, index, "h", h.detach().numpy())
        write(d, index, "loss_" + loss_name, np.array([loss.item()]))
        for k in PARAMS:
            write(d, index, "grad_%s.%s" % (loss_name, k), model.p[k].grad.numpy())
    with open(os.path.join(d, "torch.txt"), "w") as f:
        f.writelines(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
