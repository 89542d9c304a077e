//! What a checkpoint is of: the format's name and version, the run's position, and the
//! identity (network and settings) a load checks.

use slide::NetworkConfig;

/// The format written by this version. Version 2 (which hashed tensor bytes one at a time)
/// is still read; any other is refused.
pub const FORMAT_VERSION: &str = "3";
pub(super) const PREVIOUS_VERSION: &str = "2";
pub(super) const FORMAT_NAME: &str = "slide-checkpoint";

/// Where in the run a checkpoint was taken (after `batch` batches of `epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Epoch in progress (1-based).
    pub epoch: usize,
    /// Batches of that epoch already trained.
    pub batch: usize,
}

/// What a checkpoint was written for: the network's architecture hash (what evaluation
/// needs to match) and every setting of the run (what a resume needs to match), from
/// [`NetworkConfig::describe`].
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// [`NetworkConfig::architecture_hash`].
    pub network: u64,
    /// `(name, value)` of every setting.
    pub settings: Vec<(String, String)>,
}

impl Identity {
    /// The identity of a run of `config` with batches of `batch_size` (the batches its
    /// training set gets: [`TrainConfig::batch`](crate::config::TrainConfig::batch)).
    pub fn of(config: &NetworkConfig, batch_size: usize) -> Self {
        let mut settings = config.describe();
        settings.push(("train.batch_size".into(), batch_size.to_string()));
        Identity {
            network: config.architecture_hash(),
            settings,
        }
    }

    /// The identity of rank `rank` of a run of `ranks` whose output layer is split between
    /// them (unchanged for one rank): its network is its slice, so a checkpoint of another
    /// rank or another number of ranks is another network, and the settings name both.
    pub fn of_rank(mut self, rank: usize, ranks: usize) -> Self {
        if ranks > 1 {
            self.network = slide::lsh::mix64(
                self.network ^ slide::lsh::mix64(((ranks as u64) << 32) | rank as u64),
            );
            self.settings
                .push(("world.ranks".into(), ranks.to_string()));
            self.settings.push(("world.rank".into(), rank.to_string()));
        }
        self
    }
}

/// How much of the identity a load requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Require {
    /// The same network (evaluation).
    Network,
    /// The same network and training settings (resuming).
    Everything,
}
