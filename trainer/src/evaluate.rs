//! `slide-train eval`: a checkpoint scored on the config's test file.

use std::path::Path;
use std::time::Instant;

use slide::{EvalOptions, EvalStats, Mode};

use crate::config::Config;
use crate::failure::Failure;
use crate::train::prepare::{Log, restored};

/// `slide-train eval`: a checkpoint's metrics on the whole test set, or its first `samples`,
/// in `mode` (the config's other evaluation options as set), printed and returned with
/// the seconds the evaluation took.
pub fn evaluate_checkpoint(
    config: &Config,
    path: &Path,
    mode: Mode,
    samples: Option<usize>,
) -> Result<(EvalStats, f64), Failure> {
    let (loaded, net) = restored(config, path, Log::Stdout)?;
    let test = loaded.test.examples();
    let all: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let started = Instant::now();
    let mut ws = slide::Workspace::new();
    let e = net
        .evaluate(
            &mut ws,
            test,
            &all,
            EvalOptions {
                mode,
                ..config.train.eval
            },
        )
        .map_err(|e| Failure::Training(e.into()))?;
    let seconds = started.elapsed().as_secs_f64();
    // The ranks of an MPI job have the same (merged) result: the first prints it.
    if net.communicator().rank() > 0 {
        return Ok((e, seconds));
    }
    if loaded.multi_label {
        println!(
            "{}: step {}, {} test samples: P@1 {:.4}, P@3 {:.4}, P@5 {:.4} ({:.0} outputs scored per sample, {:.1} s)",
            path.display(),
            net.step(),
            e.samples,
            e.precision_at_1,
            e.precision_at_3,
            e.precision_at_5,
            e.active_outputs,
            seconds
        );
    } else {
        println!(
            "{}: step {}, {} test samples: accuracy {:.4} ({:.0} outputs scored per sample, {:.1} s)",
            path.display(),
            net.step(),
            e.samples,
            e.precision_at_1,
            e.active_outputs,
            seconds
        );
    }
    Ok((e, seconds))
}
