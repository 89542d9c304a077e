//! The training loop's steps: the epochs' shuffles, and a step of the network or of the
//! heads alone, stopping the run with a message when it diverges.

use std::path::Path;

use anyhow::anyhow;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::mix64;
use slide::{Network, StepStats};

use crate::failure::Failure;

/// The failure of a run whose step `step` diverged (`what`), with the setting to lower and
/// the checkpoint folder.
fn diverged(step: u64, checkpoints: &Path, what: String, setting: &str) -> Failure {
    Failure::Training(anyhow!(
        "step {step}: {what}; training stopped (lower {setting}?); the last good checkpoint is the newest in {}",
        checkpoints.display()
    ))
}

/// `order` as the permutation of epoch `epoch`: it depends only on the seed and the epoch,
/// so a resumed run replays it exactly.
pub(super) fn shuffle(order: &mut [usize], seed: u64, epoch: usize) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ mix64(epoch as u64)));
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
}

/// What a step trains, at which learning rate.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rate {
    /// The network (and its heads beside it), at Adam's rate.
    Network(f32),
    /// The heads alone (a head's `epochs`), head-only step `step` of `steps`.
    Heads {
        /// The head-only step, from 0.
        step: u64,
        /// Head-only steps in all.
        steps: u64,
    },
}

/// One training step of `batch` at `rate`; a diverging step (an error saying so, or a loss
/// that is not finite) stops the run with a message naming the step, the rate to lower and
/// the checkpoint folder.
pub(super) fn train_step(
    net: &mut Network,
    ws: &mut slide::Workspace,
    train: &dyn slide::Examples,
    batch: &[usize],
    rate: Rate,
    stats: &mut StepStats,
    checkpoints: &Path,
) -> Result<(), Failure> {
    let this_step = net.step() + 1;
    let (result, setting, loss) = match rate {
        Rate::Network(lr) => {
            net.set_learning_rate(lr)
                .map_err(|e| Failure::Training(e.into()))?;
            let result = net.train_step_with(ws, train, batch, stats);
            (result, "train.lr", "the loss")
        }
        Rate::Heads { step, steps } => {
            let result = net
                .train_heads_step(ws, train, batch, (step, steps))
                .map(|heads| *stats = heads);
            (result, "the heads' lr", "the heads' loss")
        }
    };
    let diverged = |what: String| diverged(this_step, checkpoints, what, setting);
    match result {
        Ok(()) => {}
        Err(e @ slide::SlideError::Diverged { .. }) => return Err(diverged(e.to_string())),
        Err(e) => return Err(Failure::Training(e.into())),
    }
    if !stats.loss.is_finite() {
        return Err(diverged(format!("{loss} is {}", stats.loss)));
    }
    Ok(())
}
