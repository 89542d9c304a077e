//! Where the per-label linear head keeps the weight of a `(feature, label)` pair: one weight
//! per pair, label by label, where every pair fits in the table's `2^bits` weights (no two
//! pairs share one, and a label's weights sit together); hashed into `2^bits` otherwise.

use crate::head::HeadShape;

/// The bias feature's index: one no input has.
pub(super) const BIAS_FEATURE: usize = usize::MAX;

/// How the table is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// One weight per pair: label `l`'s at `l * stride ..`, feature `j` at `+ j`, the bias
    /// feature last (`stride`: the input features and the bias).
    Dense {
        /// Weights per label.
        stride: usize,
    },
    /// Each pair hashed into `2^bits` weights (the hashing trick: pairs may share one).
    Hashed {
        /// The table's size, as a power of two.
        bits: u32,
    },
}

impl Layout {
    /// The layout of a head of `2^bits` weights at most for a network of `shape`: dense
    /// where `outputs x (inputs + 1)` weights are fewer than `2^bits` (strictly, so that a
    /// dense table's length never equals a hashed one's).
    pub(super) fn new(bits: u32, shape: HeadShape) -> Layout {
        let stride = shape.inputs + 1;
        match shape.outputs.checked_mul(stride) {
            Some(pairs) if pairs < 1usize << bits => Layout::Dense { stride },
            _ => Layout::Hashed { bits },
        }
    }

    /// Weights in the table for `outputs` labels.
    pub(super) fn len(self, outputs: usize) -> usize {
        match self {
            Layout::Dense { stride } => outputs * stride,
            Layout::Hashed { bits } => 1usize << bits,
        }
    }

    /// Where the weight of `feature` ([`BIAS_FEATURE`] for the bias) in `label`'s
    /// classifier lives. Dense, `label` must be below the table's labels, and a feature at
    /// or past the inputs (none the network passes: its inputs are checked) shares the
    /// bias's weight.
    #[inline]
    pub(super) fn slot(self, feature: usize, label: u32) -> usize {
        match self {
            Layout::Dense { stride } => label as usize * stride + feature.min(stride - 1),
            Layout::Hashed { bits } => hashed_slot(bits, feature, label),
        }
    }
}

/// What a stored table of `len` weights is to a head of `2^bits` weights at most for a
/// network of `shape` whose own table has `own` weights: its layout and how many labels it
/// holds. The head's own length; `2^bits` (hashed, as heads wrote before tables were dense
/// where they fit); or a dense table of fewer labels than `shape`'s; otherwise none. A dense
/// table is always shorter than `2^bits` ([`Layout::new`]), so no length means two layouts.
/// A hashed table is taken to hold `shape`'s labels: read into a grown network, its new
/// labels get what their pairs' slots hold (as a hashed head's new labels always did).
pub(super) fn stored(
    len: usize,
    own: usize,
    bits: u32,
    shape: HeadShape,
) -> Option<(Layout, usize)> {
    let stride = shape.inputs + 1;
    if len == own {
        Some((Layout::new(bits, shape), shape.outputs))
    } else if len == 1usize << bits {
        Some((Layout::Hashed { bits }, shape.outputs))
    } else if len.is_multiple_of(stride) && len / stride < shape.outputs && len < 1usize << bits {
        Some((Layout::Dense { stride }, len / stride))
    } else {
        None
    }
}

/// Adds `from` (a table of layout `from_layout`) to `to` (of layout `to_layout`) pair by pair,
/// for labels below `labels` and features below `inputs` and the bias: the scores `to`
/// gives are `from`'s, but where `to` is hashed and two pairs share a weight.
pub(super) fn convert(
    (from_layout, from): (Layout, &[f32]),
    (to_layout, to): (Layout, &mut [f32]),
    labels: usize,
    inputs: usize,
) {
    for label in 0..labels as u32 {
        for j in (0..inputs).chain(std::iter::once(BIAS_FEATURE)) {
            to[to_layout.slot(j, label)] += from[from_layout.slot(j, label)];
        }
    }
}

/// Where the weight of `feature` in `label`'s classifier lives in a table of `2^bits`: a
/// multiplicative hash of the pair (odd 64-bit constants, the top `bits` bits of the
/// product).
#[inline]
fn hashed_slot(bits: u32, feature: usize, label: u32) -> usize {
    let key = (feature as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from(label).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - bits)) as usize
}

#[cfg(test)]
mod tests;
