//! How a layer's rows are stored: the precision of weights and moments, and where each
//! part of a row's `[w | m | v]` block lies.

use crate::kernels::{Values, ValuesMut};

/// What Adam's second moment of a layer's weights is kept for: each weight, or each row.
///
/// With the `serde` feature it reads a config file's `second_moment = "element"` (the
/// default) or `"row"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum SecondMoment {
    /// One per weight, as in Adam.
    #[default]
    Element,
    /// One per row, the mean of the row's squared gradients (Adam's moving average of
    /// it), as row-wise AdaGrad does for embedding tables (FBGEMM) and as Adafactor keeps
    /// a row's statistics: every weight of a row is divided by the same root, the first
    /// moments stay per weight. The row update then reads and writes the weights and the
    /// first moments and one value of the second moments' part (its first: the others are
    /// left as they are, so the row block and checkpoints keep their form): a third less
    /// memory traffic in the update of a wide, sampled layer, whose random rows it is
    /// bound by. For an output layer a row's gradient is `delta * h`, the same input `h`
    /// for every row of a sample, so the weights of one row differ in scale by `h`, not by
    /// the row. Measured in docs/notebook/performance.md, "A second moment per row".
    Row,
}

/// How a layer stores its weights or their Adam moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Precision {
    /// 32-bit floats: a row of `n` weights is `12 n` bytes with its moments.
    #[default]
    F32,
    /// BF16 (the upper half of an f32), updated in f32 and stored with stochastic rounding
    /// (see [`crate::kernels::bf16`]). BF16 moments make a row `8 n` bytes with f32
    /// weights, BF16 weights too `6 n`: the sparse update of a wide output layer is bound
    /// by memory traffic, and the forward pass of a sampled layer reads its active rows
    /// from memory, so both move fewer bytes (docs/notebook/performance.md, "BF16 weights" and
    /// "BF16 moments", for the speed and accuracy at the Amazon-670K shape). Products and
    /// sums stay f32: a BF16 weight is widened exactly. BF16 weights need BF16 moments.
    /// Streamed states (checkpoints) hold BF16 values as BF16 tensors, exported
    /// [`LayerState`]s as f32; either kind of layer reads either (a BF16 layer rounds f32
    /// values to nearest).
    ///
    /// [`LayerState`]: crate::LayerState
    Bf16,
}

impl Precision {
    /// BF16 halves one stored value of this precision takes.
    fn halves(self) -> usize {
        match self {
            Precision::F32 => 2,
            Precision::Bf16 => 1,
        }
    }
}

/// Where a row block's parts lie: `[w | m | v]`, each `stride` values of its precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockLayout {
    /// Values per part: the row length rounded up to 16.
    pub(crate) stride: usize,
    pub(crate) weights: Precision,
    pub(crate) moments: Precision,
}

/// The parts of a row block (see [`BlockLayout`]).
pub(crate) const WEIGHTS: usize = 0;
/// Adam's first moments.
pub(crate) const M: usize = 1;
/// Adam's second moments.
pub(crate) const V: usize = 2;

impl BlockLayout {
    /// Floats of storage per row block.
    pub(crate) fn block(self) -> usize {
        self.stride * (self.weights.halves() + 2 * self.moments.halves()) / 2
    }

    /// Where part `p`'s values start, in BF16 halves from the block's start.
    pub(crate) fn offset(self, p: usize) -> usize {
        let w = self.stride * self.weights.halves();
        [0, w, w + self.stride * self.moments.halves()][p]
    }

    /// The precision of part `p`.
    fn precision(self, p: usize) -> Precision {
        if p == WEIGHTS {
            self.weights
        } else {
            self.moments
        }
    }

    /// Part `p` (`WEIGHTS`, `M` or `V`) of `block` (one row block), `stride` values.
    #[inline]
    pub(crate) fn part(self, block: &[f32], p: usize) -> Values<'_> {
        let at = self.offset(p);
        match self.precision(p) {
            Precision::F32 => Values::F32(&block[at / 2..][..self.stride]),
            Precision::Bf16 => {
                let halves: &[u16] = bytemuck::cast_slice(block);
                Values::Bf16(&halves[at..][..self.stride])
            }
        }
    }

    /// The three parts of `block` (one row block), mutable.
    #[inline]
    pub(crate) fn parts_mut(self, block: &mut [f32]) -> [ValuesMut<'_>; 3] {
        let halves: &mut [u16] = bytemuck::cast_slice_mut(block);
        let (w, rest) = halves.split_at_mut(self.offset(M));
        let (m, v) = rest.split_at_mut(self.offset(V) - self.offset(M));
        [self.wrap(w, WEIGHTS), self.wrap(m, M), self.wrap(v, V)]
    }

    /// Part `p` of `block` (one row block), mutable.
    #[inline]
    pub(crate) fn part_mut(self, block: &mut [f32], p: usize) -> ValuesMut<'_> {
        let halves: &mut [u16] = bytemuck::cast_slice_mut(block);
        self.wrap(&mut halves[self.offset(p)..], p)
    }

    /// Part `p`'s values from the start of `halves`.
    fn wrap(self, halves: &mut [u16], p: usize) -> ValuesMut<'_> {
        let values = &mut halves[..self.stride * self.precision(p).halves()];
        match self.precision(p) {
            Precision::F32 => ValuesMut::F32(bytemuck::cast_slice_mut(values)),
            Precision::Bf16 => ValuesMut::Bf16(values),
        }
    }
}
