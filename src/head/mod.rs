//! Heads: parts of a model that score outputs beside the network's last layer. A network is
//! its layers plus zero or more heads ([`NetworkConfig::heads`](crate::NetworkConfig::heads)).
//! Each head is one type behind one interface ([`Head`], its settings behind
//! [`HeadSettings`]): what it adds to a sample's *shortlist* (the network's best outputs,
//! and in training the sample's labels), what it adds to a shortlisted output's score, how
//! it trains, and its state (tensors out, tensors in, as a layer's). The network, its
//! training step, evaluation and checkpoints reach heads only through [`Heads`]; the heads
//! themselves are listed once, in the registry below (`registry!`): a new head is a file of
//! its own, one line there, and its tests (docs/design.md, "Adding a head").
//!
//! With heads, evaluation takes each sample's best [`Heads::shortlist`] outputs by the
//! network's logit, adds each head's candidates (at the logit of the last shortlisted
//! output), adds each head's score to every candidate's logit and ranks them by the sum;
//! training fills each sample's shortlist the same way, with its labels, and each head that
//! learns trains on it.

use slide_lsh::Vector;

use crate::data::Examples;
use crate::error::{Result, SlideError, config_error};
use crate::layer::{StateSource, StateTensor};

mod interface;
#[cfg(feature = "label-linear-head")]
pub mod label_linear;
pub mod propensity;
pub mod rare_labels;
mod registry;
mod state;

pub use interface::{
    Head, HeadBatch, HeadRate, HeadSample, HeadScratch, HeadSettings, HeadShape, MAX_SHORTLIST,
};
pub use registry::{AnyHead, HeadConfig};
pub use state::HeadTensor;

/// A network's heads, in the order its config lists them.
#[derive(Debug, Clone, Default)]
pub struct Heads(Vec<AnyHead>);

impl Heads {
    /// The heads `configs` describe, untrained, for a network of `shape`.
    pub fn new(configs: &[HeadConfig], shape: HeadShape) -> Result<Self> {
        configs
            .iter()
            .map(|c| c.build(shape))
            .collect::<Result<_>>()
            .map(Heads)
    }

    /// Heads built elsewhere, in order (for tests of one head's part in the ranking).
    #[cfg(test)]
    pub(crate) fn from_built(heads: Vec<AnyHead>) -> Self {
        Heads(heads)
    }

    /// The heads, in order.
    pub fn iter(&self) -> impl Iterator<Item = &AnyHead> {
        self.0.iter()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Before training: each head's [`Head::prepare`].
    pub fn prepare(&mut self, train: &dyn Examples) {
        self.0.iter_mut().for_each(|h| h.prepare(train));
    }

    /// How many of the network's best outputs the shortlist takes: the most any head wants.
    pub fn shortlist(&self) -> usize {
        self.0.iter().map(AnyHead::shortlist).max().unwrap_or(0)
    }

    /// Whether some head learns (training then fills each sample's shortlist).
    pub fn learn(&self) -> bool {
        self.0.iter().any(AnyHead::learns)
    }

    /// Epochs the heads train alone after the network's: the most any head takes.
    pub fn alone_epochs(&self) -> usize {
        self.0.iter().map(AnyHead::alone_epochs).max().unwrap_or(0)
    }

    /// Appends every head's candidates for `input` to `out` (see [`Head::candidates`]).
    pub fn candidates(
        &self,
        input: Vector<'_>,
        skip: &[u32],
        scratch: &mut Vec<(u32, u32)>,
        out: &mut Vec<u32>,
    ) {
        for head in &self.0 {
            head.candidates(input, skip, scratch, out);
        }
    }

    /// A sample's outputs ranked with the heads, from the network's `best` `(logit,
    /// output)` pairs, best first: its first [`Self::shortlist`] and the heads' candidates
    /// (each at the logit of the last shortlisted output), each scored by its logit plus
    /// the heads' scores, best first (ties: the lower output id).
    pub fn rerank(&self, input: Vector<'_>, best: &[(f32, u32)]) -> Vec<(f32, u32)> {
        // No head reads the network's best: all of `best` is the shortlist.
        let take = match self.shortlist() {
            0 => best.len(),
            n => n.min(best.len()),
        };
        let mut ranked = best[..take].to_vec();
        let Some(&(floor, _)) = ranked.last() else {
            return ranked;
        };
        let mut ids: Vec<u32> = ranked.iter().map(|&(_, id)| id).collect();
        let shortlisted = ids.len();
        self.candidates(input, &[], &mut Vec::new(), &mut ids);
        ranked.extend(ids[shortlisted..].iter().map(|&id| (floor, id)));
        for head in &self.0 {
            head.rescore(input, &mut ranked);
        }
        ranked.sort_by(|a, b| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.1.cmp(&b.1))
        });
        ranked
    }

    /// One step of every learning head on `batch` at `rate`; returns their losses' sum.
    pub fn train(
        &mut self,
        batch: &HeadBatch<'_>,
        scratch: &mut HeadScratch,
        rate: HeadRate,
    ) -> f64 {
        self.0
            .iter_mut()
            .filter(|h| h.learns())
            .map(|h| h.train(batch, scratch, rate))
            .sum()
    }

    /// Whether every head's parameters are finite.
    pub fn is_finite(&self) -> bool {
        self.0.iter().all(AnyHead::is_finite)
    }

    /// Heap bytes the heads hold.
    pub fn memory_bytes(&self) -> usize {
        self.0.iter().map(AnyHead::memory_bytes).sum()
    }

    /// Every head's state tensors.
    pub fn state_tensors(&self) -> Vec<StateTensor> {
        self.0.iter().flat_map(AnyHead::state_tensors).collect()
    }

    /// Tensor `name` of the head that has it, or `None` when none has.
    pub fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> Option<std::result::Result<(), E>> {
        let head = self
            .0
            .iter()
            .find(|h| h.state_tensors().iter().any(|t| t.name == name))?;
        Some(head.write_state_tensor(name, sink))
    }

    /// Whether some head carries `trained` into a continued run ([`Head::carries`]).
    pub fn carries(&self, trained: &StateTensor) -> bool {
        self.0.iter().any(|h| h.carries(trained))
    }

    /// Every head's [`Head::read_state`].
    pub fn read_state<S: StateSource + ?Sized>(
        &mut self,
        step: u64,
        outputs: usize,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        self.0
            .iter_mut()
            .try_for_each(|h| h.read_state(step, outputs, source))
    }
}

/// Checks `configs`: each valid, and no kind twice (two heads of a kind would share their
/// state's names).
pub(crate) fn validate(configs: &[HeadConfig]) -> Result<()> {
    for (i, config) in configs.iter().enumerate() {
        config.validate()?;
        if configs[..i].iter().any(|c| c.kind() == config.kind()) {
            return Err(config_error(
                format!("heads.{}", config.kind()),
                "is listed twice; a network takes one head of each kind",
            ));
        }
    }
    Ok(())
}
