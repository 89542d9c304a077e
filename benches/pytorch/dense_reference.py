"""Dense full-softmax reference in PyTorch: the same network as amazon670k-synthetic.toml
(sparse features -> 128 ReLU -> softmax over every label), PyTorch's default initialisation
(EmbeddingBag N(0, 1), Linear U(+-1/sqrt(fan_in))), Adam, batches of 128, softmax
cross-entropy with targets 1/|labels| on each of a sample's labels. Prints and writes (CSV)
the exact P@1 on the first `--test` test samples after every epoch, with training seconds
(evaluation excluded) and the collapse detector's shares (most frequent top-1 output, most
frequent test label).

Not part of the build or CI; needs `pip install torch numpy`. Example:
    python benches/pytorch/dense_reference.py --data datasets/generated/a100k-20k \
        --lr 0.004 --epochs 3 --csv benches/results/pytorch-dense-100k.csv
"""
import argparse
import time

import numpy as np
import torch

from xmc_sweep import read_xmc  # the same folder


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--data', required=True, help='folder with train.txt and test.txt')
    p.add_argument('--epochs', type=int, default=3)
    p.add_argument('--lr', type=float, default=4e-3)
    p.add_argument('--batch', type=int, default=128)
    p.add_argument('--hidden', type=int, default=128)
    p.add_argument('--test', type=int, default=2000, help='test samples scored')
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--sparse-adam', action='store_true',
                   help='SparseAdam (lazy) on the embedding instead of dense Adam')
    p.add_argument('--csv', help='append one row per epoch to this CSV')
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    features, labels, train, train_labels = read_xmc(a.data + '/train.txt')
    _, _, test, test_labels = read_xmc(a.data + '/test.txt', a.test)

    emb = torch.nn.EmbeddingBag(features, a.hidden, mode='sum', sparse=a.sparse_adam)
    hidden_bias = torch.nn.Parameter(torch.zeros(a.hidden))
    out = torch.nn.Linear(a.hidden, labels)
    dense_params = [hidden_bias] + list(out.parameters())
    if a.sparse_adam:
        optimizers = [torch.optim.SparseAdam(list(emb.parameters()), lr=a.lr),
                      torch.optim.Adam(dense_params, lr=a.lr)]
    else:
        optimizers = [torch.optim.Adam(list(emb.parameters()) + dense_params, lr=a.lr)]

    def forward(ids, split):
        idx, val, off = split
        starts, ends = off[ids], off[ids + 1]
        sel = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)])
        offsets = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
        h = emb(torch.from_numpy(idx[sel]), torch.from_numpy(offsets),
                per_sample_weights=torch.from_numpy(val[sel]))
        return out(torch.relu(h + hidden_bias))

    def p_at_1():
        """Exact P@1, and the collapse detector's two shares: of the test samples whose
        top-1 is the most frequent top-1 output, and of those carrying the most frequent
        test label."""
        hits, tops = 0, []
        with torch.no_grad():
            for s in range(0, len(test_labels), 256):
                ids = np.arange(s, min(s + 256, len(test_labels)))
                top = forward(ids, test).argmax(1).numpy()
                hits += sum(int(t in test_labels[j]) for j, t in zip(ids, top))
                tops.extend(top.tolist())
        n = len(test_labels)
        top1 = np.unique(tops, return_counts=True)[1].max() / n
        label = np.unique(np.concatenate([np.unique(l) for l in test_labels]),
                          return_counts=True)[1].max() / n
        return hits / n, top1, label

    rng = np.random.default_rng(a.seed)
    n, seconds = len(train_labels), 0.0
    for epoch in range(1, a.epochs + 1):
        order = rng.permutation(n)
        started = time.time()
        for s in range(0, n, a.batch):
            ids = order[s:s + a.batch]
            logits = forward(ids, train)
            target = torch.zeros_like(logits)
            for r, j in enumerate(ids):
                target[r, train_labels[j]] = 1.0 / len(train_labels[j])
            loss = -(target * torch.log_softmax(logits, 1)).sum(1).mean()
            for o in optimizers:
                o.zero_grad()
            loss.backward()
            for o in optimizers:
                o.step()
        seconds += time.time() - started
        p1, top1, label = p_at_1()
        print(f'epoch {epoch}: exact P@1 {p1:.4f} on {len(test_labels)} test samples, '
              f'{seconds:.1f} s of training ({epoch * n / seconds:.0f} samples/s), '
              f'last batch loss {loss.item():.3f}, top-1 share {top1:.4f} '
              f'(most frequent label {label:.4f})', flush=True)
        if a.csv:
            with open(a.csv, 'a') as f:
                f.write(f'pytorch-dense,{labels},{a.lr},{a.seed},{epoch},{p1:.4f},{seconds:.1f},'
                        f'{top1:.4f},{label:.4f}\n')


if __name__ == '__main__':
    main()
