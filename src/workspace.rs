//! The per-batch buffers of a [`Network`]'s passes, kept apart from the model so that a
//! network holds only its parameters, optimizer state and tables, and evaluation borrows it
//! shared.

use std::sync::{Mutex, MutexGuard};

use slide_lsh::Vector;

use crate::data::Examples;
use crate::input::SampleInput;
use crate::layer::{LayerBatch, LayerTrace, SelectScratch};
use crate::network::Network;
use crate::optimizer::{UpdateCounts, UpdateScratch};
use crate::stats::PhaseTimes;

/// What one sample of a batch left behind.
#[derive(Debug, Default)]
pub(crate) struct SampleState {
    /// One trace per layer, input first.
    pub(crate) traces: Vec<LayerTrace>,
    /// Cross-entropy of a training pass.
    pub(crate) loss: f64,
    pub(crate) macs: u64,
    pub(crate) times: PhaseTimes,
    /// The sample's labels among this rank's outputs, as ids of its slice of the output
    /// layer (all of them, unchanged, with one rank).
    pub(crate) labels: Vec<u32>,
    /// The outputs the heads learn on for this training sample: its best active outputs,
    /// its labels and the heads' candidates (empty without a head that learns).
    pub(crate) shortlist: Vec<u32>,
    /// Scratch of the network's best outputs for the shortlist.
    pub(crate) best: crate::top::TopN,
    /// Scratch of the heads' candidates.
    pub(crate) rare_scratch: Vec<(u32, u32)>,
    /// The sample's input as the network reads it (see
    /// [`NetworkConfig::input_power`](crate::NetworkConfig::input_power)).
    pub(crate) input: SampleInput,
}

/// The buffers a [`Network`]'s training steps and evaluations work in: per-sample traces,
/// per-thread LSH query scratch and the update's grouping. Make one per network with
/// [`Workspace::default`] and pass it to every call; its buffers keep their capacity, so
/// warm steps do not allocate. Handed a network other than the one it last served, it
/// resizes itself.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(crate) states: Vec<SampleState>,
    /// Samples of the latest batch (the first `batch_len` states).
    pub(crate) batch_len: usize,
    /// Per thread, one select scratch per layer.
    pub(crate) threads: Vec<Mutex<Vec<SelectScratch>>>,
    /// Per layer, the update's grouping (the layers update side by side), and what the
    /// layer's latest update did.
    pub(crate) update: Vec<(UpdateScratch, UpdateCounts)>,
    /// The heads' training buffers.
    pub(crate) heads: crate::head::HeadScratch,
    /// The output layer's pre-activations of a training batch computed in one product
    /// (`SparseLayer::batch_logits`).
    pub(crate) logits: crate::layer::batched::BatchLogits,
    /// The mean input of a layer over the latest batch (shared negatives' refresh).
    pub(crate) mean: Vec<f32>,
    /// The latest batch's labels (candidates for the shared negatives).
    pub(crate) candidates: Vec<u32>,
    /// Per sample of the latest batch, its softmax's largest logit and sum over every
    /// rank's active outputs (see [`Network::sharded`]).
    pub(crate) softmax: Vec<(f32, f32)>,
    /// What this rank sends in a collective, and what it receives.
    pub(crate) exchange: Vec<f32>,
    pub(crate) received: Vec<f32>,
    /// The [`Network::id`] the thread scratch was made for.
    network: Option<u64>,
}

impl Workspace {
    /// An empty workspace (buffers are made at first use).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sizes the workspace for `net` on the current thread pool and `samples` samples.
    pub(crate) fn prepare(&mut self, net: &Network, samples: usize) {
        if self.network != Some(net.id()) {
            self.threads.clear();
            self.network = Some(net.id());
        }
        let threads = rayon::current_num_threads();
        while self.threads.len() < threads {
            let scratch = net.layers().iter().map(|l| l.select_scratch()).collect();
            self.threads.push(Mutex::new(scratch));
        }
        if self.update.len() < net.layers().len() {
            self.update
                .resize_with(net.layers().len(), Default::default);
        }
        if self.states.len() < samples {
            self.states.resize_with(samples, Default::default);
        }
        self.batch_len = samples;
    }

    /// The latest batch's sample states.
    pub(crate) fn batch(&self) -> &[SampleState] {
        &self.states[..self.batch_len]
    }
}

/// The current rayon worker's select scratch (one per layer) among a workspace's
/// `threads`. Each worker locks only its own, so the lock is never contended.
pub(crate) fn worker_scratch(
    threads: &[Mutex<Vec<SelectScratch>>],
) -> MutexGuard<'_, Vec<SelectScratch>> {
    let worker = rayon::current_thread_index().unwrap_or(0) % threads.len();
    threads[worker].lock().unwrap_or_else(|e| e.into_inner())
}

/// The input of layer `l` for a sample: its input as the network reads it (`input`, from
/// [`SampleInput::get`]) for the first layer, the previous layer's output otherwise.
pub(crate) fn layer_input<'a>(traces: &'a [LayerTrace], l: usize, input: Vector<'a>) -> Vector<'a> {
    if l == 0 {
        input
    } else {
        traces[l - 1].as_input()
    }
}

/// One layer's view of a network's batch, for the optimizer.
pub(crate) struct NetworkBatch<'a> {
    pub(crate) states: &'a [SampleState],
    pub(crate) layer: usize,
    pub(crate) data: &'a dyn Examples,
    pub(crate) batch: &'a [usize],
}

impl LayerBatch for NetworkBatch<'_> {
    fn samples(&self) -> usize {
        self.states.len()
    }

    fn input(&self, s: usize) -> Vector<'_> {
        let state = &self.states[s];
        let input = state.input.get(self.data, self.batch[s]);
        layer_input(&state.traces, self.layer, input)
    }

    fn trace(&self, s: usize) -> &LayerTrace {
        &self.states[s].traces[self.layer]
    }
}
