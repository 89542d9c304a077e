//! The core's network config of a validated config: [`Config::network`].

use slide::NetworkConfig;

use super::Config;

impl Config {
    /// The core network config for `input_dim` inputs and a training set of
    /// `train_samples` (which turns a warm-up given in epochs into steps:
    /// [`NetworkConfig::with_epoch_length`]). The layers, Adam's settings and the rebuild
    /// schedule are the core's, as read; the last layer's size must be the number of
    /// labels; the core validates the rest.
    pub fn network(&self, input_dim: usize, train_samples: usize) -> NetworkConfig {
        let t = &self.train;
        NetworkConfig {
            input_dim,
            layers: self.network.layers.clone(),
            adam: t.adam,
            rebuild: t.rebuild,
            seed: t.seed,
            heads: self.network.heads.clone(),
            input_power: self
                .network
                .input_power
                .unwrap_or(NetworkConfig::DEFAULT_INPUT_POWER),
        }
        .with_epoch_length(t.steps_per_epoch(train_samples))
    }
}
