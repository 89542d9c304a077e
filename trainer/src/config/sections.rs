//! The TOML sections of a config file, as read (every key known, defaults filled in).

use std::path::PathBuf;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use slide::LayerConfig;

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
    /// A training file of an earlier run (xmc, libsvm; within this run's features and
    /// labels), a share of whose samples is added to the training samples: rehearsal that
    /// keeps a run continued on new data (`--init-from`) from forgetting the old.
    pub replay: Option<PathBuf>,
    /// The share of `replay`'s samples added, in (0, 1] (default 0.2).
    #[serde(default = "default_replay_share")]
    pub replay_share: f64,
}

/// [`DataConfig::replay_share`]'s default.
fn default_replay_share() -> f64 {
    0.2
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
    /// `[[network.heads]]`: the core's [`slide::HeadConfig`]s, parts of the model that score
    /// outputs beside the last layer (`kind = "label-linear"`, `"rare-labels"`, `"propensity"`, with their
    /// own keys); absent: none.
    #[serde(default)]
    pub heads: Vec<slide::HeadConfig>,
    /// The power each input value is raised to before the network reads it, each sample's
    /// input keeping its L2 norm (the core's [`slide::NetworkConfig::input_power`]); absent:
    /// 1, the inputs as stored.
    pub input_power: Option<f32>,
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

/// `[train]`: the trainer's own keys (epochs, batches, evaluation cadence, limits), and
/// beside them the core's settings under their own keys, each defined, defaulted and checked
/// once in the core: Adam's ([`slide::AdamConfig`]: `lr`, `beta1`, ...), the learning
/// rate's schedule ([`slide::LrSchedule`]: `lr_schedule`, `lr_min`, ...), the tables'
/// rebuilds ([`slide::RebuildSchedule`]: `rebuild_every`, `rebuild_growth`) and
/// evaluations ([`slide::EvalOptions`]: `eval_mode`, `eval_precision`, `eval_pool`,
/// `eval_picks`) and the propensity-scored metrics ([`slide::PropensityModel`]:
/// `propensity_a`, `propensity_b`).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct TrainConfig {
    /// Passes over the training set (default 1).
    #[serde(default = "default_epochs")]
    pub epochs: usize,
    /// Samples per step (default 128), fewer where an epoch would otherwise take fewer
    /// than `min_steps_per_epoch` steps.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// The fewest steps an epoch takes (default 1): on a small training set the batches
    /// shrink to `floor(samples / min_steps_per_epoch)` samples (at least 1).
    #[serde(default = "default_min_steps_per_epoch")]
    pub min_steps_per_epoch: usize,
    #[serde(default)]
    /// Seed of the weights, hash functions, shuffles and sampling.
    pub seed: u64,
    /// Evaluate during training every this many steps (0: only after each epoch).
    #[serde(default)]
    pub eval_every: u64,
    /// Test samples per periodic evaluation during training (0: the whole test set);
    /// `slide-train eval` and `predict` score the whole file unless `--samples` says
    /// otherwise.
    #[serde(default)]
    pub eval_samples: usize,
    /// Probe the retrieval recall of the LSH layers every this many steps (0: only at
    /// evaluations).
    #[serde(default)]
    pub recall_every: u64,
    /// Stop after this many steps (0: no limit).
    #[serde(default)]
    pub max_steps: u64,
    /// Refuse to start a run whose estimated peak memory (model, data, workspace and
    /// checkpoint buffers) exceeds this many MB (0: only the machine's available memory).
    #[serde(default)]
    pub memory_limit_mb: u64,
    /// Adam's settings.
    #[serde(flatten)]
    pub adam: slide::AdamConfig,
    /// How the learning rate moves around Adam's `lr` over the run.
    #[serde(flatten)]
    pub schedule: slide::LrSchedule,
    /// When the LSH tables are rebuilt.
    #[serde(flatten)]
    pub rebuild: slide::RebuildSchedule,
    /// How evaluations score (the periodic ones and, unless the command line says
    /// otherwise, `eval` and `predict`).
    #[serde(flatten)]
    pub eval: slide::EvalOptions,
    /// The propensity model of PSP@k and PSnDCG@k (`propensity_a`, `propensity_b`), whose
    /// label counts come from the training file.
    #[serde(flatten)]
    pub propensity: slide::PropensityModel,
    /// The keys nobody above took: refused by [`TrainConfig::check_keys`], naming them.
    #[serde(flatten, skip_serializing)]
    unknown: std::collections::BTreeMap<String, toml::Value>,
}

impl Default for TrainConfig {
    /// Every key at its default: what a `[train]` section left out means.
    fn default() -> Self {
        toml::from_str("").expect("every key of [train] has a default")
    }
}

impl TrainConfig {
    /// Samples per step on a training set of `train_samples`: `batch_size`, or fewer so
    /// that an epoch takes at least `min_steps_per_epoch` steps (every sample its own step
    /// on a set smaller than that); at least 1. With `min_steps_per_epoch = 1`, always
    /// `batch_size` (a set smaller than a batch is one step either way).
    pub fn batch(&self, train_samples: usize) -> usize {
        if self.min_steps_per_epoch <= 1 {
            return self.batch_size;
        }
        let most = (train_samples / self.min_steps_per_epoch).max(1);
        self.batch_size.min(most)
    }

    /// Steps in an epoch of `train_samples`: the one place the data's size becomes steps
    /// (the schedule's length, a warm-up given in epochs).
    pub fn steps_per_epoch(&self, train_samples: usize) -> u64 {
        train_samples.div_ceil(self.batch(train_samples)) as u64
    }

    /// Refuses a key that no part of `[train]` knows, as serde refuses one elsewhere.
    pub(super) fn check_keys(&self) -> Result<(), String> {
        match self.unknown.keys().next() {
            Some(key) => Err(format!(
                "unknown field `{key}` (configs/README.md lists every key of [train])"
            )),
            None => Ok(()),
        }
    }
}

fn default_epochs() -> usize {
    1
}
fn default_batch_size() -> usize {
    128
}
fn default_min_steps_per_epoch() -> usize {
    1
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
