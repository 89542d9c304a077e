//! Evaluation during training: the periodic evaluation (exact beside LSH mode), the
//! collapse detector's warning, and the retrieval-recall probe.

use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::mix64;
use slide::{EvalOptions, EvalStats, Examples, Mode, Network, Propensities, Workspace};

use super::metrics::{RecallRecord, collapsed};
use super::report::{Evaluated, Reporter};
use crate::config::TrainConfig;
use crate::failure::Failure;

/// Test samples probed for retrieval recall.
const RECALL_SAMPLES: usize = 16;

/// The evaluation at `step`: `train.eval_samples` test samples (all for 0), drawn from the
/// seed and the step only (not from earlier evaluations, so a resumed run evaluates the
/// same ones) into the front of `order`, scored in `train.eval_mode`; beside it the
/// LSH-mode P@1 of the same samples when the output layer samples and the mode is not LSH
/// mode already (a model that holds only under sampling shows there). Its seconds count
/// as time outside training in `report`, which also prints the collapse detector's
/// warning if it fires. With `propensities` (the training set's), the propensity-scored
/// metrics too.
pub(super) fn periodic(
    net: &Network,
    ws: &mut Workspace,
    (test, propensities): (&dyn Examples, Option<&Propensities>),
    order: &mut [usize],
    t: &TrainConfig,
    (step, output_sampled): (u64, bool),
    report: &mut Reporter,
) -> Result<Evaluated, Failure> {
    let started = Instant::now();
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
        .evaluate_with(ws, test, &order[..n], t.eval, propensities)
        .map_err(|e| Failure::Training(e.into()))?;
    let lsh = if t.eval.mode != Mode::EvalLsh && output_sampled {
        let lsh_mode = EvalOptions {
            mode: Mode::EvalLsh,
            ..t.eval
        };
        let lsh = net
            .evaluate(ws, test, &order[..n], lsh_mode)
            .map_err(|e| Failure::Training(e.into()))?;
        Some(lsh.metrics.precision[0])
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
