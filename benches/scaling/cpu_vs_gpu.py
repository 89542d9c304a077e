"""slide on 1, 2, 4, ... up to every core, against the dense PyTorch model on a CUDA GPU,
on the same files: training samples/s, P@1 after each epoch and time-to-P@1 curves, as CSV
and one plot. Without a CUDA GPU (or without PyTorch) it runs the CPU part and says so.

    python3 benches/scaling/cpu_vs_gpu.py --data datasets/generated/a670k-490k \
        [--config amazon670k-synthetic.toml] [--epochs 2] [--threads 1,2,4,8,16] \
        [--scaling-samples 25600] [--full-threads 16] [--eval-every 1000] \
        [--gpu-batches 256,1024] [--gpu-setting hidden=1024,lr=0.004,bf16=1] \
        [--csv benches/results/cpu_vs_gpu.csv] [--plot benches/results/cpu_vs_gpu.png] [--replot]

With `--scaling-samples N` the thread counts are compared on one epoch over the first N
training samples (a throughput run, rows with run=scaling, scored on 16 test samples only),
and only `--full-threads` (default: the most threads) train every epoch on the whole files
with exact P@1 after each (run=full): a node's whole comparison then fits in minutes.
Without it every thread count is a full run. The order is the full slide runs, the GPU at
the first batch size, the scaling runs, then the GPU's other batch sizes; each row reaches
the CSV as soon as it is measured.

slide runs as users run it (`target/release/slide-train`, built if missing), evaluating
every test sample exactly (every label scored) after each epoch; its training seconds
exclude evaluations, as PyTorch's do. The GPU model is benches/pytorch/xmc_sweep.py's dense
network (sparse features -> hidden ReLU -> softmax over every label, Adam), one run per
batch size. Each CSV row: run, system, device, threads, batch, epoch, train_seconds,
samples_per_s, p_at_1, p_at_3, p_at_5, phase_seconds (slide's, JSON: where its time went;
hashing, forward and backward summed over threads). The issue-42 targets read off it: the
speed-up from 2 to 16 threads, and the seconds slide needs to reach the GPU's best P@1.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ["run", "system", "device", "threads", "batch", "epoch", "train_seconds", "samples_per_s",
          "p_at_1", "p_at_3", "p_at_5", "phase_seconds"]


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "cpu"


def thread_counts(spec):
    if spec:
        return [int(t) for t in spec.split(",")]
    cores, counts, t = os.cpu_count() or 1, [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return counts + [cores]


def slide_binary():
    path = ROOT / "target" / "release" / "slide-train"
    if not path.exists():
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "slide-trainer",
                        "--bin", "slide-train"], check=True, cwd=ROOT)
    return str(path)


def samples(path):
    with open(path) as f:
        return int(f.readline().split()[0])


def sized(args, data):
    """`--set` lines that size the config's input and output for the files (a config made
    for the full label count runs on a scaled-down set too), and the user's own."""
    import tomllib
    with open(data / "train.txt") as f:
        _, features, labels = (int(x) for x in f.readline().split()[:3])
    config = Path(args.config)
    if not config.exists():
        config = ROOT / "configs" / args.config
    with open(config, "rb") as f:
        last = len(tomllib.load(f)["network"]["layers"]) - 1
    lines = [f"data.features={features}", f"data.labels={labels}",
             f"network.layers.{last}.size={labels}"] + args.set
    return [arg for line in lines for arg in ("--set", line)]


def prefix(source, n, dest):
    """The first `n` samples of the XMC file `source`, with its header, as `dest`."""
    with open(source) as f, open(dest, "w") as out:
        _, features, labels = f.readline().split()[:3]
        out.write(f"{n} {features} {labels}\n")
        written = 0
        for line in f:
            if written == n:
                break
            out.write(line)
            written += 1
    if written < n:
        sys.exit(f"{source} holds {written} samples, fewer than the {n} the scaling runs take")
    return dest


def run_slide(args, data, threads, work, scaling=None):
    """One slide run on `threads` threads: a row per epoch, from its metrics file. With
    `scaling` (a folder holding a prefix of the training set and a few test samples), one
    epoch on it, for its throughput."""
    train, test = data / "train.txt", data / "test.txt"
    epochs, run = args.epochs, "full"
    if scaling is not None:
        train, test, epochs, run = scaling / "train.txt", scaling / "test.txt", 1, "scaling"
    out = Path(work) / f"slide-{run}-{threads}"
    subprocess.run(
        [slide_binary(), "--config", args.config, "--threads", str(threads), "--quiet",
         "--out", str(out), "--set", f"train.epochs={epochs}",
         "--set", f'data.train="{train}"', "--set", f'data.test="{test}"',
         "--set", "train.eval_samples=0",
         "--set", f"train.eval_every={args.eval_every if scaling is None else 0}",
         "--set", "checkpoint.at_end=false", *sized(args, data)],
        check=True, cwd=ROOT,
    )
    per_epoch = samples(train)
    rows = []
    with open(out / "metrics.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r.get("p_at_1") is None:
                continue
            # Samples trained so far (the last batch of an epoch may be short): the epoch
            # column is fractional for evaluations inside an epoch (--eval-every).
            trained = min(r["step"] * args.batch, r["epoch"] * per_epoch)
            rows.append(dict(run=run, system="slide", device=cpu_name(), threads=threads,
                             batch=args.batch, epoch=round(trained / per_epoch, 3),
                             train_seconds=round(r["train_seconds"], 2),
                             samples_per_s=round(trained / r["train_seconds"]),
                             p_at_1=r["p_at_1"], p_at_3=r.get("p_at_3"), p_at_5=r.get("p_at_5"),
                             phase_seconds=json.dumps({k: round(v, 2) for k, v in
                                                       r.get("phase_seconds", {}).items()})))
    return rows


def gpu_available():
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU"
    return True, torch.cuda.get_device_name()


def run_gpu(args, data, batch, work):
    """The dense PyTorch model on the GPU at batch size `batch`: a row per epoch."""
    out = Path(work) / f"gpu-{batch}.csv"
    setting = f"{args.gpu_setting},epochs={args.epochs},batch={batch}"
    subprocess.run(
        [sys.executable, str(ROOT / "benches/pytorch/xmc_sweep.py"), "--data", str(data),
         "--setting", setting, "--csv", str(out)],
        check=True, cwd=ROOT,
    )
    per_epoch = samples(data / "train.txt")
    rows = []
    with open(out) as f:
        for r in csv.DictReader(f):
            epoch, seconds = int(r["epoch"]), float(r["train_seconds"])
            rows.append(dict(run="full", system="pytorch-dense", device=r["device"],
                             threads="", batch=batch, epoch=epoch,
                             train_seconds=round(seconds, 2),
                             samples_per_s=round(epoch * per_epoch / seconds),
                             p_at_1=float(r["p_at_1"]), p_at_3=float(r["p_at_3"]),
                             p_at_5=float(r["p_at_5"]), phase_seconds=""))
    return rows


def summarise(rows):
    """The issue's figures: 2 -> most threads speed-up (from the scaling runs where there
    are any), and slide's seconds to the GPU's best P@1 against the GPU's."""
    slide = [r for r in rows if r["system"] == "slide"]
    scaling = [r for r in slide if r["run"] == "scaling"]
    full = [r for r in slide if r["run"] == "full"]
    if scaling or full:
        runs = scaling or full
        last = max(r["epoch"] for r in runs)
        speed = {r["threads"]: r["samples_per_s"] for r in runs if r["epoch"] == last}
        if 2 in speed and max(speed) > 2:
            most = max(speed)
            print(f"slide: {speed[most] / speed[2]:.2f}x from 2 to {most} threads "
                  f"({speed[2]} and {speed[most]} samples/s)")
    gpu = [r for r in rows if r["system"] == "pytorch-dense"]
    if not gpu or not full:
        return
    best = max(gpu, key=lambda r: (r["p_at_1"], -r["train_seconds"]))
    most = max(r["threads"] for r in full)
    reached = [r for r in full if r["threads"] == most and r["p_at_1"] >= best["p_at_1"]]
    if reached:
        first = min(reached, key=lambda r: r["train_seconds"])
        print(f"GPU best P@1 {best['p_at_1']:.4f} in {best['train_seconds']:.1f} s (batch "
              f"{best['batch']}); slide on {most} threads reaches it in "
              f"{first['train_seconds']:.1f} s: {first['train_seconds'] / best['train_seconds']:.2f}x")
    else:
        top = max(r["p_at_1"] for r in full if r["threads"] == most)
        print(f"GPU best P@1 {best['p_at_1']:.4f}: slide on {most} threads reaches "
              f"{top:.4f}, not it, in {max(r['epoch'] for r in full)} epochs")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (curves, scaling) = plt.subplots(1, 2, figsize=(12, 4.5))
    full = [r for r in rows if r["run"] == "full"]
    keys = sorted({(r["system"], r["threads"], r["batch"]) for r in full}, key=str)
    for system, threads, batch in keys:
        run = sorted((r for r in full if (r["system"], r["threads"], r["batch"]) ==
                      (system, threads, batch)), key=lambda r: r["epoch"])
        label = f"slide, {threads} threads" if system == "slide" else f"GPU dense, batch {batch}"
        curves.plot([0] + [r["train_seconds"] for r in run], [0] + [r["p_at_1"] for r in run],
                    marker="o", label=label)
    curves.set_xlabel("training seconds")
    curves.set_ylabel("P@1 (every label scored)")
    curves.legend(fontsize=8)
    slide = [r for r in rows if r["system"] == "slide"]
    slide = [r for r in slide if r["run"] == "scaling"] or slide
    last = max(r["epoch"] for r in slide)
    points = sorted((r["threads"], r["samples_per_s"]) for r in slide if r["epoch"] == last)
    scaling.plot([t for t, _ in points], [s for _, s in points], marker="o", label="slide")
    gpu_last = max((r["epoch"] for r in rows if r["system"] == "pytorch-dense"), default=0)
    for r in rows:
        if r["system"] == "pytorch-dense" and r["epoch"] == gpu_last:
            scaling.axhline(r["samples_per_s"], linestyle="--", color="grey")
            scaling.annotate(f"GPU, batch {r['batch']}", (points[0][0], r["samples_per_s"]),
                             fontsize=8)
    scaling.set_xscale("log", base=2)
    scaling.set_xlabel("threads")
    scaling.set_ylabel("training samples/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def read_rows(path):
    """The rows of a CSV this script wrote, typed as when measured."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            r["threads"] = int(r["threads"]) if r["threads"] else ""
            for key in ("batch", "samples_per_s"):
                r[key] = int(r[key])
            for key in ("epoch", "train_seconds", "p_at_1", "p_at_3", "p_at_5"):
                r[key] = float(r[key])
            rows.append(r)
    return rows


class Sink:
    """The CSV, a row appended (and flushed) as soon as it is measured."""

    def __init__(self, path):
        new = not path.exists()
        self.file = open(path, "a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=FIELDS, lineterminator="\n")
        if new:
            self.writer.writeheader()
        self.rows = []

    def add(self, rows):
        for r in rows:
            print(r, flush=True)
        self.writer.writerows(rows)
        self.file.flush()
        self.rows += rows


def attempt(what, sink, run):
    """One part of the comparison; a failure is reported and the rest goes on."""
    try:
        sink.add(run())
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as e:
        print(f"{what} failed: {e}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with train.txt and test.txt (XMC)")
    p.add_argument("--config", default="amazon670k-synthetic.toml")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=128, help="slide's batch (the config's)")
    p.add_argument("--threads", help="comma-separated (default: 1, 2, 4, ... every core)")
    p.add_argument("--scaling-samples", type=int, default=0,
                   help="compare thread counts on one epoch over this many samples")
    p.add_argument("--full-threads",
                   help="with --scaling-samples: thread counts of the full runs (default: most)")
    p.add_argument("--eval-every", type=int, default=0, metavar="STEPS",
                   help="full slide runs also score every test sample every STEPS steps (finer "
                        "time-to-P@1 curves; evaluation time is not training time)")
    p.add_argument("--gpu-batches", default="256,1024")
    p.add_argument("--gpu-setting", default="hidden=1024,lr=0.004,bf16=1",
                   help="xmc_sweep.py's setting for the dense model")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="a config override for slide (repeatable)")
    p.add_argument("--csv", default="benches/results/cpu_vs_gpu.csv")
    p.add_argument("--plot", default="benches/results/cpu_vs_gpu.png")
    p.add_argument("--replot", action="store_true",
                   help="measure nothing: summarise and plot the rows already in --csv")
    args = p.parse_args()
    if args.replot:
        rows = read_rows(ROOT / args.csv)
        summarise(rows)
        plot(rows, ROOT / args.plot)
        print(f"wrote {args.plot}")
        return
    data = (ROOT / args.data).resolve()
    counts = thread_counts(args.threads)
    full = counts
    if args.scaling_samples:
        full = thread_counts(args.full_threads) if args.full_threads else [max(counts)]
    sink = Sink(ROOT / args.csv)
    with tempfile.TemporaryDirectory() as work:
        for threads in full:
            attempt(f"slide on {threads} threads", sink,
                    lambda: run_slide(args, data, threads, work))
        available, what = gpu_available()
        batches = [int(b) for b in args.gpu_batches.split(",")] if available else []
        if not available:
            print(f"{what}: the GPU part is skipped; slide's CPU figures only", flush=True)
        # The first batch size before the scaling runs, the others after: on a node lent for
        # minutes, the part cut short by a time limit is the least needed.
        for batch in batches[:1]:
            attempt(f"the GPU at batch {batch}", sink, lambda: run_gpu(args, data, batch, work))
        if args.scaling_samples:
            scaling = Path(work) / "scaling"
            scaling.mkdir()
            prefix(data / "train.txt", args.scaling_samples, scaling / "train.txt")
            prefix(data / "test.txt", 16, scaling / "test.txt")
            for threads in counts:
                attempt(f"slide scaling on {threads} threads", sink,
                        lambda: run_slide(args, data, threads, work, scaling))
        for batch in batches[1:]:
            attempt(f"the GPU at batch {batch}", sink, lambda: run_gpu(args, data, batch, work))
    sink.file.close()
    rows = sink.rows
    if not rows:
        sys.exit("nothing was measured")
    summarise(rows)
    try:
        plot(rows, ROOT / args.plot)
        print(f"wrote {args.csv} and {args.plot}")
    except ImportError:
        print(f"wrote {args.csv} (no matplotlib: no plot)")


if __name__ == "__main__":
    main()
