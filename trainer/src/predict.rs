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
    /// Share of the samples whose best output is one of their labels (P@1; 0 for a file
    /// without labels).
    pub precision_at_1: f64,
    /// Whether this process wrote the predictions: one process does, and of the ranks of an
    /// MPI job the first (the others computed the same answers and stay silent).
    pub wrote: bool,
}

/// Loads the checkpoint at `path` into the network `config` describes and writes, for each
/// of the first `samples` (default: all) samples of the config's test file, its `top_k`
/// (1-5) highest-scoring outputs to `out` (standard output when `None`): one line per
/// sample, in the file's order, of `output:logit` pairs separated by spaces, best first.
/// `mode` picks how outputs are scored ([`Mode::EvalExact`]: every output;
/// [`Mode::EvalLsh`]: those the tables pick); the config's other evaluation options
/// (precision, LSH-mode pool) apply.
pub fn predict_checkpoint(
    config: &Config,
    path: &Path,
    mode: Mode,
    samples: Option<usize>,
    top_k: usize,
    out: Option<&Path>,
) -> Result<PredictStats, Failure> {
    if !(1..=5).contains(&top_k) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--top-k must be between 1 and 5, not {top_k}"
        )));
    }
    let (loaded, net) = restored(config, path, Log::Stderr)?;
    // The ranks of an MPI job get the same (merged) answers: the first writes them.
    let first_rank = net.communicator().rank() == 0;
    let test = loaded.test.examples();
    let batch: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let started = Instant::now();
    let options = EvalOptions {
        mode,
        ..config.train.eval
    };
    let predictions = net
        .predict(&mut slide::Workspace::new(), test, &batch, options)
        .map_err(|e| Failure::Training(e.into()))?;
    let seconds = started.elapsed().as_secs_f64();
    let hits = predictions
        .iter()
        .zip(&batch)
        .filter(|(p, s)| {
            p.first()
                .is_some_and(|(id, _)| test.labels(**s).contains(id))
        })
        .count();
    let write = |sink: &mut dyn Write| -> std::io::Result<()> {
        let mut sink = BufWriter::new(sink);
        for prediction in &predictions {
            for (i, (id, logit)) in prediction.iter().take(top_k).enumerate() {
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
        precision_at_1: hits as f64 / batch.len().max(1) as f64,
        wrote: first_rank,
    })
}
