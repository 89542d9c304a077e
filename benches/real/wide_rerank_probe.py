"""Probe (issue 39): would per-label linear classifiers on the raw tf-idf features, beside
slide's network, recover the labels label trees get right? Trains hashed per-label linear
classifiers (feature x label -> one of 2^B buckets; squared hinge, plain SGD with a linear
decay) over a shortlist per training sample (its labels, slide's top 5 on it, 10 negatives
drawn by label frequency and 10 uniform ones), then re-ranks slide's top 5 of every test
sample by `slide logit + beta * wide score` and prints P@1 for several beta after each epoch.

Not part of the build or CI; numpy only. Inputs: the XMC files and two `slide-train
predict` outputs of one checkpoint (top 5 `id:logit` per line), on the test file and on the
training file (`--set data.test=` pointing at train.txt):

    python3 benches/real/wide_rerank_probe.py --data datasets/real/deb-deps \
        --test-top5 slide-test.txt --train-top5 slide-train.txt --epochs 3
"""
import argparse
import time

import numpy as np


def read_xmc(path):
    """(features, values, labels) lists of an XMC file's samples and its label count."""
    feats, vals, labels = [], [], []
    with open(path) as f:
        n_labels = int(f.readline().split()[2])
        for line in f:
            parts = line.split()
            has_labels = bool(parts) and ':' not in parts[0]
            labels.append(np.array([int(x) for x in parts[0].split(',')] if has_labels else [], np.int64))
            pairs = [t.split(':') for t in (parts[1:] if has_labels else parts)]
            feats.append(np.array([int(k) for k, _ in pairs], np.int64))
            vals.append(np.array([float(v) for _, v in pairs], np.float32))
    return feats, vals, labels, n_labels


def read_top5(path):
    rows = [line.split() for line in open(path)]
    ids = np.array([[int(t.split(':')[0]) for t in r[:5]] for r in rows])
    logits = np.array([[float(t.split(':')[1]) for t in r[:5]] for r in rows], np.float32)
    return ids, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--data', required=True)
    ap.add_argument('--test-top5', required=True)
    ap.add_argument('--train-top5', required=True)
    ap.add_argument('--bucket-bits', type=int, default=24)
    ap.add_argument('--epochs', type=int, default=3)
    ap.add_argument('--lr', type=float, default=1.0)
    args = ap.parse_args()
    feats, vals, labels, n_labels = read_xmc(f'{args.data}/train.txt')
    te_feats, te_vals, te_labels, _ = read_xmc(f'{args.data}/test.txt')
    train_top, _ = read_top5(args.train_top5)
    test_top, test_logits = read_top5(args.test_top5)
    buckets = 1 << args.bucket_bits
    freq = np.bincount(np.concatenate(labels), minlength=n_labels).astype(np.float64)
    by_freq = freq / freq.sum()

    def slots(f, ls):
        h = f[None, :].astype(np.uint64) * np.uint64(2654435761) \
            + ls[:, None].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        return (h >> np.uint64(20)) % np.uint64(buckets)

    table = np.zeros(buckets, np.float32)
    rng = np.random.default_rng(1)
    n, steps, t, started = len(feats), args.epochs * len(feats), 0, time.time()
    for epoch in range(args.epochs):
        for i in rng.permutation(n):
            negatives = np.concatenate([train_top[i], rng.choice(n_labels, 10, p=by_freq),
                                        rng.integers(0, n_labels, 10)])
            shortlist = np.unique(np.concatenate([labels[i], negatives]))
            y = np.where(np.isin(shortlist, labels[i]), 1.0, -1.0).astype(np.float32)
            b = slots(feats[i], shortlist)
            score = (table[b] * vals[i][None, :]).sum(1)
            grad = -2 * y * np.maximum(0, 1 - y * score)  # d(max(0, 1 - y s)^2) / ds
            lr = args.lr * (1 - t / steps)
            t += 1
            np.subtract.at(table, b.ravel(), (lr * grad[:, None] * vals[i][None, :]).ravel())
        wide = np.array([(table[slots(f, ids)] * v[None, :]).sum(1)
                         for f, v, ids in zip(te_feats, te_vals, test_top)])
        results = []
        for beta in (0, 0.5, 1, 2, 1000):
            order = np.argsort(-(test_logits + beta * wide), 1)
            first = np.take_along_axis(test_top, order, 1)[:, 0]
            p1 = np.mean([top in truth for top, truth in zip(first, te_labels)])
            results.append(f'beta {beta}: P@1 {p1:.4f}')
        print(f'epoch {epoch + 1} ({time.time() - started:.0f} s): ' + ', '.join(results), flush=True)


if __name__ == '__main__':
    main()
