"""slide on 1, 2, 4, ... up to every core, against the dense PyTorch model on a CUDA GPU,
on the same files: training samples/s, P@1 after each epoch and time-to-P@1 curves, as CSV
and one plot. Without a CUDA GPU (or without PyTorch) it runs the CPU part and says so.

    python3 benches/scaling/cpu_vs_gpu.py --data datasets/generated/a670k-490k \
        [--config amazon670k-synthetic.toml] [--epochs 2] [--threads 1,2,4,8,16] \
        [--gpu-batches 256,1024] [--gpu-setting hidden=1024,lr=0.004,bf16=1] \
        [--csv benches/results/cpu_vs_gpu.csv] [--plot benches/results/cpu_vs_gpu.png]

slide runs as users run it (`target/release/slide-train`, built if missing), evaluating
every test sample exactly (every label scored) after each epoch; its training seconds
exclude evaluations, as PyTorch's do. The GPU model is benches/pytorch/xmc_sweep.py's dense
network (sparse features -> hidden ReLU -> softmax over every label, Adam), one run per
batch size. Each CSV row: system, device, threads, batch, epoch, train_seconds,
samples_per_s, p_at_1, p_at_3, p_at_5. The issue-42 targets read off it: the speed-up from
2 to 16 threads, and the seconds slide needs to reach the GPU's best P@1.
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
FIELDS = ["system", "device", "threads", "batch", "epoch", "train_seconds", "samples_per_s",
          "p_at_1", "p_at_3", "p_at_5"]


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


def run_slide(args, data, threads, work):
    """One slide run on `threads` threads: a row per epoch, from its metrics file."""
    out = Path(work) / f"slide-{threads}"
    subprocess.run(
        [slide_binary(), "--config", args.config, "--threads", str(threads), "--quiet",
         "--out", str(out), "--set", f"train.epochs={args.epochs}",
         "--set", f'data.train="{data}/train.txt"', "--set", f'data.test="{data}/test.txt"',
         "--set", "train.eval_samples=0", "--set", "train.eval_every=0",
         "--set", "checkpoint.at_end=false", *sized(args, data)],
        check=True, cwd=ROOT,
    )
    per_epoch = samples(data / "train.txt")
    rows = []
    with open(out / "metrics.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r.get("p_at_1") is None:
                continue
            rows.append(dict(system="slide", device=cpu_name(), threads=threads,
                             batch=args.batch, epoch=r["epoch"],
                             train_seconds=round(r["train_seconds"], 2),
                             samples_per_s=round(r["epoch"] * per_epoch / r["train_seconds"]),
                             p_at_1=r["p_at_1"], p_at_3=r.get("p_at_3"), p_at_5=r.get("p_at_5")))
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
            rows.append(dict(system="pytorch-dense", device=r["device"], threads="",
                             batch=batch, epoch=epoch, train_seconds=round(seconds, 2),
                             samples_per_s=round(epoch * per_epoch / seconds),
                             p_at_1=float(r["p_at_1"]), p_at_3=float(r["p_at_3"]),
                             p_at_5=float(r["p_at_5"])))
    return rows


def summarise(rows):
    """The issue's figures: 2 -> most threads speed-up, and slide's seconds to the GPU's
    best P@1 against the GPU's."""
    slide = [r for r in rows if r["system"] == "slide"]
    last = max(r["epoch"] for r in slide)
    speed = {r["threads"]: r["samples_per_s"] for r in slide if r["epoch"] == last}
    if 2 in speed and max(speed) > 2:
        most = max(speed)
        print(f"slide: {speed[most] / speed[2]:.2f}x from 2 to {most} threads")
    gpu = [r for r in rows if r["system"] == "pytorch-dense"]
    if not gpu:
        return
    best = max(gpu, key=lambda r: (r["p_at_1"], -r["train_seconds"]))
    fastest = max(speed, key=speed.get)
    reached = [r for r in slide if r["threads"] == fastest and r["p_at_1"] >= best["p_at_1"]]
    if reached:
        first = min(reached, key=lambda r: r["train_seconds"])
        print(f"GPU best P@1 {best['p_at_1']:.4f} in {best['train_seconds']:.1f} s (batch "
              f"{best['batch']}); slide on {fastest} threads reaches it in "
              f"{first['train_seconds']:.1f} s: {first['train_seconds'] / best['train_seconds']:.2f}x")
    else:
        print(f"GPU best P@1 {best['p_at_1']:.4f}: slide does not reach it in {last} epochs")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (curves, scaling) = plt.subplots(1, 2, figsize=(12, 4.5))
    keys = sorted({(r["system"], r["threads"], r["batch"]) for r in rows}, key=str)
    for system, threads, batch in keys:
        run = sorted((r for r in rows if (r["system"], r["threads"], r["batch"]) ==
                      (system, threads, batch)), key=lambda r: r["epoch"])
        label = f"slide, {threads} threads" if system == "slide" else f"GPU dense, batch {batch}"
        curves.plot([0] + [r["train_seconds"] for r in run], [0] + [r["p_at_1"] for r in run],
                    marker="o", label=label)
    curves.set_xlabel("training seconds")
    curves.set_ylabel("P@1 (every label scored)")
    curves.legend(fontsize=8)
    slide = [r for r in rows if r["system"] == "slide"]
    last = max(r["epoch"] for r in slide)
    points = sorted((r["threads"], r["samples_per_s"]) for r in slide if r["epoch"] == last)
    scaling.plot([t for t, _ in points], [s for _, s in points], marker="o", label="slide")
    for r in rows:
        if r["system"] == "pytorch-dense" and r["epoch"] == last:
            scaling.axhline(r["samples_per_s"], linestyle="--", color="grey")
            scaling.annotate(f"GPU, batch {r['batch']}", (points[0][0], r["samples_per_s"]),
                             fontsize=8)
    scaling.set_xscale("log", base=2)
    scaling.set_xlabel("threads")
    scaling.set_ylabel("training samples/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with train.txt and test.txt (XMC)")
    p.add_argument("--config", default="amazon670k-synthetic.toml")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=128, help="slide's batch (the config's)")
    p.add_argument("--threads", help="comma-separated (default: 1, 2, 4, ... every core)")
    p.add_argument("--gpu-batches", default="256,1024")
    p.add_argument("--gpu-setting", default="hidden=1024,lr=0.004,bf16=1",
                   help="xmc_sweep.py's setting for the dense model")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="a config override for slide (repeatable)")
    p.add_argument("--csv", default="benches/results/cpu_vs_gpu.csv")
    p.add_argument("--plot", default="benches/results/cpu_vs_gpu.png")
    args = p.parse_args()
    data = (ROOT / args.data).resolve()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for threads in thread_counts(args.threads):
            rows += run_slide(args, data, threads, work)
            print(rows[-1], flush=True)
        available, what = gpu_available()
        if available:
            for batch in [int(b) for b in args.gpu_batches.split(",")]:
                rows += run_gpu(args, data, batch, work)
                print(rows[-1], flush=True)
        else:
            print(f"{what}: the GPU part is skipped; slide's CPU figures only")
    csv_path = ROOT / args.csv
    new = not csv_path.exists()
    with open(csv_path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerows(rows)
    summarise(rows)
    try:
        plot(rows, ROOT / args.plot)
        print(f"wrote {args.csv} and {args.plot}")
    except ImportError:
        print(f"wrote {args.csv} (no matplotlib: no plot)")


if __name__ == "__main__":
    main()
