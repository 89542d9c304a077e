//! The TOML sections of a config file, as read (every key known, defaults filled in).

use std::path::PathBuf;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use slide::{BiasCorrection, EvalPrecision, LayerConfig};

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
    /// The layers, input side first; the last one's size is the label count. Each is the
    /// core's [`LayerConfig`] read from `[[network.layers]]` (its serde form: `size`,
    /// `activation`, ..., `[network.layers.lsh]`), its LSH table sizes resolved as it is
    /// read; errors name the layer.
    #[serde(deserialize_with = "layers_in_place")]
    pub layers: Vec<LayerConfig>,
}

/// The layers of `[network]`, each read on its own so that an error names its place.
fn layers_in_place<'de, D: Deserializer<'de>>(layers: D) -> Result<Vec<LayerConfig>, D::Error> {
    Vec::<toml::Value>::deserialize(layers)?
        .into_iter()
        .enumerate()
        .map(|(i, layer)| {
            LayerConfig::deserialize(layer)
                .map_err(|e| D::Error::custom(format!("network.layers[{i}]: {e}")))
        })
        .collect()
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
    /// outputs that score highest for the mean input of each block of 2,048 samples, this many (0,
    /// the default: the tables' picks only; see [`slide::Network::set_eval_pool`]).
    #[serde(default)]
    pub eval_pool: usize,
    /// With `eval_pool`, the table picks LSH-mode evaluation and prediction score per
    /// sample: the outputs found in the most of the sample's buckets, this many (unset: the
    /// output layer's own budget; see [`slide::Network::set_eval_picks`]).
    #[serde(default)]
    pub eval_picks: Option<usize>,
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

impl LogConfig {
    /// The metrics file of a run writing to `out` (default `metrics.jsonl`).
    pub fn metrics_path(&self, out: &std::path::Path) -> PathBuf {
        out.join(self.metrics.as_deref().unwrap_or("metrics.jsonl".as_ref()))
    }
}
