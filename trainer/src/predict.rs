//! `slide-train predict`: a checkpoint's answers for every sample of the config's test
//! file, one line each, as a deployed model would give them.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use slide::{EvalOptions, Mode};

use crate::config::Config;
use crate::failure::Failure;
use crate::train::prepare::{Log, restored};

/// What [`predict_checkpoint`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictStats {
    /// Samples predicted.
    pub samples: usize,
    /// Seconds the predictions took (the forward passes and ranking, not the file's
    /// writing).
    pub seconds: f64,
    /// Share of the samples whose best output is one of their labels (P@1), or `None` for
    /// a file without labels.
    pub precision_at_1: Option<f64>,
    /// Recall@k, the `k` asked for: the mean over labelled samples of the share of their
    /// labels among their `k` answers (`None` for a file without labels).
    pub recall_at_k: Option<f64>,
    /// Whether this process wrote the predictions: one process does, and of the ranks of an
    /// MPI job the first (the others computed the same answers and stay silent).
    pub wrote: bool,
}

/// Loads the checkpoint at `path` into the network `config` describes and writes, for each
/// of the first `samples` (default: all) samples of the config's test file, its `top_k`
/// highest-scoring outputs (at least 1, at most the label count) to `out` (standard output
/// when `None`): one line per sample, in the file's order, of `output:score` pairs
/// separated by spaces, best first (see [`slide::Network::predict`] for the scores). `mode`
/// picks how outputs are scored ([`Mode::EvalExact`]: every output; [`Mode::EvalLsh`]:
/// those the tables pick; `None`: the config's `eval_mode`); the config's other evaluation
/// options (precision, LSH-mode pool) apply.
pub fn predict_checkpoint(
    config: &Config,
    path: &Path,
    mode: Option<Mode>,
    samples: Option<usize>,
    top_k: usize,
    out: Option<&Path>,
) -> Result<PredictStats, Failure> {
    if top_k == 0 {
        return Err(Failure::Input(anyhow::anyhow!(
            "--top-k must be at least 1"
        )));
    }
    let (loaded, net) = restored(config, path, Log::Stderr)?;
    if top_k > loaded.labels {
        return Err(Failure::Input(anyhow::anyhow!(
            "--top-k {top_k} is more than the model's {} labels",
            loaded.labels
        )));
    }
    // The ranks of an MPI job get the same (merged) answers: the first writes them.
    let first_rank = net.communicator().rank() == 0;
    let test = loaded.test.examples();
    let batch: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let started = Instant::now();
    let options = EvalOptions {
        mode: mode.unwrap_or(config.train.eval.mode),
        ..config.train.eval
    };
    let predictions = net
        .predict(&mut slide::Workspace::new(), test, &batch, options, top_k)
        .map_err(|e| Failure::Training(e.into()))?;
    let seconds = started.elapsed().as_secs_f64();
    let (precision_at_1, recall_at_k) = against_labels(&predictions, test, &batch);
    let write = |sink: &mut dyn Write| -> std::io::Result<()> {
        let mut sink = BufWriter::new(sink);
        for prediction in &predictions {
            for (i, (id, logit)) in prediction.iter().enumerate() {
                let gap = if i == 0 { "" } else { " " };
                write!(sink, "{gap}{id}:{logit}")?;
            }
            writeln!(sink)?;
        }
        sink.flush()
    };
    match out {
        _ if !first_rank => Ok(()),
        Some(file) => std::fs::File::create(file)
            .and_then(|mut f| write(&mut f))
            .with_context(|| format!("{}: cannot write the predictions", file.display())),
        None => write(&mut std::io::stdout().lock()).context("cannot write the predictions"),
    }
    .map_err(Failure::Input)?;
    Ok(PredictStats {
        samples: batch.len(),
        seconds,
        precision_at_1,
        recall_at_k,
        wrote: first_rank,
    })
}

/// P@1 and Recall@k of `predictions` (each sample's `k` best) against the labels of
/// `batch` of `test`, over the labelled samples (recall) and all (P@1); `None` for both
/// when no sample has a label.
fn against_labels(
    predictions: &[Vec<(u32, f32)>],
    test: &dyn slide::Examples,
    batch: &[usize],
) -> (Option<f64>, Option<f64>) {
    let (mut hits, mut recall, mut labelled) = (0usize, 0.0f64, 0usize);
    for (prediction, &sample) in predictions.iter().zip(batch) {
        let labels = test.labels(sample);
        if labels.is_empty() {
            continue;
        }
        labelled += 1;
        let found = |id: &u32| labels.contains(id);
        hits += usize::from(prediction.first().is_some_and(|(id, _)| found(id)));
        let recalled = prediction.iter().filter(|(id, _)| found(id)).count();
        recall += recalled as f64 / labels.len() as f64;
    }
    if labelled == 0 {
        return (None, None);
    }
    let n = batch.len().max(1) as f64;
    (Some(hits as f64 / n), Some(recall / labelled as f64))
}
