//! A sampled layer's warm-up: uniformly random ids for the first steps or epochs of
//! training ([`Warmup`], [`WarmupLength`]), read from a config file's
//! `[network.layers.lsh.warmup]`. One of the concepts a layer's LSH settings are made of;
//! it knows nothing of them.

use crate::error::Result;

/// A warm-up: [`random`](Self::random) uniformly random ids join the sampling's
/// `random_extra` ones for the first [`length`](Self::length) of training. With `log_q` the
/// correction follows the random ids: while any are drawn the tables' picks count as
/// themselves and the random ids stand for the rest of the outputs; without them every
/// non-forced id is taken for a uniform draw. The layer learns the step count from
/// [`SparseLayer::set_steps_taken`](crate::SparseLayer::set_steps_taken), which a
/// [`Network`](crate::Network) calls. At the Amazon-670K shape 128 random ids for the first
/// half epoch (78 steps of 20,000 samples) put exact P@1 ahead of uniform sampling after
/// every epoch: docs/notebook/accuracy.md, "A warm-up of uniform negatives, 16 tables". In TOML:
/// `warmup = { random = 128, length = { epochs = 0.5 } }`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Warmup {
    /// Uniformly random ids per training sample during the warm-up (at least 1).
    pub random: usize,
    /// How long it lasts.
    pub length: WarmupLength,
}

/// How long a [`Warmup`] lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase", deny_unknown_fields)
)]
pub enum WarmupLength {
    /// This many training steps (at least 1).
    Steps(u64),
    /// This many epochs of the training set (a positive number), which a layer cannot count:
    /// [`NetworkConfig::with_epoch_length`](crate::NetworkConfig::with_epoch_length) turns
    /// it into steps before the network is built.
    Epochs(f64),
}

impl Warmup {
    /// Checks that the warm-up draws at least one id for at least one step (or a positive
    /// number of epochs).
    pub fn validate(&self) -> Result<()> {
        let fail = |reason: String| Err(crate::error::config_error("lsh", reason));
        if self.random == 0 {
            return fail("warmup.random must be at least 1 (no warm-up: leave it out)".into());
        }
        match self.length {
            WarmupLength::Steps(0) => fail("warmup.length: steps must be at least 1".into()),
            WarmupLength::Epochs(e) if !(e.is_finite() && e > 0.0) => fail(format!(
                "warmup.length: epochs must be a positive number, got {e}"
            )),
            _ => Ok(()),
        }
    }

    /// Refuses a length still in epochs: what a layer is built from counts steps.
    pub(crate) fn check_in_steps(&self) -> Result<()> {
        match self.length {
            WarmupLength::Steps(_) => Ok(()),
            WarmupLength::Epochs(_) => Err(crate::error::config_error(
                "lsh",
                "a warm-up in epochs needs the epoch's length in steps first \
                 (NetworkConfig::with_epoch_length)",
            )),
        }
    }

    /// The same warm-up with a length in epochs turned into steps: `epochs` times
    /// `steps_per_epoch`, rounded down, at least 1.
    pub fn in_steps(self, steps_per_epoch: u64) -> Self {
        let length = match self.length {
            WarmupLength::Epochs(epochs) => {
                WarmupLength::Steps(((epochs * steps_per_epoch as f64) as u64).max(1))
            }
            steps => steps,
        };
        Warmup { length, ..self }
    }

    /// The random ids and the length in steps, `(0, 0)` for a length in epochs (which
    /// [`check_in_steps`](Self::check_in_steps) refuses at a layer's construction).
    pub(crate) fn random_and_steps(&self) -> (usize, u64) {
        match self.length {
            WarmupLength::Steps(steps) => (self.random, steps),
            WarmupLength::Epochs(_) => (0, 0),
        }
    }

    /// The random ids split by `part`, as one rank of a sharded layer draws them.
    pub(crate) fn rank_share(self, part: &impl Fn(usize) -> usize) -> Self {
        Warmup {
            random: part(self.random),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warm-up in epochs becomes `epochs * steps_per_epoch` steps, rounded down, at least
    /// 1 (the shipped half epoch of 157 steps is 78); one in steps stays as it is. (That a
    /// network is not built from one still in epochs: `lsh_config/tests.rs`.)
    #[test]
    fn a_warm_up_in_epochs_is_turned_into_steps() {
        let warmup = |length| Warmup { random: 4, length };
        let in_epochs = warmup(WarmupLength::Epochs(0.5));
        assert_eq!(in_epochs.in_steps(157), warmup(WarmupLength::Steps(78)));
        assert_eq!(in_epochs.in_steps(1), warmup(WarmupLength::Steps(1)));
        assert_eq!(
            warmup(WarmupLength::Steps(9)).in_steps(157),
            warmup(WarmupLength::Steps(9))
        );
        assert_eq!(in_epochs.random_and_steps(), (0, 0));
        assert_eq!(in_epochs.in_steps(157).random_and_steps(), (4, 78));
    }
}
