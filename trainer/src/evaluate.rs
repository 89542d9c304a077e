//! `slide-train eval`: a checkpoint scored on the config's test file, and the one way every
//! evaluation's figures are written (the eval command, the periodic evaluations, the run's
//! summary).

use std::path::Path;
use std::time::Instant;

use slide::{EvalOptions, EvalStats, Metrics, Mode};

use crate::config::Config;
use crate::failure::Failure;
use crate::train::prepare::{Log, restored};

/// `slide-train eval`: a checkpoint's metrics on the whole test set, or its first `samples`,
/// in `mode` (the config's `eval_mode` when `None`; its other evaluation options as set), with
/// the propensity-scored metrics from the training file's label counts, printed and
/// returned with the seconds the evaluation took.
pub fn evaluate_checkpoint(
    config: &Config,
    path: &Path,
    mode: Option<Mode>,
    samples: Option<usize>,
) -> Result<(EvalStats, f64), Failure> {
    let (loaded, net) = restored(config, path, Log::Stdout)?;
    let propensities = loaded
        .propensities(config.train.propensity)
        .map_err(|e| Failure::Input(e.into()))?;
    let test = loaded.test.examples();
    let all: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let options = EvalOptions {
        mode: mode.unwrap_or(config.train.eval.mode),
        ..config.train.eval
    };
    let started = Instant::now();
    let mut ws = slide::Workspace::new();
    let e = net
        .evaluate_with(&mut ws, test, &all, options, propensities.as_ref())
        .map_err(|e| Failure::Training(e.into()))?;
    let seconds = started.elapsed().as_secs_f64();
    // The ranks of an MPI job have the same (merged) result: the first prints it.
    if net.communicator().rank() > 0 {
        return Ok((e, seconds));
    }
    println!(
        "{}: step {}, {} test samples, {} mode: {} ({:.0} outputs scored per sample, {:.1} s)",
        path.display(),
        net.step(),
        e.samples,
        options.mode,
        metrics_text(&e.metrics, loaded.multi_label, ", "),
        e.active_outputs,
        seconds
    );
    Ok((e, seconds))
}

/// An evaluation's figures as the trainer prints them, `separator` between them: for
/// multi-label data P@1, P@3, P@5, nDCG@3, nDCG@5 and, with propensities, PSP@1, PSP@3,
/// PSP@5, PSnDCG@3, PSnDCG@5 (nDCG@1 and PSnDCG@1 equal P@1 and PSP@1; the metrics file
/// holds every one); for single-label data its accuracy.
pub fn metrics_text(m: &Metrics, multi_label: bool, separator: &str) -> String {
    if !multi_label {
        return format!("accuracy {:.4}", m.precision[0]);
    }
    let mut parts = vec![
        format!("P@1 {:.4}", m.precision[0]),
        format!("P@3 {:.4}", m.precision[1]),
        format!("P@5 {:.4}", m.precision[2]),
        format!("nDCG@3 {:.4}", m.ndcg[1]),
        format!("nDCG@5 {:.4}", m.ndcg[2]),
    ];
    if let (Some(psp), Some(psndcg)) = (m.psp, m.psndcg) {
        parts.extend([
            format!("PSP@1 {:.4}", psp[0]),
            format!("PSP@3 {:.4}", psp[1]),
            format!("PSP@5 {:.4}", psp[2]),
            format!("PSnDCG@3 {:.4}", psndcg[1]),
            format!("PSnDCG@5 {:.4}", psndcg[2]),
        ]);
    }
    parts.join(separator)
}
