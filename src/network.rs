//! The network container: a stack of [`SparseLayer`]s, the optimizer, and where training
//! stands (steps taken, the rebuild schedule). Its passes are in [`crate::step`] (training)
//! and [`crate::eval`] (evaluation); their per-batch buffers in a
//! [`Workspace`](crate::Workspace) of the caller's.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use slide_lsh::mix64;

use crate::comm::{Communicator, Local, shard_range};
use crate::config::{NetworkConfig, RebuildSchedule};
use crate::error::{Result, SlideError, config_error};
use crate::head::{HeadRate, HeadTensor, Heads};
use crate::layer::{SparseLayer, StateSource, StateTensor};
pub use crate::network_state::NetworkState;
use crate::network_state::{MemorySource, Prefixed, split_layer_name};
use crate::optimizer::Adam;

/// What a checkpoint stores of a network beside its tensors (see
/// [`Network::state_scalars`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StateScalars {
    /// Training steps taken.
    pub step: u64,
    /// The step after which the tables are rebuilt next.
    pub next_rebuild: u64,
    /// The current rebuild period.
    pub rebuild_period: f64,
    /// Per layer, its tables' generation (`None` for layers without LSH).
    pub generations: Vec<Option<u64>>,
    /// Optimizer steps taken in earlier runs, before this run's first step (see
    /// [`Network::continue_from`]); 0 for a network trained in one run.
    pub earlier_steps: u64,
}

/// Where training stands: steps taken and the rebuild schedule's position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    pub(crate) step: u64,
    pub(crate) next_rebuild: u64,
    pub(crate) period: f64,
    /// Optimizer steps taken in earlier runs (Adam's bias correction counts them).
    pub(crate) earlier: u64,
}

impl Progress {
    /// After a rebuild at the current step: the next period and rebuild step.
    pub(crate) fn advance(&mut self, schedule: RebuildSchedule) {
        if let RebuildSchedule::Exponential { growth, .. } = schedule {
            self.period *= growth;
        }
        self.next_rebuild = self.step + (self.period.round() as u64).max(1);
    }
}

/// A feed-forward network of [`SparseLayer`]s trained with softmax cross-entropy and sparse
/// Adam. It holds parameters, optimizer state and tables only; the buffers of its passes
/// live in a [`Workspace`](crate::Workspace). See the crate documentation for an example.
pub struct Network {
    config: NetworkConfig,
    layers: Vec<SparseLayer>,
    adam: Adam,
    pub(crate) schedule: Progress,
    /// Tells workspaces which network they were sized for.
    id: u64,
    /// The ranks this network's output layer is split between ([`Local`]: one).
    pub(crate) comm: Arc<dyn Communicator>,
    /// The outputs this rank holds, as ids of the whole layer.
    pub(crate) output_range: Range<usize>,
    /// The heads that score outputs beside the last layer (none: the network alone).
    pub(crate) heads: Heads,
    /// The learning rate the network was built with: a head's rate follows the schedule as
    /// the same fraction of it.
    peak_lr: f32,
}

impl Network {
    /// Validates `config` and builds the network (weights initialised from the seed, LSH
    /// tables built).
    pub fn new(config: NetworkConfig) -> Result<Self> {
        let mut net = Self::with_empty_tables(config)?;
        net.rebuild_tables()?;
        Ok(net)
    }

    /// [`new`](Self::new) without building the LSH tables, for a network whose state is
    /// restored next ([`import_state`](Self::import_state) or a checkpoint, both of which
    /// carry the tables): building them from the initial weights would hash every neuron
    /// only for the result to be replaced (about 0.6 s at the Amazon-670K shape). Until
    /// they are filled, a sampled layer's tables are empty and its active sets random.
    pub fn with_empty_tables(config: NetworkConfig) -> Result<Self> {
        Self::sharded_with_empty_tables(config, Arc::new(Local))
    }

    /// A network whose output layer is split between the ranks of `comm`: this rank holds
    /// the contiguous slice [`shard_range`] gives of the outputs (their weights, Adam state,
    /// tables and shared negatives) and a copy of every layer before it. Every rank must
    /// be built from the same config. A training step then exchanges, per sample, the
    /// softmax's maximum and sum over each rank's active outputs and sums the gradient on
    /// the last hidden layer over the ranks, so the copies stay identical; evaluation
    /// merges each rank's best outputs. With one rank it is [`Network::new`]. The output
    /// layer must be neuron-major.
    pub fn sharded(config: NetworkConfig, comm: Arc<dyn Communicator>) -> Result<Self> {
        let mut net = Self::sharded_with_empty_tables(config, comm)?;
        net.rebuild_tables()?;
        Ok(net)
    }

    /// [`sharded`](Self::sharded) without building the tables (see
    /// [`with_empty_tables`](Self::with_empty_tables)).
    pub fn sharded_with_empty_tables(
        config: NetworkConfig,
        comm: Arc<dyn Communicator>,
    ) -> Result<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        config.validate_for_ranks(comm.size())?;
        let mut layers = Vec::with_capacity(config.layers.len());
        let mut in_dim = config.input_dim;
        let last = config.layers.len() - 1;
        let outputs = config.layers[last].out_dim;
        let output_range = shard_range(outputs, comm.rank(), comm.size());
        for (i, layer) in config.layers.iter().enumerate() {
            let seed = mix64(config.seed ^ mix64(i as u64 + 1));
            let (mut layer, mut neurons) = (*layer, 0..layer.out_dim);
            if i == last && comm.size() > 1 {
                layer.lsh = layer.lsh.map(|l| l.rank_share(comm.rank(), comm.size()));
                neurons = output_range.clone();
            }
            layers.push(
                SparseLayer::slice_with_empty_tables(in_dim, &layer, seed, neurons).map_err(
                    |e| match e {
                        SlideError::InvalidConfig { reason, .. } => {
                            config_error(format!("layers[{i}]"), reason)
                        }
                        other => other,
                    },
                )?,
            );
            in_dim = layer.out_dim;
        }
        let period = config.rebuild.first_period();
        let heads = Heads::new(&config.heads, config.head_shape())?;
        if !heads.is_empty() && comm.size() > 1 {
            return Err(config_error(
                "network.heads",
                "are not supported with the output layer split between ranks",
            ));
        }
        Ok(Network {
            heads,
            peak_lr: config.adam.lr,
            adam: Adam::new(config.adam)?,
            config,
            layers,
            schedule: Progress {
                step: 0,
                next_rebuild: period,
                period: period as f64,
                earlier: 0,
            },
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            comm,
            output_range,
        })
    }

    /// The ranks the output layer is split between (one for [`Network::new`]).
    pub fn communicator(&self) -> &dyn Communicator {
        &*self.comm
    }

    /// The outputs this rank holds, as ids of the whole output layer (all of them with
    /// one rank): the output layer's neuron `j` is output `output_range().start + j`.
    pub fn output_range(&self) -> Range<usize> {
        self.output_range.clone()
    }

    /// Sets Adam's learning rate for the steps that follow (for a schedule such as cosine
    /// decay; the caller decides it from the step). Moments and update counts are kept.
    pub fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        self.adam.set_learning_rate(lr)?;
        self.config.adam.lr = lr;
        Ok(())
    }

    /// The heads (empty: none).
    pub fn heads(&self) -> &Heads {
        &self.heads
    }

    /// Builds what the heads build from training data (the rare-labels index) from `data`,
    /// where not built yet; otherwise the first training step builds it from its own data.
    /// A run that trains on a share of its samples (a replay file's) builds it here from
    /// all of them.
    pub fn prepare_heads(&mut self, data: &dyn crate::Examples) {
        self.heads.prepare(data);
    }

    /// The rate the heads learn at beside the network now: the network's current rate and
    /// the one it was built with.
    pub(crate) fn head_rate(&self) -> HeadRate {
        HeadRate::WithNetwork {
            lr: self.config.adam.lr,
            peak: self.peak_lr,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NetworkConfig {
        &self.config
    }

    /// The layers, input first.
    pub fn layers(&self) -> &[SparseLayer] {
        &self.layers
    }

    /// Layer `i`, mutably (for tests and tools; call [`rebuild_tables`](Self::rebuild_tables)
    /// after changing a sampled layer's weights by hand).
    pub fn layer_mut(&mut self, i: usize) -> &mut SparseLayer {
        &mut self.layers[i]
    }

    /// What a training step changes, borrowed apart: the layers, Adam and the heads.
    pub(crate) fn trainable(&mut self) -> (&mut [SparseLayer], &mut Adam, &mut Heads) {
        (&mut self.layers, &mut self.adam, &mut self.heads)
    }

    /// Training steps taken.
    pub fn step(&self) -> u64 {
        self.schedule.step
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// A copy of the network's training state (see [`NetworkState`]).
    pub fn export_state(&self) -> NetworkState {
        NetworkState {
            step: self.schedule.step,
            next_rebuild: self.schedule.next_rebuild,
            rebuild_period: self.schedule.period,
            earlier_steps: self.schedule.earlier,
            layers: self.layers.iter().map(SparseLayer::export_state).collect(),
            heads: self.head_tensors(),
        }
    }

    /// A copy of the heads' state, tensor by tensor.
    pub(crate) fn head_tensors(&self) -> Vec<HeadTensor> {
        HeadTensor::all(self.heads.state_tensors(), |name, sink| {
            self.heads
                .write_state_tensor(name, sink)
                .expect("a head's own tensor")
        })
        .expect("writing to memory does not fail")
    }

    /// Continues from `state`, which must come from a network of the same configuration:
    /// training on from here gives exactly what the saved network would have given.
    pub fn import_state(&mut self, state: &NetworkState) -> Result<()> {
        let scalars = StateScalars {
            step: state.step,
            next_rebuild: state.next_rebuild,
            rebuild_period: state.rebuild_period,
            generations: state
                .layers
                .iter()
                .map(|l| l.tables.as_ref().map(|t| t.generation))
                .collect(),
            earlier_steps: state.earlier_steps,
        };
        self.read_state(&scalars, &mut MemorySource(state))
    }

    /// What a checkpoint stores beside the tensors: where training stands and each
    /// layer's table generation.
    pub fn state_scalars(&self) -> StateScalars {
        StateScalars {
            step: self.schedule.step,
            next_rebuild: self.schedule.next_rebuild,
            rebuild_period: self.schedule.period,
            generations: self
                .layers
                .iter()
                .map(SparseLayer::tables_generation)
                .collect(),
            earlier_steps: self.schedule.earlier,
        }
    }

    /// Every layer's [`SparseLayer::state_tensors`], named `layers.I.NAME`, and the heads'
    /// tensors under their own names, sorted by name.
    pub fn state_tensors(&self) -> Vec<StateTensor> {
        let mut out: Vec<StateTensor> = self
            .layers
            .iter()
            .enumerate()
            .flat_map(|(i, layer)| {
                layer.state_tensors().into_iter().map(move |t| StateTensor {
                    name: format!("layers.{i}.{}", t.name),
                    ..t
                })
            })
            .collect();
        out.extend(self.heads.state_tensors());
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Passes tensor `name` (one of [`state_tensors`](Self::state_tensors)) to `sink` as
    /// little-endian bytes in pieces (see [`SparseLayer::write_state_tensor`]).
    pub fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if let Some(written) = self.heads.write_state_tensor(name, sink) {
            return written;
        }
        let (layer, rest) = split_layer_name(name)
            .filter(|&(i, _)| i < self.layers.len())
            .ok_or_else(|| config_error("network state", format!("has no tensor `{name}`")))?;
        self.layers[layer].write_state_tensor(rest, sink)
    }

    /// Continues from the state `source` holds under the names of
    /// [`state_tensors`](Self::state_tensors) and `scalars`, read into the layers' own
    /// storage piece by piece (see [`SparseLayer::read_state`]; on an error the network's
    /// contents are unspecified).
    pub fn read_state<S: StateSource + ?Sized>(
        &mut self,
        scalars: &StateScalars,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        let fail = |reason: String| S::Error::from(config_error("network state", reason));
        let layers = (0..)
            .take_while(|i| source.tensor(&format!("layers.{i}.weight")).is_some())
            .count();
        if layers != self.layers.len() || scalars.generations.len() != self.layers.len() {
            return Err(fail(format!(
                "has {layers} layers, the network {}",
                self.layers.len()
            )));
        }
        if !(scalars.rebuild_period.is_finite() && scalars.rebuild_period >= 1.0) {
            return Err(fail("rebuild period must be at least 1".into()));
        }
        let outputs = self.layers.last().map_or(0, SparseLayer::out_dim);
        self.heads.read_state(scalars.step, outputs, source)?;
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let mut prefixed = Prefixed {
                prefix: format!("layers.{i}."),
                inner: &mut *source,
            };
            layer.read_state(scalars.generations[i], &mut prefixed)?;
        }
        self.schedule = Progress {
            step: scalars.step,
            next_rebuild: scalars.next_rebuild,
            period: scalars.rebuild_period,
            earlier: scalars.earlier_steps,
        };
        let step = self.schedule.step;
        self.layers.iter_mut().for_each(|l| l.set_steps_taken(step));
        Ok(())
    }

    /// Rebuilds every LSH layer's tables from the current weights.
    pub fn rebuild_tables(&mut self) -> Result<()> {
        self.layers
            .iter_mut()
            .try_for_each(SparseLayer::rebuild_tables)
    }

    /// Per layer, what its LSH tables held after their last rebuild (`None` for layers
    /// without LSH).
    pub fn table_stats(&self) -> Vec<Option<slide_lsh::TablesStats>> {
        self.layers.iter().map(SparseLayer::table_stats).collect()
    }

    /// Whether every parameter and Adam moment is finite (a network that is not cannot be
    /// trained on).
    pub fn is_finite(&self) -> bool {
        self.layers.iter().all(SparseLayer::is_finite) && self.heads.is_finite()
    }

    /// Heap bytes held by all layers (parameters, Adam state, tables) and the heads.
    pub fn memory_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(SparseLayer::memory_bytes)
            .sum::<usize>()
            + self.heads.memory_bytes()
    }
}
