"""slide against label trees in one run: `slide-train` and Omikuji (Parabel-style label
trees, `pip install omikuji`) trained on the same XMC files with the same threads, each in a
process of its own so that its peak resident memory is its own, then scored on the same
test samples (every label scored: slide's exact evaluation, Omikuji's beam search).

Appends to a CSV one row per slide epoch (cumulative training seconds, evaluation
excluded) and one for Omikuji (training seconds, the file's parsing included, as
`Model.train_on_data` does it), each with P@1/P@3/P@5 on the whole test file and the peak
RSS, and draws P@1 against training seconds of every row on the same data (PNG, with
matplotlib; `--plot-only` redraws it from the CSV).

Real data decides accuracy: without `--data` the benchmark runs on the real multi-label
sets that `../shared/tools/debian_xmc.py` builds from the Debian archive's package metadata
(deb-deps: 37,929 labels; deb-tags: 591), written to `datasets/real/NAME/` on first use (it
needs `apt-get update -o Acquire::Languages=en` once). `--real NAME` picks real sets, among
them two from the Python Package Index's metadata (`benches/real/pypi_xmc.py`:
pypi-classifiers, pypi-deps). Generated data (`--data DIR` with
`--train N`) is easier than real data: use it for scale and speed, not to judge accuracy.

Not part of the build or CI; needs `pip install omikuji matplotlib` and a release build of
`slide-train` (built here). Examples (run from the repository root):
    python3 benches/omikuji/compare.py                       # deb-deps and deb-tags
    python3 benches/omikuji/compare.py --config xmc.toml --config amazon670k.toml
    python3 benches/omikuji/compare.py --omikuji-trees 1 --omikuji-trees 3   # forest sizes
    python3 benches/omikuji/compare.py --real pypi-classifiers --real pypi-deps   # PyPI's sets
    python3 benches/omikuji/compare.py --data datasets/generated/a670k-20k --train 20000
    python3 benches/omikuji/compare.py --data datasets/generated/a100k-20k --train 20000 \
        --labels 100000
A `--data` folder without `train.txt` is first filled by `slide-train gen-data --preset
amazon670k` with `--train`, `--test`, `--labels` and `--topics` (seed 1). Feature and label
counts come from the files' header.
"""
import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HEADER = ['cpu', 'kernels', 'threads', 'data', 'labels', 'train_samples', 'test_samples',
          'system', 'setting', 'epoch', 'train_seconds', 'p_at_1', 'p_at_3', 'p_at_5',
          'predict_samples_per_s', 'peak_rss_mib']


def cpu_name():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def read_test(path):
    """Features and label sets of an XMC file (header `n features labels`, then lines
    `l1,l2 f:v f:v ...`)."""
    samples, labels = [], []
    with open(path) as f:
        f.readline()
        for line in f:
            parts = line.split()
            has_labels = parts and ':' not in parts[0]
            labels.append({int(x) for x in parts[0].split(',')} if has_labels else set())
            pairs = []
            for token in parts[1:] if has_labels else parts:
                k, v = token.split(':')
                pairs.append((int(k), float(v)))
            samples.append(pairs)
    return samples, labels


def precision_at(ranked, labels):
    """P@1, P@3, P@5 of ranked label lists against the true label sets (each hit counts
    1/k; a sample with fewer than k predictions misses the rest), as slide computes them."""
    hits = [0, 0, 0]
    for top, truth in zip(ranked, labels):
        for j, k in enumerate((1, 3, 5)):
            hits[j] += sum(1 for label in top[:k] if label in truth)
    n = max(len(labels), 1)
    return hits[0] / n, hits[1] / (3 * n), hits[2] / (5 * n)


REAL_SETS = ('deb-deps', 'deb-tags')
# Sets that `benches/real/pypi_xmc.py` builds from the Python Package Index (`--real NAME`):
# about 25 minutes of fetching on first use, then read from its cache.
PYPI_SETS = ('pypi-classifiers', 'pypi-deps')
PYPI_TOOL = os.path.join('benches', 'real', 'pypi_xmc.py')
# Trees in Omikuji's forest unless --omikuji-trees says otherwise: its default and Parabel's.
OMIKUJI_TREES = 3
DEBIAN_TOOL = os.path.join('..', 'shared', 'tools', 'debian_xmc.py')


def real_data(names, root='datasets/real'):
    """The folders of the real sets `names`, built where missing: the PyPI sets by
    `benches/real/pypi_xmc.py`, the others by the Debian tool."""
    folders = [os.path.join(root, name) for name in names]
    missing = [n for n, f in zip(names, folders) if not os.path.exists(os.path.join(f, 'train.txt'))]
    if any(n in PYPI_SETS for n in missing):
        subprocess.run([sys.executable, PYPI_TOOL, '--out', root], check=True)
        missing = [n for n in missing if n not in PYPI_SETS]
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


def header(path):
    """`(samples, features, labels)` of an XMC file's header line."""
    with open(path) as f:
        return tuple(int(x) for x in f.readline().split()[:3])


def omikuji_child(train, test, threads, trees, out):
    """Runs in its own process: trains Omikuji with Parabel's defaults (`trees` trees in
    the forest), predicts the top 5 of every test sample and writes the
    figures as JSON to `out`."""
    import omikuji
    params = omikuji.Model.default_hyper_param()
    params.n_trees = trees
    started = time.perf_counter()
    model = omikuji.Model.train_on_data(train, params, n_threads=threads)
    train_seconds = time.perf_counter() - started
    samples, labels = read_test(test)
    started = time.perf_counter()
    ranked = [[label for label, _ in model.predict(pairs, top_k=5)] for pairs in samples]
    predict_seconds = time.perf_counter() - started
    p1, p3, p5 = precision_at(ranked, labels)
    with open(out, 'w') as f:
        json.dump({'train_seconds': train_seconds, 'p_at_1': p1, 'p_at_3': p3, 'p_at_5': p5,
                   'predict_samples_per_s': len(samples) / max(predict_seconds, 1e-9)}, f)


def run_measured(cmd, log):
    """Runs `cmd` with its output to `log`; returns its exit status and peak RSS in MiB."""
    with open(log, 'w') as out:
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--data', action='append',
                   help='folder with train.txt and test.txt (repeatable; default: the real '
                   'sets ' + ', '.join(REAL_SETS) + ' in datasets/real)')
    p.add_argument('--real', action='append', choices=REAL_SETS + PYPI_SETS, metavar='NAME',
                   help='a real set in datasets/real, built where missing (repeatable; '
                   'default: ' + ', '.join(REAL_SETS) + '; also ' + ', '.join(PYPI_SETS) + ')')
    p.add_argument('--train', type=int, default=20000, help='training samples to generate')
    p.add_argument('--test', type=int, default=6400, help='test samples to generate')
    p.add_argument('--labels', type=int, default=670091, help='labels of the data to generate')
    p.add_argument('--features', type=int, default=135909,
                   help='features of the data to generate')
    p.add_argument('--topics', type=int, default=0,
                   help='label topics of the data to generate (gen-data --topics)')
    p.add_argument('--epochs', type=int, help="slide's epochs (default: the config's)")
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--config', action='append',
                   help="slide's config (repeatable: each trained in turn; default: xmc.toml)")
    p.add_argument('--set', action='append', default=[], metavar='SECTION.KEY=VALUE',
                   help='more overrides of slide\'s config (repeatable)')
    p.add_argument('--setting', help='a name for this slide setting (default: the config\'s '
                   'file name, with "+" and the --set overrides)')
    p.add_argument('--skip-omikuji', action='store_true')
    p.add_argument('--omikuji-trees', type=int, action='append', metavar='N',
                   help="trees in Omikuji's forest (repeatable: one Omikuji run each; "
                   f"default: {OMIKUJI_TREES}, Omikuji's and Parabel's default)")
    p.add_argument('--csv', default='benches/results/omikuji.csv')
    p.add_argument('--plot', help='the PNG to draw (default: <the CSV\'s name>-<the data '
                   'folder\'s name>.png beside the CSV, so a run with a CSV of its own does '
                   'not overwrite the plots of others: benches/results/omikuji-deb-deps.png '
                   'for the default CSV)')
    p.add_argument('--plot-only', action='store_true',
                   help='train nothing: draw the plot of the CSV\'s rows on --data')
    p.add_argument('--omikuji-child', nargs=5,
                   metavar=('TRAIN', 'TEST', 'THREADS', 'TREES', 'OUT'), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.omikuji_child:
        train, test, threads, trees, out = a.omikuji_child
        omikuji_child(train, test, int(threads), int(trees), out)
        return
    if any(n < 1 for n in a.omikuji_trees or []):
        p.error('--omikuji-trees must be at least 1')
    folders = (a.data or []) + real_data(a.real or ([] if a.data else REAL_SETS))
    configs = a.config or ['xmc.toml']
    if a.plot_only:
        for folder in folders:
            plot(a, folder)
        return
    build_slide()
    for folder in folders:
        compare(a, folder, configs)


def build_slide():
    # With the ablations (`--set 'network.layers.1.lsh.picks="exact"'`), as the benchmarks'
    # crate builds the trainer: the same training pass as the benchmarks measure.
    subprocess.run(['cargo', 'build', '--release', '--locked', '-p', 'slide-trainer',
                    '--features', 'ablations', '--bin', 'slide-train'], check=True)


SLIDE = os.path.join('target', 'release', 'slide-train')


def compare(a, folder, configs):
    """slide with each config, then Omikuji, on the files in `folder`; rows to the CSV."""
    train, test = os.path.join(folder, 'train.txt'), os.path.join(folder, 'test.txt')
    if not os.path.exists(train):
        subprocess.run([SLIDE, 'gen-data', '--preset', 'amazon670k', '--out', folder,
                        '--train', str(a.train), '--test', str(a.test),
                        '--labels', str(a.labels), '--topics', str(a.topics)], check=True)
    train_samples, features, labels = header(train)
    test_samples = header(test)[0]
    work = tempfile.mkdtemp(prefix='slide-omikuji-')
    common = dict(cpu=cpu_name(), threads=a.threads, data=folder, labels=labels,
                  train_samples=train_samples, test_samples=test_samples)
    rows = []
    for config in configs:
        rows += run_slide(a, folder, config, (features, labels), work, common)

    if not a.skip_omikuji:
        for trees in a.omikuji_trees or [OMIKUJI_TREES]:
            rows.append(run_omikuji(a, folder, trees, work, common))
    fresh = not os.path.exists(a.csv)
    os.makedirs(os.path.dirname(a.csv) or '.', exist_ok=True)
    with open(a.csv, 'a', newline='') as f:
        w = csv.DictWriter(f, fieldnames=HEADER, lineterminator='\n')
        if fresh:
            w.writeheader()
        w.writerows(rows)
    print(f'{len(rows)} rows appended to {a.csv}')
    plot(a, folder)


def run_slide(a, folder, config, sizes, work, common):
    """One slide run of `config` on `folder`: a CSV row per evaluated epoch."""
    train, test = os.path.join(folder, 'train.txt'), os.path.join(folder, 'test.txt')
    features, labels = sizes
    # Every epoch ends with an exact evaluation of the whole test file.
    sets = [f'data.train="{train}"', f'data.test="{test}"', f'data.labels={labels}',
            f'data.features={features}', 'train.eval_every=0', 'train.eval_samples=0',
            'checkpoint.every=0', 'checkpoint.at_end=false'] + a.set
    sets.append(f'network.layers.1.size={labels}')
    if a.epochs is not None:
        sets.append(f'train.epochs={a.epochs}')
    setting = a.setting or '+'.join([os.path.basename(config)] + a.set)
    out = os.path.join(work, 'slide-' + os.path.basename(config))
    cmd = [SLIDE, '--config', config, '--threads', str(a.threads), '--out', out]
    for s in sets:
        cmd += ['--set', s]
    print('slide:', ' '.join(cmd), flush=True)
    log = out + '.log'
    status, rss = run_measured(cmd, log)
    if status != 0:
        sys.exit(f'slide-train failed ({status}); see {log}')
    with open(log) as f:
        found = re.search(r'^kernels: (\S+)', f.read(), re.M)
    kernels = found.group(1) if found else ''
    with open(os.path.join(out, 'metrics.jsonl')) as f:
        records = [json.loads(line) for line in f]
    rows = []
    for r in (r for r in records if 'p_at_1' in r):
        rows.append(dict(common, kernels=kernels, system='slide', setting=setting,
                         epoch=r['epoch'], train_seconds=round(r['train_seconds'], 2),
                         p_at_1=round(r['p_at_1'], 4), p_at_3=round(r.get('p_at_3', 0), 4),
                         p_at_5=round(r.get('p_at_5', 0), 4),
                         predict_samples_per_s=round(common['test_samples'] / r['eval_seconds']),
                         peak_rss_mib=round(rss)))
        print(f"{folder}: slide ({setting}) epoch {r['epoch']}: P@1/3/5 {r['p_at_1']:.4f} "
              f"{r.get('p_at_3', 0):.4f} {r.get('p_at_5', 0):.4f} after "
              f"{r['train_seconds']:.1f} s, peak RSS {rss:.0f} MiB", flush=True)
    return rows


def run_omikuji(a, folder, trees, work, common):
    """Omikuji with Parabel's defaults and `trees` trees on `folder`, in a process of its
    own: one CSV row (setting `parabel-defaults`, with `+trees=N` unless N is OMIKUJI_TREES)."""
    train, test = os.path.join(folder, 'train.txt'), os.path.join(folder, 'test.txt')
    out = os.path.join(work, f'omikuji-{trees}.json')
    cmd = [sys.executable, __file__, '--omikuji-child', train, test, str(a.threads),
           str(trees), out]
    log = os.path.join(work, f'omikuji-{trees}.log')
    status, rss = run_measured(cmd, log)
    if status != 0:
        sys.exit(f'Omikuji failed ({status}); see {log} (pip install omikuji)')
    with open(out) as f:
        o = json.load(f)
    setting = 'parabel-defaults' + ('' if trees == OMIKUJI_TREES else f'+trees={trees}')
    print(f"{folder}: omikuji ({setting}) P@1/3/5 {o['p_at_1']:.4f} {o['p_at_3']:.4f} "
          f"{o['p_at_5']:.4f} after {o['train_seconds']:.1f} s, peak RSS {rss:.0f} MiB",
          flush=True)
    return dict(common, kernels='', system='omikuji', setting=setting,
                epoch='', train_seconds=round(o['train_seconds'], 2),
                p_at_1=round(o['p_at_1'], 4), p_at_3=round(o['p_at_3'], 4),
                p_at_5=round(o['p_at_5'], 4),
                predict_samples_per_s=round(o['predict_samples_per_s']),
                peak_rss_mib=round(rss))


def plot(a, folder):
    """P@1 against training seconds from every row of the CSV on this run's data and label
    count, one line per system and setting (slide: one point per epoch)."""
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
    fig, ax = plt.subplots(figsize=(7, 4.5))
    keys = dict.fromkeys((r['system'], r['setting'], r['kernels']) for r in rows)
    for colour, key in enumerate(keys):
        mine = [r for r in rows if (r['system'], r['setting'], r['kernels']) == key]
        runs = [[]]
        for r in mine:  # a new run of the same setting starts at epoch 1
            if runs[-1] and r['epoch'] in ('', '1'):
                runs.append([])
            runs[-1].append(r)
        for i, run in enumerate(runs):
            legend = f"{key[0]} ({key[1]}{', ' + key[2] if key[2] else ''}; "
            ax.plot([float(r['train_seconds']) for r in run],
                    [float(r['p_at_1']) for r in run], 'o-', color=f'C{colour}',
                    label=(legend + f"peak {run[-1]['peak_rss_mib']} MiB)") if i == 0 else None)
    r = rows[0]
    ax.set_title(f"{name}: {int(r['train_samples']):,} training samples, {labels:,} labels, "
                 f"{r['threads']} threads, {r['cpu']}", fontsize=9)
    ax.set_xlabel('training seconds')
    ax.set_ylabel(f"exact P@1 ({int(r['test_samples']):,} test samples)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f'plot written to {target}')


if __name__ == '__main__':
    main()
