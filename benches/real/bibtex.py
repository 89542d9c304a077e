#!/usr/bin/env python3
"""Bibtex, a standard small multi-label benchmark (BibSonomy bookmarks of publications; the
MULAN split that the Extreme Classification Repository lists: 4,880 training and 2,515 test
samples, 1,836 features, 159 labels), converted from MULAN's sparse ARFF to the XMC text
format that `../shared/tools/debian_xmc.py` writes and every benchmark here reads.

Input: `bibtex-train.arff.gz` and `bibtex-test.arff.gz` in `--src` (default
`../shared/datasets/bibtex`, whose README.md gives the files' origin and the SHA-256 of their
uncompressed bytes, checked here before anything is read). A data row is `{index value, ...}`,
0-based, listing the non-zero attributes: the first 1,836 attributes are binary word
features, the last 159 the labels (their names `TAG_...` in MULAN's `bibtex.xml`).

Output: `--out`/bibtex/train.txt and test.txt (default `datasets/real/bibtex/`, git-ignored):
  line 1: "<samples> 1836 159"
  line k: "l1,l2,... f:v f:v ..."  (labels renumbered 0..158 in the ARFF's order, ids
          ascending, each row's feature values (the binary values as shipped) scaled to unit
          L2 norm, "%.6f" as the Debian sets)
A malformed row stops the conversion with the file and line named.

Usage: python3 benches/real/bibtex.py [--src DIR] [--out datasets/real]
"""
import argparse
import gzip
import hashlib
import math
import os
import sys

FEATURES = 1836
LABELS = 159
ATTRIBUTES = FEATURES + LABELS
# SHA-256 of the uncompressed ARFF files, from the source folder's README.md.
SHA256 = {
    'train': '8dcc9de6e0b2cebaec8c1f4fac78431adeeb73cfd3ab879b530a66d366e59174',
    'test': '9b03329cde64d3f994bdf7fbbac3f3b10fe185c311cb9ae725475f59c7f3f922',
}
# Samples per split, as the repository lists them: a check that the whole file was read.
SAMPLES = {'train': 4880, 'test': 2515}
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared',
                   'datasets', 'bibtex')


class Malformed(Exception):
    """A row or header line the converter cannot read, with its file and line number."""


def read_arff(path, split):
    """The rows of a MULAN sparse ARFF file as (labels, features) pairs: label ids (0-based
    among the labels), feature (id, value) pairs. Checks the file's SHA-256 first."""
    with gzip.open(path, 'rb') as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256[split]:
        raise Malformed(f'{path}: SHA-256 of the uncompressed file is {digest}, expected '
                        f'{SHA256[split]} (see the README.md beside it)')
    lines = raw.decode('utf-8').splitlines()
    attributes, rows, in_data = 0, [], False
    for number, line in enumerate(lines, 1):
        text = line.strip()
        where = f'{path}, line {number}'
        if not text or text.startswith('%'):
            continue
        if not in_data:
            lower = text.lower()
            if lower.startswith('@attribute'):
                attributes += 1
            elif lower.startswith('@data'):
                if attributes != ATTRIBUTES:
                    raise Malformed(f'{where}: {attributes} attributes, expected {ATTRIBUTES} '
                                    f'({FEATURES} features, then {LABELS} labels)')
                in_data = True
            elif not lower.startswith('@relation'):
                raise Malformed(f'{where}: neither @relation, @attribute nor @data: {text[:60]!r}')
            continue
        rows.append(parse_row(text, where))
    if not in_data:
        raise Malformed(f'{path}: no @data line')
    if len(rows) != SAMPLES[split]:
        raise Malformed(f'{path}: {len(rows)} rows, expected {SAMPLES[split]}')
    return rows


def parse_row(text, where):
    """One sparse row `{index value, ...}`: (label ids, [(feature id, value), ...])."""
    if not (text.startswith('{') and text.endswith('}')):
        raise Malformed(f'{where}: a sparse row is "{{index value, ...}}", got {text[:60]!r}')
    labels, features, previous = [], [], -1
    body = text[1:-1].strip()
    for entry in body.split(',') if body else []:
        parts = entry.split()
        try:
            if len(parts) != 2:
                raise ValueError
            index, value = int(parts[0]), float(parts[1])
        except ValueError:
            raise Malformed(f'{where}: entry {entry.strip()!r} is not "index value"') from None
        if not previous < index < ATTRIBUTES:
            raise Malformed(f'{where}: attribute {index} out of order or beyond '
                            f'{ATTRIBUTES - 1}')
        if not math.isfinite(value):
            raise Malformed(f'{where}: attribute {index} has value {parts[1]!r}')
        previous = index
        if index < FEATURES:
            if value != 0.0:
                features.append((index, value))
        elif value == 1.0:
            labels.append(index - FEATURES)
        elif value != 0.0:
            raise Malformed(f'{where}: label attribute {index} has value {parts[1]!r}, not 0 or 1')
    return labels, features


def write_xmc(rows, path):
    """`rows` in the XMC text format, each row's features scaled to unit L2 norm."""
    part = path + '.part'
    with open(part, 'w') as f:
        f.write(f'{len(rows)} {FEATURES} {LABELS}\n')
        for labels, features in rows:
            norm = math.sqrt(sum(v * v for _, v in features)) or 1.0
            pairs = ' '.join(f'{i}:{v / norm:.6f}' for i, v in features)
            f.write(','.join(map(str, labels)) + (' ' + pairs if pairs else '') + '\n')
    os.replace(part, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--src', default=SRC, help='the folder of bibtex-{train,test}.arff.gz '
                   '(default: ../shared/datasets/bibtex)')
    p.add_argument('--out', default='datasets/real', help='writes OUT/bibtex/{train,test}.txt')
    a = p.parse_args()
    folder = os.path.join(a.out, 'bibtex')
    os.makedirs(folder, exist_ok=True)
    for split in ('train', 'test'):
        source = os.path.join(a.src, f'bibtex-{split}.arff.gz')
        if not os.path.exists(source):
            sys.exit(f'{os.path.normpath(source)} not found (give --src DIR)')
        try:
            rows = read_arff(source, split)
        except Malformed as e:
            sys.exit(f'bibtex: {e}')
        empty = sum(1 for labels, _ in rows if not labels)
        target = os.path.join(folder, f'{split}.txt')
        write_xmc(rows, target)
        print(f'{target}: {len(rows)} samples, '
              f'{sum(len(l) for l, _ in rows) / len(rows):.2f} labels and '
              f'{sum(len(x) for _, x in rows) / len(rows):.1f} features a sample'
              + (f', {empty} without labels' if empty else ''))


if __name__ == '__main__':
    main()
