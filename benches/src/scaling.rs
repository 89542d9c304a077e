//! The width-scaling experiment: the same network at growing layer widths, trained with LSH
//! sampling (slide) and with every neuron computed, measuring per training step the time,
//! the multiply-adds and the rows the optimizer touches, and fitting log-log slopes.
//!
//! Three engines: slide (LSH picks the neurons), slide's own dense path (the same
//! hand-derived passes with no layer sampled) and the dense reverse-mode autodiff baseline
//! ([`crate::baseline`], burn), which is what the sub-linear claim is measured against.

use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::{FamilyKind, LshParams, Sampling};
use slide::{
    Activation, AdamConfig, DenseExamples, Examples, LayerConfig, LshConfig, Network,
    NetworkConfig, RebuildSchedule, Retrieval, SparseExamples, StepStats,
};

use crate::baseline::Baseline;
use crate::{AMAZON_FEATURES, AMAZON_NNZ, amazon_hidden_layer, sparse_vector};

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
    /// LSH sampling (a fixed budget of active neurons per sample; see [`Recipe`]).
    Slide,
    /// Every neuron computed and updated, by slide's hand-derived passes.
    Dense,
    /// Every neuron computed, gradients by reverse-mode autodiff, dense Adam (the baseline).
    Autodiff,
}

impl Engine {
    /// Name in tables and plots.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Slide => "slide",
            Engine::Dense => "every-neuron",
            Engine::Autodiff => "autodiff",
        }
    }
}

/// Active neurons per sample in the sampled layer (the recommended setting: the per-sample
/// work stays fixed while the layer widens).
pub const BUDGET: usize = 256;

/// How the widened layer is sampled and the network trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recipe {
    /// Active neurons per sample in the sampled layer.
    pub budget: usize,
    /// Adam's learning rate (every engine).
    pub lr: f32,
    /// The hash family.
    pub family: FamilyKind,
    /// Codes per table and tables.
    pub params: LshParams,
    /// Keep the `budget` neurons found in the most tables (instead of the union of buckets
    /// up to the budget, SLIDE's vanilla sampling).
    pub top_k: bool,
}

impl Recipe {
    /// The recommended settings of `sweep`: lr 1e-3, 256 active neurons per sample, DWTA
    /// tables (bins of 8, buckets of at most 128 ids, FIFO).
    ///
    /// MNIST's hidden layer: the 256 found in the most of 100 tables of K=3 codes (512
    /// buckets). Few code bits make large buckets, so the hit counts rank many candidates;
    /// the bucket bound keeps a query's work fixed as the layer widens. One epoch at H =
    /// 8,192 gave 89.6% test accuracy with K=6 L=50 vanilla sampling, 94.8% with K=3 L=50
    /// top-k; at H = 65,536 L=100 gave 95.5% against 94.6% with L=50. XMC's output layer:
    /// K=6 (2^18 buckets, room for 2M neurons in every table), L=50, SLIDE's vanilla
    /// sampling.
    pub fn recommended(sweep: Sweep) -> Self {
        let (k, l, top_k) = match sweep {
            Sweep::Mnist => (3, 100, true),
            Sweep::Xmc => (6, 50, false),
        };
        Recipe {
            budget: BUDGET,
            lr: 1e-3,
            family: FamilyKind::Dwta { bin_size: 8 },
            params: LshParams {
                k,
                l,
                range_pow: 18,
            },
            top_k,
        }
    }

    /// The LSH settings of the widened layer.
    pub fn lsh_config(&self) -> LshConfig {
        let sampling = if self.top_k {
            Sampling::top_k(self.budget)
        } else {
            Sampling::vanilla().with_budget(self.budget)
        };
        LshConfig {
            retrieval: Retrieval {
                family: self.family,
                params: self.params,
                sampling: sampling.with_min_active(self.budget),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// The network of `sweep` at `width`, sampled or not (the autodiff engine copies the
/// unsampled one).
pub fn network(
    sweep: Sweep,
    width: usize,
    engine: Engine,
    recipe: &Recipe,
    seed: u64,
) -> slide::Result<Network> {
    let lsh = (engine == Engine::Slide).then(|| recipe.lsh_config());
    let (input_dim, layers) = match sweep {
        Sweep::Mnist => (
            784,
            vec![
                LayerConfig {
                    lsh,
                    ..LayerConfig::new(width, Activation::Relu)
                },
                LayerConfig::new(10, Activation::Softmax),
            ],
        ),
        Sweep::Xmc => (
            AMAZON_FEATURES,
            vec![
                amazon_hidden_layer(),
                LayerConfig {
                    lsh,
                    ..LayerConfig::new(width, Activation::Softmax)
                },
            ],
        ),
    };
    Network::new(NetworkConfig {
        adam: AdamConfig {
            lr: recipe.lr,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Exponential {
            first: 50,
            growth: 1.1,
        },
        seed,
        ..NetworkConfig::new(input_dim, layers)
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
    /// Mean wall time of a training step, milliseconds (includes the hash-table rebuilds
    /// that fall in the measured steps).
    pub mean_ms: f64,
    /// Mean active neurons per sample in the widened layer.
    pub active: f64,
    /// Mean multiply-adds per step (forward, backward and gradient passes; counted).
    pub multiply_adds: f64,
    /// Mean rows the optimizer updated per step, all layers (counted).
    pub rows_touched: f64,
}

/// Step `s`'s batch of `batch` of `n` samples: the samples in order, wrapping around. Every
/// engine trains on these batches, so all see the same data in the same order.
pub fn batch_at(s: usize, batch: usize, n: usize) -> Vec<usize> {
    (0..batch).map(|i| (s * batch + i) % n).collect()
}

/// Calls `step` on 2 warm-up and then `steps` measured consecutive batches ([`batch_at`]),
/// timing each call. Returns the measured calls' median and mean milliseconds and what they
/// returned.
fn timed_steps<T, E>(
    steps: usize,
    batch: usize,
    n: usize,
    mut step: impl FnMut(&[usize]) -> Result<T, E>,
) -> Result<(f64, f64, Vec<T>), E> {
    let mut times = Vec::with_capacity(steps);
    let mut results = Vec::with_capacity(steps);
    for s in 0..steps + 2 {
        let indices = batch_at(s, batch, n);
        let started = Instant::now();
        let result = step(&indices)?;
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        if s >= 2 {
            times.push(elapsed);
            results.push(result);
        }
    }
    let mean_ms = times.iter().sum::<f64>() / steps.max(1) as f64;
    times.sort_by(f64::total_cmp);
    let median_ms = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    Ok((median_ms, mean_ms, results))
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
    let mut ws = slide::Workspace::new();
    let mut stats = StepStats::default();
    let (median_ms, mean_ms, counts) = timed_steps(steps, batch, data.len(), |indices| {
        net.train_step_with(&mut ws, data, indices, &mut stats)?;
        Ok::<_, slide::SlideError>((
            stats.active_per_sample[layer],
            stats.multiply_adds as f64,
            stats.rows_touched.iter().sum::<usize>() as f64,
        ))
    })?;
    let k = steps.max(1) as f64;
    let mean = |f: fn(&(f64, f64, f64)) -> f64| counts.iter().map(f).sum::<f64>() / k;
    Ok(Measurement {
        width,
        median_ms,
        mean_ms,
        active: mean(|c| c.0),
        multiply_adds: mean(|c| c.1),
        rows_touched: mean(|c| c.2),
    })
}

/// Trains the autodiff `baseline` for `steps` measured steps of `batch` samples of `data`
/// (after 2 warm-up steps), as [`measure`] does slide; multiply-adds and rows come from the
/// shapes (every neuron computed, every neuron's parameters updated).
pub fn measure_autodiff(
    baseline: &mut Baseline,
    data: &dyn Examples,
    width: usize,
    steps: usize,
    batch: usize,
) -> Measurement {
    let n = data.len();
    let Ok((median_ms, mean_ms, _)) = timed_steps(steps, batch, n, |indices| {
        baseline.train_step(data, indices);
        Ok::<_, std::convert::Infallible>(())
    });
    let macs: f64 = (2..steps + 2)
        .map(|s| baseline.multiply_adds(data, &batch_at(s, batch, n)) as f64)
        .sum();
    Measurement {
        width,
        median_ms,
        mean_ms,
        active: width as f64,
        multiply_adds: macs / steps.max(1) as f64,
        rows_touched: baseline.rows() as f64,
    }
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
