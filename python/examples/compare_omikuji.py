"""Train slide from Python on data of the Amazon-670K shape from `slide-train gen-data`
(scaled down), score it, and, when Omikuji is installed (`pip install omikuji`), train
Omikuji (Parabel's defaults) on the same files and score it the same way.

    python3 python/examples/compare_omikuji.py [--scale 0.02] [--epochs 2] [--threads 2]

Generated data is easier than real data (each label owns prototype features); for real
data, see benches/xmc/compare.py and docs/notebook/real-data.md.
"""

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import slide

ROOT = Path(__file__).resolve().parents[2]


def slide_train():
    """The `slide-train` binary of this checkout, built if missing."""
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "slide-train"
        if path.exists():
            return [str(path)]
    return ["cargo", "run", "--release", "--quiet", "-p", "slide-trainer", "--"]


def precision_at_1(ranked, y):
    """P@1 of ranked label lists against a CSR label matrix."""
    hits = [
        row[0] in set(y.indices[y.indptr[i] : y.indptr[i + 1]].tolist())
        for i, row in enumerate(ranked)
    ]
    return float(np.mean(hits))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.02)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="slide-example-"))
    try:
        subprocess.run(
            [*slide_train(), "gen-data", "--preset", "amazon670k", "--scale", str(args.scale),
             "--out", str(work)],
            check=True, cwd=ROOT,
        )
        x, y = slide.read_xmc(work / "train.txt")
        xt, yt = slide.read_xmc(work / "test.txt")
        print(f"{x.shape[0]} train / {xt.shape[0]} test samples, {x.shape[1]} features, "
              f"{y.shape[1]} labels; kernels: {slide.kernels()}")

        started = time.perf_counter()
        model = slide.Classifier(epochs=args.epochs, threads=args.threads, verbose=False)
        model.fit(x, y)
        seconds = time.perf_counter() - started
        scores = model.score(xt, yt)
        print(f"slide:   P@1 {scores['p@1']:.4f}  P@3 {scores['p@3']:.4f}  "
              f"P@5 {scores['p@5']:.4f}  trained in {seconds:.1f} s")

        try:
            import omikuji
        except ImportError:
            print("omikuji: not installed (pip install omikuji) - skipped")
            return
        started = time.perf_counter()
        trees = omikuji.Model.train_on_data(
            str(work / "train.txt"), omikuji.Model.default_hyper_param(), n_threads=args.threads
        )
        seconds = time.perf_counter() - started
        ranked = []
        for i in range(xt.shape[0]):
            start, end = xt.indptr[i], xt.indptr[i + 1]
            pairs = list(zip(xt.indices[start:end].tolist(), xt.data[start:end].tolist()))
            ranked.append([label for label, _ in trees.predict(pairs, top_k=5)] or [-1])
        print(f"omikuji: P@1 {precision_at_1(ranked, yt):.4f}  trained in {seconds:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
