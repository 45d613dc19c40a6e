#!/usr/bin/env python3
"""bert4rec_torch.py - time BERT4Rec training epochs in PyTorch: the model
of `seqrec-train --model bert4rec` (lib/model/sasrec.h's BERT4Rec, softmax
attention) built as the oracle builds it (tests/reference/sasrec_ref.py):
torch.nn.TransformerEncoderLayer blocks (post-LN, GELU), the embedding
LayerNorm, the output head and bias, with seqrec's dropout sites (after the
embedding LayerNorm, on the attention's and the feed-forward's outputs;
not on the attention's probabilities nor after the GELU), on the same data.

Usage: seqrec-cat SPLIT | bert4rec_torch.py --epochs 2 [--n-items V
       --max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1 --dropout 0.5
       --batch 128 --mask-prob 0.2 --device cpu|cuda --precision tf32|fp32|bf16]

The cloze task of seqrec-train's BERT4Rec: each user with two or more
training items is one example, its newest N training items; each epoch
masks each item with probability --mask-prob (at least one an example: a
uniform one when none was drawn), and the loss is the softmax
cross-entropy over items 1..V at the masked positions, logits t E^T + b
with t = LN(gelu(W h + c)) and the tied item embedding (lib/model/sasrec.c,
bert_loss). The masks are drawn with numpy before the clock starts, as the
batches are; PyTorch computes the padded [B, N] layout whole.

Prints what sasrec_torch.py prints (torch,epoch_seconds,S; torch,seq_per_s;
torch,loss; torch,peak_mib on a GPU) for each epoch."""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sasrec_torch  # noqa: E402


class TrainBERT4Rec(torch.nn.Module):
    """BERT4Rec of sasrec.h from torch.nn.TransformerEncoderLayer, seqrec's
    initialisation for its post-LN block: N(0, 0.02) matrices and
    embeddings, zero biases, the padding row zero."""

    def __init__(self, V, N, C, F_, L, H, p, eps):
        super().__init__()
        nrm = lambda *s: torch.nn.Parameter(torch.randn(*s) * 0.02)  # noqa: E731
        self.V, self.C, self.eps = V, C, eps
        self.item_emb = nrm(V + 2, C)  # 0 padding, 1..V items, V + 1 the mask token
        with torch.no_grad():
            self.item_emb[0] = 0
        self.pos_emb = nrm(N, C)
        self.embln = torch.nn.LayerNorm(C, eps=eps)
        self.drop = torch.nn.Dropout(p)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            blk = torch.nn.TransformerEncoderLayer(C, H, F_, dropout=p, activation="gelu",
                                                   layer_norm_eps=eps, batch_first=True,
                                                   norm_first=False)
            blk.self_attn.dropout = 0.0  # seqrec drops no attention probability
            blk.dropout = torch.nn.Identity()  # nor the GELU's output
            for name, w in blk.named_parameters():
                with torch.no_grad():
                    if w.dim() == 2:
                        w.normal_(0, 0.02)
                    elif not name.startswith("norm"):
                        w.zero_()
            self.blocks.append(blk)
        self.head = torch.nn.Linear(C, C)
        with torch.no_grad():
            self.head.weight.normal_(0, 0.02)
            self.head.bias.zero_()
        self.headln = torch.nn.LayerNorm(C, eps=eps)
        self.out_b = torch.nn.Parameter(torch.zeros(V + 1))

    def forward(self, ids, valid, rows):
        """ids, valid [B, N] left-padded (column j is position j, as
        seqrec's right-aligned positions); rows: the masked cells. The
        logits of items 1..V at those cells."""
        x = F.embedding(ids, self.item_emb, padding_idx=0) + self.pos_emb[None]
        x = self.drop(self.embln(x))
        for blk in self.blocks:
            x = blk(x, src_key_padding_mask=~valid)
        t = self.headln(F.gelu(self.head(x[rows])))
        return t @ self.item_emb[1:self.V + 1].t() + self.out_b[1:]


def cloze(ids, p, rng):
    """Each row's masked cells: every real item with probability p, one
    uniform real item where none was drawn."""
    valid = ids != 0
    m = (rng.random(ids.shape) < p) & valid
    for u in np.flatnonzero(~m.any(1)):
        m[u, rng.choice(np.flatnonzero(valid[u]))] = True
    return m


def main():
    ap = argparse.ArgumentParser()
    sasrec_torch.common_args(ap)
    ap.add_argument("--mask-prob", type=float, default=0.2)
    o = ap.parse_args()
    if not 0 < o.mask_prob <= 1:
        ap.error("--mask-prob must be in (0, 1]")
    dev, amp, rng = sasrec_torch.setup(o)
    train, V = sasrec_torch.read_train(sys.stdin, o.n_items)
    N = o.max_len
    model = TrainBERT4Rec(V, N, o.dim, o.ffn, o.layers, o.heads, o.dropout, 1e-12).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))

    U = len(train)
    items = np.zeros((U, N), np.int64)  # the newest N training items, left-padded
    for u, t in enumerate(train):
        s = t[-N:]
        items[u, N - len(s):] = s

    def loss_of(bi, bm, bt):  # a batch's ids, masked cells and items
        with amp():
            logits = model(bi, bi != 0, bm).float()
        return F.cross_entropy(logits, bt[bm] - 1)

    for epoch in range(1, o.epochs + 1):
        masked = cloze(items, o.mask_prob, rng)
        ids = np.where(masked, V + 1, items)  # V + 1: the mask token
        sasrec_torch.run_epoch(o, dev, model, opt, rng, U, (ids, masked, items), loss_of)
    return 0


if __name__ == "__main__":
    sys.exit(main())
