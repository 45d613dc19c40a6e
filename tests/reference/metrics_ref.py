#!/usr/bin/env python3
"""Independent numpy/scipy reference of seqrec-metrics (tests/bats/metrics.bats).

metrics_ref.py OUT.json RANKS.txt K,K.. [--per-user] [--corrected N] [--bv N GAMMA]
    [--coverage N] [--pop SEQ.txt N] [--topk TOP.tsv N]
        recompute every key of OUT.json (seqrec-metrics --json) from the
        text inputs with numpy and scipy, exit 1 naming the first key that
        differs by more than 1e-6 (the JSON has six decimals).
metrics_ref.py compare OUT.json A.txt B.txt K,K.. [--per-user]
        the paired t-test and Wilcoxon p-values of --compare (scipy.stats),
        the means and differences; the bootstrap interval only for holding
        the mean difference (its resampling is the C generator's).
RANKS.txt is user rank n_cand [item] lines; SEQ.txt user<TAB>items (the
training counts); TOP.tsv user<TAB>item:score,... lists.
"""
import json
import sys

import numpy as np
from scipy import stats


def read_ranks(path):
    rows = []
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith('#'):
            continue
        rows.append([int(x) for x in f] + [0] * (4 - len(f)))
    return np.array(rows, dtype=np.float64)


def record_values(R, ks, corrected):
    r = R[:, 1].copy()
    if corrected:
        n, m = corrected, R[:, 2] - 1
        sampled = (R[:, 2] >= 2) & (R[:, 2] < n)
        r[sampled] = 1 + (r[sampled] - 1) * (n - 1) / m[sampled]
    out = {}
    for k in ks:
        hit = (r <= k).astype(float)
        out['hr@%d' % k] = hit
        out['recall@%d' % k] = hit
        out['ndcg@%d' % k] = hit / np.log2(r + 1)
        out['mrr@%d' % k] = hit / r
        out['map@%d' % k] = hit / r   # AP@K of one relevant item
        out['precision@%d' % k] = hit / k
    out['mrr'] = 1 / r
    return out


def bv_values(R, ks, n, gamma):
    """Krichene and Rendle's bias-variance correction, from scipy's
    hypergeometric pmf and numpy's solver: each record's value is x(r) of
    its sample size m = n_cand - 1."""
    full = np.zeros((n, 4))
    full[:, 1] = np.arange(1, n + 1)
    full[:, 2] = n
    M = record_values(full, ks, 0)
    keys = list(M)
    Mv = np.stack([M[k] for k in keys], axis=1)           # [N, metrics]
    out = record_values(R, ks, 0)
    for m in sorted(set(int(c) - 1 for c in R[:, 2] if 2 <= c < n)):
        Rs = np.arange(1, n + 1)
        A = np.stack([stats.hypergeom.pmf(k, n - 1, Rs - 1, m) for k in range(m + 1)], axis=1)
        G = (1 - gamma) * A.T @ A + gamma * np.diag(A.sum(axis=0))
        x = np.linalg.solve(G, A.T @ Mv)                  # [m + 1, metrics]
        rows = R[:, 2] == m + 1
        for j, key in enumerate(keys):
            out[key][rows] = x[R[rows, 1].astype(int) - 1, j]
    return out


def unit_means(users, vals, per_user):
    if not per_user:
        return vals.mean()
    u = np.unique(users)
    return np.mean([vals[users == x].mean() for x in u])


def gini(counts):
    x = np.sort(counts.astype(float))
    n = len(x)
    if x.sum() == 0:
        return 0.0
    j = np.arange(1, n + 1)
    return float(((2 * j - n - 1) * x).sum() / (n * x.sum()))


def list_measures(lists, ks, n_items, pct, per_user, exp):
    """lists: (user, [(pos, item), ...])"""
    for k in ks:
        c = np.zeros(n_items + 1)
        per = {}
        for u, its in lists:
            inside = [i for p, i in its if p <= k]
            for i in inside:
                c[i] += 1
            if pct is not None and inside:
                per.setdefault(u if per_user else len(per), []).append(
                    np.mean([pct[i] for i in inside]))
        exp['coverage@%d' % k] = np.count_nonzero(c[1:]) / n_items
        exp['gini@%d' % k] = gini(c[1:])
        if pct is not None:
            exp['popbias@%d' % k] = np.mean([np.mean(v) for v in per.values()]) if per else 0.0


def popularity(path, n_items):
    c = np.zeros(n_items + 1)
    for line in open(path):
        f = line.split('\t')
        for i in f[1].split():
            c[int(i)] += 1
    a = c[1:]
    pct = np.zeros(n_items + 1)
    for i in range(1, n_items + 1):
        pct[i] = stats.percentileofscore(a, c[i], kind='mean')
    return pct


def check(got, exp):
    for key, v in exp.items():
        if key not in got:
            sys.exit('missing key %s' % key)
        # p-values are printed with 6 significant digits, the rest 6 decimals
        tol = 1e-5 * abs(v) + 1e-300 if key.endswith('_p') else 1.5e-6
        if abs(float(got[key]) - float(v)) > tol:
            sys.exit('%s: seqrec-metrics %s, reference %.9g' % (key, got[key], v))
    print('ok: %d keys agree' % len(exp))


def main_metrics(argv):
    got = json.load(open(argv[0]))
    ks = [int(k) for k in argv[2].split(',')]
    opts = argv[3:]
    per_user = '--per-user' in opts
    def arg(name, n=1):
        i = opts.index(name)
        return opts[i + 1:i + 1 + n]
    exp = {}
    R = None if argv[1] == '-' else read_ranks(argv[1])
    pct = None
    if '--pop' in opts:
        path, n = arg('--pop', 2)
        pct = popularity(path, int(n))
    if R is not None:
        corr = int(arg('--corrected')[0]) if '--corrected' in opts else 0
        if '--bv' in opts:
            n, g = arg('--bv', 2)
            vals = bv_values(R, ks, int(n), float(g))
        else:
            vals = record_values(R, ks, corr)
        for key, v in vals.items():
            exp[key] = unit_means(R[:, 0], v, per_user)
        exp['records'] = len(R)
        exp['users'] = len(np.unique(R[:, 0]))
    if '--topk' in opts:
        path, n = arg('--topk', 2)
        lists = []
        for line in open(path):
            u, rest = line.rstrip('\n').split('\t')
            its = [int(x.split(':')[0]) for x in rest.split(',') if x]
            lists.append((int(u), list(enumerate(its, 1))))
        list_measures(lists, ks, int(n), pct, per_user, exp)
    elif '--coverage' in opts or pct is not None:
        n = int(arg('--coverage')[0]) if '--coverage' in opts else len(pct) - 1
        lists = [(int(u), [(int(r), int(i))]) for u, r, _, i in R]
        list_measures(lists, ks, n, pct, per_user, exp)
    check(got, exp)


def per_unit(users, v, per_user):
    if not per_user:
        return v
    return np.array([v[users == x].mean() for x in np.unique(users)])


def main_compare(argv):
    got = json.load(open(argv[0]))
    A, B = read_ranks(argv[1]), read_ranks(argv[2])
    ks = [int(k) for k in argv[3].split(',')]
    per_user = '--per-user' in argv[4:]
    va, vb = record_values(A, ks, 0), record_values(B, ks, 0)
    exp = {}
    for key in va:
        if key.startswith('recall'):
            continue
        ua, ub = per_unit(A[:, 0], va[key], per_user), per_unit(A[:, 0], vb[key], per_user)
        d = ub - ua
        exp[key + ':a'] = ua.mean()
        exp[key + ':b'] = ub.mean()
        exp[key + ':diff'] = d.mean()
        if np.all(d == d[0]):
            exp[key + ':t_p'] = 1.0 if d[0] == 0 else 0.0
        else:
            exp[key + ':t_p'] = stats.ttest_rel(ub, ua).pvalue
        nz = d[d != 0]
        exp[key + ':wilcoxon_p'] = 1.0 if len(nz) == 0 else stats.wilcoxon(
            d, zero_method='wilcox', correction=True, mode='approx').pvalue
        lo, hi = got[key + ':ci_lo'], got[key + ':ci_hi']
        if not lo <= d.mean() + 1e-9 and d.mean() <= hi + 1e-9:
            sys.exit('%s: interval [%s, %s] misses the mean %f' % (key, lo, hi, d.mean()))
    check(got, exp)


if __name__ == '__main__':
    if sys.argv[1] == 'compare':
        main_compare(sys.argv[2:])
    else:
        main_metrics(sys.argv[1:])
