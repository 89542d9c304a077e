//! Trains 784 -> H (ReLU, LSH-sampled) -> 10 on the MNIST (or Fashion-MNIST) files shipped in
//! `datasets/`, reporting test accuracy and time per epoch.
//!
//! ```text
//! cargo run --release --example train_mnist -- [--hidden 1024] [--active 256] [--epochs 10]
//!     [--fashion] [--dense] [--lr 0.001]
//! ```
//!
//! `--dense` trains the same network with every hidden neuron active, for comparison.

use std::path::Path;
use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::formats::idx::read_images;
use slide::lsh::{BucketPolicy, FamilyKind, LshParams, Projection, Sampling};
use slide::{
    Activation, AdamConfig, Examples, LayerConfig, LshConfig, Mode, Network, NetworkConfig,
    RebuildSchedule, Retrieval, StepStats,
};

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("train_mnist: {message}");
    std::process::exit(1);
}

fn main() {
    let (mut hidden, mut active, mut epochs, mut lr) = (1024usize, 256usize, 10usize, 1e-3f32);
    let (mut fashion, mut dense) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--fashion" => fashion = true,
            "--dense" => dense = true,
            _ => {
                let value = args.next().unwrap_or_default();
                let ok = match flag.as_str() {
                    "--hidden" => value.parse().map(|v| hidden = v).is_ok(),
                    "--active" => value.parse().map(|v| active = v).is_ok(),
                    "--epochs" => value.parse().map(|v| epochs = v).is_ok(),
                    "--lr" => value.parse().map(|v| lr = v).is_ok(),
                    _ => false,
                };
                if !ok {
                    eprintln!(
                        "usage: train_mnist [--hidden H] [--active A] [--epochs E] [--lr LR] [--fashion] [--dense]"
                    );
                    std::process::exit(2);
                }
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("datasets")
        .join(if fashion { "fashion-mnist" } else { "mnist" });
    let load = |images: &str, labels: &str| {
        read_images(&root.join(images), &root.join(labels), 10).unwrap_or_else(|e| fail(e))
    };
    let train = load("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz");
    let test = load("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz");

    let lsh = (!dense).then_some(LshConfig {
        retrieval: Retrieval {
            family: FamilyKind::SimHash(Projection::Sparse { density: 1.0 / 3.0 }),
            params: LshParams {
                k: 6,
                l: 50,
                range_pow: 6,
            },
            policy: BucketPolicy::Reservoir,
            sampling: Sampling::top_k(active).with_min_active(active),
            ..Default::default()
        },
        ..Default::default()
    });
    let layers = vec![
        LayerConfig {
            lsh,
            ..LayerConfig::new(hidden, Activation::Relu)
        },
        LayerConfig::new(10, Activation::Softmax),
    ];
    let mut net = Network::new(NetworkConfig {
        adam: AdamConfig {
            lr,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Exponential {
            first: 50,
            growth: 1.1,
        },
        seed: 5,
        ..NetworkConfig::new(784, layers)
    })
    .unwrap_or_else(|e| fail(e));
    println!(
        "{}: 784 -> {hidden} -> 10, {}, lr {lr}, batch 128, {} threads",
        if fashion { "Fashion-MNIST" } else { "MNIST" },
        if dense {
            "dense hidden layer".to_string()
        } else {
            format!("SimHash K=6 L=50, top-{active} hidden neurons active")
        },
        rayon::current_num_threads()
    );
    let test_all: Vec<usize> = (0..test.len()).collect();
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut ws = slide::Workspace::new();
    let mut stats = StepStats::default();
    for epoch in 1..=epochs {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let started = Instant::now();
        let (mut loss, mut steps, mut active_hidden) = (0.0, 0, 0.0);
        for batch in order.chunks_exact(128) {
            net.train_step_with(&mut ws, &train, batch, &mut stats)
                .unwrap_or_else(|e| fail(e));
            loss += stats.loss;
            active_hidden += stats.active_per_sample[0];
            steps += 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        let sampled = net
            .evaluate(&mut ws, &test, &test_all, Mode::EvalExact)
            .unwrap_or_else(|e| fail(e));
        let every = net
            .evaluate(&mut ws, &test, &test_all, Mode::EvalDense)
            .unwrap_or_else(|e| fail(e));
        println!(
            "epoch {epoch}: loss {:.4}, test accuracy {:.2}% (LSH hidden layer, as trained) / {:.2}% (every neuron), {:.0} hidden active, {seconds:.1} s ({:.0} samples/s)",
            loss / steps as f64,
            100.0 * sampled.metrics.precision[0],
            100.0 * every.metrics.precision[0],
            active_hidden / steps as f64,
            (steps * 128) as f64 / seconds,
        );
    }
}
