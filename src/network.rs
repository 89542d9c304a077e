//! A stack of sparse layers, the threaded per-sample training step, the sparse Adam update
//! and the table-rebuild schedule.

use slide_lsh::mix64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rayon::prelude::*;
use slide_lsh::{LshError, Vector};

use crate::data::Examples;
use crate::error::{Result, SlideError, config_error};
use crate::kernels::{AdamStep, kernels};
use crate::layer::{
    Activation, LayerConfig, LayerState, LayerTrace, Mode, QueryBuffers, SparseLayer, WeightLayout,
    ranks_before,
};
use crate::rows::DisjointRows;

/// Adam's hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator guard.
    pub eps: f32,
}

impl Default for AdamConfig {
    /// PyTorch's defaults except the learning rate, SLIDE's 1e-4.
    fn default() -> Self {
        AdamConfig {
            lr: 1e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

/// When LSH tables are rebuilt from the moving weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RebuildSchedule {
    /// After every `every` steps.
    Fixed {
        /// Steps between rebuilds (at least 1).
        every: u64,
    },
    /// The SLIDE paper's schedule: the first rebuild after `first` steps, each following
    /// period `growth` times the previous one (the weights move less as training settles).
    Exponential {
        /// Steps before the first rebuild (at least 1).
        first: u64,
        /// Period growth factor (at least 1).
        growth: f64,
    },
}

/// Everything needed to build a [`Network`].
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfig {
    /// Input dimension.
    pub input_dim: usize,
    /// Layers, input to output. The last must be a softmax layer.
    pub layers: Vec<LayerConfig>,
    /// Optimizer settings.
    pub adam: AdamConfig,
    /// Table-rebuild schedule for LSH layers.
    pub rebuild: RebuildSchedule,
    /// Seeds weights, hash families, tables and per-sample sampling.
    pub seed: u64,
}

/// Where a step's time went. `hashing`, `forward` and `backward` are summed over the
/// batch's samples (thread time, larger than wall time on several threads); `update` and
/// `rebuild` are wall time of phases that are parallel inside.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PhaseTimes {
    /// Hashing inputs and querying tables (LSH layers).
    pub hashing: Duration,
    /// Computing the active neurons' activations (hashing excluded).
    pub forward: Duration,
    /// Back-propagating deltas.
    pub backward: Duration,
    /// Gradient accumulation and Adam.
    pub update: Duration,
    /// Table rebuilds.
    pub rebuild: Duration,
}

impl std::ops::AddAssign for PhaseTimes {
    fn add_assign(&mut self, other: Self) {
        self.hashing += other.hashing;
        self.forward += other.forward;
        self.backward += other.backward;
        self.update += other.update;
        self.rebuild += other.rebuild;
    }
}

/// Counters of one training step, for tests and reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepStats {
    /// Mean cross-entropy over the batch.
    pub loss: f64,
    /// Samples in the batch.
    pub samples: usize,
    /// Multiply-adds of the forward, backward and update work.
    pub multiply_adds: u64,
    /// Stored weight rows updated, per layer (neurons for neuron-major layers, inputs for
    /// input-major ones).
    pub rows_touched: Vec<usize>,
    /// Mean active neurons per sample, per layer.
    pub active_per_sample: Vec<f64>,
    /// Per layer, where a sample's active neurons came from (means over the batch); `None`
    /// for layers without LSH.
    pub active_sources: Vec<Option<ActiveSources>>,
    /// Whether the LSH tables were rebuilt after this step.
    pub rebuilt: bool,
    /// Where the time went.
    pub times: PhaseTimes,
}

/// Where the active neurons of an LSH layer came from, as means per sample.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ActiveSources {
    /// Forced ids (the sample's labels in the output layer).
    pub forced: f64,
    /// Shared negatives: the neurons that score highest for the mean input, active for
    /// every sample.
    pub shared: f64,
    /// Ids the sampling strategy took from the tables' buckets.
    pub from_tables: f64,
    /// Uniformly random ids: the fill up to `min_active` and the `random_extra` ids.
    pub random_fill: f64,
    /// Distinct candidates the visited buckets held, before the strategy's cut.
    pub candidates: f64,
}

impl ActiveSources {
    /// Share of the non-label active ids that came from the tables (1 when there are none).
    pub fn table_share(&self) -> f64 {
        let total = self.shared + self.from_tables + self.random_fill;
        if total > 0.0 {
            self.from_tables / total
        } else {
            1.0
        }
    }
}

/// Results of an evaluation pass.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EvalStats {
    /// Samples evaluated.
    pub samples: usize,
    /// Share of samples whose highest-scoring output is one of their labels (P@1; the
    /// accuracy for single-label data).
    pub precision_at_1: f64,
    /// Mean share of the 3 highest-scoring outputs that are labels (P@3).
    pub precision_at_3: f64,
    /// Mean share of the 5 highest-scoring outputs that are labels (P@5).
    pub precision_at_5: f64,
    /// Mean active output neurons per sample.
    pub active_outputs: f64,
    /// The output that is the top-1 prediction of the most samples (ties: the lower id).
    pub top1_output: u32,
    /// Share of samples whose top-1 prediction is [`top1_output`](Self::top1_output): a
    /// collapse detector. A healthy model stays near [`label_share`](Self::label_share);
    /// a collapsed one predicts one output for most inputs.
    pub top1_share: f64,
    /// Share of samples that carry the most frequent label among them: what predicting that
    /// one label everywhere would score as P@1.
    pub label_share: f64,
}

/// Share of the most frequent value in `ids` (0 for none), and that value (ties: the
/// lowest). Sorts `ids`.
fn mode_share(ids: &mut [u32], samples: usize) -> (u32, f64) {
    ids.sort_unstable();
    let (mut best, mut best_count) = (u32::MAX, 0usize);
    for run in ids.chunk_by(|a, b| a == b) {
        if run.len() > best_count {
            (best, best_count) = (run[0], run.len());
        }
    }
    (best, best_count as f64 / samples.max(1) as f64)
}

/// How much of each sample's exact top outputs its active set held, for one LSH layer (see
/// [`Network::retrieval_recall`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Recall {
    /// Mean share of a sample's `top` highest-scoring neurons (by exact pre-activation over
    /// every neuron) that were in its active set.
    pub recall: f64,
    /// What a uniformly random active set of the same size would hold on average: mean
    /// active neurons over the layer's width.
    pub random: f64,
    /// Samples probed.
    pub samples: usize,
}

/// Everything a network needs to continue training exactly where it stopped: every
/// layer's parameters, Adam state and tables, and the step and rebuild-schedule position.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkState {
    /// Training steps taken.
    pub step: u64,
    /// The step after which the tables are rebuilt next.
    pub next_rebuild: u64,
    /// The current rebuild period (grows under the exponential schedule).
    pub rebuild_period: f64,
    /// Per layer, input first.
    pub layers: Vec<LayerState>,
}

/// Gradients of the batch-mean loss for one layer, as computed by [`Network::gradients`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LayerGradients {
    /// Stored rows with a nonzero gradient, increasing (neurons or inputs, by layout).
    pub rows: Vec<u32>,
    /// `rows.len()` rows of the stored row length (`in_dim` or `out_dim`).
    pub weights: Vec<f32>,
    /// Gradient of every bias (zero for neurons inactive in the whole batch).
    pub bias: Vec<f32>,
    /// The active neurons of each sample of the batch (all neurons for dense layers).
    pub active: Vec<Vec<u32>>,
}

impl LayerGradients {
    /// The gradient of the weight from `input` to `neuron` (0 if its row was not touched).
    pub fn weight(&self, layout: WeightLayout, neuron: usize, input: usize) -> f32 {
        let (row, col) = match layout {
            WeightLayout::NeuronMajor => (neuron, input),
            WeightLayout::InputMajor => (input, neuron),
        };
        let len = self.weights.len() / self.rows.len().max(1);
        match self.rows.binary_search(&(row as u32)) {
            Ok(k) => self.weights[k * len + col],
            Err(_) => 0.0,
        }
    }
}

#[derive(Default)]
struct SampleState {
    traces: Vec<LayerTrace>,
    loss: f64,
    macs: u64,
    correct: bool,
    /// The highest-scoring output (evaluation).
    top1: u32,
    /// Labels among the 1, 3 and 5 highest-scoring outputs.
    hits_at: [u8; 3],
    times: PhaseTimes,
}

#[derive(Default)]
struct ThreadScratch {
    queries: Vec<Option<QueryBuffers>>,
    gradient_row: Vec<f32>,
}

/// One sample's share of one stored row's gradient: `(row, sample)` orders the sum, and
/// `position` locates the sample's scalar (its delta for a neuron-major row, its input value
/// for an input-major row).
#[derive(Debug, Clone, Copy)]
struct Contribution {
    row: u32,
    sample: u32,
    position: u32,
}

/// A feed-forward network of [`SparseLayer`]s trained with softmax cross-entropy and sparse
/// Adam. See the crate documentation for an example.
pub struct Network {
    config: NetworkConfig,
    layers: Vec<SparseLayer>,
    step: u64,
    next_rebuild: u64,
    rebuild_period: f64,
    batch_len: usize,
    states: Vec<SampleState>,
    scratch: Vec<Mutex<ThreadScratch>>,
    contributions: Vec<Contribution>,
    touched: Vec<u32>,
    group_starts: Vec<u32>,
    bias_gradient: Vec<f32>,
    /// Adam's bias-correction constants for update counts `1..=ADAM_TABLE`, so rows do not
    /// recompute two powers each (the values are exactly `AdamStep::new`'s).
    adam_steps: Vec<AdamStep>,
}

/// Steps between recomputations of the shared negatives (also recomputed at every rebuild):
/// one scoring of the layer against one vector, about 2% of a step at 670K outputs.
const SHARED_REFRESH: u64 = 8;

/// Update counts whose Adam constants are precomputed.
const ADAM_TABLE: u32 = 4096;

fn validate(config: &NetworkConfig) -> Result<()> {
    if config.input_dim == 0 {
        return Err(config_error("network", "input_dim must be at least 1"));
    }
    let Some(last) = config.layers.last() else {
        return Err(config_error("network", "needs at least one layer"));
    };
    if last.activation != Activation::Softmax {
        return Err(config_error(
            "output layer",
            "must use the softmax activation",
        ));
    }
    if let Some(i) = config.layers[..config.layers.len() - 1]
        .iter()
        .position(|l| l.activation == Activation::Softmax)
    {
        return Err(config_error(
            format!("layer {i}"),
            "softmax is only for the output layer",
        ));
    }
    let a = config.adam;
    if !(a.lr.is_finite() && a.lr > 0.0) {
        return Err(config_error(
            "adam",
            format!("lr must be positive, got {}", a.lr),
        ));
    }
    if !((0.0..1.0).contains(&a.beta1) && (0.0..1.0).contains(&a.beta2)) {
        return Err(config_error("adam", "beta1 and beta2 must be in [0, 1)"));
    }
    if !(a.eps.is_finite() && a.eps > 0.0) {
        return Err(config_error("adam", "eps must be positive"));
    }
    match config.rebuild {
        RebuildSchedule::Fixed { every: 0 } | RebuildSchedule::Exponential { first: 0, .. } => Err(
            config_error("rebuild schedule", "period must be at least 1 step"),
        ),
        RebuildSchedule::Exponential { growth, .. } if !(growth.is_finite() && growth >= 1.0) => {
            Err(config_error(
                "rebuild schedule",
                "growth must be a finite number >= 1",
            ))
        }
        _ => Ok(()),
    }
}

/// The input of layer `l` for a sample: the raw input for the first layer, the previous
/// layer's output otherwise.
fn layer_input<'a>(
    traces: &'a [LayerTrace],
    l: usize,
    data: &'a dyn Examples,
    sample: usize,
) -> Vector<'a> {
    if l == 0 {
        data.input(sample)
    } else {
        traces[l - 1].as_input()
    }
}

fn input_error(sample: usize, e: LshError) -> SlideError {
    match e {
        LshError::DimensionMismatch { expected, actual } => SlideError::InputDimension {
            sample,
            expected,
            actual,
        },
        LshError::IndexOutOfRange { index, dim } => SlideError::InputDimension {
            sample,
            expected: dim,
            actual: index as usize + 1,
        },
        other => SlideError::BadInput {
            sample,
            reason: other.to_string(),
        },
    }
}

/// Forward pass, loss, and (when training) backward pass of one sample.
#[allow(clippy::too_many_arguments)]
fn run_sample(
    layers: &[SparseLayer],
    input_dim: usize,
    data: &dyn Examples,
    sample: usize,
    mode: Mode,
    rng: &mut Xoshiro256PlusPlus,
    scratch: &mut ThreadScratch,
    state: &mut SampleState,
    hidden_only: bool,
) -> Result<()> {
    let input = data.input(sample);
    input
        .validate(input_dim)
        .map_err(|e| input_error(sample, e))?;
    let labels = data.labels(sample);
    let last = layers.len() - 1;
    let num_labels = layers[last].out_dim;
    if let Some(&label) = labels.iter().find(|&&y| y as usize >= num_labels) {
        return Err(SlideError::LabelOutOfRange {
            sample,
            label,
            num_labels,
        });
    }
    if mode == Mode::Train && labels.is_empty() {
        return Err(SlideError::NoLabels { sample });
    }
    state.traces.resize_with(layers.len(), Default::default);
    state.macs = 0;
    state.times = PhaseTimes::default();
    let run = if hidden_only { last } else { last + 1 };
    for (l, layer) in layers.iter().enumerate().take(run) {
        let (below, here) = state.traces.split_at_mut(l);
        let x = if l == 0 {
            input
        } else {
            below[l - 1].as_input()
        };
        let forced = if l == last { labels } else { &[] };
        here[0].reserve(layer.max_active(forced.len()));
        let started = Instant::now();
        // Exact evaluation computes every output but keeps the hidden layers' sampling, which
        // is part of how the network was trained to compute.
        let layer_mode = match mode {
            Mode::EvalExact if l == last => Mode::EvalDense,
            Mode::EvalExact => Mode::EvalLsh,
            other => other,
        };
        layer
            .select_active(
                x,
                forced,
                layer_mode,
                rng,
                scratch.queries[l].as_mut(),
                &mut here[0],
            )
            .map_err(|e| match e {
                SlideError::Lsh(LshError::NonFiniteValue { .. }) if l > 0 => SlideError::Diverged {
                    layer: l - 1,
                    sample,
                },
                other => other,
            })?;
        let selected = Instant::now();
        state.macs += layer.forward(x, &mut here[0]);
        state.times.hashing += selected - started;
        state.times.forward += selected.elapsed();
    }
    if hidden_only {
        return Ok(());
    }

    // Softmax cross-entropy with soft targets 1/|y| on each label, over the active outputs.
    let output = &mut state.traces[last];
    let target = 1.0 / labels.len().max(1) as f32;
    let position_of = |trace: &LayerTrace, label: u32| -> Option<usize> {
        if trace.dense {
            Some(label as usize)
        } else {
            trace.active.iter().position(|&id| id == label)
        }
    };
    state.loss = 0.0;
    for &label in labels {
        // A label outside the active set (possible only when evaluating with LSH) has
        // probability 0 there; its log is floored like any underflow.
        let p = position_of(output, label).map_or(0.0, |k| output.out[k]);
        state.loss -= f64::from(target) * f64::from(p.max(f32::MIN_POSITIVE)).ln();
    }
    let best = output
        .out
        .iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |acc, (k, &p)| if p > acc.1 { (k, p) } else { acc },
        );
    // An LSH-mode evaluation can retrieve nothing (no forced ids, empty buckets, no fill):
    // then there is no prediction (`u32::MAX`, as in `best_outputs`).
    state.top1 = if output.out.is_empty() {
        u32::MAX
    } else {
        output.id(best.0)
    };
    state.correct = labels.contains(&state.top1);
    if mode != Mode::Train {
        // The 5 best outputs, best first (ties: lower position first).
        let mut top = [(usize::MAX, f32::NEG_INFINITY); 5];
        for (k, &p) in output.out.iter().enumerate() {
            if p > top[4].1 {
                let mut i = 4;
                while i > 0 && p > top[i - 1].1 {
                    top[i] = top[i - 1];
                    i -= 1;
                }
                top[i] = (k, p);
            }
        }
        let hit = |n: usize| {
            top[..n]
                .iter()
                .filter(|(k, _)| *k != usize::MAX && labels.contains(&output.id(*k)))
                .count() as u8
        };
        state.hits_at = [hit(1), hit(3), hit(5)];
    }
    if mode != Mode::Train {
        return Ok(());
    }
    output.delta.clear();
    output.delta.extend_from_slice(&output.out);
    for &label in labels {
        if let Some(k) = position_of(output, label) {
            output.delta[k] -= target;
        }
    }
    let started = Instant::now();
    for l in (1..=last).rev() {
        let (below, here) = state.traces.split_at_mut(l);
        state.macs += layers[l].backward_to(&here[0], &mut below[l - 1], layers[l - 1].activation);
    }
    state.times.backward += started.elapsed();
    Ok(())
}

/// The gradient of one stored row: the sum, in sample order, of `scale * c_s * vec_s` over
/// the row's contributions, where `(c_s, vec_s)` is (the sample's delta for the neuron, the
/// layer's input) for a neuron-major row and (the sample's input value, the layer's delta
/// vector) for an input-major row. Returns the multiply-adds.
#[allow(clippy::too_many_arguments)]
fn accumulate_row(
    layout: WeightLayout,
    states: &[SampleState],
    group: &[Contribution],
    l: usize,
    data: &dyn Examples,
    batch: &[usize],
    scale: f32,
    g: &mut [f32],
) -> u64 {
    let k = kernels();
    g.fill(0.0);
    let mut macs = 0;
    for c in group {
        let traces = &states[c.sample as usize].traces;
        let input = layer_input(traces, l, data, batch[c.sample as usize]);
        match layout {
            WeightLayout::NeuronMajor => {
                let d = scale * traces[l].delta[c.position as usize];
                match input {
                    Vector::Dense(x) => {
                        (k.axpy)(d, x, g);
                        macs += x.len();
                    }
                    Vector::Sparse { indices, values } => {
                        for (&i, &v) in indices.iter().zip(values) {
                            g[i as usize] += d * v;
                        }
                        macs += indices.len();
                    }
                }
            }
            WeightLayout::InputMajor => {
                let v = match input {
                    Vector::Dense(x) => x[c.position as usize],
                    Vector::Sparse { values, .. } => values[c.position as usize],
                };
                (k.axpy)(scale * v, &traces[l].delta, g);
                macs += g.len();
            }
        }
    }
    macs as u64
}

/// Bias gradients of layer `l` into `out`, each summed in sample order: one per row group
/// (touched neuron) for a neuron-major layer, one per neuron for an input-major layer, all
/// of whose neurons are active.
#[allow(clippy::too_many_arguments)]
fn bias_gradients(
    layout: WeightLayout,
    out_dim: usize,
    states: &[SampleState],
    contributions: &[Contribution],
    group_starts: &[u32],
    l: usize,
    scale: f32,
    out: &mut Vec<f32>,
) {
    out.clear();
    match layout {
        WeightLayout::NeuronMajor => {
            out.extend(group_starts.windows(2).map(|g| {
                contributions[g[0] as usize..g[1] as usize]
                    .iter()
                    .map(|c| scale * states[c.sample as usize].traces[l].delta[c.position as usize])
                    .fold(0.0, |sum, x| sum + x)
            }));
        }
        WeightLayout::InputMajor => {
            out.resize(out_dim, 0.0);
            for state in states {
                (kernels().axpy)(scale, &state.traces[l].delta, out);
            }
        }
    }
}

/// Samples an evaluation pass holds at once.
pub const EVAL_BLOCK: usize = 256;

/// A sample's 5 best `(logit, neuron)` pairs, best first; ties go to the lower neuron id, so
/// the result does not depend on the order offers arrive in. Empty slots are
/// `(-inf, u32::MAX)`.
#[derive(Debug, Clone, Copy)]
struct Best5([(f32, u32); 5]);

impl Best5 {
    const EMPTY: Self = Best5([(f32::NEG_INFINITY, u32::MAX); 5]);

    #[inline]
    fn offer(&mut self, z: f32, id: u32) {
        if !ranks_before((z, id), self.0[4]) {
            return;
        }
        let mut i = 4;
        while i > 0 && ranks_before((z, id), self.0[i - 1]) {
            self.0[i] = self.0[i - 1];
            i -= 1;
        }
        self.0[i] = (z, id);
    }
}

impl Network {
    /// Validates `config` and builds the network (weights initialised from the seed, LSH
    /// tables built).
    pub fn new(config: NetworkConfig) -> Result<Self> {
        validate(&config)?;
        let mut layers = Vec::with_capacity(config.layers.len());
        let mut in_dim = config.input_dim;
        for (i, layer) in config.layers.iter().enumerate() {
            let seed = mix64(config.seed ^ mix64(i as u64 + 1));
            layers.push(SparseLayer::new(in_dim, layer, seed).map_err(|e| match e {
                SlideError::InvalidConfig { reason, .. } => {
                    config_error(format!("layer {i}"), reason)
                }
                other => other,
            })?);
            in_dim = layer.out_dim;
        }
        let a = config.adam;
        let adam_steps = (1..=ADAM_TABLE)
            .map(|t| AdamStep::new(a.lr, a.beta1, a.beta2, a.eps, t))
            .collect();
        let (next_rebuild, rebuild_period) = match config.rebuild {
            RebuildSchedule::Fixed { every } => (every, every as f64),
            RebuildSchedule::Exponential { first, .. } => (first, first as f64),
        };
        Ok(Network {
            config,
            layers,
            step: 0,
            next_rebuild,
            rebuild_period,
            batch_len: 0,
            states: Vec::new(),
            scratch: Vec::new(),
            contributions: Vec::new(),
            touched: Vec::new(),
            group_starts: Vec::new(),
            bias_gradient: Vec::new(),
            adam_steps,
        })
    }

    /// Sets Adam's learning rate for the steps that follow (for a schedule such as cosine
    /// decay; the caller decides it from the step). Moments and update counts are kept.
    pub fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        if !(lr.is_finite() && lr > 0.0) {
            return Err(config_error(
                "adam",
                format!("lr must be positive, got {lr}"),
            ));
        }
        if lr == self.config.adam.lr {
            return Ok(());
        }
        self.config.adam.lr = lr;
        let a = self.config.adam;
        for (t, step) in (1..=ADAM_TABLE).zip(&mut self.adam_steps) {
            *step = AdamStep::new(a.lr, a.beta1, a.beta2, a.eps, t);
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &NetworkConfig {
        &self.config
    }

    /// The layers, input first.
    pub fn layers(&self) -> &[SparseLayer] {
        &self.layers
    }

    /// Layer `i`, mutably (for tests and tools; call [`rebuild_tables`](Self::rebuild_tables)
    /// after changing a sampled layer's weights by hand).
    pub fn layer_mut(&mut self, i: usize) -> &mut SparseLayer {
        &mut self.layers[i]
    }

    /// Training steps taken.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// A copy of the network's training state (see [`NetworkState`]).
    pub fn export_state(&self) -> NetworkState {
        NetworkState {
            step: self.step,
            next_rebuild: self.next_rebuild,
            rebuild_period: self.rebuild_period,
            layers: self.layers.iter().map(SparseLayer::export_state).collect(),
        }
    }

    /// Continues from `state`, which must come from a network of the same configuration:
    /// training on from here gives exactly what the saved network would have given.
    pub fn import_state(&mut self, state: &NetworkState) -> Result<()> {
        if state.layers.len() != self.layers.len() {
            return Err(config_error(
                "network state",
                format!(
                    "has {} layers, the network {}",
                    state.layers.len(),
                    self.layers.len()
                ),
            ));
        }
        if !(state.rebuild_period.is_finite() && state.rebuild_period >= 1.0) {
            return Err(config_error(
                "network state",
                "rebuild period must be at least 1",
            ));
        }
        for (layer, saved) in self.layers.iter_mut().zip(&state.layers) {
            layer.import_state(saved)?;
        }
        self.step = state.step;
        self.next_rebuild = state.next_rebuild;
        self.rebuild_period = state.rebuild_period;
        Ok(())
    }

    /// Rebuilds every LSH layer's tables from the current weights.
    pub fn rebuild_tables(&mut self) -> Result<()> {
        self.layers
            .iter_mut()
            .try_for_each(SparseLayer::rebuild_tables)
    }

    /// Per layer, what its LSH tables held after their last rebuild (`None` for layers
    /// without LSH).
    pub fn table_stats(&self) -> Vec<Option<slide_lsh::TablesStats>> {
        self.layers.iter().map(SparseLayer::table_stats).collect()
    }

    /// Heap bytes held by all layers (parameters, Adam state, tables).
    pub fn memory_bytes(&self) -> usize {
        self.layers.iter().map(SparseLayer::memory_bytes).sum()
    }

    /// One training step on the samples `batch` of `data` (indices into it): the samples'
    /// forward and backward passes run in parallel, then every touched row gets one Adam
    /// update, in parallel over rows, then the tables are rebuilt if the schedule says so.
    /// The result is identical for any number of threads.
    pub fn train_step(&mut self, data: &dyn Examples, batch: &[usize]) -> Result<StepStats> {
        let mut stats = StepStats::default();
        self.train_step_with(data, batch, &mut stats)?;
        Ok(stats)
    }

    /// [`train_step`](Self::train_step) writing its counters into `stats`, whose buffers are
    /// reused: once warm (buffers sized by earlier steps of similar batches), a step, table
    /// rebuilds included, allocates nothing on the heap, except the small buffers of a
    /// refresh of shared negatives or query centers (every 8 steps, where configured).
    pub fn train_step_with(
        &mut self,
        data: &dyn Examples,
        batch: &[usize],
        stats: &mut StepStats,
    ) -> Result<()> {
        self.run_batch(data, batch, Mode::Train, 0, false)?;
        self.fill_batch_stats(stats);
        let scale = 1.0 / batch.len() as f32;
        let started = Instant::now();
        for l in 0..self.layers.len() {
            let (rows, macs) = self.update_layer(l, data, batch, scale);
            stats.rows_touched.push(rows);
            stats.multiply_adds += macs;
        }
        stats.times.update = started.elapsed();
        self.step += 1;
        let rebuild =
            self.step >= self.next_rebuild && self.layers.iter().any(SparseLayer::is_sampled);
        if rebuild || self.step.is_multiple_of(SHARED_REFRESH) {
            let started = Instant::now();
            self.refresh_mean_inputs(data, batch);
            stats.times.rebuild = started.elapsed();
        }
        if rebuild {
            let started = Instant::now();
            self.rebuild_tables()?;
            stats.times.rebuild += started.elapsed();
            stats.rebuilt = true;
            if let RebuildSchedule::Exponential { growth, .. } = self.config.rebuild {
                self.rebuild_period *= growth;
            }
            self.next_rebuild = self.step + (self.rebuild_period.round() as u64).max(1);
        }
        Ok(())
    }

    /// Refreshes what each LSH layer derives from the mean of its inputs over the batch
    /// just trained on: its shared negatives and its query center (see
    /// [`LshConfig`](crate::LshConfig)).
    fn refresh_mean_inputs(&mut self, data: &dyn Examples, batch: &[usize]) {
        for l in 0..self.layers.len() {
            if !self.layers[l].uses_mean_input() {
                continue;
            }
            let mut mean = vec![0.0f32; self.layers[l].in_dim()];
            let weight = 1.0 / batch.len() as f32;
            for (state, &sample) in self.states[..batch.len()].iter().zip(batch) {
                layer_input(&state.traces, l, data, sample)
                    .for_each_nonzero(|i, v| mean[i] += weight * v);
            }
            self.layers[l].refresh_mean_input(&mean);
        }
    }

    /// The gradients of the batch-mean loss, with the active sets the next
    /// [`train_step`](Self::train_step) on the same batch would use, without changing the
    /// network. For tests and the autodiff comparison; allocates its result.
    pub fn gradients(
        &mut self,
        data: &dyn Examples,
        batch: &[usize],
    ) -> Result<Vec<LayerGradients>> {
        self.run_batch(data, batch, Mode::Train, 0, false)?;
        let scale = 1.0 / batch.len() as f32;
        let mut result = Vec::with_capacity(self.layers.len());
        for l in 0..self.layers.len() {
            self.group_layer(l, data, batch);
            let layer = &self.layers[l];
            let row_len = layer.row_len();
            let mut weights = vec![0.0f32; self.touched.len() * row_len];
            for (k, g) in weights.chunks_exact_mut(row_len).enumerate() {
                let group = &self.contributions
                    [self.group_starts[k] as usize..self.group_starts[k + 1] as usize];
                accumulate_row(layer.layout, &self.states, group, l, data, batch, scale, g);
            }
            let mut compact = Vec::new();
            let states = &self.states[..batch.len()];
            bias_gradients(
                layer.layout,
                layer.out_dim,
                states,
                &self.contributions,
                &self.group_starts,
                l,
                scale,
                &mut compact,
            );
            let bias = match layer.layout {
                WeightLayout::InputMajor => compact,
                WeightLayout::NeuronMajor => {
                    let mut dense = vec![0.0f32; layer.out_dim];
                    for (&neuron, g) in self.touched.iter().zip(compact) {
                        dense[neuron as usize] = g;
                    }
                    dense
                }
            };
            let active = self.states[..batch.len()]
                .iter()
                .map(|s| {
                    let t = &s.traces[l];
                    (0..t.len()).map(|p| t.id(p)).collect()
                })
                .collect();
            result.push(LayerGradients {
                rows: self.touched.clone(),
                weights,
                bias,
                active,
            });
        }
        Ok(result)
    }

    /// Evaluates the samples `batch` of `data` in `mode` (see [`Mode`]; [`Mode::Train`] is
    /// read as [`Mode::EvalLsh`]): P@1, P@3, P@5.
    ///
    /// Samples go through in blocks of [`EVAL_BLOCK`], so memory does not grow with
    /// `batch`. When every output is scored ([`Mode::EvalExact`], [`Mode::EvalDense`]) and
    /// the output layer is neuron-major, each block reads the output weights once for all
    /// its samples and keeps only each sample's 5 best scores: at 670K outputs that is one
    /// pass over 340 MB per block instead of one per sample, and no per-sample score vector.
    /// The ranking is by logit (ties: lower neuron id first), which the softmax preserves.
    pub fn evaluate(
        &mut self,
        data: &dyn Examples,
        batch: &[usize],
        mode: Mode,
    ) -> Result<EvalStats> {
        if batch.is_empty() {
            return Ok(EvalStats::default());
        }
        let mode = if mode == Mode::Train {
            Mode::EvalLsh
        } else {
            mode
        };
        let last = self.layers.len() - 1;
        let scores_all = matches!(mode, Mode::EvalExact | Mode::EvalDense)
            && self.layers[last].layout == WeightLayout::NeuronMajor;
        let mut hits = [0u64; 3];
        let mut active = 0usize;
        let mut top1s = Vec::with_capacity(batch.len());
        for (b, block) in batch.chunks(EVAL_BLOCK).enumerate() {
            self.run_batch(data, block, mode, b * EVAL_BLOCK, scores_all)?;
            if scores_all {
                let tops = self.best_outputs(data, block);
                for (top, &sample) in tops.iter().zip(block) {
                    if top.0[0].1 != u32::MAX {
                        top1s.push(top.0[0].1);
                    }
                    let labels = data.labels(sample);
                    let hit = |n: usize| {
                        top.0[..n]
                            .iter()
                            .filter(|&&(_, id)| id != u32::MAX && labels.contains(&id))
                            .count() as u64
                    };
                    hits[0] += hit(1);
                    hits[1] += hit(3);
                    hits[2] += hit(5);
                }
                active += self.layers[last].out_dim * block.len();
            } else {
                for state in &self.states[..block.len()] {
                    if state.top1 != u32::MAX {
                        top1s.push(state.top1);
                    }
                    hits[0] += u64::from(state.correct);
                    hits[1] += u64::from(state.hits_at[1]);
                    hits[2] += u64::from(state.hits_at[2]);
                    active += state.traces[last].len();
                }
            }
        }
        let n = batch.len() as f64;
        let (top1_output, top1_share) = mode_share(&mut top1s, batch.len());
        let mut labels: Vec<u32> = batch
            .iter()
            .flat_map(|&s| data.labels(s))
            .copied()
            .collect();
        let (_, label_share) = mode_share(&mut labels, batch.len());
        Ok(EvalStats {
            samples: batch.len(),
            precision_at_1: hits[0] as f64 / n,
            precision_at_3: hits[1] as f64 / (3.0 * n),
            precision_at_5: hits[2] as f64 / (5.0 * n),
            active_outputs: active as f64 / n,
            top1_output,
            top1_share,
            label_share,
        })
    }

    /// For each LSH layer, how many of a sample's `top` highest-scoring neurons (by exact
    /// pre-activation, every neuron scored) the active set of a training step holds, over
    /// the samples `batch` of `data` (which need labels: the output layer's active set is
    /// built as in training, labels forced in). `None` for layers without LSH. Costs a
    /// forward pass and a full scoring of each LSH layer per sample; changes nothing in the
    /// network.
    pub fn retrieval_recall(
        &mut self,
        data: &dyn Examples,
        batch: &[usize],
        top: usize,
    ) -> Result<Vec<Option<Recall>>> {
        self.run_batch(data, batch, Mode::Train, 0, false)?;
        let states = &self.states[..batch.len()];
        let mut result = Vec::with_capacity(self.layers.len());
        for (l, layer) in self.layers.iter().enumerate() {
            if !layer.is_sampled() {
                result.push(None);
                continue;
            }
            let shares: Vec<(f64, f64)> = states
                .par_iter()
                .zip(batch)
                .map(|(state, &sample)| {
                    let input = layer_input(&state.traces, l, data, sample);
                    let trace = &state.traces[l];
                    let mut active: Vec<u32> = (0..trace.len()).map(|p| trace.id(p)).collect();
                    active.sort_unstable();
                    let best = layer.top_neurons(input, top);
                    let found = best.iter().filter(|id| active.binary_search(id).is_ok());
                    let want = best.len().max(1) as f64;
                    (
                        found.count() as f64 / want,
                        active.len() as f64 / layer.out_dim as f64,
                    )
                })
                .collect();
            let n = shares.len().max(1) as f64;
            result.push(Some(Recall {
                recall: shares.iter().map(|s| s.0).sum::<f64>() / n,
                random: shares.iter().map(|s| s.1).sum::<f64>() / n,
                samples: shares.len(),
            }));
        }
        Ok(result)
    }

    /// The 5 highest output logits of each sample of `block` (whose hidden layers
    /// [`Self::run_batch`] has run), every output neuron scored. Parallel over blocks of
    /// output rows, each read once for all samples while it sits in cache.
    fn best_outputs(&self, data: &dyn Examples, block: &[usize]) -> Vec<Best5> {
        const ROWS: usize = 256;
        let last = self.layers.len() - 1;
        let layer = &self.layers[last];
        let inputs: Vec<Vector<'_>> = block
            .iter()
            .enumerate()
            .map(|(p, &sample)| layer_input(&self.states[p].traces, last, data, sample))
            .collect();
        let k = kernels();
        let n = block.len();
        (0..layer.out_dim.div_ceil(ROWS))
            .into_par_iter()
            .fold(
                || vec![Best5::EMPTY; n],
                |mut best, chunk| {
                    let rows = chunk * ROWS..((chunk + 1) * ROWS).min(layer.out_dim);
                    for (best, x) in best.iter_mut().zip(&inputs) {
                        for j in rows.clone() {
                            best.offer(layer.neuron_logit(k, j, *x), j as u32);
                        }
                    }
                    best
                },
            )
            .reduce(
                || vec![Best5::EMPTY; n],
                |mut a, b| {
                    for (a, b) in a.iter_mut().zip(&b) {
                        for &(z, id) in &b.0 {
                            a.offer(z, id);
                        }
                    }
                    a
                },
            )
    }

    /// The output layer's active neurons and their probabilities for sample `sample` of
    /// `data`, in `mode` ([`Mode::Train`] forces the sample's labels into the active set).
    pub fn outputs(
        &mut self,
        data: &dyn Examples,
        sample: usize,
        mode: Mode,
    ) -> Result<Vec<(u32, f32)>> {
        self.run_batch(data, &[sample], mode, 0, false)?;
        let trace = &self.states[0].traces[self.layers.len() - 1];
        Ok((0..trace.len())
            .map(|p| (trace.id(p), trace.out[p]))
            .collect())
    }

    fn fill_batch_stats(&self, stats: &mut StepStats) {
        let n = self.batch_len;
        let states = &self.states[..n];
        stats.loss = states.iter().map(|s| s.loss).sum::<f64>() / n as f64;
        stats.samples = n;
        stats.multiply_adds = states.iter().map(|s| s.macs).sum();
        stats.rows_touched.clear();
        stats.active_per_sample.clear();
        stats.active_sources.clear();
        stats
            .active_sources
            .extend(self.layers.iter().enumerate().map(|(l, layer)| {
                layer.is_sampled().then(|| {
                    let mut sum = ActiveSources::default();
                    for s in states {
                        let c = s.traces[l].sources;
                        sum.forced += (c.forced - s.traces[l].shared) as f64;
                        sum.shared += s.traces[l].shared as f64;
                        sum.from_tables += c.from_tables as f64;
                        sum.random_fill += c.random_fill as f64;
                        sum.candidates += c.candidates as f64;
                    }
                    let n = n as f64;
                    ActiveSources {
                        forced: sum.forced / n,
                        shared: sum.shared / n,
                        from_tables: sum.from_tables / n,
                        random_fill: sum.random_fill / n,
                        candidates: sum.candidates / n,
                    }
                })
            }));
        stats
            .active_per_sample
            .extend((0..self.layers.len()).map(|l| {
                states.iter().map(|s| s.traces[l].len()).sum::<usize>() as f64 / n as f64
            }));
        stats.rebuilt = false;
        stats.times = PhaseTimes::default();
        for state in states {
            stats.times += state.times;
        }
    }

    /// Forward (and, when training, backward) passes of every sample, in parallel. Sample
    /// `batch[p]` draws its random numbers from the stream of position `first_position + p`;
    /// `hidden_only` stops before the output layer.
    fn run_batch(
        &mut self,
        data: &dyn Examples,
        batch: &[usize],
        mode: Mode,
        first_position: usize,
        hidden_only: bool,
    ) -> Result<()> {
        if batch.is_empty() {
            return Err(SlideError::EmptyBatch);
        }
        if let Some(&sample) = batch.iter().find(|&&s| s >= data.len()) {
            return Err(SlideError::SampleOutOfRange {
                sample,
                len: data.len(),
            });
        }
        let threads = rayon::current_num_threads();
        while self.scratch.len() < threads {
            let queries = self
                .layers
                .iter()
                .map(SparseLayer::new_query_buffers)
                .collect();
            self.scratch.push(Mutex::new(ThreadScratch {
                queries,
                gradient_row: Vec::with_capacity(
                    self.layers
                        .iter()
                        .map(SparseLayer::row_len)
                        .max()
                        .unwrap_or(0),
                ),
            }));
        }
        if self.states.len() < batch.len() {
            self.states.resize_with(batch.len(), Default::default);
        }
        self.batch_len = batch.len();
        let layers = &self.layers;
        let scratch = &self.scratch;
        let step_seed = mix64(self.config.seed ^ mix64(self.step ^ 0x7374_6570));
        let input_dim = self.config.input_dim;
        self.states[..batch.len()]
            .par_iter_mut()
            .zip(batch)
            .enumerate()
            .try_for_each(|(position, (state, &sample))| {
                let worker = rayon::current_thread_index().unwrap_or(0) % scratch.len();
                // Each worker locks only its own scratch, so the lock is never contended.
                let mut scratch = scratch[worker].lock().unwrap_or_else(|e| e.into_inner());
                let position = (first_position + position) as u64;
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(step_seed ^ position));
                run_sample(
                    layers,
                    input_dim,
                    data,
                    sample,
                    mode,
                    &mut rng,
                    &mut scratch,
                    state,
                    hidden_only,
                )
            })
    }

    /// Lists layer `l`'s contributions, sorted by (row, sample), and the row groups.
    fn group_layer(&mut self, l: usize, data: &dyn Examples, batch: &[usize]) {
        let layer = &self.layers[l];
        let layout = layer.layout;
        // Reserve for the most contributions the batch could produce, so that steps whose
        // active sets grow do not reallocate: every neuron a sample could activate for a
        // neuron-major layer, the samples' nonzero inputs for an input-major one.
        let last = self.layers.len() - 1;
        let most: usize = self.states[..batch.len()]
            .iter()
            .zip(batch)
            .map(|(state, &i)| match layout {
                WeightLayout::NeuronMajor => {
                    layer.max_active(if l == last { data.labels(i).len() } else { 0 })
                }
                WeightLayout::InputMajor => layer_input(&state.traces, l, data, i).nnz(),
            })
            .sum();
        for v in [&mut self.touched, &mut self.group_starts] {
            if v.capacity() < most + 1 {
                v.reserve(most + 1 - v.len());
            }
        }
        let contributions = &mut self.contributions;
        contributions.clear();
        if contributions.capacity() < most {
            contributions.reserve(most);
        }
        for (s, state) in self.states[..batch.len()].iter().enumerate() {
            let sample = s as u32;
            match layout {
                WeightLayout::NeuronMajor => {
                    let trace = &state.traces[l];
                    contributions.extend((0..trace.len()).map(|p| Contribution {
                        row: trace.id(p),
                        sample,
                        position: p as u32,
                    }));
                }
                WeightLayout::InputMajor => match layer_input(&state.traces, l, data, batch[s]) {
                    Vector::Dense(x) => {
                        contributions.extend(x.iter().enumerate().filter(|(_, v)| **v != 0.0).map(
                            |(i, _)| Contribution {
                                row: i as u32,
                                sample,
                                position: i as u32,
                            },
                        ));
                    }
                    Vector::Sparse { indices, values } => {
                        contributions.extend(
                            indices
                                .iter()
                                .zip(values)
                                .enumerate()
                                .filter(|(_, (_, v))| **v != 0.0)
                                .map(|(p, (&i, _))| Contribution {
                                    row: i,
                                    sample,
                                    position: p as u32,
                                }),
                        );
                    }
                },
            }
        }
        contributions.par_sort_unstable_by_key(|c| (c.row, c.sample));
        self.touched.clear();
        self.group_starts.clear();
        for (k, c) in contributions.iter().enumerate() {
            if self.touched.last() != Some(&c.row) {
                self.touched.push(c.row);
                self.group_starts.push(k as u32);
            }
        }
        self.group_starts.push(contributions.len() as u32);
    }

    /// Sparse Adam on layer `l`: one update of every touched row (in parallel over rows) and
    /// of every touched bias. Each row keeps its own update count `t`, used for Adam's bias
    /// correction, so a row skipped for many steps resumes with the correction of its own
    /// update history (its moments were not decayed meanwhile: "lazy" Adam, as TensorFlow's
    /// LazyAdam). Returns (rows updated, multiply-adds).
    fn update_layer(
        &mut self,
        l: usize,
        data: &dyn Examples,
        batch: &[usize],
        scale: f32,
    ) -> (usize, u64) {
        self.group_layer(l, data, batch);
        let adam = self.config.adam;
        let Network {
            layers,
            states,
            scratch,
            contributions,
            touched,
            group_starts,
            bias_gradient,
            adam_steps,
            ..
        } = self;
        let layer = &mut layers[l];
        let (layout, row_len, stride) = (layer.layout, layer.row_len(), layer.stride);
        let states = &states[..batch.len()];
        let (contributions, group_starts, scratch) = (&*contributions, &*group_starts, &*scratch);
        let adam_steps = &*adam_steps;
        let rows = DisjointRows::new(&mut layer.params, &mut layer.row_steps, stride);
        rows.par_for_each_init(
            touched,
            || {
                // Each worker locks only its own scratch, once per run of rows.
                let worker = rayon::current_thread_index().unwrap_or(0) % scratch.len();
                scratch[worker].lock().unwrap_or_else(|e| e.into_inner())
            },
            |scratch, k, row| {
                let g = &mut scratch.gradient_row;
                g.resize(row_len, 0.0);
                let group = &contributions[group_starts[k] as usize..group_starts[k + 1] as usize];
                accumulate_row(layout, states, group, l, data, batch, scale, g);
                *row.steps += 1;
                let t = *row.steps as usize;
                let s = match adam_steps.get(t - 1) {
                    Some(s) => *s,
                    None => AdamStep::new(adam.lr, adam.beta1, adam.beta2, adam.eps, *row.steps),
                };
                (kernels().adam)(
                    &mut row.w[..row_len],
                    g,
                    &mut row.m[..row_len],
                    &mut row.v[..row_len],
                    &s,
                );
            },
        );
        // Counted here rather than in the parallel loop, which would contend on one counter.
        let mut macs = (touched.len() * row_len) as u64;
        for c in contributions.iter() {
            macs += match layout {
                WeightLayout::NeuronMajor => {
                    let traces = &states[c.sample as usize].traces;
                    layer_input(traces, l, data, batch[c.sample as usize]).nnz() as u64
                }
                WeightLayout::InputMajor => row_len as u64,
            };
        }
        // Biases: one per neuron. Neuron-major rows are neurons; an input-major layer has all
        // its neurons active, so all its biases move.
        bias_gradients(
            layout,
            layer.out_dim,
            states,
            contributions,
            group_starts,
            l,
            scale,
            bias_gradient,
        );
        for (k, &g) in bias_gradient.iter().enumerate() {
            let neuron = match layout {
                WeightLayout::NeuronMajor => touched[k] as usize,
                WeightLayout::InputMajor => k,
            };
            layer.bias_steps[neuron] += 1;
            let s = AdamStep::new(
                adam.lr,
                adam.beta1,
                adam.beta2,
                adam.eps,
                layer.bias_steps[neuron],
            );
            (kernels().adam)(
                std::slice::from_mut(&mut layer.bias[neuron]),
                &[g],
                std::slice::from_mut(&mut layer.bias_m[neuron]),
                std::slice::from_mut(&mut layer.bias_v[neuron]),
                &s,
            );
        }
        (touched.len(), macs)
    }
}
