//! What a [`Network`](crate::Network) is built from: its layers, optimizer settings, table
//! rebuild schedule and seed, checked before anything is allocated.

use crate::error::{Result, config_error};
use crate::layer::{Activation, LayerConfig};
use crate::optimizer::AdamConfig;

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

impl RebuildSchedule {
    /// Checks that periods are at least one step and growth is finite and at least 1.
    pub fn validate(&self) -> Result<()> {
        match *self {
            RebuildSchedule::Fixed { every: 0 } | RebuildSchedule::Exponential { first: 0, .. } => {
                Err(config_error(
                    "rebuild schedule",
                    "period must be at least 1 step",
                ))
            }
            RebuildSchedule::Exponential { growth, .. }
                if !(growth.is_finite() && growth >= 1.0) =>
            {
                Err(config_error(
                    "rebuild schedule",
                    "growth must be a finite number >= 1",
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

impl NetworkConfig {
    /// Checks the network-level rules (a softmax output layer and no other, the optimizer's
    /// and the schedule's ranges). Each layer's own settings are checked when it is built.
    pub fn validate(&self) -> Result<()> {
        if self.input_dim == 0 {
            return Err(config_error("network", "input_dim must be at least 1"));
        }
        let Some(last) = self.layers.last() else {
            return Err(config_error("network", "needs at least one layer"));
        };
        if last.activation != Activation::Softmax {
            return Err(config_error(
                "output layer",
                "must use the softmax activation",
            ));
        }
        if let Some(i) = self.layers[..self.layers.len() - 1]
            .iter()
            .position(|l| l.activation == Activation::Softmax)
        {
            return Err(config_error(
                format!("layer {i}"),
                "softmax is only for the output layer",
            ));
        }
        self.adam.validate()?;
        self.rebuild.validate()
    }
}
