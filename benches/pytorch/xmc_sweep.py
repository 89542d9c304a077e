"""Dense PyTorch models on real extreme-classification files: which model, loss and schedule
a network needs to reach label trees' precision, measured on a GPU (or CPU) in minutes.

Each setting trains `features -> hidden ReLU -> labels` (or, with `hidden=0`, a linear
one-vs-all model straight on the sparse features) with Adam and scores every label of
every test sample after each epoch: P@1 / P@3 / P@5, training seconds. Settings are
`key=value,...` strings:
    hidden=1024      hidden width (0: linear model on the features)
    loss=softmax     softmax cross-entropy with targets 1/|y| | bce (one-vs-all binary
                     cross-entropy over every label)
    lr=0.004         Adam's learning rate (cosine-decayed to 0 over the epochs with cos=1)
    epochs=10        epochs
    batch=128        batch size
    dropout=0        dropout on the hidden layer
    indrop=0         dropout on the input features (each nonzero dropped in training with
                     this probability, the rest scaled up)
    init=1.0         std of the input embedding's N(0, std) initialisation
    wd=0             decoupled weight decay (AdamW)
    cos=1            cosine learning-rate decay
    bf16=0           bf16 autocast (CUDA)
    seeds=1          an ensemble of this many networks (seeds seed, seed+1, ...), trained
                     side by side on the same batches, scored by their mean probability

Not part of the build or CI; needs torch and numpy. Example:
    python3 benches/pytorch/xmc_sweep.py --data datasets/real/deb-deps \
        --setting hidden=1024,loss=softmax --setting hidden=1024,loss=bce --csv sweep.csv
"""
import argparse
import csv
import gzip
import math
import os
import time

import numpy as np
import torch


def open_text(path):
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        path += '.gz'
    return gzip.open(path, 'rt') if path.endswith('.gz') else open(path)


def read_xmc(path, limit=None):
    """The XMC text format (plain or gzipped): a header `n features labels`, then
    `l1,l2 f:v f:v ...`; the first `limit` samples, or all. Returns (features, labels,
    (indices, values, offsets), label lists)."""
    with open_text(path) as f:
        _, features, labels = map(int, f.readline().split())
        idx, val, off, labs = [], [], [0], []
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            parts = line.split()
            has_labels = parts and ':' not in parts[0]
            labs.append([int(x) for x in parts[0].split(',')] if has_labels else [])
            for token in parts[1:] if has_labels else parts:
                k, v = token.split(':')
                idx.append(int(k))
                val.append(float(v))
            off.append(len(idx))
    return (features, labels,
            (np.array(idx, dtype=np.int64), np.array(val, dtype=np.float32),
             np.array(off, dtype=np.int64)), labs)


DEFAULTS = dict(hidden=1024, loss='softmax', lr=0.004, epochs=10, batch=128, dropout=0.0,
                init=1.0, wd=0.0, cos=1, bf16=0, seeds=1, indrop=0.0)


def parse_setting(text):
    s = dict(DEFAULTS)
    for part in filter(None, text.split(',')):
        key, value = part.split('=')
        if key not in s:
            raise SystemExit(f'unknown key {key!r} in {text!r}')
        s[key] = type(DEFAULTS[key])(value) if key != 'loss' else value
    return s


class Batches:
    """The CSR rows of a split, on the device, gathered per batch for EmbeddingBag."""

    def __init__(self, split, labs, labels, device):
        idx, val, off = split
        self.off = off
        self.idx = torch.from_numpy(idx).to(device)
        self.val = torch.from_numpy(val).to(device)
        self.labs = labs
        self.labels = labels
        self.device = device

    def inputs(self, ids):
        starts, ends = self.off[ids], self.off[ids + 1]
        lengths = ends - starts
        sel = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) \
            + np.arange(lengths.sum())
        sel = torch.from_numpy(sel).to(self.device)
        offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)[:-1]])).to(self.device)
        return self.idx[sel], self.val[sel], offsets

    def targets(self, ids, loss):
        rows = np.repeat(np.arange(len(ids)), [len(self.labs[j]) for j in ids])
        cols = np.concatenate([self.labs[j] for j in ids]).astype(np.int64)
        t = torch.zeros(len(ids), self.labels, device=self.device)
        if loss == 'softmax':
            w = np.concatenate([[1.0 / len(self.labs[j])] * len(self.labs[j]) for j in ids])
        else:
            w = np.ones(len(cols))
        t[torch.from_numpy(rows).to(self.device), torch.from_numpy(cols).to(self.device)] = \
            torch.from_numpy(w.astype(np.float32)).to(self.device)
        return t


class Model(torch.nn.Module):
    def __init__(self, features, labels, s):
        super().__init__()
        width = s['hidden'] if s['hidden'] > 0 else labels
        self.emb = torch.nn.EmbeddingBag(features, width, mode='sum')
        if s['hidden'] > 0:
            torch.nn.init.normal_(self.emb.weight, std=s['init'])
        else:
            torch.nn.init.zeros_(self.emb.weight)
        self.bias = torch.nn.Parameter(torch.zeros(width))
        self.hidden = s['hidden']
        self.drop = torch.nn.Dropout(s['dropout'])
        self.out = torch.nn.Linear(s['hidden'], labels) if s['hidden'] > 0 else None

    def forward(self, idx, val, offsets):
        h = self.emb(idx, offsets, per_sample_weights=val) + self.bias
        if self.out is None:
            return h
        return self.out(self.drop(torch.relu(h)))


def precision(models, batches, n, loss, k=5):
    hits = np.zeros(3)
    for model in models:
        model.eval()
    with torch.no_grad():
        for s in range(0, n, 1024):
            ids = np.arange(s, min(s + 1024, n))
            x = batches.inputs(ids)
            if len(models) == 1:
                scores = models[0](*x)
            elif loss == 'softmax':
                scores = sum(torch.softmax(m(*x).float(), 1) for m in models)
            else:
                scores = sum(torch.sigmoid(m(*x).float()) for m in models)
            top = scores.topk(k, dim=1).indices.cpu().numpy()
            for j, row in zip(ids, top):
                truth = set(batches.labs[j])
                got = [int(x) in truth for x in row]
                hits += [got[0], sum(got[:3]) / 3, sum(got[:5]) / 5]
    for model in models:
        model.train()
    return hits / max(n, 1)


def run(setting, data, train, test, device, seed, writer, common):
    s = parse_setting(setting)
    features, labels = data
    models, opts, scheds = [], [], []
    n = len(train.labs)
    steps = s['epochs'] * math.ceil(n / s['batch'])
    for member in range(s['seeds']):
        torch.manual_seed(seed + member)
        models.append(Model(features, labels, s).to(device))
        opts.append(torch.optim.AdamW(models[-1].parameters(), lr=s['lr'], weight_decay=s['wd']))
        scheds.append(torch.optim.lr_scheduler.LambdaLR(
            opts[-1],
            lambda t: 0.5 * (1 + math.cos(math.pi * min(t, steps) / steps)) if s['cos'] else 1.0))
    rng = np.random.default_rng(seed)
    seconds, best = 0.0, (0, 0)
    for epoch in range(1, s['epochs'] + 1):
        order = rng.permutation(n)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        started = time.perf_counter()
        for b in range(0, n, s['batch']):
            ids = order[b:b + s['batch']]
            x = train.inputs(ids)
            if s['indrop'] > 0:
                keep = (torch.rand_like(x[1]) >= s['indrop']).float() / (1 - s['indrop'])
                x = (x[0], x[1] * keep, x[2])
            target = train.targets(ids, s['loss'])
            for model, opt, sched in zip(models, opts, scheds):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bool(s['bf16'])):
                    logits = model(*x)
                logits = logits.float()
                if s['loss'] == 'softmax':
                    loss = -(target * torch.log_softmax(logits, 1)).sum(1).mean()
                else:
                    loss = torch.nn.functional.binary_cross_entropy_with_logits(
                        logits, target, reduction='sum') / len(ids)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
        if device.type == 'cuda':
            torch.cuda.synchronize()
        seconds += time.perf_counter() - started
        p = precision(models, test, len(test.labs), s['loss'])
        best = max(best, (p[0], epoch))
        print(f'{setting:45s} epoch {epoch:2d}: P@1/3/5 {p[0]:.4f} {p[1]:.4f} {p[2]:.4f} '
              f'after {seconds:.1f} s ({epoch * n / seconds:.0f} samples/s), '
              f'loss {loss.item():.4f}', flush=True)
        if writer:
            writer.writerow(dict(common, setting=setting, epoch=epoch,
                                 train_seconds=round(seconds, 2), p_at_1=round(p[0], 4),
                                 p_at_3=round(p[1], 4), p_at_5=round(p[2], 4)))
    print(f'{setting:45s} best P@1 {best[0]:.4f} at epoch {best[1]}', flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--data', required=True, action='append',
                   help='folder with train.txt[.gz] and test.txt[.gz] (repeatable)')
    p.add_argument('--setting', action='append', default=[], help='key=value,... (repeatable)')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--threads', type=int, default=2, help='CPU threads (CPU device)')
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--csv', help='append one row per epoch to this CSV')
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    name = torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'
    fields = ['device', 'data', 'setting', 'epoch', 'train_seconds', 'p_at_1', 'p_at_3',
              'p_at_5']
    out = open(a.csv, 'a', newline='') if a.csv else None
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator='\n') if out else None
    if out and out.tell() == 0:
        writer.writeheader()
    for folder in a.data:
        features, labels, tr, tr_labs = read_xmc(os.path.join(folder, 'train.txt'))
        _, _, te, te_labs = read_xmc(os.path.join(folder, 'test.txt'))
        train = Batches(tr, tr_labs, labels, device)
        test = Batches(te, te_labs, labels, device)
        print(f'{folder}: {len(tr_labs)} / {len(te_labs)} samples, {features} features, '
              f'{labels} labels, on {name}', flush=True)
        common = dict(device=name, data=os.path.basename(os.path.normpath(folder)))
        for setting in a.setting or ['']:
            try:
                run(setting, (features, labels), train, test, device, a.seed, writer, common)
            except Exception as e:  # one failed setting must not end the sweep
                print(f'{setting}: failed: {e!r}', flush=True)
            if out:
                out.flush()


if __name__ == '__main__':
    main()
