//! A layer's trainable state in plain arrays, for checkpoints: copied whole as a
//! [`LayerState`], or streamed tensor by tensor (the names, types and shapes of
//! [`SparseLayer::state_tensors`], written by [`SparseLayer::write_state_tensor`] and read
//! by [`SparseLayer::read_state`] from a [`StateSource`]).

mod stream;

pub use stream::{read_f32s, read_u32s, write_rows};

use super::SparseLayer;
use super::config::{M, V, WEIGHTS};

use crate::error::{Result, SlideError, config_error};

/// A layer's trainable state in plain arrays (for checkpoints): rows of the stored layout
/// without padding.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerState {
    /// Stored rows: neurons (neuron-major) or inputs (input-major).
    pub rows: usize,
    /// Floats per row: `in_dim` (neuron-major) or `out_dim` (input-major).
    pub row_len: usize,
    /// `rows * row_len` weights.
    pub weights: Vec<f32>,
    /// Adam's first moments of the weights.
    pub m: Vec<f32>,
    /// Adam's second moments of the weights.
    pub v: Vec<f32>,
    /// Updates each row has received.
    pub row_steps: Vec<u32>,
    /// One bias per neuron.
    pub bias: Vec<f32>,
    /// Adam's first moments of the biases.
    pub bias_m: Vec<f32>,
    /// Adam's second moments of the biases.
    pub bias_v: Vec<f32>,
    /// Updates each bias has received.
    pub bias_steps: Vec<u32>,
    /// The LSH tables' contents, for sampled layers.
    pub tables: Option<slide_lsh::TablesState>,
    /// The shared negatives in force (see
    /// [`Negatives::shared_negatives`](crate::Negatives::shared_negatives)), or the pool each
    /// sample picks its own from (see [`Negatives::shared_pool`](crate::Negatives::shared_pool)),
    /// best first for the mean input; empty if none.
    pub shared: Vec<u32>,
    /// The query center in force (see
    /// [`Retrieval::center_queries`](crate::Retrieval::center_queries); empty if none).
    pub center: Vec<f32>,
}

impl SparseLayer {
    fn rows(&self) -> usize {
        self.row_steps.len()
    }

    /// Rows stored and floats per row, as [`LayerState`] holds them.
    pub(crate) fn stored_shape(&self) -> (usize, usize) {
        (self.rows(), self.row_len())
    }

    /// A copy of the layer's trainable state.
    pub fn export_state(&self) -> LayerState {
        let (rows, row_len) = (self.rows(), self.row_len());
        let storage = self.block_layout();
        let part = |which: usize| -> Vec<f32> {
            let mut out = vec![0.0f32; rows * row_len];
            for (block, row) in self
                .params
                .chunks_exact(self.block())
                .zip(out.chunks_exact_mut(row_len.max(1)))
            {
                storage.part(block, which).first(row_len).widen_into(row);
            }
            out
        };
        LayerState {
            rows,
            row_len,
            weights: part(WEIGHTS),
            m: part(M),
            v: part(V),
            row_steps: self.row_steps.clone(),
            bias: self.bias.clone(),
            bias_m: self.bias_m.clone(),
            bias_v: self.bias_v.clone(),
            bias_steps: self.bias_steps.clone(),
            tables: self.lsh.as_ref().map(|l| l.tables.export_state()),
            shared: self.lsh.as_ref().map_or(Vec::new(), |l| l.shared.clone()),
            center: self.lsh.as_ref().map_or(Vec::new(), |l| l.center.clone()),
        }
    }

    /// Replaces the layer's trainable state with `state`, after checking every size (see
    /// [`read_state`](Self::read_state), which it goes through).
    pub fn import_state(&mut self, state: &LayerState) -> Result<()> {
        let generation = state.tables.as_ref().map(|t| t.generation);
        self.read_state(generation, &mut MemorySource(state))
    }

    /// Whether every weight, bias and Adam moment is finite.
    pub fn is_finite(&self) -> bool {
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        let (storage, row_len) = (self.block_layout(), self.row_len());
        let rows_finite = self.params.chunks_exact(self.block()).all(|block| {
            [WEIGHTS, M, V]
                .into_iter()
                .all(|p| storage.part(block, p).first(row_len).is_finite())
        });
        rows_finite
            && [&self.bias, &self.bias_m, &self.bias_v]
                .iter()
                .all(|v| finite(v))
    }

    /// Adam's `(m, v)` at position `col` of row `row`, as f32.
    pub(crate) fn moments_at(&self, row: usize, col: usize) -> (f32, f32) {
        let block = &self.params[row * self.block()..][..self.block()];
        let storage = self.block_layout();
        (
            storage.part(block, M).get(col),
            storage.part(block, V).get(col),
        )
    }

    /// The tables' generation, for sampled layers (see [`slide_lsh::TablesState`]).
    pub fn tables_generation(&self) -> Option<u64> {
        self.lsh.as_ref().map(|l| l.tables.generation())
    }
}

/// The element type of a state tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    /// `f32`.
    F32,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// BF16 (the upper half of an `f32`; see [`crate::kernels::bf16`]).
    Bf16,
}

impl Elem {
    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            Elem::Bf16 => 2,
            Elem::F32 | Elem::U32 => 4,
            Elem::U64 => 8,
        }
    }
}

/// One array of a layer's (or network's) trainable state as checkpoints store it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTensor {
    /// Its name (`weight`, `tables.store`, ...; prefixed `layers.I.` by a network).
    pub name: String,
    /// The element type.
    pub elem: Elem,
    /// Its shape.
    pub shape: Vec<usize>,
}

impl StateTensor {
    /// Bytes the tensor takes, little-endian and unpadded.
    pub fn byte_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.elem.bytes()
    }
}

/// Where [`SparseLayer::read_state`] and [`Network::read_state`](crate::Network::read_state)
/// read a state from: named tensors of little-endian bytes, read at any offset (a
/// checkpoint file, or a [`LayerState`] in memory).
pub trait StateSource {
    /// The source's error; the reader's own checks fail with a [`SlideError`].
    type Error: From<SlideError>;
    /// The element type and shape of tensor `name`, if the source has it.
    fn tensor(&self, name: &str) -> Option<(Elem, Vec<usize>)>;
    /// Fills `out` with tensor `name`'s bytes from byte `offset` on.
    fn read(
        &mut self,
        name: &str,
        offset: usize,
        out: &mut [u8],
    ) -> std::result::Result<(), Self::Error>;
}

/// A [`LayerState`] as a [`StateSource`].
pub(crate) struct MemorySource<'a>(pub(crate) &'a LayerState);

/// A tensor of a [`LayerState`], borrowed.
enum Data<'a> {
    F32(&'a [f32]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl MemorySource<'_> {
    fn data(&self, name: &str) -> Option<(Vec<usize>, Data<'_>)> {
        let s = self.0;
        let matrix = || vec![s.rows, s.row_len];
        let tables = s.tables.as_ref();
        let one = |len: usize| vec![len];
        Some(match name {
            "weight" => (matrix(), Data::F32(&s.weights)),
            "adam_m" => (matrix(), Data::F32(&s.m)),
            "adam_v" => (matrix(), Data::F32(&s.v)),
            "row_steps" => (one(s.row_steps.len()), Data::U32(&s.row_steps)),
            "bias" => (one(s.bias.len()), Data::F32(&s.bias)),
            "bias_adam_m" => (one(s.bias_m.len()), Data::F32(&s.bias_m)),
            "bias_adam_v" => (one(s.bias_v.len()), Data::F32(&s.bias_v)),
            "bias_steps" => (one(s.bias_steps.len()), Data::U32(&s.bias_steps)),
            "shared_negatives" if !s.shared.is_empty() => {
                (one(s.shared.len()), Data::U32(&s.shared))
            }
            "query_center" if !s.center.is_empty() => (one(s.center.len()), Data::F32(&s.center)),
            "tables.buckets" => {
                let t = tables?;
                (one(t.buckets.len()), Data::U32(&t.buckets))
            }
            "tables.store" => {
                let t = tables?;
                (one(t.store.len()), Data::U32(&t.store))
            }
            "tables.store_offsets" => {
                let t = tables?;
                (one(t.store_offsets.len()), Data::U64(&t.store_offsets))
            }
            _ => return None,
        })
    }
}

impl StateSource for MemorySource<'_> {
    type Error = SlideError;

    fn tensor(&self, name: &str) -> Option<(Elem, Vec<usize>)> {
        self.data(name).map(|(shape, data)| {
            let elem = match data {
                Data::F32(_) => Elem::F32,
                Data::U32(_) => Elem::U32,
                Data::U64(_) => Elem::U64,
            };
            (elem, shape)
        })
    }

    /// Reads whole elements (`offset` and `out.len()` multiples of the element size).
    fn read(&mut self, name: &str, offset: usize, out: &mut [u8]) -> Result<()> {
        let short = || config_error("layer state", format!("`{name}` is shorter than its shape"));
        let Some((_, data)) = self.data(name) else {
            return Err(short());
        };
        fn copy<T: Copy, const N: usize>(
            values: &[T],
            offset: usize,
            out: &mut [u8],
            le: fn(T) -> [u8; N],
        ) -> Option<()> {
            let from = offset / N;
            let values = values.get(from..from + out.len() / N)?;
            for (chunk, &v) in out.chunks_exact_mut(N).zip(values) {
                chunk.copy_from_slice(&le(v));
            }
            Some(())
        }
        match data {
            Data::F32(v) => copy(v, offset, out, f32::to_le_bytes),
            Data::U32(v) => copy(v, offset, out, u32::to_le_bytes),
            Data::U64(v) => copy(v, offset, out, u64::to_le_bytes),
        }
        .ok_or_else(short)
    }
}
