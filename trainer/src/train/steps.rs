//! The training loop's steps: the epochs' shuffles, a network step and a head-only step,
//! each stopping the run with a message when it diverges.

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

/// One training step of `batch` at learning rate `lr`; a diverging step stops the run with
/// a message naming the step and the checkpoint folder.
pub(super) fn train_step(
    net: &mut Network,
    ws: &mut slide::Workspace,
    train: &dyn slide::Examples,
    batch: &[usize],
    lr: f32,
    stats: &mut StepStats,
    checkpoints: &Path,
) -> Result<(), Failure> {
    let this_step = net.step() + 1;
    let diverged = |what: String| diverged(this_step, checkpoints, what, "train.lr");
    net.set_learning_rate(lr)
        .map_err(|e| Failure::Training(e.into()))?;
    match net.train_step_with(ws, train, batch, stats) {
        Ok(()) => {}
        Err(e @ slide::SlideError::Diverged { .. }) => return Err(diverged(e.to_string())),
        Err(e) => return Err(Failure::Training(e.into())),
    }
    if !stats.loss.is_finite() {
        return Err(diverged(format!("the loss is {}", stats.loss)));
    }
    Ok(())
}

/// One step of the wide head alone (`network.wide.epochs`), at its learning rate `lr`; a
/// non-finite loss stops the run as [`train_step`] does.
pub(super) fn head_step(
    net: &mut Network,
    ws: &mut slide::Workspace,
    train: &dyn slide::Examples,
    batch: &[usize],
    lr: f32,
    stats: &mut StepStats,
    checkpoints: &Path,
) -> Result<(), Failure> {
    *stats = net
        .train_head_step(ws, train, batch, lr)
        .map_err(|e| Failure::Training(e.into()))?;
    if !stats.loss.is_finite() {
        let what = format!("the wide head's loss is {}", stats.loss);
        return Err(diverged(net.step(), checkpoints, what, "network.wide.lr"));
    }
    Ok(())
}
