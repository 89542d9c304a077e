#!/usr/bin/env python3
"""The extreme-classification metrics of the Extreme Classification Repository's tables,
from each sample's ranked predictions and its true labels, computed as the repository's
evaluation tools compute them (pyxclib, `xclib/evaluation/xc_metrics.py`): for k = 1, 3, 5,

  P@k       mean over samples of (hits in the top k) / k; a sample with fewer than k
            predictions misses the rest.
  nDCG@k    mean over samples of DCG@k / IDCG(min(|y|, k)), a label at rank r (from 1)
            gaining 1 / log2(r + 1); a sample without labels scores 0 (and counts).
  PSP@k     [mean over samples of the top k's hits, each weighed by its label's inverse
            propensity, / k] / [the same mean for the best possible top k: the k largest
            inverse propensities among the sample's true labels].
  PSnDCG@k  [mean over samples of the weighed DCG@k / IDCG(min(|y|, k))] / [the same mean
            with the sample's true labels ranked by inverse propensity, largest first].

Inverse propensity (Jain, Prabhu and Varma, KDD 2016): label l weighs 1 + C (N_l + B)^-A,
C = (ln N - 1)(B + 1)^A, N the training samples and N_l those carrying l; A = 0.55 and
B = 1.5 are the repository's choice for most sets (Amazon: 0.6, 2.6; Wikipedia: 0.5, 0.4).
A label no training sample carries (N_l = 0) weighs 1 + C B^-A.

The same definitions as slide's own (`src/metrics.rs`), so that the figures in its
`metrics.jsonl` and those computed here from its predictions agree. NumPy only.

    python3 benches/xmc/xmc_metrics.py --self-test     # a 3-sample case worked by hand
"""
import math
import sys

import numpy as np

# The k of every metric, in the order of each metric's list.
AT_K = (1, 3, 5)
# The deepest rank any metric reads.
MAX_K = 5
# The repository's propensity constants for most sets.
DEFAULT_A = 0.55
DEFAULT_B = 1.5
# The metric families, in the order of the CSV's columns.
NAMES = ('p', 'ndcg', 'psp', 'psndcg')


def label_counts(label_sets, labels):
    """How many of `label_sets` (one iterable of label ids per training sample) carry each
    of the `labels` label ids (ids at or above `labels` are not counted)."""
    counts = np.zeros(labels, dtype=np.int64)
    for sample in label_sets:
        for label in sample:
            if label < labels:
                counts[label] += 1
    return counts


def inverse_propensity(counts, samples, a=DEFAULT_A, b=DEFAULT_B):
    """Each label's inverse propensity `1 + C (N_l + B)^-A`, `C = (ln N - 1)(B + 1)^A`, from
    its training count `counts[l]` (N_l) among `samples` (N) training samples."""
    if samples < 1:
        raise ValueError('propensities need at least one training sample')
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f'propensity A and B must be finite and above 0, got {a}, {b}')
    c = (math.log(samples) - 1.0) * (b + 1.0) ** a
    return 1.0 + c * (np.asarray(counts, dtype=np.float64) + b) ** -a


def _discounts(depth):
    """The gain of ranks 1..depth: 1 / log2(rank + 1)."""
    return 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))


def metrics(ranked, truth, inv_prop=None):
    """The metrics of predictions `ranked` (per sample, label ids best first; only the first
    MAX_K are read) against `truth` (per sample, its set of true label ids), as a dict
    `{'p_at_1': ..., 'ndcg_at_1': ..., 'psp_at_1': ..., 'psndcg_at_1': ..., ...}` for
    k in AT_K; the propensity-scored ones only when `inv_prop` (by label id, e.g. from
    `inverse_propensity`, one weight for every label id) is given; an id beyond it is an
    error."""
    if len(ranked) != len(truth):
        raise ValueError(f'{len(ranked)} predictions for {len(truth)} samples')
    samples = max(len(truth), 1)
    gains = _discounts(MAX_K)
    # IDCG(m) for m = 0..MAX_K: the best DCG of m labels.
    ideal_dcg = np.concatenate([[0.0], np.cumsum(gains)])
    if inv_prop is not None:
        inv_prop = np.asarray(inv_prop, dtype=np.float64)

        def weight(label):
            if not 0 <= label < len(inv_prop):
                raise ValueError(f'label {label} is beyond the {len(inv_prop)} propensities')
            return inv_prop[label]
    sums = {name: np.zeros(len(AT_K)) for name in NAMES}
    best = {'psp': np.zeros(len(AT_K)), 'psndcg': np.zeros(len(AT_K))}
    for top, labels in zip(ranked, truth):
        top = list(top)[:MAX_K]
        hit = np.array([1.0 if label in labels else 0.0 for label in top] +
                       [0.0] * (MAX_K - len(top)))
        for j, k in enumerate(AT_K):
            sums['p'][j] += hit[:k].sum() / k
            if labels:
                sums['ndcg'][j] += (hit[:k] * gains[:k]).sum() / ideal_dcg[min(len(labels), k)]
        if inv_prop is None:
            continue
        weighed = np.array([hit[r] * weight(top[r]) for r in range(len(top))] +
                           [0.0] * (MAX_K - len(top)))
        ideal = np.sort([weight(label) for label in labels])[::-1][:MAX_K]
        ideal = np.concatenate([ideal, np.zeros(MAX_K - len(ideal))])
        for j, k in enumerate(AT_K):
            sums['psp'][j] += weighed[:k].sum() / k
            best['psp'][j] += ideal[:k].sum() / k
            if labels:
                norm = ideal_dcg[min(len(labels), k)]
                sums['psndcg'][j] += (weighed[:k] * gains[:k]).sum() / norm
                best['psndcg'][j] += (ideal[:k] * gains[:k]).sum() / norm
    out = {}
    for name in NAMES:
        if name in best and inv_prop is None:
            continue
        for j, k in enumerate(AT_K):
            if name in best:
                value = sums[name][j] / best[name][j] if best[name][j] > 0 else 0.0
            else:
                value = sums[name][j] / samples
            out[f'{name}_at_{k}'] = float(value)
    return out


def columns():
    """The CSV columns of `metrics`' figures, in order: p_at_1, p_at_3, p_at_5, ndcg_at_1, ..."""
    return [f'{name}_at_{k}' for name in NAMES for k in AT_K]


def self_test():
    """Three samples, 4 labels, worked by hand (A = 0.55, B = 1.5, N = 10 training samples
    with label counts 6, 3, 1, 0). Prints the figures and exits 1 on a mismatch."""
    counts, n, a, b = [6, 3, 1, 0], 10, 0.55, 1.5
    c = (math.log(10) - 1) * 2.5 ** 0.55
    w = [1 + c * (6 + 1.5) ** -0.55, 1 + c * (3 + 1.5) ** -0.55, 1 + c * (1 + 1.5) ** -0.55,
         1 + c * 1.5 ** -0.55]
    inv = inverse_propensity(counts, n, a, b)
    assert np.allclose(inv, w, rtol=0, atol=1e-12), (inv, w)
    # Sample 0: true {0, 2, 3}, ranked 0 2 1 (hits at ranks 1 and 2; label 3 missed)
    # Sample 1: true {1},       ranked 3 1 (two predictions only: a hit at rank 2)
    # Sample 2: true {},        ranked 0 1 2 (no labels: 0 in every mean, still counted)
    # Weights, largest first: w3 (no training sample), w2, w1, w0.
    ranked = [[0, 2, 1], [3, 1], [0, 1, 2]]
    truth = [{0, 2, 3}, {1}, set()]
    g1, g2, g3 = 1.0, 1 / math.log2(3), 0.5  # gains of ranks 1, 2, 3
    idcg3 = g1 + g2 + g3
    want = {
        'p_at_1': (1 + 0 + 0) / 3, 'p_at_3': (2 / 3 + 1 / 3 + 0) / 3,
        'p_at_5': (2 / 5 + 1 / 5 + 0) / 3,
        'ndcg_at_1': (1 + 0 + 0) / 3,
        # sample 0: DCG g1 + g2 over IDCG(min(3, k)); sample 1: g2 over IDCG(1) = 1
        'ndcg_at_3': ((g1 + g2) / idcg3 + g2 + 0) / 3,
        'ndcg_at_5': ((g1 + g2) / idcg3 + g2 + 0) / 3,
        # PSP@1: the predictions' hits weigh w0 (sample 0) and nothing; the best top 1s
        # w3 (sample 0's heaviest label) and w1
        'psp_at_1': (w[0] + 0 + 0) / (w[3] + w[1] + 0),
        # PSP@3 and @5 (the /k cancels: every hit and every true label is within rank 3)
        'psp_at_3': (w[0] + w[2] + w[1]) / (w[3] + w[2] + w[0] + w[1]),
        'psp_at_5': (w[0] + w[2] + w[1]) / (w[3] + w[2] + w[0] + w[1]),
        'psndcg_at_1': (w[0] + 0) / (w[3] + w[1]),
        # sample 0: (w0 g1 + w2 g2) / IDCG(3) against (w3 g1 + w2 g2 + w0 g3) / IDCG(3);
        # sample 1: w1 g2 / IDCG(1) against w1 g1 / IDCG(1)
        'psndcg_at_3': ((w[0] * g1 + w[2] * g2) / idcg3 + w[1] * g2) /
                       ((w[3] * g1 + w[2] * g2 + w[0] * g3) / idcg3 + w[1] * g1),
    }
    want['psndcg_at_5'] = want['psndcg_at_3']
    got = metrics(ranked, truth, inv)
    bad = [key for key in want if abs(got[key] - want[key]) > 1e-12]
    for key in columns():
        print(f'{key:12} {got[key]:.6f}  (by hand {want[key]:.6f})'
              f'{"  MISMATCH" if key in bad else ""}')
    # Without propensities only P@k and nDCG@k.
    plain = metrics(ranked, truth)
    assert set(plain) == {f'{m}_at_{k}' for m in ('p', 'ndcg') for k in AT_K}, plain
    # A perfect ranking scores 1 on every propensity-scored metric.
    perfect = metrics([[2, 0], [1]], [{0, 2}, {1}], inv)
    bad += [key for key in ('psp_at_1', 'psp_at_5', 'psndcg_at_1', 'psndcg_at_5')
            if abs(perfect[key] - 1.0) > 1e-12]
    if bad:
        print('self-test FAILED:', ', '.join(bad))
        sys.exit(1)
    print('self-test passed')


if __name__ == '__main__':
    if sys.argv[1:] == ['--self-test']:
        self_test()
    else:
        sys.exit(__doc__)
