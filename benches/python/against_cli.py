"""The Python package against `slide-train` on the same files, alternating: training wall
time (the files' reading and the arrays' conversion included for Python; the whole process
for the CLI) and prediction samples/s of the same checkpoint, every label scored.

    python3 benches/python/against_cli.py [--config xmc.toml] [--data datasets/real/deb-deps]
        [--rounds 2] [--threads 2] [--epochs 2]

Needs `target/release/slide-train` and the package built in release mode
(`maturin develop --release` in python/, or `pip install ./python`). Prints one line per run
and the medians' ratios.
"""

import argparse
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import slide

ROOT = Path(__file__).resolve().parents[2]


def cli_train(args, data, out):
    started = time.perf_counter()
    subprocess.run(
        [str(ROOT / "target/release/slide-train"), "--config", args.config, "--threads",
         str(args.threads), "--quiet", "--out", str(out), "--set", f"train.epochs={args.epochs}",
         "--set", f'data.train="{data}/train.txt"', "--set", f'data.test="{data}/test.txt"'],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )
    return time.perf_counter() - started


def python_train(args, data):
    started = time.perf_counter()
    x, y = slide.read_xmc(data / "train.txt")
    xt, yt = slide.read_xmc(data / "test.txt")
    model = slide.Classifier(ROOT / "configs" / args.config, epochs=args.epochs,
                             threads=args.threads, verbose=False)
    model.fit(x, y, xt, yt)
    with tempfile.TemporaryDirectory() as saved:
        model.save(saved)  # as the CLI writes its checkpoint at the end
    return time.perf_counter() - started, model, xt, yt


def cli_predict(args, data, checkpoints):
    run = subprocess.run(
        [str(ROOT / "target/release/slide-train"), "predict", "--config", args.config,
         "--threads", str(args.threads), "--checkpoint", str(checkpoints), "--out", "/dev/null",
         "--set", f'data.train="{data}/train.txt"', "--set", f'data.test="{data}/test.txt"'],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )
    return float(re.search(r"\(([0-9.]+) samples/s\)", run.stderr).group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="xmc.toml")
    p.add_argument("--data", default="datasets/real/deb-deps")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    data = (ROOT / args.data).resolve()
    times = {"cli": [], "python": []}
    speeds = {"cli": [], "python": []}
    print(f"kernels: {slide.kernels()}")
    for round_ in range(args.rounds):
        with tempfile.TemporaryDirectory() as work:
            seconds = cli_train(args, data, Path(work) / "run")
            times["cli"].append(seconds)
            speeds["cli"].append(cli_predict(args, data, Path(work) / "run" / "checkpoints"))
            print(f"round {round_ + 1} cli:    train {seconds:.1f} s, predict {speeds['cli'][-1]:.0f} samples/s")
        seconds, model, xt, _ = python_train(args, data)
        times["python"].append(seconds)
        started = time.perf_counter()
        model.predict(xt, k=5)
        speeds["python"].append(xt.shape[0] / (time.perf_counter() - started))
        print(f"round {round_ + 1} python: train {seconds:.1f} s, predict {speeds['python'][-1]:.0f} samples/s")
    train_ratio = statistics.median(times["python"]) / statistics.median(times["cli"])
    predict_ratio = statistics.median(speeds["python"]) / statistics.median(speeds["cli"])
    print(f"python/cli: training wall time {train_ratio:.3f}, prediction samples/s {predict_ratio:.3f}")


if __name__ == "__main__":
    main()
