"""slide against the extreme-classification field's peers in one run: `slide-train`,
Omikuji (Parabel-style label trees, `pip install omikuji`), PECOS XR-Linear (`pip install
libpecos`) and napkinXC's probabilistic label trees (`pip install napkinxc`), trained on the
same XMC files with the same threads, each in a process of its own so that its peak resident
memory is its own, then scored on the same test samples by one code path.

Every system writes its top 5 labels for every test sample, best first; `xmc_metrics.py`
(beside this script) turns them into the Extreme Classification Repository's metrics, as
its tools (pyxclib) compute them: P@k, nDCG@k, PSP@k and PSnDCG@k for k = 1, 3, 5, the
propensities from the training file (`--propensity-a`, `--propensity-b`; 0.55 and 1.5 by
default, the repository's choice for most sets).

The systems, each with its own default recipe:
  slide     `target/release/slide-train` with `--config` (default xmc.toml), an exact
            evaluation of the whole test file after every epoch (`metrics.jsonl`), a
            checkpoint at the end, then `slide-train predict --top-k 5` of that checkpoint.
  omikuji   Parabel's defaults (`--omikuji-trees`: trees in the forest, 3 by default),
            `Model.train_on_data` on the file, then `predict(top_k=5)` sample by sample.
  pecos     XR-Linear as PECOS's README trains it: PIFA label embeddings, hierarchical
            k-means indexer, `XLinearModel.train`; then, as its predict command does, the
            model saved and loaded for prediction only, `predict(only_topk=5)` (beam 10).
  napkinxc  `PLT(dir).fit(X, Y)` (hierarchical k-means tree, logistic nodes by LIBLINEAR),
            `predict_proba(top_k=5)`.

CSV: one row per system run, plus for slide one per evaluated epoch. Columns:
  cpu, kernels (slide's kernel set, from its log; empty for the peers), threads, data, labels,
  train_samples, test_samples, system, setting, round (1..--rounds), epoch (slide's epoch
  rows; empty otherwise), source, train_seconds, wall_seconds, p_at_{1,3,5},
  ndcg_at_{1,3,5}, psp_at_{1,3,5}, psndcg_at_{1,3,5}, predict_samples_per_s, peak_rss_mib.
  source: `predictions` where the metrics come from the system's top-5 file through
  `xmc_metrics.py` (every peer row, and slide's final model in a row with an empty epoch);
  `metrics.jsonl` for slide's per-epoch rows, as slide-train measured them (its P@k always;
  nDCG/PSP/PSnDCG where its metrics file has them, empty otherwise). Where both exist the
  script prints both and warns when slide's last epoch and its predictions differ by more
  than 1e-4 on any metric.
  train_seconds: as each system reports its training, to the millisecond (to 10 ms up to
  xmc-2026-12-07f.csv, where Bibtex's bars were decided at that grain). slide: cumulative training seconds of
  the epochs, the files' reading and the evaluations excluded. omikuji: `train_on_data`,
  its own parsing of the file included. pecos: the label embeddings, the indexer and the
  training, after the file was read into matrices. napkinxc: `fit`, after the same reading.
  wall_seconds: the whole process's wall time, start-up, reading, training and predicting
  the test file (pecos: its model's save and load too): the same yardstick for every
  system. For slide, the training process plus the `predict` process; the training process
  scores the whole test file after every epoch (the curve's points), so its wall time
  carries one exact evaluation per epoch that the peers do not pay.
  predict_samples_per_s: test samples over the seconds of the prediction call alone (slide's
  rows: its evaluation of the epoch, or the predict command's own figure).
  peak_rss_mib: the process's peak resident memory (slide's predictions row: the larger of
  the training and the predict process).

Omikuji (no seed among its parameters) and napkinXC (`seed=None` by default) cluster the
labels from random starts: their figures move from run to run (Bibtex, 2 threads, seven
runs: P@1 from 0.633 to 0.643 for Omikuji, from 0.631 to 0.633 for napkinXC); PECOS (its
indexer's seed 0) and slide (its config's seed) repeated to the digit.

Timing rules: the systems run one at a time, and nothing else may run on the machine (the
figures move by 10-20% otherwise); the CSV names the CPU (`cpu`) and slide's kernel set
(`kernels`, set by SLIDE_KERNELS). Every child gets `--threads` through its own API and
OMP/OpenBLAS/MKL/Rayon thread counts of the same number. `--rounds N` repeats the whole
sequence N times, alternating the systems (slide, omikuji, pecos, napkinxc, slide, ...),
each round's rows with its `round`: take the median of 3 rounds for a table.

Real data decides accuracy: without `--data` the benchmark runs on the real sets deb-deps
and deb-tags (built from the Debian archive's package metadata by
`../shared/tools/debian_xmc.py`; it needs `apt-get update -o Acquire::Languages=en` once)
and bibtex (MULAN's Bibtex, converted by `benches/real/bibtex.py` from
`../shared/datasets/bibtex`), each written to `datasets/real/NAME/` on first use. Generated
data (`--data DIR` with `--train N`) is easier than real data: use it for scale and speed,
not to judge accuracy.

Not part of the build or CI; needs `pip install omikuji libpecos napkinxc matplotlib` and a
release build of `slide-train` (built here unless `--no-build`). Examples (run from the
repository root):
    python3 benches/xmc/compare.py                                  # the three real sets
    python3 benches/xmc/compare.py --real bibtex --threads 2 --csv /tmp/bibtex.csv
    python3 benches/xmc/compare.py --rounds 3 --csv benches/results/xmc-compare.csv
    python3 benches/xmc/compare.py --systems pecos,napkinxc --real deb-tags
    python3 benches/xmc/compare.py --omikuji-trees 1 --omikuji-trees 3   # forest sizes
    python3 benches/xmc/compare.py --epochs 1 --epochs 2 --epochs 4   # slide's frontier
    python3 benches/xmc/compare.py --data datasets/generated/a670k-20k --train 20000
A `--data` folder without `train.txt` is first filled by `slide-train gen-data --preset
amazon670k` with `--train`, `--test`, `--labels` and `--topics` (seed 1). Feature and label
counts come from the files' header.
"""
import argparse
import csv
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xmc_metrics  # noqa: E402  (beside this script)

SYSTEMS = ('slide', 'omikuji', 'pecos', 'napkinxc')
METRICS = xmc_metrics.columns()
HEADER = (['cpu', 'kernels', 'threads', 'data', 'labels', 'train_samples', 'test_samples',
           'system', 'setting', 'round', 'epoch', 'source', 'train_seconds', 'wall_seconds']
          + METRICS + ['predict_samples_per_s', 'peak_rss_mib'])
REAL_SETS = ('deb-deps', 'deb-tags', 'bibtex')
DEBIAN_SETS = ('deb-deps', 'deb-tags')
DEBIAN_TOOL = os.path.join('..', 'shared', 'tools', 'debian_xmc.py')
BIBTEX_TOOL = os.path.join('benches', 'real', 'bibtex.py')
# Trees in Omikuji's forest unless --omikuji-trees says otherwise: its default and Parabel's.
OMIKUJI_TREES = 3
# Where slide's last epoch and the metrics of its predictions may differ (ties broken
# differently, float sums in another order) before the script warns.
AGREEMENT = 1e-4
SLIDE = os.path.join('target', 'release', 'slide-train')


def cpu_name():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def header(path):
    """`(samples, features, labels)` of an XMC file's header line."""
    with open(path) as f:
        return tuple(int(x) for x in f.readline().split()[:3])


def read_labels(path):
    """The label sets of an XMC file (header `n features labels`, then lines
    `l1,l2 f:v f:v ...`; a line whose first token holds a `:` has no labels)."""
    labels = []
    with open(path) as f:
        f.readline()
        for line in f:
            first = line.split(maxsplit=1)[0] if line.strip() else ''
            labels.append(set() if not first or ':' in first
                          else {int(x) for x in first.split(',')})
    return labels


def read_xmc(path):
    """An XMC file as a SciPy CSR float32 feature matrix (sorted indices; the header's
    feature count as its width) and the samples' label lists."""
    import numpy as np
    import scipy.sparse as sp
    samples, features, _ = header(path)
    indptr, indices, values, labels = [0], [], [], []
    with open(path) as f:
        f.readline()
        for number, line in enumerate(f, 2):
            parts = line.split()
            has_labels = bool(parts) and ':' not in parts[0]
            labels.append([int(x) for x in parts[0].split(',')] if has_labels else [])
            for token in parts[1:] if has_labels else parts:
                k, v = token.split(':')
                indices.append(int(k))
                values.append(float(v))
            indptr.append(len(indices))
    if len(labels) != samples:
        sys.exit(f'{path}: {len(labels)} samples, its header says {samples}')
    x = sp.csr_matrix((np.asarray(values, dtype=np.float32), np.asarray(indices, dtype=np.int64),
                       np.asarray(indptr, dtype=np.int64)), shape=(samples, features))
    x.sort_indices()
    return x, labels


def read_predictions(path):
    """A predictions file, one line per sample of `id:score` pairs best first (what
    `slide-train predict` writes and every child here writes): the ranked label ids."""
    with open(path) as f:
        return [[int(token.split(':', 1)[0]) for token in line.split()] for line in f]


def write_predictions(path, ranked):
    """`ranked` (per sample, (label, score) pairs) as a predictions file, best first (a
    stable sort by score, so that equal scores keep the system's order)."""
    with open(path, 'w') as f:
        for pairs in ranked:
            pairs = sorted(pairs, key=lambda p: -p[1])
            f.write(' '.join(f'{int(label)}:{float(score):.6g}' for label, score in pairs) + '\n')


def real_data(names, root='datasets/real'):
    """The folders of the real sets `names`, built where missing: bibtex by
    `benches/real/bibtex.py`, the others by the Debian tool."""
    folders = [os.path.join(root, name) for name in names]
    missing = [n for n, f in zip(names, folders)
               if not os.path.exists(os.path.join(f, 'train.txt'))]
    if 'bibtex' in missing:
        subprocess.run([sys.executable, BIBTEX_TOOL, '--out', root], check=True)
    missing = [n for n in missing if n in DEBIAN_SETS]
    if missing:
        if not os.path.exists(DEBIAN_TOOL):
            sys.exit(f'{DEBIAN_TOOL} not found: give --data DIR instead')
        work = tempfile.mkdtemp(prefix='slide-debian-')
        subprocess.run([sys.executable, DEBIAN_TOOL, '--out', work, '--which', ','.join(missing)],
                       check=True)
        for name in missing:
            os.makedirs(os.path.join(root, name), exist_ok=True)
            for split in ('train', 'test'):
                os.replace(os.path.join(work, f'{name}_{split}.txt'),
                           os.path.join(root, name, f'{split}.txt'))
    return folders


# --- The children: each runs in a process of its own (`--child SYSTEM ...`), writes its
# --- predictions file and a JSON of its own timings. The parent scores the predictions.

def omikuji_child(a):
    """Omikuji with Parabel's defaults and `a.trees` trees."""
    import omikuji
    params = omikuji.Model.default_hyper_param()
    params.n_trees = a.trees
    started = time.perf_counter()
    model = omikuji.Model.train_on_data(a.train_file, params, n_threads=a.threads)
    train_seconds = time.perf_counter() - started
    x, _ = read_xmc(a.test_file)
    rows = [list(zip(x.indices[x.indptr[i]:x.indptr[i + 1]].tolist(),
                     x.data[x.indptr[i]:x.indptr[i + 1]].tolist())) for i in range(x.shape[0])]
    started = time.perf_counter()
    ranked = [model.predict(pairs, top_k=5) for pairs in rows]
    predict_seconds = time.perf_counter() - started
    return train_seconds, predict_seconds, ranked


def pecos_child(a):
    """PECOS XR-Linear with its default recipe (the README's: PIFA embeddings, hierarchical
    k-means, XLinearModel's default training and prediction parameters)."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel
    import numpy as np
    import scipy.sparse as sp
    x, labels = read_xmc(a.train_file)
    rows = np.repeat(np.arange(len(labels)), [len(l) for l in labels])
    cols = np.fromiter((l for ls in labels for l in ls), dtype=np.int64, count=len(rows))
    # Training takes the label matrix as CSC (XLinearModel.train's docstring, and what
    # XLinearModel.load_label_matrix(for_training=True) gives).
    y = sp.csc_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                      shape=(len(labels), header(a.train_file)[2]))
    started = time.perf_counter()
    embedding = LabelEmbeddingFactory.create(y, x, method='pifa', threads=a.threads)
    chain = Indexer.gen(embedding, indexer_type='hierarchicalkmeans', threads=a.threads)
    model = XLinearModel.train(x, y, C=chain, threads=a.threads)
    train_seconds = time.perf_counter() - started
    # As PECOS's own pipeline predicts (`python3 -m pecos.xmc.xlinear.predict`): from the
    # saved model loaded for prediction only, a C++ layout that predicts the same labels
    # about 20 times faster than the model as trained (Bibtex, 2 threads: 0.05 s against 1 s).
    folder = os.path.join(a.work, 'pecos-model')
    model.save(folder)
    del model
    model = XLinearModel.load(folder, is_predict_only=True)
    xt, _ = read_xmc(a.test_file)
    started = time.perf_counter()
    scores = model.predict(xt, only_topk=5, threads=a.threads).tocsr()
    predict_seconds = time.perf_counter() - started
    ranked = [list(zip(scores.indices[scores.indptr[i]:scores.indptr[i + 1]].tolist(),
                       scores.data[scores.indptr[i]:scores.indptr[i + 1]].tolist()))
              for i in range(scores.shape[0])]
    return train_seconds, predict_seconds, ranked


def napkinxc_child(a):
    """napkinXC's PLT with its defaults, the model in a folder of the run."""
    from napkinxc.models import PLT
    x, labels = read_xmc(a.train_file)
    started = time.perf_counter()
    model = PLT(os.path.join(a.work, 'napkinxc-model'), threads=a.threads)
    model.fit(x, labels)
    train_seconds = time.perf_counter() - started
    xt, _ = read_xmc(a.test_file)
    started = time.perf_counter()
    ranked = model.predict_proba(xt, top_k=5)
    predict_seconds = time.perf_counter() - started
    return train_seconds, predict_seconds, ranked


CHILDREN = {'omikuji': omikuji_child, 'pecos': pecos_child, 'napkinxc': napkinxc_child}


def child(a):
    train_seconds, predict_seconds, ranked = CHILDREN[a.child](a)
    write_predictions(os.path.join(a.work, 'predictions.txt'), ranked)
    with open(os.path.join(a.work, 'timings.json'), 'w') as f:
        json.dump({'train_seconds': train_seconds, 'predict_seconds': predict_seconds,
                   'test_samples': len(ranked)}, f)


# --- The parent.

def child_env(threads):
    """The environment of every child: libraries' own thread pools sized as --threads."""
    env = dict(os.environ)
    for name in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS',
                 'RAYON_NUM_THREADS'):
        env[name] = str(threads)
    return env


def run_measured(cmd, log, threads):
    """Runs `cmd` with its output to `log`; returns its exit status, wall seconds and peak
    RSS in MiB."""
    with open(log, 'w') as out:
        started = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                   env=child_env(threads))
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    return os.waitstatus_to_exitcode(status), wall, usage.ru_maxrss / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--data', action='append',
                   help='folder with train.txt and test.txt (repeatable; default: the real '
                   'sets ' + ', '.join(REAL_SETS) + ' in datasets/real)')
    p.add_argument('--real', action='append', choices=REAL_SETS, metavar='NAME',
                   help='a real set in datasets/real, built where missing (repeatable; '
                   'default: ' + ', '.join(REAL_SETS) + ')')
    p.add_argument('--systems', default=','.join(SYSTEMS),
                   help='the systems to run, comma separated, in this order within a round '
                   f'(default: {",".join(SYSTEMS)})')
    p.add_argument('--rounds', type=int, default=1,
                   help='run every system N times, alternating systems (default 1; 3 for '
                   'a median)')
    p.add_argument('--train', type=int, default=20000, help='training samples to generate')
    p.add_argument('--test', type=int, default=6400, help='test samples to generate')
    p.add_argument('--labels', type=int, default=670091, help='labels of the data to generate')
    p.add_argument('--features', type=int, default=135909,
                   help='features of the data to generate')
    p.add_argument('--topics', type=int, default=0,
                   help='label topics of the data to generate (gen-data --topics)')
    p.add_argument('--epochs', type=int, action='append', metavar='N',
                   help="slide's epochs (repeatable: one slide run each, its whole schedule "
                   "at N epochs, so slide's frontier is a curve of runs; default: the "
                   "config's)")
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--propensity-a', type=float, default=xmc_metrics.DEFAULT_A,
                   help='A of the inverse propensities (default %(default)s)')
    p.add_argument('--propensity-b', type=float, default=xmc_metrics.DEFAULT_B,
                   help='B of the inverse propensities (default %(default)s)')
    p.add_argument('--config', action='append',
                   help="slide's config (repeatable: each trained in turn; default: xmc.toml)")
    p.add_argument('--set', action='append', default=[], metavar='SECTION.KEY=VALUE',
                   help='more overrides of slide\'s config (repeatable)')
    p.add_argument('--setting', help='a name for this slide setting (default: the config\'s '
                   'file name, with "+" and the --set overrides)')
    p.add_argument('--omikuji-trees', type=int, action='append', metavar='N',
                   help="trees in Omikuji's forest (repeatable: one Omikuji run each; "
                   f"default: {OMIKUJI_TREES}, Omikuji's and Parabel's default)")
    p.add_argument('--csv', default='benches/results/xmc-compare.csv')
    p.add_argument('--plot', help='the PNG to draw (default: <the CSV\'s name>-<the data '
                   'folder\'s name>.png beside the CSV)')
    p.add_argument('--plot-only', action='store_true',
                   help='train nothing: draw the plot of the CSV\'s rows on the data')
    p.add_argument('--no-build', action='store_true',
                   help='use target/release/slide-train as it is (no cargo build)')
    p.add_argument('--keep', action='store_true',
                   help="keep the runs' folder (logs, predictions, slide's checkpoint)")
    # A child's arguments (internal).
    p.add_argument('--child', choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    p.add_argument('--train-file', help=argparse.SUPPRESS)
    p.add_argument('--test-file', help=argparse.SUPPRESS)
    p.add_argument('--work', help=argparse.SUPPRESS)
    p.add_argument('--trees', type=int, default=OMIKUJI_TREES, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a)
        return
    a.systems = [s.strip() for s in a.systems.split(',') if s.strip()]
    unknown = [s for s in a.systems if s not in SYSTEMS]
    if unknown or not a.systems:
        p.error(f'--systems: unknown {", ".join(unknown) or "(none given)"}; '
                f'known: {", ".join(SYSTEMS)}')
    if a.rounds < 1:
        p.error('--rounds must be at least 1')
    if any(n < 1 for n in a.omikuji_trees or []):
        p.error('--omikuji-trees must be at least 1')
    folders = (a.data or []) + real_data(a.real or ([] if a.data else REAL_SETS))
    configs = a.config or ['xmc.toml']
    if a.plot_only:
        for folder in folders:
            plot(a, folder)
        return
    check_csv(a.csv)
    generate = any(not os.path.exists(os.path.join(f, 'train.txt')) for f in folders)
    if ('slide' in a.systems or generate) and not a.no_build:
        build_slide()
    for folder in folders:
        compare(a, folder, configs)


def check_csv(path):
    """Refuses to append to a CSV whose columns are not this script's (an older benchmark's)."""
    if os.path.exists(path):
        with open(path) as f:
            found = next(csv.reader(f), None)
        if found != HEADER:
            sys.exit(f'{path} has other columns than this script writes: give another --csv')


def build_slide():
    # With the ablations (`--set 'network.layers.1.lsh.picks="exact"'`), as the benchmarks'
    # crate builds the trainer: the same training pass as the benchmarks measure.
    subprocess.run(['cargo', 'build', '--release', '--locked', '-p', 'slide-trainer',
                    '--features', 'ablations', '--bin', 'slide-train'], check=True)


def compare(a, folder, configs):
    """Every system in `a.systems`, `a.rounds` times in turn, on the files in `folder`; the
    rows appended to the CSV after each run."""
    train, test = os.path.join(folder, 'train.txt'), os.path.join(folder, 'test.txt')
    if not os.path.exists(train):
        subprocess.run([SLIDE, 'gen-data', '--preset', 'amazon670k', '--out', folder,
                        '--train', str(a.train), '--test', str(a.test),
                        '--labels', str(a.labels), '--topics', str(a.topics)], check=True)
    train_samples, features, labels = header(train)
    test_samples = header(test)[0]
    counts = xmc_metrics.label_counts(read_labels(train), labels)
    scoring = dict(truth=read_labels(test),
                   inv_prop=xmc_metrics.inverse_propensity(counts, train_samples,
                                                           a.propensity_a, a.propensity_b))
    work = tempfile.mkdtemp(prefix='slide-xmc-')
    common = dict(cpu=cpu_name(), threads=a.threads, data=folder, labels=labels,
                  train_samples=train_samples, test_samples=test_samples)
    for round_ in range(1, a.rounds + 1):
        for system in a.systems:
            common['round'] = round_
            if system == 'slide':
                rows = []
                for config in configs:
                    for epochs in a.epochs or [None]:
                        rows += run_slide(a, folder, (config, epochs), (features, labels),
                                          work, common, scoring)
            elif system == 'omikuji':
                rows = [run_peer(a, folder, 'omikuji', work, common, scoring, trees=trees)
                        for trees in a.omikuji_trees or [OMIKUJI_TREES]]
            else:
                rows = [run_peer(a, folder, system, work, common, scoring)]
            append_rows(a.csv, rows)
    if a.keep:
        print(f'runs kept in {work}')
    else:
        shutil.rmtree(work, ignore_errors=True)
    plot(a, folder)


def append_rows(path, rows):
    fresh = not os.path.exists(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'a', newline='') as f:
        w = csv.DictWriter(f, fieldnames=HEADER, lineterminator='\n')
        if fresh:
            w.writeheader()
        w.writerows(rows)
    print(f'{len(rows)} rows appended to {path}', flush=True)


def rounded(figures):
    """The metric columns of `figures` (a dict of floats), to 4 digits; absent ones empty."""
    return {key: round(figures[key], 4) if figures.get(key) is not None else ''
            for key in METRICS}


def summary(figures):
    """P@1/3/5, nDCG@5, PSP@1/5 in one line."""
    def f(key):
        return f'{figures[key]:.4f}' if figures.get(key) is not None else '-'
    return (f"P@1/3/5 {f('p_at_1')} {f('p_at_3')} {f('p_at_5')}, nDCG@5 {f('ndcg_at_5')}, "
            f"PSP@1/5 {f('psp_at_1')} {f('psp_at_5')}, PSnDCG@5 {f('psndcg_at_5')}")


def slide_sets(a, folder, sizes, propensities, epochs):
    """The `--set` overrides of slide's runs on `folder`: the files and their sizes, an exact
    evaluation of the whole test file after every epoch, one checkpoint at the end, the
    propensity constants where this build knows them, then the user's."""
    train, test = os.path.join(folder, 'train.txt'), os.path.join(folder, 'test.txt')
    features, labels = sizes
    sets = [f'data.train="{train}"', f'data.test="{test}"', f'data.labels={labels}',
            f'data.features={features}', 'train.eval_every=0', 'train.eval_samples=0',
            'checkpoint.every=0', 'checkpoint.at_end=true']
    if propensities:
        sets += [f'train.propensity_a={a.propensity_a}', f'train.propensity_b={a.propensity_b}']
    sets += a.set + [f'network.layers.1.size={labels}']
    if epochs is not None:
        sets.append(f'train.epochs={epochs}')
    return sets


def knows_propensities(a, config, work):
    """Whether this build of slide-train reads `train.propensity_a`/`_b` (the metrics of its
    `metrics.jsonl` gained them after this script was written; an older build rejects the
    keys as unknown). Asks its config loader, with data files that do not exist so that it
    stops right after the config. `data.labels` is given so that a config whose output size
    is left out (xmc.toml) does not stop at the missing file's header before `[train]`'s
    keys are checked."""
    missing = os.path.join(work, 'no-such-file')
    cmd = [SLIDE, 'eval', '--config', config, '--checkpoint', missing,
           '--set', f'train.propensity_a={a.propensity_a}',
           '--set', f'train.propensity_b={a.propensity_b}', '--set', 'data.labels=1',
           '--set', f'data.train="{missing}"', '--set', f'data.test="{missing}"']
    result = subprocess.run(cmd, capture_output=True, text=True)
    return 'propensity_' not in result.stderr


def run_slide(a, folder, config, sizes, work, common, scoring):
    """One slide run of `config = (file, epochs)` on `folder` (`epochs`: `train.epochs`,
    `None` for the file's): a CSV row per evaluated epoch (metrics.jsonl), then one for the
    final checkpoint's predictions (scored by xmc_metrics)."""
    config, epochs = config
    propensities = knows_propensities(a, config, work)
    if not propensities:
        print('slide-train does not know train.propensity_a/_b yet: its metrics.jsonl has '
              'no propensity-scored metrics; the predictions row has them', flush=True)
    sets = slide_sets(a, folder, sizes, propensities, epochs)
    setting = a.setting or '+'.join([os.path.basename(config)] + a.set)
    if epochs is not None:
        setting += f'+epochs={epochs}'
    name = f"slide-{os.path.basename(config)}-e{epochs or 0}-r{common['round']}"
    out = os.path.join(work, name)
    cmd = [SLIDE, '--config', config, '--threads', str(a.threads), '--out', out]
    for s in sets:
        cmd += ['--set', s]
    print('slide:', ' '.join(cmd), flush=True)
    log = out + '.log'
    status, wall, rss = run_measured(cmd, log, a.threads)
    if status != 0:
        sys.exit(f'slide-train failed ({status}); see {log}')
    with open(log) as f:
        found = re.search(r'^kernels: (\S+)', f.read(), re.M)
    kernels = found.group(1) if found else ''
    with open(os.path.join(out, 'metrics.jsonl')) as f:
        records = [r for r in (json.loads(line) for line in f) if 'p_at_1' in r]
    rows = []
    for r in records:
        figures = {key: r.get(key) for key in METRICS}
        rows.append(dict(common, kernels=kernels, system='slide', setting=setting,
                         epoch=r['epoch'], source='metrics.jsonl',
                         train_seconds=round(r["train_seconds"], 3), wall_seconds='',
                         **rounded(figures),
                         predict_samples_per_s=round(common['test_samples'] / r['eval_seconds']),
                         peak_rss_mib=round(rss)))
        print(f"{folder}: slide ({setting}) epoch {r['epoch']} (metrics.jsonl): "
              f"{summary(figures)} after {r['train_seconds']:.1f} s", flush=True)

    # The final model's top 5, scored as the peers' are.
    checkpoints = glob.glob(os.path.join(out, 'checkpoints', 'checkpoint-*.safetensors'))
    if not checkpoints:
        sys.exit(f'slide-train wrote no checkpoint in {out}/checkpoints; see {log}')
    checkpoint = max(checkpoints, key=os.path.getmtime)
    predictions = out + '-predictions.txt'
    cmd = [SLIDE, 'predict', '--config', config, '--checkpoint', checkpoint, '--top-k', '5',
           '--out', predictions, '--threads', str(a.threads)]
    for s in sets:
        cmd += ['--set', s]
    predict_log = out + '-predict.log'
    status, predict_wall, predict_rss = run_measured(cmd, predict_log, a.threads)
    if status != 0:
        sys.exit(f'slide-train predict failed ({status}); see {predict_log}')
    with open(predict_log) as f:
        found = re.search(r'predicted \d+ samples in \S+ s \((\d+) samples/s\)', f.read())
    figures = score(read_predictions(predictions), scoring, f'slide {predictions}')
    train_seconds = records[-1]['train_seconds'] if records else ''
    print(f'{folder}: slide ({setting}) final (predictions): {summary(figures)}; '
          f'{wall + predict_wall:.1f} s wall, peak RSS {max(rss, predict_rss):.0f} MiB',
          flush=True)
    if records:
        last = records[-1]
        apart = {key: abs(last[key] - figures[key]) for key in METRICS
                 if last.get(key) is not None and figures.get(key) is not None}
        far = {key: d for key, d in apart.items() if d > AGREEMENT}
        if far:
            print(f'WARNING: slide\'s metrics.jsonl (epoch {last["epoch"]}) and its predictions '
                  f'differ by more than {AGREEMENT}: ' +
                  ', '.join(f'{k} {last[k]:.6f} against {figures[k]:.6f}' for k in far),
                  flush=True)
        else:
            print(f'slide: metrics.jsonl and predictions agree within {AGREEMENT} on '
                  f'{", ".join(apart)}', flush=True)
    rows.append(dict(common, kernels=kernels, system='slide', setting=setting, epoch='',
                     source='predictions',
                     train_seconds=round(train_seconds, 3) if records else '',
                     wall_seconds=round(wall + predict_wall, 2), **rounded(figures),
                     predict_samples_per_s=found.group(1) if found else '',
                     peak_rss_mib=round(max(rss, predict_rss))))
    return rows


def score(ranked, scoring, what):
    """The metrics of `ranked` against the test file's labels."""
    truth = scoring['truth']
    if len(ranked) != len(truth):
        sys.exit(f'{what}: {len(ranked)} predictions for {len(truth)} test samples')
    return xmc_metrics.metrics(ranked, truth, scoring['inv_prop'])


def run_peer(a, folder, system, work, common, scoring, trees=None):
    """One peer's run on `folder` in a process of its own: its CSV row (setting
    `parabel-defaults` for Omikuji, with `+trees=N` unless N is OMIKUJI_TREES;
    `defaults` for the others)."""
    train, test = os.path.join(folder, 'train.txt'), os.path.join(folder, 'test.txt')
    tag = system + (f'-{trees}' if trees else '') + f"-r{common['round']}"
    folder_of_run = os.path.join(work, tag)
    os.makedirs(folder_of_run, exist_ok=True)
    cmd = [sys.executable, os.path.abspath(__file__), '--child', system, '--train-file', train,
           '--test-file', test, '--threads', str(a.threads), '--work', folder_of_run]
    if trees:
        cmd += ['--trees', str(trees)]
    log = folder_of_run + '.log'
    status, wall, rss = run_measured(cmd, log, a.threads)
    if status != 0:
        with open(log) as f:
            tail = f.read()[-2000:]
        sys.exit(f'{system} failed ({status}); see {log} (pip install omikuji libpecos '
                 f'napkinxc):\n{tail}')
    with open(os.path.join(folder_of_run, 'timings.json')) as f:
        timings = json.load(f)
    figures = score(read_predictions(os.path.join(folder_of_run, 'predictions.txt')), scoring,
                    system)
    if system == 'omikuji':
        setting = 'parabel-defaults' + ('' if trees == OMIKUJI_TREES else f'+trees={trees}')
    else:
        setting = 'defaults'
    print(f"{folder}: {system} ({setting}): {summary(figures)}; training "
          f"{timings['train_seconds']:.1f} s, {wall:.1f} s wall, peak RSS {rss:.0f} MiB",
          flush=True)
    return dict(common, kernels='', system=system, setting=setting, epoch='',
                source='predictions', train_seconds=round(timings["train_seconds"], 3),
                wall_seconds=round(wall, 2), **rounded(figures),
                predict_samples_per_s=round(timings['test_samples'] /
                                            max(timings['predict_seconds'], 1e-9)),
                peak_rss_mib=round(rss))


def plot(a, folder):
    """Two panels against training seconds from every row of the CSV on this data: P@1, and
    PSP@5 (P@5 where no row has it). slide: a curve of its epochs per run (metrics.jsonl),
    its final model scored from its predictions as a cross; each peer run a point."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('no plot: pip install matplotlib')
        return
    with open(a.csv) as f:
        rows = [r for r in csv.DictReader(f) if r['data'] == folder]
    if not rows:
        print(f'no rows on {folder} in {a.csv}: no plot')
        return
    labels = int(rows[0]['labels'])
    name = os.path.basename(os.path.normpath(folder))
    stem = os.path.splitext(os.path.basename(a.csv))[0]
    target = a.plot or os.path.join(os.path.dirname(a.csv) or '.', f'{stem}-{name}.png')
    second = 'psp_at_5' if any(r['psp_at_5'] for r in rows) else 'p_at_5'
    titles = {'p_at_1': 'P@1', 'p_at_5': 'P@5', 'psp_at_5': 'PSP@5'}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    keys = list(dict.fromkeys((r['system'], r['setting'], r['kernels']) for r in rows))
    for colour, key in enumerate(keys):
        mine = [r for r in rows if (r['system'], r['setting'], r['kernels']) == key]
        curves = [[]]
        for r in (r for r in mine if r['source'] == 'metrics.jsonl'):
            if curves[-1] and r['epoch'] == '1':  # a new run starts at epoch 1
                curves.append([])
            curves[-1].append(r)
        points = [r for r in mine if r['source'] == 'predictions']
        rss = max(int(r['peak_rss_mib']) for r in mine)
        legend = f"{key[0]} ({key[1]}{', ' + key[2] if key[2] else ''}; peak {rss} MiB)"
        for ax, metric in zip(axes, ('p_at_1', second)):
            first = True
            for curve in curves:
                curve = [r for r in curve if r[metric]]
                if curve:
                    ax.plot([float(r['train_seconds']) for r in curve],
                            [float(r[metric]) for r in curve], 'o-', color=f'C{colour}',
                            label=legend if first else None)
                    first = False
            shown = [r for r in points if r[metric] and r['train_seconds']]
            if shown:
                ax.plot([float(r['train_seconds']) for r in shown],
                        [float(r[metric]) for r in shown],
                        'x' if key[0] == 'slide' else 's', color=f'C{colour}', markersize=8,
                        linestyle='none', label=legend if first else None)
    r = rows[0]
    fig.suptitle(f"{name}: {int(r['train_samples']):,} training samples, {labels:,} labels, "
                 f"{r['threads']} threads, {r['cpu']}\nslide: a curve of its epochs "
                 "(metrics.jsonl), x: its final model scored from its predictions; squares: "
                 "the peers' runs", fontsize=9)
    for ax, metric in zip(axes, ('p_at_1', second)):
        ax.set_xlabel('training seconds (as each system reports them)')
        ax.set_ylabel(f"{titles[metric]} ({int(r['test_samples']):,} test samples)")
        ax.grid(alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    legend_rows = (len(names) + 1) // 2
    fig.legend(handles, names, loc='lower center', ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.01 + 0.045 * legend_rows, 1, 0.98))
    fig.savefig(target, dpi=110)
    plt.close(fig)
    print(f'plot written to {target}')


if __name__ == '__main__':
    main()
