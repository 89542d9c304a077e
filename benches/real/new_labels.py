#!/usr/bin/env python3
"""Splits an XMC set for the new-labels protocol (docs/guide.md, "Adding labels to a
trained model"): 10% of the labels are held back, drawn among the labels with fewer than 20
training samples (new labels are rare ones; among all labels where too few are rare), and
renumbered after the others, so that a model trained without them has an output layer that
a continued run grows.

    python3 benches/real/new_labels.py --data datasets/real/deb-deps --out DIR [--seed 1]

Writes, in the XMC text format (header `samples features labels`):
  DIR/full/train.txt, DIR/full/test.txt  every sample, labels renumbered (all L labels)
  DIR/old/train.txt, DIR/old/test.txt    the samples without a held label (K = L - held labels)
  DIR/new/train.txt                      the training samples with a held label, all their labels (L)
  DIR/new/test.txt                       the test samples with a held label (L): the new labels' own P@1
and prints the counts.
"""

import argparse
import os
import random


def read(path):
    with open(path) as f:
        header = f.readline().split()
        rows = []
        for line in f:
            line = line.rstrip("\n")
            labels, _, features = line.partition(" ")
            if ":" in labels:  # a sample without labels starts with its first feature
                labels, features = "", line
            ids = [int(y) for y in labels.split(",") if y != ""]
            rows.append((ids, features.strip()))
    return int(header[1]), int(header[2]), rows


def write(path, rows, features, labels):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f"{len(rows)} {features} {labels}\n")
        for ids, feats in rows:
            f.write(",".join(map(str, ids)) + " " + feats + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with train.txt and test.txt")
    p.add_argument("--out", required=True)
    p.add_argument("--share", type=float, default=0.1, help="share of the labels held back")
    p.add_argument("--rare", type=int, default=20, help="rare: fewer training samples than this")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    features, labels, train = read(os.path.join(a.data, "train.txt"))
    _, _, test = read(os.path.join(a.data, "test.txt"))
    counts = [0] * labels
    for ids, _ in train:
        for y in ids:
            counts[y] += 1
    held_count = max(1, round(a.share * labels))
    rare = [y for y in range(labels) if 0 < counts[y] < a.rare]
    pool = rare if len(rare) >= held_count else [y for y in range(labels) if counts[y] > 0]
    held = set(random.Random(a.seed).sample(pool, held_count))
    kept = [y for y in range(labels) if y not in held]
    new_id = {y: i for i, y in enumerate(kept)}
    new_id.update({y: len(kept) + i for i, y in enumerate(sorted(held))})
    k = len(kept)

    def renumber(rows):
        return [(sorted(new_id[y] for y in ids), feats) for ids, feats in rows]

    train, test = renumber(train), renumber(test)
    has_new = lambda ids: any(y >= k for y in ids)
    write(os.path.join(a.out, "full/train.txt"), train, features, labels)
    write(os.path.join(a.out, "full/test.txt"), test, features, labels)
    old_train = [r for r in train if not has_new(r[0])]
    old_test = [r for r in test if not has_new(r[0]) and r[0]]
    write(os.path.join(a.out, "old/train.txt"), old_train, features, k)
    write(os.path.join(a.out, "old/test.txt"), old_test, features, k)
    new_train = [r for r in train if has_new(r[0])]
    new_test = [r for r in test if has_new(r[0])]
    write(os.path.join(a.out, "new/train.txt"), new_train, features, labels)
    write(os.path.join(a.out, "new/test.txt"), new_test, features, labels)
    print(
        f"{labels} labels, {held_count} held back (from {'rare' if pool is rare else 'all'} "
        f"labels: {len(rare)} have 1-{a.rare - 1} training samples); training samples: "
        f"{len(train)} in all, {len(old_train)} without a held label, {len(new_train)} with one; "
        f"test samples with one: {len(new_test)} of {len(test)}"
    )


if __name__ == "__main__":
    main()
