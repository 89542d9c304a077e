//! Evaluation during and after training: the periodic evaluation (exact beside LSH mode),
//! the collapse detector's warning, the retrieval-recall probe, and `slide-train eval`.

use std::path::Path;
use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::mix64;
use slide::{EvalStats, Examples, Mode, Network, Workspace};

use super::metrics::{RecallRecord, collapsed};
use super::report::{Evaluated, Reporter};
use super::{Failure, Log, restored};
use crate::config::{Config, TrainConfig};

/// Test samples probed for retrieval recall.
const RECALL_SAMPLES: usize = 16;

/// The evaluation at `step`: `train.eval_samples` test samples (all for 0), drawn from the
/// seed and the step only (not from earlier evaluations, so a resumed run evaluates the
/// same ones) into the front of `order`, scored in `train.eval_mode`; beside it the
/// LSH-mode P@1 of the same samples when the output layer samples and the mode is not LSH
/// mode already (a model that holds only under sampling shows there). Its seconds count
/// as time outside training in `report`, which also prints the collapse detector's
/// warning if it fires.
#[allow(clippy::too_many_arguments)]
pub(super) fn periodic(
    net: &Network,
    ws: &mut Workspace,
    test: &dyn Examples,
    order: &mut [usize],
    t: &TrainConfig,
    step: u64,
    output_sampled: bool,
    report: &mut Reporter,
) -> Result<Evaluated, Failure> {
    let started = Instant::now();
    let mode = t.eval_mode.mode();
    let n = if t.eval_samples == 0 {
        test.len()
    } else {
        t.eval_samples.min(test.len())
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(t.seed ^ step));
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    for i in 0..n.min(test.len().saturating_sub(1)) {
        let j = rng.random_range(i..test.len());
        order.swap(i, j);
    }
    let result = net
        .evaluate(ws, test, &order[..n], mode)
        .map_err(|e| Failure::Training(e.into()))?;
    let lsh = if mode != Mode::EvalLsh && output_sampled {
        let lsh = net
            .evaluate(ws, test, &order[..n], Mode::EvalLsh)
            .map_err(|e| Failure::Training(e.into()))?;
        Some(lsh.precision_at_1)
    } else {
        None
    };
    let seconds = started.elapsed().as_secs_f64();
    report.outside_training += seconds;
    if let Some(message) = collapse_warning(step, &result) {
        report.warn(&message);
    }
    Ok(Evaluated {
        result,
        seconds,
        lsh,
    })
}

/// The collapse detector's warning for an evaluation at `step`, if it fired.
pub(super) fn collapse_warning(step: u64, result: &EvalStats) -> Option<String> {
    collapsed(result).then(|| {
        format!(
            "warning: step {step}: output {} is the top-1 prediction of {:.1}% of the test samples, more than twice the most frequent label's share ({:.1}%): the model is collapsing under exact scoring",
            result.top1_output,
            100.0 * result.top1_share,
            100.0 * result.label_share
        )
    })
}

/// Retrieval recall at 10 of each sampled layer on a few labelled test samples (their
/// labels forced in, as in training), drawn from the seed and the step; `None` when the
/// draw holds no labelled sample. Its seconds count as time outside training in `report`.
pub(super) fn recall_probe(
    net: &Network,
    ws: &mut Workspace,
    test: &dyn Examples,
    seed: u64,
    step: u64,
    report: &mut Reporter,
) -> Result<Option<Vec<Option<RecallRecord>>>, Failure> {
    let started = Instant::now();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ step ^ 0x7265));
    let probe: Vec<usize> = (0..RECALL_SAMPLES.min(test.len()))
        .map(|_| rng.random_range(0..test.len()))
        .filter(|&i| !test.labels(i).is_empty())
        .collect();
    if probe.is_empty() {
        return Ok(None);
    }
    let r = net
        .retrieval_recall(ws, test, &probe, 10)
        .map_err(|e| Failure::Training(e.into()))?;
    report.outside_training += started.elapsed().as_secs_f64();
    Ok(Some(
        r.iter()
            .map(|r| {
                r.map(|r| RecallRecord {
                    top10: r.recall,
                    random: r.random,
                    samples: r.samples,
                })
            })
            .collect(),
    ))
}

/// `slide-train eval`: a checkpoint's metrics on the whole test set, or its first `samples`,
/// printed and returned with the seconds the evaluation took.
pub fn evaluate_checkpoint(
    config: &Config,
    path: &Path,
    mode: Mode,
    samples: Option<usize>,
) -> Result<(EvalStats, f64), Failure> {
    if let Some(memory) = config.memory {
        use crate::memory;
        let search = memory::search_for(mode, &memory);
        let (loaded, built) = memory::restored(config, memory, path, &|line| println!("{line}"))?;
        let file = memory::checkpoint_file(path);
        let samples = samples.unwrap_or(0);
        let (stats, seconds) = memory::evaluate(&built, &loaded, samples, search)?;
        let line = memory::describe(&stats, seconds, loaded.multi_label);
        println!("{}: {line}", file.display());
        return Ok((stats, seconds));
    }
    let (loaded, net) = restored(config, path, Log::Stdout)?;
    let test = loaded.test.examples();
    let all: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let started = Instant::now();
    let mut ws = slide::Workspace::new();
    let e = net
        .evaluate(&mut ws, test, &all, mode)
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
