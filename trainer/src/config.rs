//! The training config: TOML, every key known (unknown keys are errors naming the key), every
//! value validated before any work starts.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use slide::lsh::{BucketPolicy, FamilyKind, LshParams, Projection, Sampling, Strategy};
use slide::{
    Activation, AdamConfig, BiasCorrection, EvalPrecision, Init, LayerConfig, LshConfig,
    NetworkConfig, Precision, RebuildSchedule, WeightLayout,
};

/// A whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[data]`: where the examples come from.
    pub data: DataConfig,
    /// `[network]`: the layers.
    pub network: NetworkSection,
    /// `[train]`: the optimizer, schedule and evaluation.
    pub train: TrainConfig,
    #[serde(default)]
    /// `[log]`: where metrics go.
    pub log: LogConfig,
    #[serde(default)]
    /// `[checkpoint]`: how often and where checkpoints are written.
    pub checkpoint: CheckpointConfig,
}

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
/// `[network]`.
pub struct NetworkSection {
    /// The layers, input side first; the last one's size is the label count.
    pub layers: Vec<LayerSection>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
/// How a layer's weights are drawn.
pub enum InitName {
    #[default]
    /// Glorot uniform.
    Glorot,
    /// `U(+-1/sqrt(in))`, PyTorch's Linear default.
    FanIn,
    /// `N(0, init_scale^2)`.
    Normal,
    /// `U(+-init_scale)`.
    Uniform,
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
    /// How the weights are drawn: glorot (default), fan-in (PyTorch's Linear), normal or
    /// uniform (with `init_scale`).
    #[serde(default)]
    pub init: InitName,
    /// Standard deviation (normal) or half-width (uniform).
    pub init_scale: Option<f32>,
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
/// LSH families.
pub enum FamilyName {
    /// Signed random projections, sparse ±1 entries.
    Simhash,
    /// Signed random projections, Gaussian entries.
    SimhashGaussian,
    /// Winner-take-all.
    Wta,
    /// Densified winner-take-all.
    Dwta,
    /// Densified one-permutation MinHash.
    Minhash,
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
    /// Hash family.
    pub family: FamilyName,
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
    /// WTA/DWTA bin size.
    #[serde(default = "default_bin_size")]
    pub bin_size: usize,
    /// Sparse SimHash density.
    #[serde(default = "default_density")]
    pub density: f32,
    /// MinHash bits per code.
    #[serde(default = "default_minhash_bits")]
    pub bits: u32,
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
    /// tables' picks. With `log_q`, the tables' picks are then scored as themselves and the
    /// random ids stand for the rest of the outputs (see `slide::LshConfig::log_q`).
    #[serde(default)]
    pub uniform_negatives: usize,
    /// A warm-up: this many further uniformly random outputs join each training sample's
    /// active set in the first `warmup_steps` steps, or the first `warmup_epochs` epochs
    /// (with `log_q` the tables' picks count as themselves while random ids are drawn; see
    /// `slide::LshConfig::warmup_random`).
    #[serde(default)]
    pub warmup_negatives: usize,
    /// How many training steps `warmup_negatives` lasts.
    #[serde(default)]
    pub warmup_steps: u64,
    /// How long `warmup_negatives` lasts, in epochs of the training set (converted to steps,
    /// rounded down, once the data is loaded: see [`Config::network`]); instead of
    /// `warmup_steps`.
    #[serde(default)]
    pub warmup_epochs: f64,
    /// Ablation: take nothing from the tables and draw `budget` uniformly random ids in
    /// place of their picks: uniform negative sampling at the same budget, to measure what
    /// LSH adds. The layer then neither builds its tables nor hashes queries, so its time is
    /// a uniform sampler's (the shared negatives are still picked).
    #[serde(default)]
    pub uniform: bool,
    /// Ablation, slow: replace the tables' picks with each training sample's
    /// highest-scoring outputs (every output scored), the picks of perfect retrieval (see
    /// `slide::LshConfig::exact_picks`).
    #[serde(default)]
    pub exact_picks: bool,
}

impl LshSection {
    /// The core's family with its settings from the flat keys (`family`, `bin_size`,
    /// `density`, `bits`).
    fn family(&self) -> FamilyKind {
        match self.family {
            FamilyName::Simhash => FamilyKind::SimHash(Projection::Sparse {
                density: self.density,
            }),
            FamilyName::SimhashGaussian => FamilyKind::SimHash(Projection::Gaussian),
            FamilyName::Wta => FamilyKind::Wta {
                bin_size: self.bin_size,
            },
            FamilyName::Dwta => FamilyKind::Dwta {
                bin_size: self.bin_size,
            },
            FamilyName::Minhash => FamilyKind::MinHash { bits: self.bits },
        }
    }

    /// `K`, `L`, `range_pow` and the bucket capacity for a layer of `width` neurons: as
    /// given, or tuned from the budget when `k`, `l` and `range_pow` are all left out.
    pub fn resolve(&self, width: usize) -> Result<(LshParams, usize)> {
        match (self.k, self.l, self.range_pow) {
            (Some(k), Some(l), Some(range_pow)) => Ok((
                LshParams { k, l, range_pow },
                self.bucket_capacity.unwrap_or_else(default_bucket_capacity),
            )),
            (None, None, None) => {
                let Some(budget) = self.budget else {
                    bail!("k, l and range_pow are tuned from budget, which is missing");
                };
                let bits = self.family().bits_per_code()?;
                let tuned = slide::lsh::tune_for_budget(width, budget, bits)?;
                Ok((
                    tuned.params,
                    self.bucket_capacity.unwrap_or(tuned.bucket_capacity),
                ))
            }
            _ => bail!("give all of k, l and range_pow, or none of them (tuned from budget)"),
        }
    }
}

fn default_bucket_capacity() -> usize {
    128
}
fn default_bin_size() -> usize {
    8
}
fn default_density() -> f32 {
    1.0 / 3.0
}
fn default_minhash_bits() -> u32 {
    3
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
    /// Passes over the training set.
    pub epochs: usize,
    /// Samples per step.
    pub batch_size: usize,
    /// Adam's learning rate (the schedule's peak).
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
    /// Steps over which the learning rate rises linearly from 0 to `lr` first.
    #[serde(default)]
    pub warmup_steps: u64,
    /// Refuse to start a run whose estimated peak memory (model, data, workspace and
    /// checkpoint buffers) exceeds this many MB (0: only the machine's available memory).
    #[serde(default)]
    pub memory_limit_mb: u64,
}

impl TrainConfig {
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

/// Finds a config: the path as given, or a bare name looked up in `configs/`.
pub fn locate(path: &Path) -> PathBuf {
    if path.exists() || path.components().count() > 1 {
        return path.to_path_buf();
    }
    let in_configs = Path::new("configs").join(path);
    if in_configs.exists() {
        in_configs
    } else {
        path.to_path_buf()
    }
}

/// Reads, overrides (`section.key=value`, the value in TOML syntax) and validates a config.
pub fn load(path: &Path, overrides: &[String]) -> Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    parse(&text, path, overrides)
}

/// [`load`] of a config's text; `path` names it in errors.
pub fn parse(text: &str, path: &Path, overrides: &[String]) -> Result<Config> {
    let mut value: toml::Table = toml::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), one_line(&e.to_string())))?;
    for item in overrides {
        apply_override(&mut value, item)?;
    }
    let config: Config = Config::deserialize(value)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), one_line(&e.to_string())))?;
    config
        .validate()
        .with_context(|| format!("{}", path.display()))?;
    Ok(config)
}

fn one_line(message: &str) -> String {
    let words = message.split_whitespace().collect::<Vec<_>>().join(" ");
    slide::formats::printable(&words)
}

fn apply_override(table: &mut toml::Table, item: &str) -> Result<()> {
    let Some((key, raw)) = item.split_once('=') else {
        bail!("--set {item}: expected section.key=value");
    };
    // Values are TOML; a bare word that is not valid TOML is taken as a string.
    let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.trim().split('.').collect();
    let mut here = toml::Value::Table(std::mem::take(table));
    let result = set_path(&mut here, &parts, value, item);
    if let toml::Value::Table(t) = here {
        *table = t;
    }
    result
}

/// Sets `parts` (table keys, or indices into arrays such as `network.layers.1.size`) to
/// `value`, creating missing tables.
fn set_path(here: &mut toml::Value, parts: &[&str], value: toml::Value, item: &str) -> Result<()> {
    let (first, rest) = parts.split_first().expect("split yields at least one part");
    let child = match here {
        toml::Value::Table(t) if rest.is_empty() => {
            t.insert(first.to_string(), value);
            return Ok(());
        }
        toml::Value::Table(t) => t
            .entry(first.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new())),
        toml::Value::Array(a) => {
            let index: usize = first.parse().map_err(|_| {
                anyhow::anyhow!("--set {item}: `{first}` is not an index into a list")
            })?;
            let len = a.len();
            let slot = a.get_mut(index).ok_or_else(|| {
                anyhow::anyhow!("--set {item}: index {index} is past the list's {len} entries")
            })?;
            if rest.is_empty() {
                *slot = value;
                return Ok(());
            }
            slot
        }
        _ => bail!("--set {item}: `{first}` is inside a value that is not a section or list"),
    };
    set_path(child, rest, value, item)
}

impl Config {
    /// Every check that can be made without reading the data.
    pub fn validate(&self) -> Result<()> {
        let t = &self.train;
        if t.eval_precision == EvalPrecision::Bf16 && !slide::kernels::has_bf16_dot() {
            bail!("train.eval_precision = \"bf16\" needs a CPU with AVX512-BF16");
        }
        if t.batch_size == 0 {
            bail!("train.batch_size must be at least 1");
        }
        if t.epochs == 0 {
            bail!("train.epochs must be at least 1");
        }
        if !(t.lr.is_finite() && t.lr > 0.0) {
            bail!("train.lr must be positive, got {}", t.lr);
        }
        if !(t.lr_min.is_finite() && t.lr_min >= 0.0 && t.lr_min <= t.lr) {
            bail!(
                "train.lr_min must be between 0 and train.lr ({}), got {}",
                t.lr,
                t.lr_min
            );
        }
        if !(t.lr_gamma > 0.0 && t.lr_gamma <= 1.0) {
            bail!("train.lr_gamma must be in (0, 1], got {}", t.lr_gamma);
        }
        if self.checkpoint.keep_last == 0 {
            bail!("checkpoint.keep_last must be at least 1");
        }
        if self.network.layers.is_empty() {
            bail!("network.layers: at least one layer is needed");
        }
        match self.data.format {
            DataFormat::Xmc | DataFormat::Libsvm => {
                if self.data.train.is_none() || self.data.test.is_none() {
                    bail!("data.train and data.test are needed for text formats");
                }
            }
            DataFormat::Idx => {
                if self.data.dir.is_none() {
                    bail!("data.dir is needed for the idx format");
                }
            }
        }
        if matches!(self.data.format, DataFormat::Libsvm)
            && (self.data.features.is_none() || self.data.labels.is_none())
        {
            bail!("data.features and data.labels are needed for the libsvm format");
        }
        for (i, layer) in self.network.layers.iter().enumerate() {
            if layer.weights == Precision::Bf16 && layer.moments != Precision::Bf16 {
                bail!("network.layers[{i}]: weights = \"bf16\" needs moments = \"bf16\"");
            }
            match (layer.init, layer.init_scale) {
                (InitName::Normal | InitName::Uniform, None) => bail!(
                    "network.layers[{i}]: init = \"{}\" needs init_scale",
                    if layer.init == InitName::Normal {
                        "normal"
                    } else {
                        "uniform"
                    }
                ),
                (_, Some(x)) if !(x.is_finite() && x > 0.0) => {
                    bail!("network.layers[{i}].init_scale must be positive, got {x}")
                }
                (InitName::Glorot | InitName::FanIn, Some(_)) => {
                    bail!("network.layers[{i}].init_scale applies to normal and uniform only")
                }
                _ => {}
            }
            if let Some(lsh) = &layer.lsh {
                lsh.resolve(layer.size)
                    .with_context(|| format!("network.layers[{i}].lsh"))?;
                if lsh.uniform && lsh.budget.is_none() {
                    bail!("network.layers[{i}].lsh: uniform sampling needs budget");
                }
                if !(lsh.warmup_epochs.is_finite() && lsh.warmup_epochs >= 0.0) {
                    bail!(
                        "network.layers[{i}].lsh: warmup_epochs must be a number of epochs, \
                         at least 0, got {}",
                        lsh.warmup_epochs
                    );
                }
                if lsh.warmup_steps > 0 && lsh.warmup_epochs > 0.0 {
                    bail!("network.layers[{i}].lsh: give warmup_steps or warmup_epochs, not both");
                }
                let lasts = lsh.warmup_steps > 0 || lsh.warmup_epochs > 0.0;
                if (lsh.warmup_negatives > 0) != lasts {
                    bail!(
                        "network.layers[{i}].lsh: warmup_negatives ({}) and its length \
                         (warmup_steps {}, warmup_epochs {}) go together: both 0 or neither",
                        lsh.warmup_negatives,
                        lsh.warmup_steps,
                        lsh.warmup_epochs
                    );
                }
                match lsh.strategy {
                    StrategyName::TopK if lsh.budget.is_none() => {
                        bail!("network.layers[{i}].lsh: strategy top-k needs budget (k)")
                    }
                    StrategyName::Threshold if lsh.min_hits.is_none() => {
                        bail!("network.layers[{i}].lsh: strategy threshold needs min_hits")
                    }
                    _ => {}
                }
                // (A warm-up in epochs is at least a step whatever the data's size.)
                if let Some(core) = layer_config(layer, 1.0).lsh {
                    core.validate(layer.size)
                        .with_context(|| format!("network.layers[{i}].lsh"))?;
                }
            }
        }
        Ok(())
    }

    /// The core network config for `input_dim` inputs and a training set of
    /// `train_samples` (which turns a warm-up given in epochs into steps: `warmup_epochs`
    /// times the steps of an epoch, rounded down, at least 1). The last layer's size must be
    /// the number of labels; the core validates the rest.
    pub fn network(&self, input_dim: usize, train_samples: usize) -> NetworkConfig {
        let t = &self.train;
        let steps_per_epoch = train_samples.div_ceil(t.batch_size.max(1)) as f64;
        NetworkConfig {
            input_dim,
            layers: self
                .network
                .layers
                .iter()
                .map(|layer| layer_config(layer, steps_per_epoch))
                .collect(),
            adam: AdamConfig {
                lr: t.lr,
                beta1: t.beta1,
                beta2: t.beta2,
                eps: t.eps,
                bias_correction: t.bias_correction,
            },
            rebuild: if t.rebuild_growth > 1.0 {
                RebuildSchedule::Exponential {
                    first: t.rebuild_every,
                    growth: t.rebuild_growth,
                }
            } else {
                RebuildSchedule::Fixed {
                    every: t.rebuild_every,
                }
            },
            seed: t.seed,
        }
    }
}

/// [`LshSection::resolve`] of a validated config.
fn resolved(lsh: &LshSection, width: usize) -> (LshParams, usize) {
    lsh.resolve(width)
        .expect("Config::validate resolved every layer")
}

/// `layer` as the core's config, a warm-up in epochs taken as that many of `steps_per_epoch`.
fn layer_config(layer: &LayerSection, steps_per_epoch: f64) -> LayerConfig {
    LayerConfig {
        out_dim: layer.size,
        activation: layer.activation,
        layout: layer.layout,
        init: match (layer.init, layer.init_scale) {
            (InitName::Glorot, _) => Init::Glorot,
            (InitName::FanIn, _) => Init::FanIn,
            (InitName::Normal, scale) => Init::Normal {
                std: scale.unwrap_or(1.0),
            },
            (InitName::Uniform, scale) => Init::Uniform {
                bound: scale.unwrap_or(1.0),
            },
        },
        lsh: layer.lsh.as_ref().map(|lsh| {
            let (params, bucket_capacity) = resolved(lsh, layer.size);
            LshConfig {
                family: lsh.family(),
                params,
                bucket_capacity,
                policy: lsh.policy,
                sampling: Sampling {
                    strategy: match lsh.strategy {
                        StrategyName::Vanilla => Strategy::Vanilla,
                        StrategyName::TopK if lsh.uniform => Strategy::Vanilla,
                        StrategyName::TopK => Strategy::TopK {
                            k: lsh.budget.unwrap_or(1),
                        },
                        StrategyName::Threshold => Strategy::Threshold {
                            min_hits: lsh.min_hits.unwrap_or(1),
                        },
                    },
                    budget: if lsh.uniform { Some(0) } else { lsh.budget },
                    min_active: lsh.min_active,
                    random_extra: lsh.uniform_negatives
                        + if lsh.uniform {
                            lsh.budget.unwrap_or(0)
                        } else {
                            0
                        },
                },
                log_q: lsh.log_q,
                shared_negatives: lsh.shared_negatives,
                shared_shift: lsh.shared_shift,
                shared_pool: lsh.shared_pool,
                center_queries: lsh.center_queries,
                exact_picks: lsh.exact_picks,
                warmup_random: lsh.warmup_negatives,
                warmup_steps: if lsh.warmup_epochs > 0.0 {
                    ((lsh.warmup_epochs * steps_per_epoch) as u64).max(1)
                } else {
                    lsh.warmup_steps
                },
                shared_refresh: lsh.shared_refresh,
            }
        }),
        moments: layer.moments,
        weights: layer.weights,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shipped config parses and passes validation (data files are not needed for that).
    #[test]
    fn shipped_configs_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let config = load(&path, &[]).unwrap_or_else(|e| panic!("{e:#}"));
                assert!(!config.network.layers.is_empty());
                // The resolved core config goes through serde (the core's `serde` feature)
                // and back unchanged.
                let network = config.network(1000, 1000);
                let text = serde_json::to_string(&network).unwrap();
                let back: NetworkConfig = serde_json::from_str(&text).unwrap();
                assert_eq!(back, network, "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 6, "only {checked} configs");
    }

    #[test]
    fn overrides_reach_tables_and_list_entries() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mnist.toml");
        let config = load(
            &path,
            &[
                "train.lr=0.5".into(),
                "network.layers.0.size=77".into(),
                "data.dir=elsewhere".into(),
            ],
        )
        .unwrap();
        assert_eq!(config.train.lr, 0.5);
        assert_eq!(config.network.layers[0].size, 77);
        assert_eq!(config.data.dir.as_deref(), Some(Path::new("elsewhere")));
        let err = load(&path, &["network.layers.x.size=1".into()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--set network.layers.x.size=1: `x` is not an index into a list"
        );
        let err = load(&path, &["nonsense".into()]).unwrap_err().to_string();
        assert_eq!(err, "--set nonsense: expected section.key=value");

        // The moments' precision reaches the core's layer config; other values are refused.
        let bf16 = load(&path, &["network.layers.1.moments=\"bf16\"".into()]).unwrap();
        let layers = bf16.network(784, 1000).layers;
        assert_eq!(layers[0].moments, Precision::F32);
        assert_eq!(layers[1].moments, Precision::Bf16);
        let err = load(&path, &["network.layers.1.moments=\"f16\"".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `f16`"), "{err}");

        // So does the weights' precision, which needs BF16 moments.
        let both = [
            "network.layers.1.moments=\"bf16\"".into(),
            "network.layers.1.weights=\"bf16\"".into(),
        ];
        let layers = load(&path, &both).unwrap().network(784, 1000).layers;
        assert_eq!(
            (layers[0].weights, layers[1].weights),
            (Precision::F32, Precision::Bf16)
        );
        let err = load(&path, &["network.layers.1.weights=\"bf16\"".into()]).unwrap_err();
        assert!(
            format!("{err:#}")
                .ends_with(": network.layers[1]: weights = \"bf16\" needs moments = \"bf16\""),
            "{err:#}"
        );
    }

    /// The shared negatives' shift, pool and refresh period reach the core's LSH config
    /// (the period is 8 steps unless set); a shift outside [0, 1], a pool wider than the
    /// layer or a period of 0 is refused when the config is loaded.
    #[test]
    fn shared_shift_is_a_fraction_and_the_pool_fits_the_layer() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
        let shipped = load(&path, &[]).unwrap().network(135_909, 20_000);
        let lsh = shipped.layers[1].lsh.unwrap();
        assert_eq!((lsh.shared_shift, lsh.shared_pool), (0.5, 2048));
        assert_eq!(lsh.shared_refresh, 32);
        let mnist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mnist.toml");
        let unset = load(&mnist, &[]).unwrap().network(784, 60_000).layers[0].lsh;
        assert_eq!(unset.unwrap().shared_refresh, 8);
        let err = load(&path, &["network.layers.1.lsh.shared_refresh=0".into()]).unwrap_err();
        assert!(
            format!("{err:#}").ends_with("shared_refresh must be at least 1 step"),
            "{err:#}"
        );
        let err = load(&path, &["network.layers.1.lsh.shared_shift=1.5".into()]).unwrap_err();
        assert!(
            format!("{err:#}").ends_with("shared_shift must be in [0, 1], got 1.5"),
            "{err:#}"
        );
        let err = load(&path, &["network.layers.1.lsh.shared_pool=700000".into()]).unwrap_err();
        assert!(
            format!("{err:#}")
                .ends_with("shared_pool (700000) must be at most the layer's 670091 neurons"),
            "{err:#}"
        );
    }

    /// The warm-up's random negatives reach the core's LSH config (the shipped 128 for half
    /// an epoch: 78 of the 157 steps of 20,000 samples, 391 of 782 for 100,000, at least 1),
    /// on top of the uniform ablation's too; a length in steps or in epochs, not both; one
    /// without the other, or a negative length, is refused when the config is loaded.
    #[test]
    fn warm_up_negatives_reach_the_core() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
        let warm = |overrides: &[String], samples: usize| {
            let lsh = load(&path, overrides)
                .unwrap()
                .network(135_909, samples)
                .layers[1]
                .lsh;
            let lsh = lsh.unwrap();
            (
                lsh.sampling.random_extra,
                lsh.warmup_random,
                lsh.warmup_steps,
            )
        };
        assert_eq!(warm(&[], 20_000), (0, 128, 78));
        assert_eq!(warm(&[], 100_000), (0, 128, 391));
        assert_eq!(warm(&[], 10), (0, 128, 1));
        let uniform = ["network.layers.1.lsh.uniform=true".into()];
        assert_eq!(warm(&uniform, 20_000), (256, 128, 78));
        let in_steps = [
            "network.layers.1.lsh.warmup_epochs=0".into(),
            "network.layers.1.lsh.warmup_steps=100".into(),
        ];
        assert_eq!(warm(&in_steps, 20_000), (0, 128, 100));
        let layer = "network.layers[1].lsh: ";
        for (bad, expected) in [
            (
                vec!["network.layers.1.lsh.warmup_negatives=0"],
                "warmup_negatives (0) and its length (warmup_steps 0, warmup_epochs 0.5) go \
                 together: both 0 or neither",
            ),
            (
                vec!["network.layers.1.lsh.warmup_epochs=0"],
                "warmup_negatives (128) and its length (warmup_steps 0, warmup_epochs 0) go \
                 together: both 0 or neither",
            ),
            (
                vec!["network.layers.1.lsh.warmup_steps=100"],
                "give warmup_steps or warmup_epochs, not both",
            ),
            (
                vec!["network.layers.1.lsh.warmup_epochs=-1.0"],
                "warmup_epochs must be a number of epochs, at least 0, got -1",
            ),
        ] {
            let overrides: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let err = format!("{:#}", load(&path, &overrides).unwrap_err());
            assert!(
                err.ends_with(&format!("{layer}{expected}")),
                "{bad:?}: {err}"
            );
        }
    }

    /// The TOML keys reach the core's schedule; a factor above 1 is refused.
    #[test]
    fn learning_rate_schedules() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mnist.toml");
        let sets = [
            "train.lr=0.01",
            "train.lr_schedule=\"cosine\"",
            "train.lr_min=0.001",
            "train.lr_gamma=0.5",
            "train.warmup_steps=10",
        ];
        let overrides: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let mut config = load(&path, &overrides).unwrap();
        let t = &mut config.train;
        let schedule = t.schedule();
        assert_eq!(
            schedule,
            slide::LrSchedule {
                lr: 0.01,
                decay: slide::Decay::Cosine,
                lr_min: 0.001,
                lr_gamma: 0.5,
                warmup_steps: 10
            }
        );
        // Half-way through the warm-up, the cosine still at its start (0.0099996).
        assert!((schedule.rate(5, 1000, 1) - 0.005).abs() < 1e-6);
        t.lr_gamma = 1.5;
        assert!(
            config
                .validate()
                .unwrap_err()
                .to_string()
                .contains("lr_gamma")
        );
    }
}
