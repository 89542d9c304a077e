//! What a [`Network`](crate::Network) is built from: its layers, heads, optimizer settings,
//! table rebuild schedule and seed, checked before anything is allocated. One concept a
//! file: the network's config and its checks here; the rebuild schedule
//! ([`RebuildSchedule`], `config/rebuild.rs`); what a checkpoint records of it
//! ([`NetworkConfig::describe`], [`NetworkConfig::architecture_hash`], `config/identity.rs`);
//! its memory estimate ([`MemoryEstimate`], `config/memory.rs`).

use crate::error::{Result, config_error};
use crate::head::HeadConfig;
use crate::layer::{Activation, LayerConfig, SoftmaxLoss};
use crate::optimizer::AdamConfig;

mod identity;
mod memory;
mod rebuild;

pub use identity::{FNV_OFFSET, FNV_PRIME, fnv1a};
pub use memory::MemoryEstimate;
pub use rebuild::RebuildSchedule;

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
    /// The heads that score outputs beside the last layer, in order ([`crate::head`];
    /// empty: none). With the `serde` feature, `[[network.heads]]` entries.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub heads: Vec<HeadConfig>,
    /// The power each input value is raised to, keeping its sign, before the first layer and
    /// the heads read it; each sample's input then keeps its L2 norm (default 1: the
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
    /// [`Self::input_power`]'s default: the inputs as stored.
    pub const DEFAULT_INPUT_POWER: f32 = 1.0;

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
            heads: Vec::new(),
            input_power: Self::DEFAULT_INPUT_POWER,
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

    /// What the heads are built for: the input features and the last layer's outputs.
    pub fn head_shape(&self) -> crate::head::HeadShape {
        crate::head::HeadShape {
            inputs: self.input_dim,
            outputs: self.layers.last().map_or(0, |l| l.out_dim),
        }
    }

    /// Checks the network-level rules ([`Self::validate_model`]) and the optimizer's and the
    /// schedule's ranges. Each layer's own settings are checked when it is built.
    pub fn validate(&self) -> Result<()> {
        self.validate_model()?;
        self.adam.validate()?;
        self.rebuild.validate()
    }

    /// Checks the model's own rules, each written once here (a config reader calls this
    /// rather than repeating them): an input, an input power that is a finite number above
    /// 0, at least one layer, a softmax or sigmoid output layer and no other such layer, no
    /// log-Q correction of a sigmoid, valid heads. Errors name the key under `[network]`
    /// (`input_power`, `layers`, `layers[I]`, `heads.KIND.KEY`).
    pub fn validate_model(&self) -> Result<()> {
        if self.input_dim == 0 {
            return Err(config_error("input_dim", "must be at least 1"));
        }
        if !(self.input_power.is_finite() && self.input_power > 0.0) {
            return Err(config_error(
                "input_power",
                "must be a finite number above 0",
            ));
        }
        let Some(last) = self.layers.last() else {
            return Err(config_error("layers", "at least one layer is needed"));
        };
        let output = format!("layers[{}]", self.layers.len() - 1);
        if !last.activation.is_output() {
            return Err(config_error(
                output,
                "must use the softmax or the sigmoid activation",
            ));
        }
        if let Some(i) = self.layers[..self.layers.len() - 1]
            .iter()
            .position(|l| l.activation.is_output())
        {
            return Err(config_error(
                format!("layers[{i}]"),
                "softmax and sigmoid are only for the output layer",
            ));
        }
        if let Some(i) = self.layers[..self.layers.len() - 1]
            .iter()
            .position(|l| matches!(l.init, crate::Init::Centroids { .. }))
        {
            return Err(config_error(
                format!("layers[{i}]"),
                "init = { centroids = ... } is for the output layer: its rows are labels",
            ));
        }
        if last.activation == Activation::Sigmoid && last.lsh.is_some_and(|l| l.negatives.log_q) {
            return Err(config_error(
                output,
                "log_q corrects a sampled softmax; a sigmoid output has no normaliser to \
                 correct (set log_q = false)",
            ));
        }
        crate::head::validate(&self.heads)
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

#[cfg(test)]
mod tests;
