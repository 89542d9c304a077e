//! Running the trainer's loop for the Python package: a fit's config, arrays (as training and
//! validation sets) and propensities ([`Run`]), and the loop on its own threads with the GIL
//! released.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use slide::{Examples, Propensities, SparseExamples};
use slide_trainer::config::Config;
use slide_trainer::data::Loaded;
use slide_trainer::failure::Failure;
use slide_trainer::train::{self, Talk};

use crate::arrays::{Csr, Inputs, Labels, Validation, examples};
use crate::support::{pool, read_config};

/// The training set of `x`, `y` (`features` inputs, `labels` labels) and the validation
/// set (empty without one); an empty `x` is an error.
fn sets(
    x: Inputs<'_>,
    y: Labels<'_>,
    validation: Option<Validation<'_>>,
    features: usize,
    labels: usize,
) -> PyResult<(SparseExamples, SparseExamples)> {
    let x_csr = Csr::inputs((x.0, x.1, x.2, features));
    let y_csr = Csr::labels((y.0, y.1, labels));
    let train_set = examples(&x_csr, Some(&y_csr))?;
    let test_set = match validation {
        Some(((vi, vx, vd), (li, lx))) => {
            let xv = Csr::inputs((vi, vx, vd, features));
            let yv = Csr::labels((li, lx, labels));
            examples(&xv, Some(&yv))?
        }
        None => SparseExamples::new(),
    };
    if train_set.len() == 0 {
        return Err(PyValueError::new_err("X has no rows to train on"));
    }
    Ok((train_set, test_set))
}

/// The trainer's loop on `loaded` from `start`, on `threads` threads with the GIL
/// released; Ctrl-C stops it after the step in progress (the result says so).
pub(crate) fn run_loop(
    py: Python<'_>,
    config: &Config,
    loaded: Loaded,
    out: &Path,
    verbose: bool,
    threads: Option<usize>,
    start: train::Start<'_>,
) -> PyResult<Result<train::Trained, Failure>> {
    let talk = if verbose { Talk::All } else { Talk::Nothing };
    let pool = pool(threads)?;
    let interrupt = Arc::new(AtomicUsize::new(0));
    let on_signal = signal_hook::flag::register_usize(
        signal_hook::consts::SIGINT,
        Arc::clone(&interrupt),
        signal_hook::consts::SIGINT as usize,
    )
    .map_err(|e| PyRuntimeError::new_err(format!("cannot watch for Ctrl-C: {e}")))?;
    let result = py.detach(|| {
        pool.install(|| {
            train::train(
                (config, loaded, Instant::now()),
                out,
                talk,
                start,
                &interrupt,
            )
        })
    });
    signal_hook::low_level::unregister(on_signal);
    Ok(result)
}

/// What a run of `fit` or `partial_fit` trains with, besides its data: the config (and its
/// text), the shape, and the training labels' propensities.
pub(crate) struct Run {
    pub(crate) config: Config,
    pub(crate) text: String,
    pub(crate) features: usize,
    pub(crate) labels: usize,
    pub(crate) train_samples: usize,
    pub(crate) propensities: Propensities,
}

impl Run {
    /// The config `text` (named `path`) with `overrides`, sized for `features` inputs and
    /// `labels` labels, and the data of `x`, `y` and the validation arrays.
    pub(crate) fn prepare(
        text: &str,
        path: &Path,
        overrides: &[String],
        (x, y, validation): (Inputs<'_>, Labels<'_>, Option<Validation<'_>>),
        (features, labels): (usize, usize),
    ) -> PyResult<(Run, Loaded)> {
        let (config, text) = read_config(text, path, overrides, (features, labels))?;
        let (train_set, test_set) = sets(x, y, validation, features, labels)?;
        let train_samples = train_set.len();
        let propensities = Propensities::from_examples(&train_set, labels, config.train.propensity)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let loaded = Loaded::sparse(train_set, test_set, features, labels);
        let run = Run {
            config,
            text,
            features,
            labels,
            train_samples,
            propensities,
        };
        Ok((run, loaded))
    }
}
