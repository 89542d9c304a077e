//! The core's network config of a validated config: [`Config::network`].

use slide::{AdamConfig, NetworkConfig, RebuildSchedule};

use super::Config;

impl Config {
    /// The core network config for `input_dim` inputs and a training set of
    /// `train_samples` (which turns a warm-up given in epochs into steps:
    /// [`NetworkConfig::with_epoch_length`]). The layers are the core's, as read; the last
    /// one's size must be the number of labels; the core validates the rest.
    pub fn network(&self, input_dim: usize, train_samples: usize) -> NetworkConfig {
        let t = &self.train;
        NetworkConfig {
            input_dim,
            layers: self.network.layers.clone(),
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
        .with_epoch_length(t.steps_per_epoch(train_samples))
    }
}
