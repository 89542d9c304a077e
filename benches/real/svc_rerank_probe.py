"""Probe (issue 39): how much would a converged one-vs-all linear model add to slide's network
on a small real set? Trains liblinear's squared-hinge linear SVMs (scikit-learn's LinearSVC,
C = 1, with an intercept), one per label, on every training sample, prints their P@1/P@3/P@5
alone (every label scored), then re-ranks the network's top 5 of each test sample by
`logit + beta * SVM score` for several beta, beside the shipped model's top 5.

Not part of the build or CI; needs numpy, scipy and scikit-learn. Inputs: an XMC folder and
two `slide-train predict --top-k 5` outputs of one checkpoint on its test file, one with the
wide head out of the ranking (`--set network.wide.weight=0.000001`: the network alone), one
as trained. Meant for sets of a few hundred labels (deb-tags: 591 SVMs in about 45 s on 2
cores); deb-deps' 37,929 would take hours this way.

    python3 benches/real/svc_rerank_probe.py --data datasets/real/deb-tags \
        --network-top5 net.txt --shipped-top5 both.txt
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import MultiLabelBinarizer
from sklearn.svm import LinearSVC


def read_xmc(path):
    """(CSR matrix of the features, label lists, label count) of an XMC file."""
    rows, cols, vals, labels = [], [], [], []
    with open(path) as f:
        _, features, n_labels = map(int, f.readline().split())
        for i, line in enumerate(f):
            parts = line.split()
            has_labels = bool(parts) and ':' not in parts[0]
            labels.append([int(x) for x in parts[0].split(',')] if has_labels else [])
            for t in parts[1:] if has_labels else parts:
                j, v = t.split(':')
                rows.append(i)
                cols.append(int(j))
                vals.append(float(v))
    x = sp.csr_matrix((vals, (rows, cols)), shape=(len(labels), features))
    return x, labels, n_labels


def read_top5(path):
    """Per line, the `(label, score)` pairs of `slide-train predict`'s `id:score` output."""
    with open(path) as f:
        return [[(int(a), float(b)) for a, b in (t.split(':') for t in line.split())]
                for line in f]


def precision(ranked, truth):
    """P@1, P@3, P@5 of ranked label lists against the true label sets."""
    sums = [0.0, 0.0, 0.0]
    for ranks, labels in zip(ranked, truth):
        labels = set(labels)
        for i, k in enumerate((1, 3, 5)):
            sums[i] += sum(1 for y in ranks[:k] if y in labels) / k
    return [round(s / len(truth), 4) for s in sums]


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--data', required=True, help='folder with train.txt and test.txt')
    p.add_argument('--network-top5', required=True)
    p.add_argument('--shipped-top5', required=True)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    x_train, y_train, n_labels = read_xmc(f'{a.data}/train.txt')
    x_test, y_test, _ = read_xmc(f'{a.data}/test.txt')
    targets = MultiLabelBinarizer(classes=list(range(n_labels))).fit_transform(y_train)
    started = time.time()
    svm = OneVsRestClassifier(LinearSVC(C=1.0, loss='squared_hinge'), n_jobs=a.threads)
    svm.fit(x_train, targets)
    print(f'{n_labels} SVMs trained in {time.time() - started:.1f} s')
    scores = svm.decision_function(x_test)
    print('SVMs alone', precision([np.argsort(-s)[:5] for s in scores], y_test))
    network, shipped = read_top5(a.network_top5), read_top5(a.shipped_top5)
    print('network alone (top 5)', precision([[y for y, _ in r] for r in network], y_test))
    print('shipped model (top 5)', precision([[y for y, _ in r] for r in shipped], y_test))
    for beta in (1, 2, 3, 5, 10):
        ranked = [[y for y, _ in sorted(r, key=lambda t: -(t[1] + beta * scores[i][t[0]]))]
                  for i, r in enumerate(network)]
        print(f'network top 5 by logit + {beta} x SVM', precision(ranked, y_test))


if __name__ == '__main__':
    main()
