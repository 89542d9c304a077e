//! The sparse fully-connected layer: parameters in one contiguous allocation, the per-sample
//! forward and backward passes over active neurons, and the grouped gradient accumulation
//! that feeds the sparse Adam update.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use slide_lsh::{
    BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, LshParams,
    QueryScratch, SampleCounts, Sampling, TablesConfig, TablesStats, Vector,
};

use crate::error::{Result, config_error};
use crate::kernels::{Kernels, kernels, sparse_dot};

/// A layer's non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `max(0, z)`.
    Relu,
    /// `z`.
    Linear,
    /// Softmax over the active neurons; only for the output layer, which it pairs with the
    /// cross-entropy loss.
    Softmax,
}

/// How a layer stores its `out_dim x in_dim` weight matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightLayout {
    /// One row per neuron (`out_dim` rows of `in_dim`): a neuron's forward pass is one dot
    /// product and its update touches one row. Needed for LSH sampling, which hashes rows.
    NeuronMajor,
    /// One row per input (`in_dim` rows of `out_dim`): the forward pass is an axpy per
    /// nonzero input, and an update touches only the rows of the inputs that were nonzero.
    /// The right choice for a layer fed by very sparse, very wide input (the first layer on
    /// extreme-classification data: ~75 nonzeros of 135,909 features, 128 neurons), where
    /// neuron-major storage would read and update whole 135,909-wide rows. Every neuron of
    /// such a layer is active.
    InputMajor,
}

/// How a layer's weights are drawn at construction (biases start at zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Glorot (Xavier) uniform: `U(-a, a)`, `a = sqrt(6 / (in_dim + out_dim))`. Tiny for a
    /// very wide layer: 0.003 for a 670K-wide output on 128 inputs.
    Glorot,
    /// PyTorch's `nn.Linear` default: `U(-a, a)`, `a = 1 / sqrt(in_dim)`.
    FanIn,
    /// `U(-bound, bound)`.
    Uniform {
        /// Half-width of the interval.
        bound: f32,
    },
    /// `N(0, std^2)`; `std = 1` is PyTorch's `nn.EmbeddingBag` default, the usual first
    /// layer on sparse extreme-classification input.
    Normal {
        /// Standard deviation.
        std: f32,
    },
}

impl Init {
    fn validate(&self) -> std::result::Result<(), &'static str> {
        match *self {
            Init::Uniform { bound: x } | Init::Normal { std: x } if !(x.is_finite() && x > 0.0) => {
                Err("the init scale must be a positive number")
            }
            _ => Ok(()),
        }
    }

    fn draw(&self, in_dim: usize, out_dim: usize, rng: &mut Xoshiro256PlusPlus) -> f32 {
        match *self {
            Init::Glorot => {
                let a = (6.0 / (in_dim + out_dim) as f64).sqrt() as f32;
                rng.random_range(-a..a)
            }
            Init::FanIn => {
                let a = (1.0 / in_dim as f64).sqrt() as f32;
                rng.random_range(-a..a)
            }
            Init::Uniform { bound } => rng.random_range(-bound..bound),
            Init::Normal { std } => {
                // Box-Muller on (0, 1] x [0, 1).
                let u1 = 1.0 - rng.random::<f64>();
                let u2 = rng.random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (z * f64::from(std)) as f32
            }
        }
    }
}

/// LSH sampling settings of a layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LshConfig {
    /// Hash family.
    pub family: FamilyKind,
    /// `K`, `L`, `range_pow`.
    pub params: LshParams,
    /// Most neurons per bucket.
    pub bucket_capacity: usize,
    /// What a full bucket does.
    pub policy: BucketPolicy,
    /// How candidates become the active set (budget, minimum with random fill).
    pub sampling: Sampling,
    /// Output layer only: the sampled-softmax (log-Q) correction in training. Each
    /// non-label active output's logit is raised by `ln((n - f) / (a - f))` before the
    /// softmax (`n` outputs, `a` active, `f` of them forced labels), as if the `a - f`
    /// negatives had been drawn uniformly from the `n - f`: each stands for `(n - f) /
    /// (a - f)` outputs, and the loss estimates the full softmax's instead of the loss over
    /// the active set alone. Without it every output that is rarely sampled as a negative is
    /// rarely pushed down, and under exact scoring such outputs outrank the labels.
    ///
    /// When the sampling also draws `random_extra` uniformly random ids, the tables' picks
    /// count as certain, like the forced ids: they are scored as themselves, and only the
    /// random ids are shifted, by `ln((n - f - t) / r)` for `t` table picks and `r` random
    /// ids, so that the random ids estimate what the forced and retrieved ones leave out.
    pub log_q: bool,
    /// This many neurons that score highest for the mean input of the latest training
    /// batch (recomputed every 8 steps and at every table rebuild) join every sample's
    /// active set, in training and in LSH-mode evaluation.
    /// In an output layer fed by ReLU units every input shares a positive mean direction,
    /// and outputs aligned with it ("hubs") score high for every input; dense training
    /// pushes them down at every step, sampled training only when it happens to draw
    /// them. Sampled with certainty, they get no log-Q shift. 0 turns this off.
    pub shared_negatives: usize,
    /// Hash each input minus the mean input of a recent training batch (refreshed with the
    /// shared negatives) instead of the input itself. Rank-based families (WTA, DWTA) then
    /// see which coordinates are high for this input rather than which are high for every
    /// input (with ReLU inputs the same few coordinates win most bins for every sample).
    pub center_queries: bool,
}

/// One layer of a network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerConfig {
    /// Number of neurons.
    pub out_dim: usize,
    /// Non-linearity.
    pub activation: Activation,
    /// Weight storage.
    pub layout: WeightLayout,
    /// How the weights are drawn.
    pub init: Init,
    /// `None`: every neuron is active. `Some`: LSH picks the active neurons per sample.
    pub lsh: Option<LshConfig>,
}

/// Whether a pass trains or evaluates, and how the output layer picks neurons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// LSH sampling, with the sample's labels forced into the output layer's active set.
    Train,
    /// Every output neuron computed (exact scores); hidden LSH layers sample as in training,
    /// without forced labels.
    EvalExact,
    /// Every LSH layer samples, the output layer included, without forced labels: fast,
    /// approximate predictions.
    EvalLsh,
    /// Every neuron of every layer active, as if no layer were sampled.
    EvalDense,
}

pub(crate) struct LshState {
    pub(crate) family: LshFamily,
    pub(crate) tables: HashTables,
    pub(crate) sampling: Sampling,
    pub(crate) log_q: bool,
    pub(crate) shared_negatives: usize,
    /// The neurons that scored highest for the mean input at the last refresh.
    pub(crate) shared: Vec<u32>,
    pub(crate) center_queries: bool,
    /// The mean input subtracted from queries (empty until the first refresh).
    pub(crate) center: Vec<f32>,
    /// What the tables held after the last rebuild.
    pub(crate) stats: TablesStats,
}

/// A fully-connected layer `in_dim -> out_dim` whose weights live in one contiguous,
/// SIMD-padded allocation next to their Adam moments. See the crate documentation for an
/// example.
pub struct SparseLayer {
    pub(crate) in_dim: usize,
    pub(crate) out_dim: usize,
    pub(crate) activation: Activation,
    pub(crate) layout: WeightLayout,
    /// Floats per stored row: the row length rounded up to 16 (64 bytes).
    pub(crate) stride: usize,
    /// Row `r` of the weights, then its Adam moments: `[w | m | v]`, each `stride` floats,
    /// in one block of `3 * stride` at `r * 3 * stride`. An update reads and writes one
    /// contiguous 1.5 KB block for a 128-wide row instead of three scattered ones; the update
    /// of randomly chosen rows is bound by memory traffic, so this is what it costs.
    pub(crate) params: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) row_steps: Vec<u32>,
    pub(crate) bias_m: Vec<f32>,
    pub(crate) bias_v: Vec<f32>,
    pub(crate) bias_steps: Vec<u32>,
    pub(crate) lsh: Option<LshState>,
}

/// What one sample left in one layer: which neurons were active, their outputs, and (after
/// the backward pass) the loss gradient with respect to their pre-activations.
#[derive(Debug, Clone, Default)]
pub(crate) struct LayerTrace {
    /// Every neuron active (`active` unused, positions are neuron ids).
    pub(crate) dense: bool,
    pub(crate) active: Vec<u32>,
    pub(crate) out: Vec<f32>,
    pub(crate) delta: Vec<f32>,
    /// Where the active ids came from (all zero when every neuron is active); `forced`
    /// counts the labels and the shared negatives.
    pub(crate) sources: SampleCounts,
    /// How many of the forced ids were the layer's shared negatives.
    pub(crate) shared: usize,
    /// Added to the logits from position `shift_from` on before a softmax (the log-Q
    /// correction of a training pass; 0 otherwise).
    pub(crate) logit_shift: f32,
    /// First active position the log-Q shift applies to (see [`LshConfig::log_q`]).
    pub(crate) shift_from: usize,
}

impl LayerTrace {
    /// Makes room for `n` neurons, so the passes never reallocate.
    pub(crate) fn reserve(&mut self, n: usize) {
        for v in [&mut self.out, &mut self.delta] {
            if v.capacity() < n {
                v.reserve(n - v.len());
            }
        }
        if self.active.capacity() < n {
            self.active.reserve(n - self.active.len());
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.out.len()
    }

    pub(crate) fn id(&self, position: usize) -> u32 {
        if self.dense {
            position as u32
        } else {
            self.active[position]
        }
    }

    /// The layer's output as the next layer's input.
    pub(crate) fn as_input(&self) -> Vector<'_> {
        if self.dense {
            Vector::Dense(&self.out)
        } else {
            Vector::Sparse {
                indices: &self.active,
                values: &self.out,
            }
        }
    }
}

/// Per-thread scratch a layer's forward pass needs for LSH queries.
#[derive(Debug, Default)]
pub(crate) struct QueryBuffers {
    pub(crate) codes: CodeBuffer,
    pub(crate) query: QueryScratch,
    /// The forced ids of one query: labels, then the layer's shared negatives.
    pub(crate) forced: Vec<u32>,
    /// A centered query.
    pub(crate) centered: Vec<f32>,
}

fn padded(len: usize) -> usize {
    len.div_ceil(16) * 16
}

impl SparseLayer {
    /// A layer with weights drawn from `seed` as `config.init` says, zero biases and zero
    /// Adam state. LSH tables are built from the initial
    /// weights.
    pub fn new(in_dim: usize, config: &LayerConfig, seed: u64) -> Result<Self> {
        let what = || format!("layer {in_dim} -> {}", config.out_dim);
        if in_dim == 0 || config.out_dim == 0 {
            return Err(config_error(what(), "dimensions must be at least 1"));
        }
        if in_dim > u32::MAX as usize || config.out_dim > u32::MAX as usize {
            return Err(config_error(what(), "dimensions must be below 2^32"));
        }
        if config.layout == WeightLayout::InputMajor && config.lsh.is_some() {
            return Err(config_error(
                what(),
                "LSH sampling hashes neuron rows and needs the neuron-major layout",
            ));
        }
        let (rows, row_len) = match config.layout {
            WeightLayout::NeuronMajor => (config.out_dim, in_dim),
            WeightLayout::InputMajor => (in_dim, config.out_dim),
        };
        let stride = padded(row_len);
        let total = rows
            .checked_mul(3 * stride)
            .ok_or_else(|| config_error(what(), "weight matrix too large"))?;
        config
            .init
            .validate()
            .map_err(|e| config_error(what(), e))?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut params = vec![0.0f32; total];
        for row in params.chunks_exact_mut(3 * stride) {
            for w in &mut row[..row_len] {
                *w = config.init.draw(in_dim, config.out_dim, &mut rng);
            }
        }
        let mut layer = SparseLayer {
            in_dim,
            out_dim: config.out_dim,
            activation: config.activation,
            layout: config.layout,
            stride,
            params,
            bias: vec![0.0; config.out_dim],
            row_steps: vec![0; rows],
            bias_m: vec![0.0; config.out_dim],
            bias_v: vec![0.0; config.out_dim],
            bias_steps: vec![0; config.out_dim],
            lsh: None,
        };
        if let Some(lsh) = &config.lsh {
            lsh.sampling.validate(lsh.params.l)?;
            let family = LshFamily::new(lsh.family, in_dim, lsh.params, seed ^ 0x6c73_6800)?;
            let tables = HashTables::new(TablesConfig::for_family(
                lsh.params,
                config.out_dim,
                lsh.bucket_capacity,
                lsh.policy,
                seed ^ 0x7462_6c00,
            ))?;
            let stats = tables.stats();
            layer.lsh = Some(LshState {
                family,
                tables,
                sampling: lsh.sampling,
                log_q: lsh.log_q,
                shared_negatives: lsh.shared_negatives,
                shared: Vec::with_capacity(lsh.shared_negatives),
                center_queries: lsh.center_queries,
                center: Vec::new(),
                stats,
            });
            layer.rebuild_tables()?;
        }
        Ok(layer)
    }

    /// Input dimension.
    pub fn in_dim(&self) -> usize {
        self.in_dim
    }

    /// Number of neurons.
    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// The non-linearity.
    pub fn activation(&self) -> Activation {
        self.activation
    }

    /// The weight layout.
    pub fn layout(&self) -> WeightLayout {
        self.layout
    }

    /// Whether LSH picks this layer's active neurons.
    pub fn is_sampled(&self) -> bool {
        self.lsh.is_some()
    }

    /// Length of a stored row: `in_dim` (neuron-major) or `out_dim` (input-major).
    pub(crate) fn row_len(&self) -> usize {
        match self.layout {
            WeightLayout::NeuronMajor => self.in_dim,
            WeightLayout::InputMajor => self.out_dim,
        }
    }

    fn index(&self, neuron: usize, input: usize) -> usize {
        assert!(
            neuron < self.out_dim && input < self.in_dim,
            "weight index out of range"
        );
        match self.layout {
            WeightLayout::NeuronMajor => neuron * 3 * self.stride + input,
            WeightLayout::InputMajor => input * 3 * self.stride + neuron,
        }
    }

    /// Stored row `r`'s weights (`stride` floats, zero past the row length).
    #[inline]
    pub(crate) fn row(&self, r: usize) -> &[f32] {
        &self.params[r * 3 * self.stride..][..self.stride]
    }

    /// The weight from `input` to `neuron`. Panics if either is out of range.
    pub fn weight(&self, neuron: usize, input: usize) -> f32 {
        self.params[self.index(neuron, input)]
    }

    /// Sets the weight from `input` to `neuron` (the LSH tables are not rebuilt).
    pub fn set_weight(&mut self, neuron: usize, input: usize, value: f32) {
        let i = self.index(neuron, input);
        self.params[i] = value;
    }

    /// The bias of `neuron`.
    pub fn bias(&self, neuron: usize) -> f32 {
        self.bias[neuron]
    }

    /// Sets the bias of `neuron`.
    pub fn set_bias(&mut self, neuron: usize, value: f32) {
        self.bias[neuron] = value;
    }

    /// Adam's `(m, v)` for the weight from `input` to `neuron`, and the update count of the
    /// row holding it.
    pub fn adam_state(&self, neuron: usize, input: usize) -> (f32, f32, u32) {
        let i = self.index(neuron, input);
        let row = i / (3 * self.stride);
        (
            self.params[i + self.stride],
            self.params[i + 2 * self.stride],
            self.row_steps[row],
        )
    }

    /// Heap bytes held by parameters, optimizer state and hash tables.
    pub fn memory_bytes(&self) -> usize {
        let floats = self.params.len() + self.bias.len() * 3;
        let tables = self
            .lsh
            .as_ref()
            .map_or(0, |l| l.tables.stats().memory_bytes);
        floats * 4 + (self.row_steps.len() + self.bias_steps.len()) * 4 + tables
    }

    /// Re-hashes every neuron's weight row into the layer's tables (no-op for dense layers).
    pub fn rebuild_tables(&mut self) -> Result<()> {
        if let Some(lsh) = &mut self.lsh {
            lsh.tables
                .rebuild_dense(&lsh.family, &self.params, 3 * self.stride)?;
            lsh.stats = lsh.tables.stats();
        }
        Ok(())
    }

    /// What the LSH tables held after the last rebuild (bucket occupancy, ids dropped by
    /// full buckets); `None` for a layer without LSH.
    pub fn table_stats(&self) -> Option<TablesStats> {
        self.lsh.as_ref().map(|l| l.stats)
    }

    /// The most neurons one sample can activate when `forced` labels are forced in.
    pub(crate) fn max_active(&self, forced: usize) -> usize {
        match &self.lsh {
            Some(lsh) => lsh
                .tables
                .max_sampled(&lsh.sampling, forced + lsh.shared_negatives),
            None => self.out_dim,
        }
    }

    /// Per-thread query scratch, sized up front so no query allocates.
    pub(crate) fn new_query_buffers(&self) -> Option<QueryBuffers> {
        self.lsh.as_ref().map(|lsh| QueryBuffers {
            codes: CodeBuffer::for_family(&lsh.family),
            query: QueryScratch::for_tables(&lsh.tables),
            forced: Vec::with_capacity(1024 + lsh.shared_negatives),
            centered: Vec::with_capacity(if lsh.center_queries { self.in_dim } else { 0 }),
        })
    }

    /// Picks one sample's active neurons into `trace` (LSH layers in [`Mode::Train`] and
    /// [`Mode::EvalLsh`]; every neuron otherwise). `input` has been validated.
    pub(crate) fn select_active(
        &self,
        input: Vector<'_>,
        forced: &[u32],
        mode: Mode,
        rng: &mut Xoshiro256PlusPlus,
        buffers: Option<&mut QueryBuffers>,
        trace: &mut LayerTrace,
    ) -> Result<()> {
        trace.dense = true;
        trace.sources = SampleCounts::default();
        trace.shared = 0;
        trace.logit_shift = 0.0;
        trace.shift_from = 0;
        if let (Some(lsh), Mode::Train | Mode::EvalLsh, Some(b)) = (&self.lsh, mode, buffers) {
            let query = if lsh.center.is_empty() {
                input
            } else {
                b.centered.clear();
                b.centered.extend(lsh.center.iter().map(|c| -c));
                input.for_each_nonzero(|i, v| b.centered[i] += v);
                Vector::Dense(&b.centered)
            };
            let codes = lsh.family.hash(query, &mut b.codes)?;
            b.forced.clear();
            if mode == Mode::Train {
                b.forced.extend_from_slice(forced);
            }
            // The shared negatives are the outputs that score highest for the average
            // input: candidates for every sample, in training and in LSH-mode evaluation.
            b.forced.extend_from_slice(&lsh.shared);
            trace.sources = lsh.tables.sample(
                codes,
                &lsh.sampling,
                &b.forced,
                rng,
                &mut b.query,
                &mut trace.active,
            )?;
            let labels = if mode == Mode::Train { forced.len() } else { 0 };
            trace.shared = trace.sources.forced.saturating_sub(labels);
            if mode == Mode::Train && lsh.log_q {
                (trace.shift_from, trace.logit_shift) =
                    log_q_shift(self.out_dim, &trace.sources, lsh.sampling.random_extra > 0);
            }
            trace.dense = false;
        }
        Ok(())
    }

    /// Forward pass of one sample over the active neurons [`select_active`] chose: their
    /// activations into `trace.out`. Returns the multiply-adds spent.
    pub(crate) fn forward(&self, input: Vector<'_>, trace: &mut LayerTrace) -> u64 {
        let k = kernels();
        let input_nnz = input.nnz();
        let sampled = !trace.dense;
        trace.dense = !sampled;
        let active = if sampled {
            trace.active.len()
        } else {
            self.out_dim
        };
        trace.out.clear();
        match self.layout {
            WeightLayout::NeuronMajor => {
                for position in 0..active {
                    let j = if sampled {
                        trace.active[position] as usize
                    } else {
                        position
                    };
                    trace.out.push(self.neuron_logit(k, j, input));
                }
            }
            WeightLayout::InputMajor => {
                trace.out.extend_from_slice(&self.bias);
                input.for_each_nonzero(|i, v| {
                    (k.axpy)(v, &self.row(i)[..self.out_dim], &mut trace.out);
                });
            }
        }
        match self.activation {
            Activation::Relu => trace.out.iter_mut().for_each(|z| *z = z.max(0.0)),
            Activation::Linear => {}
            Activation::Softmax => {
                if sampled && trace.logit_shift != 0.0 {
                    let shift = trace.logit_shift;
                    trace.out[trace.shift_from..]
                        .iter_mut()
                        .for_each(|z| *z += shift);
                }
                softmax_in_place(&mut trace.out)
            }
        }
        (active * input_nnz) as u64
    }

    /// Refreshes what the layer derives from the mean input of a recent training batch:
    /// the shared negatives (see [`LshConfig::shared_negatives`]), the neurons with the
    /// highest pre-activation for `mean_input`, and the query center (see
    /// [`LshConfig::center_queries`]).
    pub(crate) fn refresh_mean_input(&mut self, mean_input: &[f32]) {
        let Some(count) = self.lsh.as_ref().map(|l| l.shared_negatives) else {
            return;
        };
        let best = if count > 0 {
            self.top_neurons(Vector::Dense(mean_input), count)
        } else {
            Vec::new()
        };
        if let Some(lsh) = &mut self.lsh {
            lsh.shared.clear();
            lsh.shared.extend_from_slice(&best);
            if lsh.center_queries {
                lsh.center.clear();
                lsh.center.extend_from_slice(mean_input);
            }
        }
    }

    /// Whether the layer uses the mean input (shared negatives or centered queries).
    pub(crate) fn uses_mean_input(&self) -> bool {
        self.lsh
            .as_ref()
            .is_some_and(|l| l.shared_negatives > 0 || l.center_queries)
    }

    /// Neuron `j`'s pre-activation for `input`: its bias plus its row's dot product with
    /// the input. Neuron-major layers only (LSH layers always are); `k` is the kernel table,
    /// passed in so hot loops look it up once.
    #[inline]
    pub(crate) fn neuron_logit(&self, k: &Kernels, j: usize, input: Vector<'_>) -> f32 {
        debug_assert_eq!(self.layout, WeightLayout::NeuronMajor);
        let row = &self.row(j)[..self.in_dim];
        self.bias[j]
            + match input {
                Vector::Dense(x) => (k.dot)(row, x),
                Vector::Sparse { indices, values } => sparse_dot(row, indices, values),
            }
    }

    /// The ids of the `top` neurons with the highest pre-activation for `input` (every
    /// neuron scored, in parallel over blocks of neurons; ties: the lower id, see
    /// [`ranks_before`]), best first. Neuron-major layers only.
    pub(crate) fn top_neurons(&self, input: Vector<'_>, top: usize) -> Vec<u32> {
        const BLOCK: usize = 4096;
        if top == 0 {
            return Vec::new();
        }
        let k = kernels();
        let offer = |best: &mut Vec<(f32, u32)>, z: f32, id: u32| {
            if best.len() < top || ranks_before((z, id), best[best.len() - 1]) {
                let at = best.partition_point(|&b| ranks_before(b, (z, id)));
                best.insert(at, (z, id));
                best.truncate(top);
            }
        };
        let best = (0..self.out_dim.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let mut best = Vec::with_capacity(top + 1);
                for j in b * BLOCK..((b + 1) * BLOCK).min(self.out_dim) {
                    offer(&mut best, self.neuron_logit(k, j, input), j as u32);
                }
                best
            })
            .reduce(Vec::new, |mut a, b| {
                for (z, id) in b {
                    offer(&mut a, z, id);
                }
                a
            });
        best.into_iter().map(|(_, id)| id).collect()
    }

    /// Back-propagates `trace.delta` (the loss gradient w.r.t. this layer's
    /// pre-activations) to the previous layer: writes `prev.delta`, the gradient w.r.t. the
    /// previous layer's pre-activations, and returns the multiply-adds spent.
    pub(crate) fn backward_to(
        &self,
        trace: &LayerTrace,
        prev: &mut LayerTrace,
        prev_activation: Activation,
    ) -> u64 {
        let k = kernels();
        let n_prev = prev.len();
        prev.delta.clear();
        prev.delta.resize(n_prev, 0.0);
        let macs = match self.layout {
            WeightLayout::NeuronMajor => {
                for (position, &d) in trace.delta.iter().enumerate() {
                    let row = self.row(trace.id(position) as usize);
                    if prev.dense {
                        (k.axpy)(d, &row[..self.in_dim], &mut prev.delta);
                    } else {
                        for (g, &i) in prev.delta.iter_mut().zip(&prev.active) {
                            *g += d * row[i as usize];
                        }
                    }
                }
                trace.delta.len() * n_prev
            }
            WeightLayout::InputMajor => {
                for (p, g) in prev.delta.iter_mut().enumerate() {
                    let input = if prev.dense {
                        p
                    } else {
                        prev.active[p] as usize
                    };
                    let row = &self.row(input)[..self.out_dim];
                    *g = (k.dot)(row, &trace.delta);
                }
                self.out_dim * n_prev
            }
        };
        if prev_activation == Activation::Relu {
            for (g, &a) in prev.delta.iter_mut().zip(&prev.out) {
                if a <= 0.0 {
                    *g = 0.0;
                }
            }
        }
        macs as u64
    }
}

/// Whether the scored neuron `a = (logit, id)` ranks before `b`: the higher logit, and on
/// a tie the lower id, so a ranking does not depend on the order neurons are offered in.
#[inline]
pub(crate) fn ranks_before(a: (f32, u32), b: (f32, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// The log-Q shift of a training pass (see [`LshConfig::log_q`]): the first active
/// position it applies to and the amount. For `n` outputs, `f` forced ids, `t` picked by the
/// tables and `r` uniformly random ones: with `complement` (the sampling drew random ids on
/// purpose), the forced ids and the tables' picks are scored as themselves and each random
/// id stands for `(n - f - t) / r` of the outputs left out, so the shift is
/// `ln((n - f - t) / r)` from position `f + t`; otherwise every drawn id is taken for a
/// uniform draw, `ln((n - f) / (t + r))` from position `f`. No shift when no id was forced
/// or none was drawn.
fn log_q_shift(out_dim: usize, sources: &SampleCounts, complement: bool) -> (usize, f32) {
    let (fixed, drawn) = if complement {
        (sources.forced + sources.from_tables, sources.random_fill)
    } else {
        (sources.forced, sources.from_tables + sources.random_fill)
    };
    if sources.forced == 0 || drawn == 0 {
        return (fixed, 0.0);
    }
    (fixed, ((out_dim - fixed) as f64 / drawn as f64).ln() as f32)
}

/// Numerically stable softmax.
pub(crate) fn softmax_in_place(z: &mut [f32]) {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in z.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    z.iter_mut().for_each(|x| *x *= inv);
}

/// A layer's trainable state in plain arrays (for checkpoints): rows of the stored layout
/// without padding.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerState {
    /// Stored rows: neurons (neuron-major) or inputs (input-major).
    pub rows: usize,
    /// Floats per row: `in_dim` (neuron-major) or `out_dim` (input-major).
    pub row_len: usize,
    /// `rows * row_len` weights.
    pub weights: Vec<f32>,
    /// Adam's first moments of the weights.
    pub m: Vec<f32>,
    /// Adam's second moments of the weights.
    pub v: Vec<f32>,
    /// Updates each row has received.
    pub row_steps: Vec<u32>,
    /// One bias per neuron.
    pub bias: Vec<f32>,
    /// Adam's first moments of the biases.
    pub bias_m: Vec<f32>,
    /// Adam's second moments of the biases.
    pub bias_v: Vec<f32>,
    /// Updates each bias has received.
    pub bias_steps: Vec<u32>,
    /// The LSH tables' contents, for sampled layers.
    pub tables: Option<slide_lsh::TablesState>,
    /// The shared negatives in force (see [`LshConfig::shared_negatives`]; empty if none).
    pub shared: Vec<u32>,
    /// The query center in force (see [`LshConfig::center_queries`]; empty if none).
    pub center: Vec<f32>,
}

impl SparseLayer {
    fn rows(&self) -> usize {
        self.row_steps.len()
    }

    /// A copy of the layer's trainable state.
    pub fn export_state(&self) -> LayerState {
        let (rows, row_len, stride) = (self.rows(), self.row_len(), self.stride);
        let part = |offset: usize| -> Vec<f32> {
            self.params
                .chunks_exact(3 * stride)
                .flat_map(|block| &block[offset..offset + row_len])
                .copied()
                .collect()
        };
        LayerState {
            rows,
            row_len,
            weights: part(0),
            m: part(stride),
            v: part(2 * stride),
            row_steps: self.row_steps.clone(),
            bias: self.bias.clone(),
            bias_m: self.bias_m.clone(),
            bias_v: self.bias_v.clone(),
            bias_steps: self.bias_steps.clone(),
            tables: self.lsh.as_ref().map(|l| l.tables.export_state()),
            shared: self.lsh.as_ref().map_or(Vec::new(), |l| l.shared.clone()),
            center: self.lsh.as_ref().map_or(Vec::new(), |l| l.center.clone()),
        }
    }

    /// Replaces the layer's trainable state with `state`, after checking every size.
    pub fn import_state(&mut self, state: &LayerState) -> Result<()> {
        let (rows, row_len, stride) = (self.rows(), self.row_len(), self.stride);
        let what = || format!("layer {} -> {} state", self.in_dim, self.out_dim);
        if state.rows != rows || state.row_len != row_len {
            return Err(config_error(
                what(),
                format!(
                    "has {} rows of {}, the layer {rows} of {row_len}",
                    state.rows, state.row_len
                ),
            ));
        }
        let n = rows * row_len;
        if [state.weights.len(), state.m.len(), state.v.len()] != [n; 3]
            || state.row_steps.len() != rows
            || [
                state.bias.len(),
                state.bias_m.len(),
                state.bias_v.len(),
                state.bias_steps.len(),
            ] != [self.out_dim; 4]
        {
            return Err(config_error(what(), "array sizes do not match the layer"));
        }
        if state.shared.iter().any(|&id| id as usize >= self.out_dim)
            || !(state.center.is_empty() || state.center.len() == self.in_dim)
        {
            return Err(config_error(
                what(),
                "shared negatives or query center do not fit the layer",
            ));
        }
        match (&mut self.lsh, &state.tables) {
            (Some(lsh), Some(tables)) => {
                lsh.tables.import_state(tables)?;
                lsh.stats = lsh.tables.stats();
                lsh.shared.clone_from(&state.shared);
                lsh.center.clone_from(&state.center);
            }
            (None, None) => {}
            _ => {
                return Err(config_error(
                    what(),
                    "LSH sampling differs between state and layer",
                ));
            }
        }
        for (r, block) in self.params.chunks_exact_mut(3 * stride).enumerate() {
            let row = r * row_len..(r + 1) * row_len;
            block[..row_len].copy_from_slice(&state.weights[row.clone()]);
            block[stride..stride + row_len].copy_from_slice(&state.m[row.clone()]);
            block[2 * stride..2 * stride + row_len].copy_from_slice(&state.v[row]);
        }
        self.row_steps.copy_from_slice(&state.row_steps);
        self.bias.copy_from_slice(&state.bias);
        self.bias_m.copy_from_slice(&state.bias_m);
        self.bias_v.copy_from_slice(&state.bias_v);
        self.bias_steps.copy_from_slice(&state.bias_steps);
        Ok(())
    }
}
