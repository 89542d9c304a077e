//! What a head is: [`Head`] (what it adds to a shortlist and to scores, how it trains, its
//! state) and [`HeadSettings`] (its config), with what they exchange with the network.

use slide_lsh::Vector;

use crate::data::Examples;
use crate::error::{Result, SlideError};
use crate::layer::{StateSource, StateTensor};

/// The most outputs a head's shortlist takes from the network's best.
pub const MAX_SHORTLIST: usize = 64;

/// What a head is built for: the network's input features and outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadShape {
    /// Input features of the network (the first layer's inputs).
    pub inputs: usize,
    /// Outputs of the network (the last layer's).
    pub outputs: usize,
}

/// A head's settings: checked, described for checkpoints, sized, and built into the head.
pub trait HeadSettings {
    /// The head these settings build.
    type Head: Head;
    /// Checks every setting; errors name the key as `heads.KIND.KEY`.
    fn validate(&self) -> Result<()>;
    /// The settings as `(name, value)` pairs, for [`NetworkConfig::describe`]
    /// (crate::NetworkConfig::describe); those whose name [`Self::architecture`] accepts
    /// enter the architecture hash.
    fn describe(&self, out: &mut Vec<(String, String)>);
    /// Whether the described setting `name` is part of the model's architecture (what a
    /// state file must match to be read), not of its training only.
    fn architecture(name: &str) -> bool;
    /// Heap bytes the head built for `shape` holds (parameters and indexes it saves).
    fn estimated_bytes(&self, shape: HeadShape) -> u64;
    /// The head for a network of `shape`, untrained.
    fn build(&self, shape: HeadShape) -> Result<Self::Head>;
}

/// What a training sample's pass left for the heads: its input as the network reads it,
/// its shortlist and its labels.
pub struct HeadSample<'a> {
    /// The sample's input (after the network's input power).
    pub input: Vector<'a>,
    /// The outputs its shortlist holds: the network's best, its labels, the heads'
    /// candidates.
    pub shortlist: &'a [u32],
    /// Its labels.
    pub labels: &'a [u32],
}

/// A training batch's samples as the heads see them, in batch order: their number and each
/// one's [`HeadSample`] (the training step makes it from the samples' passes).
pub struct HeadBatch<'a> {
    /// Samples in the batch.
    pub len: usize,
    /// The `i`th sample, `i < len`.
    pub sample: &'a (dyn Fn(usize) -> HeadSample<'a> + Sync),
}

impl<'a> HeadBatch<'a> {
    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch's `i`th sample.
    pub fn sample(&self, i: usize) -> HeadSample<'a> {
        (self.sample)(i)
    }
}

/// The buffers of the heads' training steps, one of each head's own type, kept between
/// steps so that warm steps do not allocate.
#[derive(Debug, Default)]
pub struct HeadScratch(Vec<Box<dyn std::any::Any + Send>>);

impl HeadScratch {
    /// The buffers of type `T` (made on first use).
    pub fn get<T: Default + Send + 'static>(&mut self) -> &mut T {
        let at = match self.0.iter().position(|b| b.is::<T>()) {
            Some(at) => at,
            None => {
                self.0.push(Box::new(T::default()));
                self.0.len() - 1
            }
        };
        self.0[at].downcast_mut().expect("the type just found")
    }
}

/// The rate a head learns at in a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HeadRate {
    /// Beside the network: the network's learning rate `lr` now, and the one it was built
    /// with, `peak` (a head's rate follows the network's schedule as the same fraction).
    WithNetwork {
        /// The network's learning rate this step.
        lr: f32,
        /// The network's learning rate at the start.
        peak: f32,
    },
    /// Alone, after the network's epochs: head-only step `step` of `steps` (from 0).
    Alone {
        /// The head-only step, from 0.
        step: u64,
        /// Head-only steps in all.
        steps: u64,
    },
}

/// What every head does; each method's default is "nothing" for heads that do not take
/// part in that stage.
pub trait Head {
    /// Before training: builds what the head needs from the training set (once).
    fn prepare(&mut self, _train: &dyn Examples) {}

    /// How many of a sample's best outputs, by the network's logit, the head wants in the
    /// shortlist (0: it does not read the network's best).
    fn shortlist(&self) -> usize {
        0
    }

    /// Appends the head's candidates for `input` to `out`, passing over `skip` (a training
    /// sample's labels) and those `out` holds; `scratch` is reused between calls.
    fn candidates(
        &self,
        _input: Vector<'_>,
        _skip: &[u32],
        _scratch: &mut Vec<(u32, u32)>,
        _out: &mut Vec<u32>,
    ) {
    }

    /// Adds the head's score for `input` to each `(score, output)` candidate's score.
    fn rescore(&self, _input: Vector<'_>, _candidates: &mut [(f32, u32)]) {}

    /// Whether the head learns on the training samples' shortlists ([`Self::train`]).
    fn learns(&self) -> bool {
        false
    }

    /// Epochs the head trains alone after the network's (0: none).
    fn alone_epochs(&self) -> usize {
        0
    }

    /// One step on `batch` at `rate`; returns the sum of the samples' losses.
    fn train(
        &mut self,
        _batch: &HeadBatch<'_>,
        _scratch: &mut HeadScratch,
        _rate: HeadRate,
    ) -> f64 {
        0.0
    }

    /// Whether every parameter is finite.
    fn is_finite(&self) -> bool {
        true
    }

    /// Heap bytes held.
    fn memory_bytes(&self) -> usize;

    /// The tensors of the head's state, under their names in a network's state.
    fn state_tensors(&self) -> Vec<StateTensor>;

    /// Tensor `name` (one of [`Self::state_tensors`]) as little-endian bytes, in pieces.
    fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E>;

    /// Whether [`Self::read_state`] takes `trained`, a tensor of a network with fewer
    /// outputs, in a continued run ([`Network::continue_from`](crate::Network::continue_from));
    /// those it does not take are the freshly built head's. By default: a tensor of the
    /// same name, type and shape as one of [`Self::state_tensors`].
    fn carries(&self, trained: &StateTensor) -> bool {
        self.state_tensors().contains(trained)
    }

    /// Reads the head's state from `source`, written at training step `step` by a network
    /// of `outputs` outputs; refuses a state that lacks what the head needs.
    fn read_state<S: StateSource + ?Sized>(
        &mut self,
        step: u64,
        outputs: usize,
        source: &mut S,
    ) -> std::result::Result<(), S::Error>;
}
