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

/// FNV-1a, 64 bits, continuing from `hash` (start from [`FNV_OFFSET`]): a stable hash for
/// identities and checksums (the same bytes give the same value on every platform and
/// version).
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

impl NetworkConfig {
    /// Every setting as `(name, value)`, in a fixed order: `input_dim`, `seed`, then per
    /// layer `layers.I.out_dim`, `.activation`, `.layout`, `.init` and, for sampled layers,
    /// `.lsh.family`, `.lsh.params`, `.lsh.bucket_capacity`, `.lsh.policy`, `.lsh.sampling`,
    /// `.lsh.log_q`, `.lsh.shared_negatives`, `.lsh.center_queries`, then `adam` and
    /// `rebuild`. Checkpoints record it, so a resume can name the settings that changed.
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
            if let Some(lsh) = &l.lsh {
                put("lsh.family", format!("{:?}", lsh.family));
                put("lsh.params", format!("{:?}", lsh.params));
                put("lsh.bucket_capacity", lsh.bucket_capacity.to_string());
                put("lsh.policy", format!("{:?}", lsh.policy));
                put("lsh.sampling", format!("{:?}", lsh.sampling));
                put("lsh.log_q", lsh.log_q.to_string());
                put("lsh.shared_negatives", lsh.shared_negatives.to_string());
                put("lsh.center_queries", lsh.center_queries.to_string());
            }
        }
        out.push(("adam".to_string(), format!("{:?}", self.adam)));
        out.push(("rebuild".to_string(), format!("{:?}", self.rebuild)));
        out
    }

    /// A stable hash of what a trained model's state depends on to be read back and
    /// evaluated: input size, seed (the hash functions are drawn from it, not saved), and
    /// each layer's size, activation, layout and LSH settings. Not the optimizer, the
    /// rebuild schedule or the initialisation, which only shape training.
    pub fn architecture_hash(&self) -> u64 {
        self.describe()
            .iter()
            .filter(|(key, _)| !(key == "adam" || key == "rebuild" || key.ends_with(".init")))
            .fold(FNV_OFFSET, |h, (key, value)| {
                fnv1a(fnv1a(fnv1a(h, key.as_bytes()), b"="), value.as_bytes())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::{Init, WeightLayout};

    fn config() -> NetworkConfig {
        let layer = |out_dim, activation| LayerConfig {
            out_dim,
            activation,
            layout: WeightLayout::NeuronMajor,
            init: Init::Glorot,
            lsh: None,
        };
        NetworkConfig {
            input_dim: 10,
            layers: vec![layer(8, Activation::Relu), layer(3, Activation::Softmax)],
            adam: AdamConfig::default(),
            rebuild: RebuildSchedule::Fixed { every: 5 },
            seed: 1,
        }
    }

    /// The hash is a fixed number for a fixed config (it names checkpoints' networks across
    /// versions), ignores training-only settings and changes with the network.
    #[test]
    fn architecture_hash_is_stable_and_ignores_training_settings() {
        let base = config();
        assert_eq!(base.architecture_hash(), 0xace3_a60e_1fd1_8647);
        let mut trained_differently = base.clone();
        trained_differently.adam.lr = 0.5;
        trained_differently.rebuild = RebuildSchedule::Fixed { every: 9 };
        trained_differently.layers[0].init = Init::FanIn;
        assert_eq!(
            trained_differently.architecture_hash(),
            base.architecture_hash()
        );
        let mut wider = base.clone();
        wider.layers[0].out_dim = 9;
        assert_ne!(wider.architecture_hash(), base.architecture_hash());
        let mut reseeded = base.clone();
        reseeded.seed = 2;
        assert_ne!(reseeded.architecture_hash(), base.architecture_hash());
        let keys: Vec<String> = base.describe().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys[..3], ["input_dim", "seed", "layers.0.out_dim"]);
    }
}
