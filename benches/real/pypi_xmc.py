#!/usr/bin/env python3
"""Real multi-label sets from the Python Package Index's metadata, in the XMC format that
`../shared/tools/debian_xmc.py` writes (and with its features, split and label rules).

A fixed share of PyPI's projects is picked by a hash of the name (`--per-mille`, 35 by
default: about 32,000 of 927,000 projects in November 2026), and each project's JSON
(https://pypi.org/pypi/NAME/json) is fetched once into DIR/pypi-raw.jsonl.gz; a later run
reads the projects it already has from there and fetches only the others (about 20 a second
from a 2-core machine). A sample is a project's summary and the first 4,000 characters of its
long description (the README).

  pypi-classifiers  labels = the project's Trove classifiers ("Topic :: Scientific/Engineering",
                    "Framework :: Django", "License :: OSI Approved :: MIT License", ...);
                    a few hundred labels, like deb-tags.
  pypi-deps         labels = the distributions in its requires_dist that no extra asks for,
                    names normalised as PEP 503 does; tens of thousands of labels with a long
                    tail, like deb-deps.

The index changes every day, so a later build differs: the sets' sizes and the date of the
build go into docs/real-data.md beside every figure measured on them.

Usage: python3 benches/real/pypi_xmc.py --out datasets/real
       (writes DIR/pypi-classifiers/{train,test}.txt and DIR/pypi-deps/{train,test}.txt)
"""
import argparse
import gzip
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

SIMPLE = 'https://pypi.org/simple/'
PROJECT = 'https://pypi.org/pypi/{}/json'
DEBIAN_TOOL = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'shared', 'tools',
                           'debian_xmc.py')
DESCRIPTION_CHARS = 4000
KEEP = ('name', 'summary', 'description', 'classifiers', 'requires_dist')


def debian_tool():
    """The Debian tool as a module: its tokenizer and `build` (features, split, labels)."""
    if not os.path.exists(DEBIAN_TOOL):
        sys.exit(f'{os.path.normpath(DEBIAN_TOOL)} not found: it holds the features and split '
                 'rules these sets share with deb-deps and deb-tags')
    spec = importlib.util.spec_from_file_location('debian_xmc', DEBIAN_TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def picked(names, per_mille):
    """The projects whose name hashes (SHA-1) into the first `per_mille` of 1,000."""
    return sorted(n for n in names
                  if int(hashlib.sha1(n.encode()).hexdigest()[:8], 16) % 1000 < per_mille)


def project_names():
    with urllib.request.urlopen(SIMPLE, timeout=120) as r:
        page = r.read().decode()
    names = re.findall(r'<a href="/?(?:simple/)?([^"/]+)/">', page)
    if not names:
        sys.exit(f'{SIMPLE}: no project names in the page')
    return names


def fetch(name):
    """The fields of KEEP of `name`'s JSON; `{'name': name, 'missing': True}` for a project
    the index no longer has (404); None when the request failed three times (not cached, so
    a later run asks again)."""
    for attempt in range(3):
        try:
            with urllib.request.urlopen(PROJECT.format(name), timeout=30) as r:
                info = json.loads(r.read())['info']
            out = {k: info.get(k) for k in KEEP}
            out['name'] = name
            out['description'] = (out['description'] or '')[:DESCRIPTION_CHARS]
            return out
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return {'name': name, 'missing': True}
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(1 + attempt)
    return None


def raw_projects(path, names, threads):
    """Every project of `names`, from the cache at `path` where it is there, else fetched and
    appended to it."""
    have = {}
    if os.path.exists(path):
        with gzip.open(path, 'rt') as f:
            for line in f:
                p = json.loads(line)
                have[p['name']] = p
    todo = [n for n in names if n not in have]
    print(f'pypi: {len(names)} projects picked, {len(have)} cached, {len(todo)} to fetch',
          file=sys.stderr)
    started = time.time()
    with gzip.open(path, 'at') as out, ThreadPoolExecutor(threads) as pool:
        for i, p in enumerate(pool.map(fetch, todo)):
            if p is not None:
                out.write(json.dumps(p) + '\n')
                have[p['name']] = p
            if (i + 1) % 2000 == 0:
                print(f'pypi: {i + 1} / {len(todo)} fetched, {time.time() - started:.0f} s',
                      file=sys.stderr)
    return [have[n] for n in names if n in have and not have[n].get('missing')]


def normalised(name):
    """A distribution's name as PEP 503 normalises it."""
    return re.sub(r'[-_.]+', '-', name).lower()


def requirement_names(requires):
    """PEP 503 names of the requirements that no extra asks for."""
    out = set()
    for req in requires or []:
        spec, _, marker = req.partition(';')
        if 'extra' in marker:
            continue
        m = re.match(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)', spec)
        if m:
            out.add(normalised(m.group(1)))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True, help='the folder of the sets (datasets/real)')
    ap.add_argument('--per-mille', type=int, default=35, help='projects picked per 1,000')
    ap.add_argument('--threads', type=int, default=64, help='requests at once')
    a = ap.parse_args()
    if not 1 <= a.per_mille <= 1000:
        ap.error('--per-mille must be between 1 and 1000')
    tool = debian_tool()
    os.makedirs(a.out, exist_ok=True)
    projects = raw_projects(os.path.join(a.out, 'pypi-raw.jsonl.gz'),
                            picked(project_names(), a.per_mille), a.threads)
    samples = {'pypi-classifiers': [], 'pypi-deps': []}
    for p in projects:
        own = normalised(p['name'])
        tokens = tool.tokenize(f"{p.get('summary') or ''}\n{p.get('description') or ''}")
        samples['pypi-classifiers'].append((p['name'], tokens, sorted(set(p.get('classifiers') or []))))
        deps = [d for d in requirement_names(p.get('requires_dist')) if d != own]
        samples['pypi-deps'].append((p['name'], tokens, deps))
    work = tempfile.mkdtemp(prefix='slide-pypi-')
    for name, rows in samples.items():
        st = tool.build(name, rows, work)
        folder = os.path.join(a.out, name)
        os.makedirs(folder, exist_ok=True)
        for split in ('train', 'test'):
            os.replace(os.path.join(work, f'{name}_{split}.txt'), os.path.join(folder, f'{split}.txt'))
        print(f"{name}: {st['train']} / {st['test']} samples, {st['features']} features, "
              f"{st['labels']} labels, {st['train_avg_labels']:.1f} labels per training sample",
              file=sys.stderr)


if __name__ == '__main__':
    main()
