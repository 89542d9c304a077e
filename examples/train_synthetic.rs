//! Trains a SLIDE network on a generated extreme-classification problem and reports the
//! held-out precision@1 as it learns: the library alone, without `slide-train` (README, "The
//! library").
//!
//! ```text
//! cargo run --release --example train_synthetic -- [--labels 20000] [--epochs 5] [--threads N]
//! ```
//!
//! The data: every label owns a sparse prototype of 8 of the 20,000 features; a sample has
//! 1-3 labels (Zipf-like frequencies) and carries most of its labels' prototype features
//! plus noise features, with tf-idf-like values. The network is the paper's shape scaled
//! down: features -> 128 ReLU (input-major) -> labels softmax, LSH (DWTA) on the output.

use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::{FamilyKind, LshParams, Sampling};
use slide::{
    Activation, AdamConfig, LayerConfig, LshConfig, Mode, Network, NetworkConfig, RebuildSchedule,
    Retrieval, SparseExamples, StepStats, WeightLayout,
};

const FEATURES: usize = 20_000;

fn generate(labels: usize, samples: usize, seed: u64, prototypes: &[Vec<u32>]) -> SparseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut data = SparseExamples::new();
    for _ in 0..samples {
        let count = rng.random_range(1..=3usize);
        let mut ys: Vec<u32> = Vec::with_capacity(count);
        while ys.len() < count {
            // Zipf-like: squaring a uniform draw makes low ids frequent.
            let y = (rng.random::<f64>().powi(2) * labels as f64) as u32;
            if !ys.contains(&y) {
                ys.push(y);
            }
        }
        let mut features: Vec<u32> = Vec::new();
        for &y in &ys {
            features.extend(
                prototypes[y as usize]
                    .iter()
                    .filter(|_| rng.random::<f32>() < 0.8),
            );
        }
        features.extend((0..6).map(|_| rng.random_range(0..FEATURES as u32)));
        features.sort_unstable();
        features.dedup();
        let values: Vec<f32> = features
            .iter()
            .map(|_| rng.random_range(0.2f32..1.0))
            .collect();
        data.push(&features, &values, &ys);
    }
    data
}

fn main() {
    let mut labels = 20_000usize;
    let mut epochs = 5usize;
    let mut threads = 0usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        match (flag.as_str(), value) {
            ("--labels", Some(v)) if v >= 10 => labels = v,
            ("--epochs", Some(v)) if v >= 1 => epochs = v,
            ("--threads", Some(v)) => threads = v,
            _ => {
                eprintln!("usage: train_synthetic [--labels N>=10] [--epochs N>=1] [--threads N]");
                std::process::exit(2);
            }
        }
    }
    if threads > 0
        && let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
    {
        eprintln!("train_synthetic: {e}");
        std::process::exit(2);
    }

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let prototypes: Vec<Vec<u32>> = (0..labels)
        .map(|_| {
            (0..8)
                .map(|_| rng.random_range(0..FEATURES as u32))
                .collect()
        })
        .collect();
    let train = generate(labels, 100_000, 1, &prototypes);
    let test = generate(labels, 5_000, 2, &prototypes);

    let output = LayerConfig::new(labels, Activation::Softmax).sampled(LshConfig {
        retrieval: Retrieval {
            family: FamilyKind::Dwta { bin_size: 8 },
            params: LshParams {
                k: 4,
                l: 50,
                range_pow: 12,
            },
            sampling: Sampling::top_k(256).with_min_active(256),
            ..Default::default()
        },
        ..Default::default()
    });
    let hidden = LayerConfig {
        layout: WeightLayout::InputMajor,
        ..LayerConfig::new(128, Activation::Relu)
    };
    let mut net = Network::new(NetworkConfig {
        adam: AdamConfig {
            lr: 3e-3,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Exponential {
            first: 50,
            growth: 1.1,
        },
        seed: 11,
        ..NetworkConfig::new(FEATURES, vec![hidden, output])
    })
    .unwrap_or_else(|e| {
        eprintln!("train_synthetic: {e}");
        std::process::exit(1);
    });
    println!(
        "synthetic XMC: {} train / {} test samples, {FEATURES} features, {labels} labels; \
         network {FEATURES} -> 128 -> {labels} (DWTA K=4 L=50 on the output, 256 active), {} threads",
        train.offsets.len() - 1,
        test.offsets.len() - 1,
        rayon::current_num_threads()
    );
    let test_batch: Vec<usize> = (0..test.offsets.len() - 1).collect();
    let batch = 128;
    let n = train.offsets.len() - 1;
    let mut order: Vec<usize> = (0..n).collect();
    let mut ws = slide::Workspace::new();
    let mut stats = StepStats::default();
    let started = Instant::now();
    let mut trained = 0usize;
    for epoch in 1..=epochs {
        // A seeded shuffle per epoch.
        for i in (1..n).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let mut loss = 0.0;
        let steps = n / batch;
        for chunk in order.chunks_exact(batch) {
            net.train_step_with(&mut ws, &train, chunk, &mut stats)
                .unwrap_or_else(|e| {
                    eprintln!("train_synthetic: {e}");
                    std::process::exit(1);
                });
            loss += stats.loss;
            trained += batch;
        }
        let seconds = started.elapsed().as_secs_f64();
        let exact = net
            .evaluate(&mut ws, &test, &test_batch, Mode::EvalExact)
            .expect("evaluate");
        let fast = net
            .evaluate(&mut ws, &test, &test_batch, Mode::EvalLsh)
            .expect("evaluate");
        println!(
            "epoch {epoch}: train loss {:.3}, test P@1 {:.3} exact / {:.3} LSH ({:.0} outputs), {:.0} samples/s",
            loss / steps as f64,
            exact.metrics.precision[0],
            fast.metrics.precision[0],
            fast.active_outputs,
            trained as f64 / seconds
        );
    }
}
