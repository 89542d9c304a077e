#!/usr/bin/env python3
"""Splits an XMC set for the new-labels protocol (docs/guide.md, "Adding labels to a
trained model"): 10% of the labels are held back, drawn among the labels with fewer than 20
training samples (new labels are rare ones; among all labels where too few are rare), and
renumbered after the others, so that a model trained without them has an output layer that
a continued run grows.

    python3 benches/real/new_labels.py --data datasets/real/deb-deps --out DIR [--seed 1] \
        [--measure ROUNDS]

Writes, in the XMC text format (header `samples features labels`):
  DIR/full/train.txt, DIR/full/test.txt  every sample, labels renumbered (all L labels)
  DIR/old/train.txt, DIR/old/test.txt    the samples without a held label (K = L - held labels)
  DIR/new/train.txt                      the training samples with a held label, all their labels (L)
  DIR/new/test.txt                       the test samples with a held label (L): the new labels' own P@1
and prints the counts. With --measure ROUNDS it then runs the protocol with
target/release/slide-train and configs/xmc.toml, one run at a time (run it alone on the
machine): the model of the old samples (once), then ROUNDS alternating rounds of a model
trained from scratch on full/ and that model continued (--init-from) on new/ with a replay
of old/ (CONTINUE below; the recipe's `min_steps_per_epoch` sizes its batches), each
scored on full/test.txt and new/test.txt; rows go to
DIR/results.csv, medians to standard output.
"""

import argparse
import csv
import glob
import json
import os
import random
import statistics
import subprocess

BIN = "target/release/slide-train"
CONFIG = "configs/xmc.toml"
# How the continued run trains (chosen on deb-deps; see docs/guide.md).
CONTINUE = ["train.epochs=2", "data.replay_share=0.4", "train.lr=0.003"]


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
    p.add_argument("--measure", type=int, default=0, metavar="ROUNDS",
                   help="then run the protocol, ROUNDS alternating rounds")
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
    summary = (
        f"{labels} labels, {held_count} held back (from {'rare' if pool is rare else 'all'} "
        f"labels: {len(rare)} have 1-{a.rare - 1} training samples); training samples: "
        f"{len(train)} in all, {len(old_train)} without a held label, {len(new_train)} with one; "
        f"test samples with one: {len(new_test)} of {len(test)}"
    )
    print(summary)
    if a.measure:
        measure(a.out, a.measure)


def run(out, sets, init_from=None):
    """One training run into OUT (removed first); returns its final checkpoint and training
    seconds."""
    subprocess.run(["rm", "-rf", out], check=True)
    args = [BIN, "--config", CONFIG, "--quiet", "--out", out]
    if init_from:
        args += ["--init-from", init_from]
    for s in sets + ["train.eval_samples=0"]:
        args += ["--set", s]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    last = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))][-1]
    checkpoint = sorted(glob.glob(os.path.join(out, "checkpoints", "*.safetensors")))[-1]
    return checkpoint, last["train_seconds"]


def score(checkpoint, train, test):
    """P@1 and P@5 of `slide-train eval` on TEST."""
    args = [BIN, "eval", "--config", CONFIG, "--checkpoint", checkpoint,
            "--set", f'data.train="{train}"', "--set", f'data.test="{test}"']
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    value = lambda key: float(text.split(key + " ")[1].split(",")[0])
    return value("P@1"), value("P@5")


def measure(out, rounds):
    files = lambda part, name: os.path.join(out, part, name)
    data = lambda part, test_part=None: [
        f'data.train="{files(part, "train.txt")}"',
        f'data.test="{files(test_part or part, "test.txt")}"',
    ]
    base, _ = run(os.path.join(out, "run-old"), data("old"))
    rows = []
    for r in range(1, rounds + 1):
        for system in ("scratch", "continued"):
            if system == "scratch":
                ckpt, seconds = run(os.path.join(out, "run-scratch"), data("full"))
            else:
                sets = data("new", "full") + [f'data.replay="{files("old", "train.txt")}"'] + CONTINUE
                ckpt, seconds = run(os.path.join(out, "run-continued"), sets, init_from=base)
            p1, p5 = score(ckpt, files("full", "train.txt"), files("full", "test.txt"))
            new_p1, _ = score(ckpt, files("full", "train.txt"), files("new", "test.txt"))
            rows.append(dict(round=r, system=system, train_seconds=round(seconds, 3),
                             p_at_1=p1, p_at_5=p5, new_labels_p_at_1=new_p1))
            print(rows[-1], flush=True)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for system in ("scratch", "continued"):
        mine = [x for x in rows if x["system"] == system]
        median = lambda key: statistics.median(x[key] for x in mine)
        print(f"{system}: training {median('train_seconds'):.2f} s (median of {len(mine)}), "
              f"P@1 {median('p_at_1'):.4f}, P@5 {median('p_at_5'):.4f}, "
              f"new labels' P@1 {median('new_labels_p_at_1'):.4f}")


if __name__ == "__main__":
    main()
