//! A network's state outside the network: the plain copy ([`NetworkState`]) and the
//! naming of its tensors for checkpoints (`layers.I.NAME` for the layers; the heads name
//! their own).

use crate::error::{Result, SlideError, config_error};
use crate::head::HeadTensor;
use crate::layer::MemorySource as LayerMemory;
use crate::layer::{Elem, LayerState, StateSource};

/// Everything a network needs to continue training exactly where it stopped: every
/// layer's parameters, Adam state and tables, and the step and rebuild-schedule position.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetworkState {
    /// Training steps taken.
    pub step: u64,
    /// The step after which the tables are rebuilt next.
    pub next_rebuild: u64,
    /// The current rebuild period (grows under the exponential schedule).
    pub rebuild_period: f64,
    /// Optimizer steps taken in earlier runs (see [`Network::continue_from`](crate::Network::continue_from)).
    pub earlier_steps: u64,
    /// Per layer, input first.
    pub layers: Vec<LayerState>,
    /// The heads' tensors, by name.
    pub heads: Vec<HeadTensor>,
}

/// `layers.I.NAME` as `(I, NAME)`.
pub(crate) fn split_layer_name(name: &str) -> Option<(usize, &str)> {
    let (index, rest) = name.strip_prefix("layers.")?.split_once('.')?;
    Some((index.parse().ok()?, rest))
}

/// A [`NetworkState`] as a [`StateSource`]: `layers.I.NAME` is layer `I`'s `NAME`; any
/// other name, a head's tensor.
pub(crate) struct MemorySource<'a>(pub(crate) &'a NetworkState);

impl StateSource for MemorySource<'_> {
    type Error = SlideError;

    fn tensor(&self, name: &str) -> Option<(Elem, Vec<usize>)> {
        if let Some(t) = self.0.heads.iter().find(|t| t.name == name) {
            return Some((t.elem, t.shape.clone()));
        }
        let (i, rest) = split_layer_name(name)?;
        LayerMemory(self.0.layers.get(i)?).tensor(rest)
    }

    fn read(&mut self, name: &str, offset: usize, out: &mut [u8]) -> Result<()> {
        if let Some(t) = self.0.heads.iter().find(|t| t.name == name) {
            let from = offset.min(t.bytes.len());
            let n = out.len().min(t.bytes.len() - from);
            out[..n].copy_from_slice(&t.bytes[from..from + n]);
            return Ok(());
        }
        let layer =
            split_layer_name(name).and_then(|(i, rest)| Some((self.0.layers.get(i)?, rest)));
        let Some((layer, rest)) = layer else {
            return Err(config_error(
                "network state",
                format!("has no tensor `{name}`"),
            ));
        };
        LayerMemory(layer).read(rest, offset, out)
    }
}

/// A network's [`StateSource`] seen by one layer: its names without `layers.I.`.
pub(crate) struct Prefixed<'a, S: ?Sized> {
    pub(crate) prefix: String,
    pub(crate) inner: &'a mut S,
}

impl<S: StateSource + ?Sized> StateSource for Prefixed<'_, S> {
    type Error = S::Error;

    fn tensor(&self, name: &str) -> Option<(Elem, Vec<usize>)> {
        self.inner.tensor(&format!("{}{name}", self.prefix))
    }

    fn read(
        &mut self,
        name: &str,
        offset: usize,
        out: &mut [u8],
    ) -> std::result::Result<(), S::Error> {
        self.inner
            .read(&format!("{}{name}", self.prefix), offset, out)
    }
}
