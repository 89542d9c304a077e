//! A trained network with the config it was built from: trained by the trainer's own loop
//! on arrays, scored and saved as `slide-train` checkpoints, loaded from them.

use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use slide::{
    EvalOptions, Examples, Metrics, Mode, Network, Propensities, SparseExamples, Workspace,
};
use slide_trainer::checkpoint::{self, Identity, Position, Require};
use slide_trainer::config::{self, Config};
use slide_trainer::failure::Failure;
use slide_trainer::train;

use crate::arrays::{Csr, Inputs, Labels, Validation, examples};
use crate::support::{bad, failure, metrics_dict, pool, shape};
use crate::training::{Run, run_loop};

/// The file beside a saved model's checkpoint that holds its config.
const CONFIG_FILE: &str = "config.toml";

/// A trained network, its config (as text and read) and its shape.
#[pyclass(module = "slide._slide")]
pub struct Model {
    net: Network,
    config: Config,
    /// The config's text with every override applied: what `save` writes.
    text: String,
    features: usize,
    labels: usize,
    train_samples: usize,
    /// The metrics of the last evaluation during training (`None` without validation
    /// data, or for a loaded model).
    last_eval: Option<Metrics>,
    /// The training labels' propensities (under the config's `propensity_a` and
    /// `propensity_b`), which `score` weighs with unless given others; `None` for a loaded
    /// model.
    propensities: Option<Propensities>,
}

#[pymethods]
impl Model {
    /// Trains a network as the config `text` (named `path`) with `overrides` says, on the
    /// inputs `x` and labels `y`, evaluating on `(x_val, y_val)` when given; metrics (and
    /// checkpoints, if the config asks) go to `out`. The GIL is released while it trains;
    /// Ctrl-C stops it after the step in progress.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (text, path, overrides, x, y, validation, out, verbose, threads))]
    fn fit(
        py: Python<'_>,
        text: &str,
        path: PathBuf,
        overrides: Vec<String>,
        x: Inputs<'_>,
        y: Labels<'_>,
        validation: Option<Validation<'_>>,
        out: PathBuf,
        verbose: bool,
        threads: Option<usize>,
    ) -> PyResult<Model> {
        let shape = (x.3, y.2);
        let (run, loaded) = Run::prepare(text, &path, &overrides, (x, y, validation), shape)?;
        let result = run_loop(
            py,
            &run.config,
            loaded,
            &out,
            verbose,
            threads,
            train::Start::New,
        );
        let trained = result?.map_err(failure)?;
        let model = Model::from_run(run, trained.net, trained.last_eval);
        match trained.interrupted {
            // Python's own handler saw the signal too: run it now, so that the
            // KeyboardInterrupt it raises does not replace this one (which carries the
            // model, for the caller to keep) at the next bytecode.
            Some(Failure::Interrupted { message, .. }) => {
                let _ = py.check_signals();
                Err(PyKeyboardInterrupt::new_err((message, Py::new(py, model)?)))
            }
            Some(other) => Err(failure(other)),
            None => Ok(model),
        }
    }

    /// Continues this model on `x` and `y` as `slide-train --init-from` does: a new run of
    /// the model's config (with `overrides`: its epochs, ...) from its weights, tables and
    /// optimizer state. `y` may have more label columns than the model: the output layer
    /// grows by them; `x` may not have more features. Metrics go to `out`. On Ctrl-C the
    /// model keeps what it learnt and `KeyboardInterrupt` is raised.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (overrides, x, y, validation, out, verbose, threads))]
    fn partial_fit(
        &mut self,
        py: Python<'_>,
        overrides: Vec<String>,
        x: Inputs<'_>,
        y: Labels<'_>,
        validation: Option<Validation<'_>>,
        out: PathBuf,
        verbose: bool,
        threads: Option<usize>,
    ) -> PyResult<()> {
        let (features, labels) = (x.3, y.2);
        if features > self.features {
            return Err(PyValueError::new_err(format!(
                "X has {features} features, the model reads {}: a continued model cannot add input features",
                self.features
            )));
        }
        if labels < self.labels {
            return Err(PyValueError::new_err(format!(
                "Y has {labels} label columns, the model {}: a continued model may add labels, not remove them",
                self.labels
            )));
        }
        let shape = (self.features, labels);
        let (run, loaded) = Run::prepare(
            &self.text,
            Path::new(CONFIG_FILE),
            &overrides,
            (x, y, validation),
            shape,
        )?;
        // The model as a checkpoint, which the run continues from (a folder of this call's
        // own: several models may continue at once).
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let saved =
            std::env::temp_dir().join(format!("slide-partial-fit-{}-{call}", std::process::id()));
        let at = Position { epoch: 1, batch: 0 };
        let checkpoint =
            checkpoint::save(&saved, &self.net, at, &self.identity(), 1).map_err(bad)?;
        let start = train::Start::InitFrom(&checkpoint);
        let result = run_loop(py, &run.config, loaded, &out, verbose, threads, start);
        let _ = std::fs::remove_dir_all(&saved);
        let trained = result?.map_err(failure)?;
        *self = Model::from_run(run, trained.net, trained.last_eval);
        match trained.interrupted {
            Some(Failure::Interrupted { message, .. }) => {
                let _ = py.check_signals();
                Err(PyKeyboardInterrupt::new_err(message))
            }
            Some(other) => Err(failure(other)),
            None => Ok(()),
        }
    }

    /// Each row's `k` (1 to the label count) best labels and their scores, best first, as
    /// two byte strings of `rows * k` uint32 and float32 values (a row with fewer scored
    /// labels is padded with label 2^32 - 1 and score -inf); `mode` is `"exact"` (every label
    /// scored), `"lsh"` or `"dense"`, or `None` for the config's `eval_mode`.
    #[pyo3(signature = (x, k, mode, threads))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: Inputs<'py>,
        k: usize,
        mode: Option<&str>,
        threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        if !(1..=self.labels).contains(&k) {
            return Err(PyValueError::new_err(format!(
                "k must be between 1 and the model's {} labels, not {k}",
                self.labels
            )));
        }
        let data = self.inputs(x)?;
        let options = self.options(mode)?;
        let answers = self.on_threads(py, threads, |net| {
            let batch: Vec<usize> = (0..data.len()).collect();
            net.predict(&mut Workspace::new(), &data, &batch, options, k)
        })?;
        let (mut ids, mut scores) = (Vec::with_capacity(answers.len() * k * 4), Vec::new());
        scores.reserve(answers.len() * k * 4);
        for answer in &answers {
            let padded = answer
                .iter()
                .copied()
                .chain(std::iter::repeat((u32::MAX, f32::NEG_INFINITY)));
            for (id, z) in padded.take(k) {
                ids.extend_from_slice(&id.to_le_bytes());
                scores.extend_from_slice(&z.to_le_bytes());
            }
        }
        Ok((PyBytes::new(py, &ids), PyBytes::new(py, &scores)))
    }

    /// The metrics of the rows of `x` against the labels `y` (see `slide::metrics`; in
    /// `mode`, or the config's `eval_mode` for `None`), with the number of rows: P@k and
    /// nDCG@k, and PSP@k and PSnDCG@k weighed by the propensities of `train_counts` (each
    /// label's training samples, and their number) when given, else of the labels the model
    /// was fitted on (a loaded model without `train_counts` has none).
    #[pyo3(signature = (x, y, mode, threads, train_counts))]
    fn score<'py>(
        &self,
        py: Python<'py>,
        x: Inputs<'py>,
        y: Labels<'py>,
        mode: Option<&str>,
        threads: Option<usize>,
        train_counts: Option<(Vec<u64>, usize)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_shape(x.3, y.2)?;
        let x = Csr::inputs((x.0, x.1, x.2, self.features));
        let y = Csr::labels((y.0, y.1, self.labels));
        let data = examples(&x, Some(&y))?;
        let options = self.options(mode)?;
        let given = train_counts
            .map(|(counts, n)| Propensities::from_counts(&counts, n, self.config.train.propensity))
            .transpose()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let propensities = given.as_ref().or(self.propensities.as_ref());
        let stats = self.on_threads(py, threads, |net| {
            let batch: Vec<usize> = (0..data.len()).collect();
            net.evaluate_with(&mut Workspace::new(), &data, &batch, options, propensities)
        })?;
        let scores = metrics_dict(py, &stats.metrics)?;
        scores.set_item("samples", stats.samples)?;
        Ok(scores)
    }

    /// Writes the model into the folder `dir`: `config.toml` and a checkpoint in the
    /// format `slide-train` writes and reads (atomically, as it does); returns the
    /// checkpoint's path.
    fn save(&self, dir: PathBuf) -> PyResult<PathBuf> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| bad(anyhow::anyhow!("{}: {e}", dir.display())))?;
        let identity = self.identity();
        let at = Position {
            epoch: self.config.train.epochs,
            batch: 0,
        };
        let path = checkpoint::save(&dir, &self.net, at, &identity, 1).map_err(bad)?;
        let config = dir.join(CONFIG_FILE);
        let temporary = dir.join(format!("{CONFIG_FILE}.tmp"));
        std::fs::write(&temporary, self.saved_text()?)
            .and_then(|()| std::fs::rename(&temporary, &config))
            .map_err(|e| bad(anyhow::anyhow!("{}: {e}", config.display())))?;
        Ok(path)
    }

    /// A model saved by `save` or by `slide-train`: `path` is a checkpoint file or a folder
    /// (its newest checkpoint); the config is `text` (named `config_path`) when given, else
    /// the folder's `config.toml`. Its `data.features` and `data.labels` (or the XMC
    /// training file it names) give the shape.
    #[staticmethod]
    #[pyo3(signature = (path, text, config_path, overrides))]
    fn load(
        path: PathBuf,
        text: Option<String>,
        config_path: PathBuf,
        overrides: Vec<String>,
    ) -> PyResult<Model> {
        let folder = if path.is_dir() {
            path.clone()
        } else {
            path.parent().unwrap_or(Path::new(".")).to_path_buf()
        };
        let (text, config_path) = match text {
            Some(text) => (text, config_path),
            None => {
                let beside = folder.join(CONFIG_FILE);
                let text = std::fs::read_to_string(&beside).map_err(|e| {
                    PyValueError::new_err(format!(
                        "{}: {e}; a checkpoint written by slide-train loads with config=",
                        beside.display()
                    ))
                })?;
                (text, beside)
            }
        };
        let text = config::with_overrides(&text, &config_path, &overrides).map_err(bad)?;
        let config = config::parse(&text, &config_path, &[]).map_err(bad)?;
        let (features, labels, train_samples) = shape(&config)?;
        let file = if path.is_dir() {
            checkpoint::list(&path).map_err(bad)?.pop().ok_or_else(|| {
                PyValueError::new_err(format!("{}: holds no checkpoint", path.display()))
            })?
        } else {
            path
        };
        let network = config.network(features, train_samples);
        let identity = Identity::of(&network, config.train.batch(train_samples));
        let mut net = Network::with_empty_tables(network)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        checkpoint::load(&file, &mut net, &identity, Require::Network).map_err(bad)?;
        Ok(Model {
            net,
            config,
            text,
            features,
            labels,
            train_samples,
            last_eval: None,
            propensities: None,
        })
    }

    /// Input dimension.
    #[getter]
    fn features(&self) -> usize {
        self.features
    }

    /// Number of labels.
    #[getter]
    fn labels(&self) -> usize {
        self.labels
    }

    /// Training steps taken.
    #[getter]
    fn steps(&self) -> u64 {
        self.net.step()
    }

    /// The config's text, every override applied.
    #[getter]
    fn config_text(&self) -> &str {
        &self.text
    }

    /// The metrics of the last evaluation during training, as `score` names them (`None`
    /// without validation data, or for a loaded model).
    #[getter]
    fn last_eval<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.last_eval.map(|m| metrics_dict(py, &m)).transpose()
    }
}

impl Model {
    /// The model this run trained: `net`, with the last evaluation's metrics.
    fn from_run(run: Run, net: Network, last_eval: Option<slide::EvalStats>) -> Model {
        Model {
            net,
            config: run.config,
            text: run.text,
            features: run.features,
            labels: run.labels,
            train_samples: run.train_samples,
            last_eval: last_eval.map(|e| e.metrics),
            propensities: Some(run.propensities),
        }
    }

    /// `work` on the network in a pool of `threads` workers, with the GIL released; its
    /// error (the core's) as a `ValueError`.
    fn on_threads<T: Send>(
        &self,
        py: Python<'_>,
        threads: Option<usize>,
        work: impl FnOnce(&Network) -> slide::Result<T> + Send,
    ) -> PyResult<T> {
        let pool = pool(threads)?;
        py.detach(|| pool.install(|| work(&self.net)))
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The config to save: the text, with each warm-up given in epochs written in the steps
    /// it took (the number of training samples is not in the config, and the checkpoint's
    /// identity names the steps).
    fn saved_text(&self) -> PyResult<String> {
        let network = self.config.network(self.features, self.train_samples);
        let steps: Vec<String> = network
            .layers
            .iter()
            .enumerate()
            .filter_map(|(i, layer)| match layer.lsh?.warmup?.length {
                slide::WarmupLength::Steps(s) => Some(format!(
                    "network.layers.{i}.lsh.warmup.length={{ steps = {s} }}"
                )),
                slide::WarmupLength::Epochs(_) => None,
            })
            .collect();
        config::with_overrides(&self.text, Path::new(CONFIG_FILE), &steps).map_err(bad)
    }

    /// What a checkpoint of this model records (as `slide-train` writes it).
    fn identity(&self) -> Identity {
        let network = self.config.network(self.features, self.train_samples);
        Identity::of(&network, self.config.train.batch(self.train_samples))
    }

    /// The config's evaluation options, in `mode` when given (else the config's own).
    fn options(&self, mode: Option<&str>) -> PyResult<EvalOptions> {
        let Some(mode) = mode else {
            return Ok(self.config.train.eval);
        };
        let mode: Mode = mode
            .parse()
            .map_err(|e: slide::SlideError| PyValueError::new_err(e.to_string()))?;
        Ok(EvalOptions {
            mode,
            ..self.config.train.eval
        })
    }

    /// `features` and `labels` of arrays must be the model's.
    fn check_shape(&self, features: usize, labels: usize) -> PyResult<()> {
        if features != self.features {
            return Err(PyValueError::new_err(format!(
                "X has {features} features but the model was trained on {}",
                self.features
            )));
        }
        if labels != self.labels {
            return Err(PyValueError::new_err(format!(
                "Y has {labels} labels but the model has {}",
                self.labels
            )));
        }
        Ok(())
    }

    /// Unlabelled examples of the inputs `x`, checked against the model's shape.
    fn inputs(
        &self,
        x: (Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>, usize),
    ) -> PyResult<SparseExamples> {
        self.check_shape(x.3, self.labels)?;
        examples(&Csr::inputs((x.0, x.1, x.2, self.features)), None)
    }
}
