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
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import MultiLabelBinarizer
from sklearn.svm import LinearSVC

from wide_rerank_probe import read_top5, read_xmc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'omikuji'))
from compare import precision_at  # noqa: E402 (beside this probe's folder)


def features(path):
    """(CSR matrix of the features, label sets, label count) of an XMC file."""
    feats, vals, labels, n_labels = read_xmc(path)
    with open(path) as f:
        width = int(f.readline().split()[1])
    rows = np.repeat(np.arange(len(feats)), [len(f) for f in feats])
    x = sp.csr_matrix((np.concatenate(vals), (rows, np.concatenate(feats))),
                      shape=(len(feats), width))
    return x, [set(y.tolist()) for y in labels], n_labels


def precision(ranked, truth):
    """`precision_at`, rounded for printing."""
    return [round(p, 4) for p in precision_at(ranked, truth)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--data', required=True, help='folder with train.txt and test.txt')
    p.add_argument('--network-top5', required=True)
    p.add_argument('--shipped-top5', required=True)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    x_train, y_train, n_labels = features(f'{a.data}/train.txt')
    x_test, y_test, _ = features(f'{a.data}/test.txt')
    targets = MultiLabelBinarizer(classes=list(range(n_labels))).fit_transform(y_train)
    started = time.time()
    svm = OneVsRestClassifier(LinearSVC(C=1.0, loss='squared_hinge'), n_jobs=a.threads)
    svm.fit(x_train, targets)
    print(f'{n_labels} SVMs trained in {time.time() - started:.1f} s')
    scores = svm.decision_function(x_test)
    print('SVMs alone', precision([np.argsort(-s)[:5] for s in scores], y_test))
    (ids, logits), (shipped, _) = read_top5(a.network_top5), read_top5(a.shipped_top5)
    print('network alone (top 5)', precision(ids, y_test))
    print('shipped model (top 5)', precision(shipped, y_test))
    svm_of_ids = np.take_along_axis(scores, ids, axis=1)
    for beta in (1, 2, 3, 5, 10):
        order = np.argsort(-(logits + beta * svm_of_ids), axis=1, kind='stable')
        ranked = np.take_along_axis(ids, order, axis=1)
        print(f'network top 5 by logit + {beta} x SVM', precision(ranked, y_test))


if __name__ == '__main__':
    main()
