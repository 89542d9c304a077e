//! `--init-from`: a new run (its own data, epochs and schedule) that starts from a trained
//! model's checkpoint, its output layer grown by the labels the new training data adds
//! (see [`slide::Network::continue_from`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use slide::Network;

use slide::comm::Communicator;

use super::prepare::{Log, Prepared, prepare_loaded};
use crate::checkpoint;
use crate::config::Config;
use crate::data::Loaded;
use crate::failure::Failure;

/// Where a run starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Start<'a> {
    /// A new network, as the config initialises it.
    #[default]
    New,
    /// Where the checkpoint (or the newest in the folder) of the same run left off
    /// (`--resume`): every setting must match.
    Resume(&'a Path),
    /// A new run (its own data, epochs and schedule) from a trained model's checkpoint,
    /// with more labels if the data has them (`--init-from`, see
    /// [`slide::Network::continue_from`]).
    InitFrom(&'a Path),
}

/// The data and network of a run that starts at `start` (see [`prepare_loaded`]): with
/// [`Start::InitFrom`], the checkpoint's header checked against the data first, and the
/// network continued from the checkpoint (`say`: print what grew). Beside them, the first
/// output whose row nothing has trained yet: 0 for a new network, the first new label of a
/// grown one, none for a resumed run (a [`slide::Network::warm_start`] sets rows from it on).
pub(super) fn prepare(
    config: &Config,
    (mut loaded, started): (Loaded, std::time::Instant),
    start: Start<'_>,
    (log, say): (Log, bool),
    comm: Arc<dyn Communicator>,
) -> Result<(Prepared, Option<usize>), Failure> {
    let plan = match start {
        Start::InitFrom(path) => Some(plan(path, &mut loaded, comm.size())?),
        _ => None,
    };
    let restoring = start != Start::New;
    let mut prepared = prepare_loaded(config, (loaded, started), restoring, log, comm)?;
    let untrained = match (plan, start) {
        (Some(plan), _) => {
            let samples = prepared.loaded.train.examples().len();
            Some(apply(plan, config, samples, &mut prepared.net, say)?)
        }
        (None, Start::New) => Some(0),
        (None, _) => None,
    };
    Ok((prepared, untrained))
}

/// What a continued run takes from its checkpoint's header before its network is built.
struct Plan<'a> {
    path: &'a Path,
    /// Input features the trained model reads.
    inputs: usize,
    /// Its outputs (labels).
    labels: usize,
}

/// Reads the checkpoint's header and checks the new data against it, before any work: no
/// more input features than the model read, no fewer labels than it has (the model's
/// feature count becomes the data's). Refused on the ranks of an MPI job.
fn plan<'a>(path: &'a Path, loaded: &mut Loaded, ranks: usize) -> Result<Plan<'a>, Failure> {
    let refuse =
        |reason: String| Failure::Input(anyhow!("--init-from {}: {reason}", path.display()));
    if ranks > 1 {
        return Err(refuse("a continued run takes one process".into()));
    }
    let settings = checkpoint::settings(path).map_err(Failure::Input)?;
    let number = |key: &str| {
        settings
            .get(key)
            .and_then(|v| v.parse::<usize>().ok())
            .ok_or_else(|| refuse(format!("the checkpoint names no `{key}`")))
    };
    let inputs = number("input_dim")?;
    let layers = (0..)
        .take_while(|i| settings.contains_key(&format!("layers.{i}.out_dim")))
        .count();
    let labels = number(&format!("layers.{}.out_dim", layers.max(1) - 1))?;
    if loaded.features > inputs {
        return Err(refuse(format!(
            "the training data has {} input features, the model was trained on {inputs}: a \
             continued run cannot add input features (train a new model on all the data)",
            loaded.features
        )));
    }
    if loaded.labels < labels {
        return Err(refuse(format!(
            "the training data has {} labels, the model {labels}: a continued run may add \
             labels, not remove them (give the data's header the model's label count or more)",
            loaded.labels
        )));
    }
    loaded.features = inputs;
    Ok(Plan {
        path,
        inputs,
        labels,
    })
}

/// Loads the checkpoint into a network of the trained model's shape (`config`'s network
/// with the checkpoint's input and label counts: a checkpoint of another architecture is
/// refused, naming the settings that differ) and continues `net` from it; returns the
/// first new label.
fn apply(
    plan: Plan<'_>,
    config: &Config,
    train_samples: usize,
    net: &mut Network,
    say: bool,
) -> Result<usize, Failure> {
    let trained_config = config
        .with_output_size(plan.labels)
        .map_err(|e| Failure::Input(anyhow!("--init-from {}: {e:#}", plan.path.display())))?
        .network(plan.inputs, train_samples);
    let identity = checkpoint::Identity::of(&trained_config, config.train.batch(train_samples));
    let mut trained =
        Network::sharded_with_empty_tables(trained_config, Arc::new(slide::comm::Local))
            .map_err(|e| Failure::Input(e.into()))?;
    checkpoint::load(
        plan.path,
        &mut trained,
        &identity,
        checkpoint::Require::Network,
    )
    .map_err(Failure::Input)?;
    let state = trained.export_state();
    drop(trained);
    let continued = net
        .continue_from(state)
        .map_err(|e| Failure::Input(anyhow!("--init-from {}: {e}", plan.path.display())))?;
    if say {
        println!(
            "continued from {}: {} labels, {} of them new; the model had taken {} optimizer steps",
            plan.path.display(),
            continued.outputs,
            continued.outputs - continued.outputs_before,
            continued.earlier_steps
        );
    }
    Ok(continued.outputs_before)
}
