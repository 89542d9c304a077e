//! What the model's methods share: the trainer's failures as Python exceptions, thread
//! pools, and configs read for arrays (sized by them) or for a saved model.

use std::path::Path;

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use slide_trainer::config::{self, Config};
use slide_trainer::failure::Failure;

/// A trainer failure as a Python exception with the CLI's message: bad input is a
/// `ValueError`, a failure while training a `RuntimeError`, a signal a
/// `KeyboardInterrupt`.
pub fn failure(e: Failure) -> PyErr {
    match e {
        Failure::Input(e) => PyValueError::new_err(format!("{e:#}")),
        Failure::Training(e) => PyRuntimeError::new_err(format!("{e:#}")),
        Failure::Interrupted { message, .. } => PyKeyboardInterrupt::new_err(message),
    }
}

/// An error of the trainer's library as a `ValueError`.
pub fn bad(e: anyhow::Error) -> PyErr {
    PyValueError::new_err(format!("{e:#}"))
}

/// A thread pool of `threads` workers (`None`: one per core).
pub fn pool(threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        builder = builder.num_threads(n);
    }
    builder
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the threads: {e}")))
}

/// The config `text` (named `path` in errors) with `overrides`, sized for data of
/// `features` and `labels`: what a model is built from, and the text to save.
pub fn read_config(
    text: &str,
    path: &Path,
    overrides: &[String],
    (features, labels): (usize, usize),
) -> PyResult<(Config, String)> {
    let mut all = overrides.to_vec();
    all.extend([
        "data.format=\"xmc\"".to_string(),
        format!("data.features={features}"),
        format!("data.labels={labels}"),
    ]);
    for key in ["train", "test"] {
        all.push(format!("data.{key}=\"(arrays)\""));
    }
    let text = config::with_overrides(text, path, &all).map_err(bad)?;
    let parsed = config::parse(&text, path, &[]).map_err(bad)?;
    Ok((parsed, text))
}

/// The input dimension, label count and training-set size a config declares:
/// `data.features` and `data.labels`, else the header of the XMC training file it names,
/// which also gives the training samples (which turn a warm-up in epochs into steps; 1
/// without the file, where a saved config gives its warm-ups in steps).
pub fn shape(config: &Config) -> PyResult<(usize, usize, usize)> {
    let data = &config.data;
    let header = match data.train.as_deref() {
        Some(train) if train.is_file() => Some(
            slide::formats::xmc::read_xmc_header(train)
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
        ),
        _ => None,
    };
    let features = data.features.or(header.map(|h| h.features));
    let labels = data.labels.or(header.map(|h| h.labels));
    match (features, labels) {
        (Some(f), Some(l)) => Ok((f, l, header.map_or(1, |h| h.points))),
        _ => Err(PyValueError::new_err(
            "the config gives neither data.features and data.labels nor an XMC training file to read them from",
        )),
    }
}

/// `metrics` as a dict: `"p@1"`, `"p@3"`, `"p@5"`, `"ndcg@1"`, ..., and with propensities
/// `"psp@1"`, ..., `"psndcg@5"`.
pub(crate) fn metrics_dict<'py>(
    py: Python<'py>,
    metrics: &slide::Metrics,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let dict = pyo3::types::PyDict::new(py);
    for (name, k, value) in metrics.entries() {
        dict.set_item(format!("{name}@{k}"), value)?;
    }
    Ok(dict)
}
