//! Training-step throughput of slide at the paper's shapes, with the share of time per phase.
//!
//! ```text
//! cargo run --release -p slide-benches --bin step_bench -- amazon [--k 6] [--l 50]
//!     [--active 1024] [--steps 200] [--batch 128] [--rebuild-every 50]
//!     [--rebuild-growth-permille 1000]   (1100: each rebuild period 1.1x the previous)
//!     [--bf16 0]   (1: the sampled layer's weights and Adam moments in BF16)
//! cargo run --release -p slide-benches --bin step_bench -- mnist --hidden 65536 [...]
//! ```
//!
//! Inputs are synthetic with the shapes' statistics (Amazon-670K: 75 nonzeros of 135,909
//! features, 1-10 labels of 670,091; MNIST: 784 pixels, 80% zero, 10 classes); throughput
//! does not depend on what the data mean.

use std::time::Instant;

use slide::lsh::{FamilyKind, LshParams, Sampling};
use slide::{
    Activation, Examples, LayerConfig, LshConfig, Network, NetworkConfig, PhaseTimes, Precision,
    RebuildSchedule, Retrieval, StepStats,
};
use slide_benches::scaling::{mnist_like, xmc_like};
use slide_benches::{AMAZON_FEATURES, AMAZON_LABELS, amazon_hidden_layer};

struct Options {
    shape: String,
    hidden: usize,
    k: usize,
    l: usize,
    active: usize,
    steps: usize,
    batch: usize,
    rebuild_every: u64,
    /// Per mille: 1000 = fixed period, 1100 = each period 1.1 times the previous.
    rebuild_growth: u64,
    /// How the sampled layer stores its weights and Adam moments.
    precision: Precision,
}

fn parse() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let shape = args
        .next()
        .ok_or("usage: step_bench amazon|mnist [options]")?;
    let mut o = Options {
        shape,
        hidden: 1024,
        k: 6,
        l: 50,
        active: 1024,
        steps: 200,
        batch: 128,
        rebuild_every: 50,
        rebuild_growth: 1000,
        precision: Precision::F32,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let n: usize = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?;
        match flag.as_str() {
            "--hidden" => o.hidden = n,
            "--k" => o.k = n,
            "--l" => o.l = n,
            "--active" => o.active = n,
            "--steps" => o.steps = n,
            "--batch" => o.batch = n,
            "--rebuild-every" => o.rebuild_every = n as u64,
            "--rebuild-growth-permille" => o.rebuild_growth = n as u64,
            "--bf16" => {
                o.precision = match n {
                    0 => Precision::F32,
                    _ => Precision::Bf16,
                }
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

fn lsh(o: &Options) -> LshConfig {
    LshConfig {
        retrieval: Retrieval {
            family: FamilyKind::Dwta { bin_size: 8 },
            // DWTA sub-hashes have 3 bits; beyond 18 bits the codes are folded into 2^18 buckets.
            params: LshParams {
                k: o.k,
                l: o.l,
                range_pow: (3 * o.k as u32).min(18),
            },
            sampling: Sampling::vanilla()
                .with_budget(o.active)
                .with_min_active(o.active),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Prints `step_bench: {message}` and exits with status 2.
fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("step_bench: {message}");
    std::process::exit(2);
}

/// The shape's input width, its layers (the sampled one with `--k`, `--l`, `--active` and
/// `--bf16`) and 4,096 synthetic samples of it.
fn shape(o: &Options) -> (usize, Vec<LayerConfig>, Box<dyn Examples>) {
    match o.shape.as_str() {
        "amazon" => (
            AMAZON_FEATURES,
            vec![
                amazon_hidden_layer(),
                LayerConfig {
                    moments: o.precision,
                    weights: o.precision,
                    ..LayerConfig::new(AMAZON_LABELS, Activation::Softmax).sampled(lsh(o))
                },
            ],
            Box::new(xmc_like(4096, AMAZON_LABELS, 1)),
        ),
        "mnist" => (
            784,
            vec![
                LayerConfig {
                    moments: o.precision,
                    weights: o.precision,
                    ..LayerConfig::new(o.hidden, Activation::Relu).sampled(lsh(o))
                },
                LayerConfig::new(10, Activation::Softmax),
            ],
            Box::new(mnist_like(4096, 2)),
        ),
        other => fail(format!("unknown shape {other} (amazon or mnist)")),
    }
}

/// The table rebuilds: every `--rebuild-every` steps, or from there on periods growing by
/// `--rebuild-growth-permille`.
fn rebuild_schedule(o: &Options) -> RebuildSchedule {
    if o.rebuild_growth <= 1000 {
        RebuildSchedule::Fixed {
            every: o.rebuild_every,
        }
    } else {
        RebuildSchedule::Exponential {
            first: o.rebuild_every,
            growth: o.rebuild_growth as f64 / 1000.0,
        }
    }
}

/// What the measured steps did, summed over them.
#[derive(Default)]
struct Totals {
    /// Wall-clock seconds of the measured steps.
    wall: f64,
    /// Each phase's time (the per-sample phases as thread time).
    times: PhaseTimes,
    /// Active neurons per sample, summed over the steps.
    active: f64,
    /// Parameter rows the optimizer updated.
    rows: usize,
    /// Multiply-adds.
    macs: u64,
    /// Steps that rebuilt the tables.
    rebuilds: usize,
}

/// Three warm-up steps, not measured, then `--steps` measured ones, each on the next
/// `--batch` samples (wrapping around).
fn train_steps(o: &Options, net: &mut Network, data: &dyn Examples) -> Totals {
    let n = data.len();
    let mut ws = slide::Workspace::new();
    let mut stats = StepStats::default();
    let mut totals = Totals::default();
    for s in 0..3 {
        let batch: Vec<usize> = (0..o.batch).map(|i| (s * o.batch + i) % n).collect();
        net.train_step_with(&mut ws, data, &batch, &mut stats)
            .expect("step");
    }
    let started = Instant::now();
    for s in 0..o.steps {
        let batch: Vec<usize> = (0..o.batch).map(|i| ((s + 3) * o.batch + i) % n).collect();
        net.train_step_with(&mut ws, data, &batch, &mut stats)
            .expect("step");
        totals.times += stats.times;
        totals.active += stats.active_per_sample.iter().sum::<f64>();
        totals.rows += stats.rows_touched.iter().sum::<usize>();
        totals.macs += stats.multiply_adds;
        totals.rebuilds += usize::from(stats.rebuilt);
    }
    totals.wall = started.elapsed().as_secs_f64();
    totals
}

/// Prints the throughput, the work per step and each phase's share of the time.
fn report(o: &Options, totals: &Totals) {
    let (wall, times) = (totals.wall, &totals.times);
    let steps = o.steps as f64;
    let threads = rayon::current_num_threads() as f64;
    let shares = [
        ("hashing", times.hashing.as_secs_f64() / threads),
        ("forward", times.forward.as_secs_f64() / threads),
        ("backward", times.backward.as_secs_f64() / threads),
        ("update", times.update.as_secs_f64()),
        ("rebuild", times.rebuild.as_secs_f64()),
    ];
    let total: f64 = shares.iter().map(|s| s.1).sum();
    println!(
        "{:.0} samples/s ({:.1} ms/step over {} steps, {} rebuilds), {:.0} active neurons/sample, {:.0} rows updated/step, {:.1} M multiply-adds/step, peak RSS {:.0} MB",
        o.batch as f64 * steps / wall,
        wall / steps * 1e3,
        o.steps,
        totals.rebuilds,
        totals.active / steps,
        totals.rows as f64 / steps,
        totals.macs as f64 / steps / 1e6,
        peak_rss_mb()
    );
    let parts: Vec<String> = shares
        .iter()
        .map(|(name, t)| format!("{name} {:.1}%", 100.0 * t / total))
        .collect();
    println!(
        "time shares (per-sample phases as thread time / threads): {}",
        parts.join(", ")
    );
}

fn main() {
    let o = parse().unwrap_or_else(|e| fail(e));
    let (input_dim, layers, data) = shape(&o);
    let started = Instant::now();
    let mut net = Network::new(NetworkConfig {
        rebuild: rebuild_schedule(&o),
        seed: 3,
        ..NetworkConfig::new(input_dim, layers)
    })
    .unwrap_or_else(|e| fail(e));
    println!(
        "{} shape, K={} L={}, active budget {}, batch {}, {} threads, kernels {}; built in {:.1} s, model + tables {:.0} MB",
        o.shape,
        o.k,
        o.l,
        o.active,
        o.batch,
        rayon::current_num_threads(),
        slide::kernels::kernels().name,
        started.elapsed().as_secs_f64(),
        net.memory_bytes() as f64 / 1e6
    );
    let totals = train_steps(&o, &mut net, data.as_ref());
    report(&o, &totals);
}
