//! The width-scaling experiment: the same network at growing layer widths, trained with LSH
//! sampling (slide) and with every neuron computed, measuring per training step the time,
//! the multiply-adds and the rows the optimizer touches, and fitting log-log slopes.
//!
//! The every-neuron engine here is slide's own dense path (the same hand-derived passes with
//! no layer sampled); the reverse-mode autodiff baseline the project plans goes beside it.

use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::{BucketPolicy, FamilyKind, LshParams, Sampling};
use slide::{
    Activation, AdamConfig, DenseExamples, Examples, LayerConfig, LshConfig, Network,
    NetworkConfig, RebuildSchedule, SparseExamples, StepStats, WeightLayout,
};

use crate::{AMAZON_FEATURES, AMAZON_HIDDEN, AMAZON_NNZ, sparse_vector};

/// Which layer grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// MNIST 784 -> H -> 10, H growing, LSH on the hidden layer.
    Mnist,
    /// XMC 135,909 sparse -> 128 -> N, N growing, LSH on the output layer.
    Xmc,
}

/// How the widened layer picks its neurons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// LSH sampling (DWTA, K=6, L=50, a fixed budget of active neurons per sample).
    Slide,
    /// Every neuron computed and updated.
    Dense,
}

impl Engine {
    /// Name in tables and plots.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Slide => "slide",
            Engine::Dense => "every-neuron",
        }
    }
}

/// Active neurons per sample in the sampled layer (the recommended setting: the per-sample
/// work stays fixed while the layer widens).
pub const BUDGET: usize = 256;

/// The LSH settings of the widened layer.
pub fn lsh_config(budget: usize) -> LshConfig {
    LshConfig {
        family: FamilyKind::Dwta { bin_size: 8 },
        params: LshParams {
            k: 6,
            l: 50,
            range_pow: 18,
        },
        bucket_capacity: 128,
        policy: BucketPolicy::Fifo,
        sampling: Sampling::vanilla()
            .with_budget(budget)
            .with_min_active(budget),
    }
}

/// The network of `sweep` at `width`, sampled or not.
pub fn network(sweep: Sweep, width: usize, engine: Engine, seed: u64) -> slide::Result<Network> {
    let lsh = (engine == Engine::Slide).then(|| lsh_config(BUDGET));
    let (input_dim, layers) = match sweep {
        Sweep::Mnist => (
            784,
            vec![
                LayerConfig {
                    out_dim: width,
                    activation: Activation::Relu,
                    layout: WeightLayout::NeuronMajor,
                    lsh,
                },
                LayerConfig {
                    out_dim: 10,
                    activation: Activation::Softmax,
                    layout: WeightLayout::NeuronMajor,
                    lsh: None,
                },
            ],
        ),
        Sweep::Xmc => (
            AMAZON_FEATURES,
            vec![
                LayerConfig {
                    out_dim: AMAZON_HIDDEN,
                    activation: Activation::Relu,
                    layout: WeightLayout::InputMajor,
                    lsh: None,
                },
                LayerConfig {
                    out_dim: width,
                    activation: Activation::Softmax,
                    layout: WeightLayout::NeuronMajor,
                    lsh,
                },
            ],
        ),
    };
    Network::new(NetworkConfig {
        input_dim,
        layers,
        adam: AdamConfig {
            lr: 1e-3,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Exponential {
            first: 50,
            growth: 1.1,
        },
        seed,
    })
}

/// `n` synthetic MNIST-shaped images (784 pixels, 80% zero) with classes below 10.
pub fn mnist_like(n: usize, seed: u64) -> DenseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    DenseExamples {
        dim: 784,
        inputs: (0..n * 784)
            .map(|_| {
                if rng.random::<f32>() < 0.8 {
                    0.0
                } else {
                    rng.random()
                }
            })
            .collect(),
        classes: (0..n).map(|_| rng.random_range(0..10)).collect(),
    }
}

/// `n` synthetic Amazon-shaped samples (75 nonzeros of 135,909 features) with 1-10 labels
/// below `labels`, low ids more frequent.
pub fn xmc_like(n: usize, labels: usize, seed: u64) -> SparseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut data = SparseExamples::new();
    for i in 0..n {
        let (indices, values) = sparse_vector(AMAZON_FEATURES, AMAZON_NNZ, seed ^ i as u64);
        let count = rng.random_range(1..=10usize);
        let mut ids: Vec<u32> = (0..count)
            .map(|_| (rng.random::<f64>().powi(2) * labels as f64) as u32)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        data.push(&indices, &values, &ids);
    }
    data
}

/// What one engine did at one width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// The widened layer's size.
    pub width: usize,
    /// Median wall time of a training step, milliseconds.
    pub median_ms: f64,
    /// Mean active neurons per sample in the widened layer.
    pub active: f64,
    /// Mean multiply-adds per step (forward, backward and gradient passes; counted).
    pub multiply_adds: f64,
    /// Mean rows the optimizer updated per step, all layers (counted).
    pub rows_touched: f64,
}

/// Trains `net` for `steps` measured steps of `batch` samples of `data` (after 2 warm-up
/// steps) and reports medians and means.
pub fn measure(
    net: &mut Network,
    data: &dyn Examples,
    width: usize,
    layer: usize,
    steps: usize,
    batch: usize,
) -> slide::Result<Measurement> {
    let n = data.len();
    let mut stats = StepStats::default();
    let mut times = Vec::with_capacity(steps);
    let (mut active, mut macs, mut rows) = (0.0, 0.0, 0.0);
    for s in 0..steps + 2 {
        let indices: Vec<usize> = (0..batch).map(|i| (s * batch + i) % n).collect();
        let started = Instant::now();
        net.train_step_with(data, &indices, &mut stats)?;
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        if s >= 2 {
            times.push(elapsed);
            active += stats.active_per_sample[layer];
            macs += stats.multiply_adds as f64;
            rows += stats.rows_touched.iter().sum::<usize>() as f64;
        }
    }
    times.sort_by(f64::total_cmp);
    let k = steps.max(1) as f64;
    Ok(Measurement {
        width,
        median_ms: times.get(times.len() / 2).copied().unwrap_or(f64::NAN),
        active: active / k,
        multiply_adds: macs / k,
        rows_touched: rows / k,
    })
}

/// The least-squares slope of `ln y` against `ln x` (NaN for fewer than two points).
pub fn log_log_slope(points: &[(f64, f64)]) -> f64 {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    let n = logs.len() as f64;
    if logs.len() < 2 {
        return f64::NAN;
    }
    let mx = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}
