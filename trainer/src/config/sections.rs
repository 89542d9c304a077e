//! The TOML sections of a config file, as read (every key known, defaults filled in).

use std::path::PathBuf;

use serde::Deserialize;
use slide::lsh::BucketPolicy;
use slide::{Activation, BiasCorrection, EvalPrecision, Precision, WeightLayout};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[checkpoint]`.
pub struct CheckpointConfig {
    /// Folder for checkpoints, relative to the output folder.
    #[serde(default = "default_checkpoint_dir")]
    pub dir: PathBuf,
    /// Write one every this many steps (0: only at the end of the run).
    #[serde(default)]
    pub every: u64,
    /// Checkpoints kept; older ones are deleted.
    #[serde(default = "default_keep_last")]
    pub keep_last: usize,
    /// Write a checkpoint when the run ends (default). `false` skips it, for experiment runs
    /// whose model is not wanted (1.4 GB each at the Amazon-670K shape); the periodic ones
    /// and the one an interrupt writes are kept.
    #[serde(default = "default_at_end")]
    pub at_end: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            dir: default_checkpoint_dir(),
            every: 0,
            keep_last: default_keep_last(),
            at_end: true,
        }
    }
}

fn default_checkpoint_dir() -> PathBuf {
    PathBuf::from("checkpoints")
}
fn default_at_end() -> bool {
    true
}
fn default_keep_last() -> usize {
    3
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
/// Data file formats.
pub enum DataFormat {
    /// Extreme Classification Repository text files (`N D L` header).
    Xmc,
    /// LIBSVM multi-label text files; `features` and `labels` give the sizes.
    Libsvm,
    /// MNIST-style IDX files in `dir` (train-images-idx3-ubyte[.gz], ...).
    Idx,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[data]`.
pub struct DataConfig {
    /// Format of the train and test files.
    pub format: DataFormat,
    /// Training file (xmc, libsvm).
    pub train: Option<PathBuf>,
    /// Test file (xmc, libsvm).
    pub test: Option<PathBuf>,
    /// Folder of the four IDX files (idx).
    pub dir: Option<PathBuf>,
    /// Input dimension: required for libsvm; checked against the files otherwise.
    pub features: Option<usize>,
    /// Number of labels or classes: required for libsvm; checked otherwise.
    pub labels: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[network]`.
pub struct NetworkSection {
    /// The layers, input side first; the last one's size is the label count.
    pub layers: Vec<LayerSection>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[[network.layers]]`.
pub struct LayerSection {
    /// Number of neurons.
    pub size: usize,
    /// Non-linearity.
    pub activation: Activation,
    #[serde(default)]
    /// Weight storage.
    pub layout: WeightLayout,
    /// How the weights are drawn: `"glorot"` (default), `"fan-in"` (PyTorch's Linear),
    /// `{ normal = { std = 1.0 } }` or `{ uniform = { bound = 0.003 } }` (the core's type).
    #[serde(default)]
    pub init: slide::Init,
    /// LSH sampling; absent: every neuron is active.
    pub lsh: Option<LshSection>,
    /// How the weights' Adam moments are stored: `f32` (default) or `bf16` (stochastic
    /// rounding; a third less memory traffic in the update of a wide layer).
    #[serde(default)]
    pub moments: Precision,
    /// How the weights are stored: `f32` (default) or `bf16` (stochastic rounding; needs
    /// `moments = "bf16"`; a quarter less memory traffic in the update and half in the
    /// forward pass of a wide sampled layer).
    #[serde(default)]
    pub weights: Precision,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
/// How active neurons are chosen from the buckets.
pub enum StrategyName {
    /// The union of the L buckets from a random first table, up to the budget.
    Vanilla,
    /// The `budget` neurons found in the most buckets.
    TopK,
    /// Neurons found in at least `min_hits` buckets.
    Threshold,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[network.layers.lsh]`.
pub struct LshSection {
    /// Hash family with its settings (the lsh crate's type: `{ dwta = { bin_size = 8 } }`,
    /// `{ simhash = { sparse = { density = 0.33 } } }`, ...).
    pub family: slide::lsh::FamilyKind,
    /// Hash functions concatenated per table (K). With `l` and `range_pow` left out too,
    /// all three and the bucket capacity are tuned from `budget` and the layer's width.
    pub k: Option<usize>,
    /// Number of tables (L).
    pub l: Option<usize>,
    /// log2 of the buckets per table.
    pub range_pow: Option<u32>,
    /// Entries a bucket holds (default 128, or tuned with the rest).
    pub bucket_capacity: Option<usize>,
    #[serde(default)]
    /// What a full bucket does.
    pub policy: BucketPolicy,
    /// How active neurons are chosen.
    pub strategy: StrategyName,
    /// Most neurons the strategy selects (top-k's k).
    pub budget: Option<usize>,
    /// Threshold strategy: tables a neuron must be found in.
    pub min_hits: Option<u16>,
    /// Random fill up to this many active neurons.
    #[serde(default)]
    pub min_active: usize,
    /// Output layer: the sampled-softmax (log-Q) correction in training.
    #[serde(default)]
    pub log_q: bool,
    /// Neurons scoring highest for the batch's mean input, active for every sample.
    #[serde(default)]
    pub shared_negatives: usize,
    /// With `log_q`, the fraction (0 to 1) of the log-Q shift the shared negatives get.
    #[serde(default)]
    pub shared_shift: f32,
    /// Keep this many outputs that score highest for the batch's mean input and give each
    /// sample the `shared_negatives` of them that score highest for its own input (see
    /// `slide::LshConfig::shared_pool`). 0: the same shared negatives for every sample.
    #[serde(default)]
    pub shared_pool: usize,
    /// Training steps between two scorings of every output for the batch's mean input,
    /// which choose the shared negatives or their pool (see
    /// `slide::LshConfig::shared_refresh`).
    #[serde(default = "default_shared_refresh")]
    pub shared_refresh: u64,
    /// Hash each input minus the mean input of a recent batch.
    #[serde(default)]
    pub center_queries: bool,
    /// This many uniformly random outputs join each training sample's active set after the
    /// tables' picks (the core's `Sampling::random_extra`). With `log_q`, the tables' picks
    /// are then scored as themselves and the random ids stand for the rest of the outputs
    /// (see `slide::LshConfig::log_q`).
    #[serde(default)]
    pub random_extra: usize,
    /// Where the picks come from: the tables (default) or, as ablations, `uniform` (the
    /// budget's worth of uniformly random ids; no tables are built or queried) or `exact`
    /// (slow: each training sample's highest-scoring outputs, every output scored; see
    /// `slide::Picks`).
    #[serde(default)]
    pub picks: slide::Picks,
    /// A warm-up of uniformly random outputs (`[network.layers.lsh.warmup]`, the core's
    /// `Warmup`: `random` and `length = { steps = N }` or `{ epochs = E }`; epochs become
    /// steps once the data is loaded, see [`Config::network`](super::Config::network)).
    pub warmup: Option<slide::Warmup>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
/// Which neurons an evaluation computes (`train.eval_mode`, `slide-train eval --mode`).
pub enum EvalMode {
    /// Every output scored; hidden LSH layers sample as in training.
    #[default]
    Exact,
    /// Every LSH layer samples, the output layer too.
    Lsh,
    /// Every neuron of every layer.
    Dense,
}

impl EvalMode {
    /// The core's pass mode.
    pub fn mode(self) -> slide::Mode {
        match self {
            EvalMode::Exact => slide::Mode::EvalExact,
            EvalMode::Lsh => slide::Mode::EvalLsh,
            EvalMode::Dense => slide::Mode::EvalDense,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[train]`.
pub struct TrainConfig {
    /// Passes over the training set (default 1).
    #[serde(default = "default_epochs")]
    pub epochs: usize,
    /// Samples per step (default 128).
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Adam's learning rate, the schedule's peak (default 0.001, PyTorch's).
    #[serde(default = "default_lr")]
    pub lr: f32,
    #[serde(default = "default_beta1")]
    /// Adam's first-moment decay.
    pub beta1: f32,
    #[serde(default = "default_beta2")]
    /// Adam's second-moment decay.
    pub beta2: f32,
    #[serde(default = "default_eps")]
    /// Adam's denominator guard.
    pub eps: f32,
    #[serde(default)]
    /// Which update count Adam's bias correction uses: `"global"` (the optimizer's steps,
    /// as PyTorch) or `"per-row"` (each row's own updates).
    pub bias_correction: BiasCorrection,
    #[serde(default)]
    /// Seed of the weights, hash functions, shuffles and sampling.
    pub seed: u64,
    /// Steps before the first table rebuild.
    #[serde(default = "default_rebuild_first")]
    pub rebuild_every: u64,
    /// Growth of the rebuild period (1 = fixed period).
    #[serde(default = "default_rebuild_growth")]
    pub rebuild_growth: f64,
    /// Evaluate every this many steps (0: only after each epoch).
    #[serde(default)]
    pub eval_every: u64,
    /// Test samples per evaluation (0: the whole test set).
    #[serde(default)]
    pub eval_samples: usize,
    #[serde(default)]
    /// Which neurons evaluations compute.
    pub eval_mode: EvalMode,
    /// How an exact evaluation scores every output: `f32` (default) or `bf16` (AVX512-BF16
    /// products, about twice as fast at the Amazon-670K shape; see docs/performance.md,
    /// "BF16 scoring for exact evaluation").
    #[serde(default)]
    pub eval_precision: EvalPrecision,
    /// LSH-mode evaluation and prediction score, beside each sample's table picks, the
    /// outputs that score highest for the mean input of each block of 1,024 samples, this many (0,
    /// the default: the tables' picks only; see [`slide::Network::set_eval_pool`]).
    #[serde(default)]
    pub eval_pool: usize,
    /// Probe the retrieval recall of the LSH layers every this many steps (0: only at
    /// evaluations).
    #[serde(default)]
    pub recall_every: u64,
    /// Stop after this many steps (0: no limit).
    #[serde(default)]
    pub max_steps: u64,
    /// How the learning rate decays over the run: constant (default), cosine or
    /// exponential ([`slide::Decay`]; [`TrainConfig::schedule`] gives the whole schedule).
    #[serde(default)]
    pub lr_schedule: slide::Decay,
    /// The learning rate the cosine schedule ends at.
    #[serde(default)]
    pub lr_min: f32,
    /// The exponential schedule's factor per epoch.
    #[serde(default = "default_lr_gamma")]
    pub lr_gamma: f32,
    /// Steps over which the learning rate rises linearly from 0 to `lr` first (the
    /// sampled layers' `[network.layers.lsh.warmup]` is another warm-up, of random outputs).
    #[serde(default)]
    pub warmup_steps: u64,
    /// Refuse to start a run whose estimated peak memory (model, data, workspace and
    /// checkpoint buffers) exceeds this many MB (0: only the machine's available memory).
    #[serde(default)]
    pub memory_limit_mb: u64,
}

impl Default for TrainConfig {
    /// Every key at its default: what a `[train]` section left out means.
    fn default() -> Self {
        toml::from_str("").expect("every key of [train] has a default")
    }
}

impl TrainConfig {
    /// Steps in an epoch of `train_samples`: the one place the data's size becomes steps
    /// (the schedule's length, a warm-up given in epochs).
    pub fn steps_per_epoch(&self, train_samples: usize) -> u64 {
        train_samples.div_ceil(self.batch_size.max(1)) as u64
    }

    /// The run's learning-rate schedule, the core's type.
    pub fn schedule(&self) -> slide::LrSchedule {
        slide::LrSchedule {
            lr: self.lr,
            decay: self.lr_schedule,
            lr_min: self.lr_min,
            lr_gamma: self.lr_gamma,
            warmup_steps: self.warmup_steps,
        }
    }
}

fn default_shared_refresh() -> u64 {
    slide::layer::DEFAULT_SHARED_REFRESH
}

fn default_epochs() -> usize {
    1
}
fn default_batch_size() -> usize {
    128
}
fn default_lr() -> f32 {
    0.001
}
fn default_lr_gamma() -> f32 {
    1.0
}
fn default_beta1() -> f32 {
    0.9
}
fn default_beta2() -> f32 {
    0.999
}
fn default_eps() -> f32 {
    1e-8
}
fn default_rebuild_first() -> u64 {
    50
}
fn default_rebuild_growth() -> f64 {
    1.0
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
/// `[log]`.
pub struct LogConfig {
    /// Metrics file (JSON lines), relative to the output folder.
    pub metrics: Option<PathBuf>,
}
