//! What a [`Network`](crate::Network) is built from: its layers, optimizer settings, table
//! rebuild schedule and seed, checked before anything is allocated.

use crate::error::{Result, config_error};
use crate::layer::{
    Activation, BlockLayout, LayerConfig, LshConfig, Precision, SecondMoment, SoftmaxLoss,
    WeightLayout,
};
use crate::optimizer::AdamConfig;
use crate::wide::WideConfig;

/// When LSH tables are rebuilt from the moving weights.
///
/// With the `serde` feature it reads a config file's `[train]` keys `rebuild_every` (steps
/// before the first rebuild, default 50) and `rebuild_growth` (each period's factor over
/// the previous one, default 1: a fixed period).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(from = "RebuildKeys", into = "RebuildKeys")
)]
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

impl Default for RebuildSchedule {
    /// A rebuild every 50 steps.
    fn default() -> Self {
        RebuildSchedule::Fixed { every: 50 }
    }
}

/// The keys a config file spells a [`RebuildSchedule`] with.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(default)]
struct RebuildKeys {
    rebuild_every: u64,
    rebuild_growth: f64,
}

#[cfg(feature = "serde")]
impl Default for RebuildKeys {
    fn default() -> Self {
        RebuildSchedule::default().into()
    }
}

#[cfg(feature = "serde")]
impl From<RebuildKeys> for RebuildSchedule {
    /// A growth of exactly 1 is a fixed period; any other is checked by
    /// [`RebuildSchedule::validate`].
    fn from(keys: RebuildKeys) -> Self {
        if keys.rebuild_growth == 1.0 {
            RebuildSchedule::Fixed {
                every: keys.rebuild_every,
            }
        } else {
            RebuildSchedule::Exponential {
                first: keys.rebuild_every,
                growth: keys.rebuild_growth,
            }
        }
    }
}

#[cfg(feature = "serde")]
impl From<RebuildSchedule> for RebuildKeys {
    fn from(schedule: RebuildSchedule) -> Self {
        match schedule {
            RebuildSchedule::Fixed { every } => RebuildKeys {
                rebuild_every: every,
                rebuild_growth: 1.0,
            },
            RebuildSchedule::Exponential { first, growth } => RebuildKeys {
                rebuild_every: first,
                rebuild_growth: growth,
            },
        }
    }
}

impl RebuildSchedule {
    /// Checks that periods are at least one step and growth is finite and at least 1.
    pub fn validate(&self) -> Result<()> {
        match *self {
            RebuildSchedule::Fixed { every: 0 } | RebuildSchedule::Exponential { first: 0, .. } => {
                Err(config_error(
                    "rebuild_every",
                    "the period must be at least 1 step",
                ))
            }
            RebuildSchedule::Exponential { growth, .. }
                if !(growth.is_finite() && growth >= 1.0) =>
            {
                Err(config_error(
                    "rebuild_growth",
                    "must be a finite number >= 1",
                ))
            }
            _ => Ok(()),
        }
    }

    /// The first period, in steps.
    pub(crate) fn first_period(&self) -> u64 {
        match *self {
            RebuildSchedule::Fixed { every } => every,
            RebuildSchedule::Exponential { first, .. } => first,
        }
    }
}

/// Everything needed to build a [`Network`](crate::Network).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
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
    /// Per-label linear classifiers on the input features that re-rank the network's best
    /// outputs ([`WideHead`](crate::WideHead)); `None`: none.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub wide: Option<WideConfig>,
    /// The power each input value is raised to, keeping its sign, before the first layer and
    /// the wide head read it; each sample's input then keeps its L2 norm (default 1: the
    /// input as stored). Below 1 it evens out a row's values: on tf-idf rows 0.5 weighs a
    /// description's rare and common words more alike. Part of the model: training,
    /// evaluation and prediction all read their inputs through it.
    #[cfg_attr(
        feature = "serde",
        serde(
            default = "crate::input::stored",
            skip_serializing_if = "crate::input::is_stored"
        )
    )]
    pub input_power: f32,
}

impl NetworkConfig {
    /// A network of `layers` on `input_dim` inputs, with Adam's defaults, a table rebuild
    /// every 50 steps and seed 0. Set what differs:
    ///
    /// ```
    /// use slide::{Activation, LayerConfig, NetworkConfig};
    /// let layers = vec![LayerConfig::new(3, Activation::Softmax)];
    /// let config = NetworkConfig { seed: 7, ..NetworkConfig::new(10, layers) };
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn new(input_dim: usize, layers: Vec<LayerConfig>) -> Self {
        NetworkConfig {
            input_dim,
            layers,
            adam: AdamConfig::default(),
            rebuild: RebuildSchedule::default(),
            seed: 0,
            wide: None,
            input_power: 1.0,
        }
    }

    /// The same config with every warm-up given in epochs turned into steps, an epoch being
    /// `steps_per_epoch` steps (see [`Warmup::in_steps`](crate::Warmup::in_steps)): the one
    /// place the training set's size reaches the network's settings.
    pub fn with_epoch_length(mut self, steps_per_epoch: u64) -> Self {
        for lsh in self.layers.iter_mut().filter_map(|l| l.lsh.as_mut()) {
            lsh.warmup = lsh.warmup.map(|w| w.in_steps(steps_per_epoch));
        }
        self
    }

    /// Checks the network-level rules (a softmax or sigmoid output layer and no other such
    /// layer, no log-Q correction of a sigmoid, the optimizer's
    /// and the schedule's ranges). Each layer's own settings are checked when it is built.
    pub fn validate(&self) -> Result<()> {
        if self.input_dim == 0 {
            return Err(config_error("network", "input_dim must be at least 1"));
        }
        if !(self.input_power.is_finite() && self.input_power > 0.0) {
            return Err(config_error(
                "input_power",
                "must be a finite number above 0",
            ));
        }
        let Some(last) = self.layers.last() else {
            return Err(config_error("network", "needs at least one layer"));
        };
        if !last.activation.is_output() {
            return Err(config_error(
                "output layer",
                "must use the softmax or the sigmoid activation",
            ));
        }
        if let Some(i) = self.layers[..self.layers.len() - 1]
            .iter()
            .position(|l| l.activation.is_output())
        {
            return Err(config_error(
                format!("layer {i}"),
                "softmax and sigmoid are only for the output layer",
            ));
        }
        if last.activation == Activation::Sigmoid && last.lsh.is_some_and(|l| l.negatives.log_q) {
            return Err(config_error(
                "output layer",
                "log_q corrects a sampled softmax; a sigmoid output has no normaliser to \
                 correct (set log_q = false)",
            ));
        }
        self.adam.validate()?;
        if let Some(wide) = &self.wide {
            wide.validate()?;
        }
        self.rebuild.validate()
    }

    /// [`validate`](Self::validate) for a network whose output layer is split between
    /// `ranks` processes (see [`Network::sharded`](crate::Network::sharded)): with more than
    /// one, the decoupled softmax is refused, since each label's softmax needs the
    /// probabilities of every output in one place.
    pub fn validate_for_ranks(&self, ranks: usize) -> Result<()> {
        self.validate()?;
        let decoupled = self.layers.last().map(|l| l.softmax_loss) == Some(SoftmaxLoss::Decoupled);
        if ranks > 1 && decoupled {
            return Err(config_error(
                "output layer",
                "softmax_loss = \"decoupled\" needs the whole output layer in one process; \
                 a sharded layer takes \"shared\"",
            ));
        }
        Ok(())
    }
}

/// FNV-1a, 64 bits, continuing from `hash` (start from [`FNV_OFFSET`]): a stable hash for
/// identities and checksums (the same bytes give the same value on every platform and
/// version).
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a's multiplier (64 bits).
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl NetworkConfig {
    /// Every setting as `(name, value)`, in a fixed order: `input_dim`, `seed`, then per
    /// layer `layers.I.out_dim`, `.activation`, `.layout`, `.init`, `.weights` and
    /// `.moments` (if BF16), `.second_moment` (if per row) and, for sampled layers, the LSH
    /// settings as `.lsh.NAME` in the order [`LshConfig`] gives them (`family`, `params`,
    /// ..., each setting added later only when not its default), then `adam` and `rebuild`.
    /// Checkpoints record it, so a resume can name the settings that changed.
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("input_dim".to_string(), self.input_dim.to_string()),
            ("seed".to_string(), self.seed.to_string()),
        ];
        for (i, l) in self.layers.iter().enumerate() {
            let mut put = |key: &str, value: String| out.push((format!("layers.{i}.{key}"), value));
            put("out_dim", l.out_dim.to_string());
            put("activation", format!("{:?}", l.activation));
            put("layout", format!("{:?}", l.layout));
            put("init", format!("{:?}", l.init));
            // Named only when not the default, so checkpoints from before the setting
            // existed still resume.
            if l.weights != Precision::F32 {
                put("weights", format!("{:?}", l.weights));
            }
            if l.moments != Precision::F32 {
                put("moments", format!("{:?}", l.moments));
            }
            if l.second_moment != SecondMoment::Element {
                put("second_moment", format!("{:?}", l.second_moment));
            }
            if l.softmax_loss != SoftmaxLoss::Shared {
                put("softmax_loss", format!("{:?}", l.softmax_loss));
            }
            if l.lr_scale != 1.0 {
                put("lr_scale", l.lr_scale.to_string());
            }
            if let Some(lsh) = &l.lsh {
                lsh.describe(&mut |key, value| put(&format!("lsh.{key}"), value));
            }
        }
        out.push(("adam".to_string(), format!("{:?}", self.adam)));
        out.push(("rebuild".to_string(), format!("{:?}", self.rebuild)));
        // Named only when not the default, so checkpoints from before the setting resume.
        if self.input_power != 1.0 {
            out.push(("input_power".to_string(), self.input_power.to_string()));
        }
        // Named only when present, so checkpoints from before the wide head still resume.
        if let Some(wide) = &self.wide {
            out.push(("wide.bits".to_string(), wide.bits.to_string()));
            out.push(("wide".to_string(), format!("{wide:?}")));
        }
        out
    }

    /// A stable hash of what a trained model's state depends on to be read back and
    /// evaluated: input size, seed (the hash functions are drawn from it, not saved), the
    /// input power (named only when not 1), and each layer's size, activation, layout and
    /// LSH settings, and the wide head's size. Not the optimizer, the
    /// rebuild schedule, the initialisation, the precision of weights and moments and the
    /// second moment's form (a layer reads a state file's values in either precision) or
    /// the LSH settings that only shape training (the shared negatives' shift and refresh
    /// period, the exact-picks ablation, the warm-up).
    pub fn architecture_hash(&self) -> u64 {
        self.describe()
            .iter()
            .filter(|(key, _)| {
                !(key == "adam"
                    || key == "rebuild"
                    || key == "wide"
                    || key.ends_with(".init")
                    || key.ends_with(".moments")
                    || key.ends_with(".second_moment")
                    || key.ends_with(".softmax_loss")
                    || key.ends_with(".lr_scale")
                    || key.ends_with(".weights")
                    || key
                        .split_once(".lsh.")
                        .is_some_and(|(_, lsh_key)| LshConfig::TRAINING_ONLY.contains(&lsh_key)))
            })
            .fold(FNV_OFFSET, |h, (key, value)| {
                fnv1a(fnv1a(fnv1a(h, key.as_bytes()), b"="), value.as_bytes())
            })
    }
}

/// What a network takes in memory, from its config alone (see
/// [`NetworkConfig::estimated_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryEstimate {
    /// Weights, Adam moments and update counts (rows padded to 64 bytes), biases with
    /// theirs.
    pub parameters: u64,
    /// LSH tables at their largest: bucket index, id stores and the rebuild's codes.
    pub tables: u64,
    /// One exported [`NetworkState`](crate::NetworkState): unpadded weights, moments and
    /// counts, biases and table contents, the payload of a checkpoint (a writer that holds
    /// copies of it adds this once per copy).
    pub state: u64,
}

impl MemoryEstimate {
    /// Parameters and tables: what a built network holds.
    pub fn model(&self) -> u64 {
        self.parameters + self.tables
    }
}

impl NetworkConfig {
    /// What one rank of `ranks` holds when the output layer is split between them (see
    /// [`Network::sharded`](crate::Network::sharded)): the layers before it whole, and the
    /// largest slice of the output layer (rank 0's), its tables tuned for that slice.
    pub fn estimated_bytes_per_rank(&self, ranks: usize) -> MemoryEstimate {
        let mut rank_zero = self.clone();
        if let Some(last) = rank_zero.layers.last_mut() {
            last.out_dim = crate::comm::shard_range(last.out_dim, 0, ranks.max(1)).len();
        }
        rank_zero.estimated_bytes()
    }

    /// The memory the network needs, computed from the config without allocating (checked
    /// against the allocations of built networks in the tests).
    pub fn estimated_bytes(&self) -> MemoryEstimate {
        let mut estimate = MemoryEstimate::default();
        let mut in_dim = self.input_dim as u64;
        for layer in &self.layers {
            let out = layer.out_dim as u64;
            let (rows, row_len) = match layer.layout {
                WeightLayout::NeuronMajor => (out, in_dim),
                WeightLayout::InputMajor => (in_dim, out),
            };
            let stride = row_len.div_ceil(16) * 16;
            // [w | m | v] rows, one u32 count per row; bias, its moments and count.
            let block = BlockLayout {
                stride: stride as usize,
                weights: layer.weights,
                moments: layer.moments,
            }
            .block() as u64;
            estimate.parameters += rows * (block * 4 + 4) + out * 16;
            estimate.state += rows * (3 * row_len * 4 + 4) + out * 16;
            if let Some(lsh) = &layer.lsh {
                let tables = lsh.retrieval.tables(layer.out_dim, 0);
                estimate.tables += tables.estimated_bytes();
                // Saved: 4 u32 per bucket and the stored ids; shared negatives, center.
                let buckets = (lsh.retrieval.params.l as u64) << lsh.retrieval.params.range_pow;
                let stored = (lsh.retrieval.params.l as u64) * out;
                let shared = lsh.negatives.shared_len() as u64;
                estimate.state += buckets * 16 + stored * 4 + shared * 4;
                // The copy of a pool's weights (as stored) and biases (see
                // `Negatives::shared_pool`).
                if lsh.negatives.pooled() {
                    let bytes = if layer.weights == Precision::Bf16 {
                        2
                    } else {
                        4
                    };
                    estimate.tables += shared * (in_dim * bytes + 4);
                }
                estimate.state += if lsh.retrieval.center_queries {
                    in_dim * 4
                } else {
                    0
                };
            }
            in_dim = out;
        }
        if let Some(wide) = &self.wide {
            estimate.parameters += wide.table_bytes() as u64;
            estimate.state += wide.table_bytes() as u64;
        }
        estimate
    }
}

#[cfg(test)]
mod tests;
