//! A network's state outside the network: the plain copy ([`NetworkState`]) and the
//! naming of its tensors (`layers.I.NAME`, `wide.table`) for checkpoints.

use crate::error::{Result, SlideError, config_error};
use crate::layer::MemorySource as LayerMemory;
use crate::layer::{Elem, LayerState, StateSource};
use crate::wide::RareIndex;

/// The wide head's tensor in a network's state.
pub(crate) const WIDE_TABLE: &str = "wide.table";
/// The wide head's rare-feature index: [`RareIndex::starts`], then
/// [`RareIndex::entries`].
pub(crate) const WIDE_RARE_STARTS: &str = "wide.rare.starts";
pub(crate) const WIDE_RARE_ENTRIES: &str = "wide.rare.entries";

/// Everything a network needs to continue training exactly where it stopped: every
/// layer's parameters, Adam state and tables, and the step and rebuild-schedule position.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkState {
    /// Training steps taken.
    pub step: u64,
    /// The step after which the tables are rebuilt next.
    pub next_rebuild: u64,
    /// The current rebuild period (grows under the exponential schedule).
    pub rebuild_period: f64,
    /// Per layer, input first.
    pub layers: Vec<LayerState>,
    /// The wide head's weights (empty without one).
    pub wide: Vec<f32>,
    /// The wide head's rare-feature index, once built.
    pub wide_rare: Option<RareIndex>,
}

/// `layers.I.NAME` as `(I, NAME)`.
pub(crate) fn split_layer_name(name: &str) -> Option<(usize, &str)> {
    let (index, rest) = name.strip_prefix("layers.")?.split_once('.')?;
    Some((index.parse().ok()?, rest))
}

/// A [`NetworkState`] as a [`StateSource`]: `layers.I.NAME` is layer `I`'s `NAME`.
pub(crate) struct MemorySource<'a>(pub(crate) &'a NetworkState);

impl StateSource for MemorySource<'_> {
    type Error = SlideError;

    fn tensor(&self, name: &str) -> Option<(Elem, Vec<usize>)> {
        if name == WIDE_TABLE {
            return (!self.0.wide.is_empty()).then(|| (Elem::F32, vec![self.0.wide.len()]));
        }
        if let Some(values) = rare_part(self.0.wide_rare.as_ref(), name) {
            return Some((Elem::U32, vec![values.len()]));
        }
        let (i, rest) = split_layer_name(name)?;
        LayerMemory(self.0.layers.get(i)?).tensor(rest)
    }

    fn read(&mut self, name: &str, offset: usize, out: &mut [u8]) -> Result<()> {
        if name == WIDE_TABLE {
            copy_le(&self.0.wide, offset, out, f32::to_le_bytes);
            return Ok(());
        }
        if let Some(values) = rare_part(self.0.wide_rare.as_ref(), name) {
            copy_le(values, offset, out, u32::to_le_bytes);
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

/// The part of `index` a rare-index tensor `name` holds, if `name` is one.
pub(crate) fn rare_part<'a>(index: Option<&'a RareIndex>, name: &str) -> Option<&'a [u32]> {
    match name {
        WIDE_RARE_STARTS => Some(index?.starts()),
        WIDE_RARE_ENTRIES => Some(index?.entries()),
        _ => None,
    }
}

/// `values` from byte `offset` on, little-endian, into `out` (as far as both go).
fn copy_le<T: Copy>(values: &[T], offset: usize, out: &mut [u8], le: fn(T) -> [u8; 4]) {
    let from = (offset / 4).min(values.len());
    for (o, &v) in out.chunks_exact_mut(4).zip(&values[from..]) {
        o.copy_from_slice(&le(v));
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
