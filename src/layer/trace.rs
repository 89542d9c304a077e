//! What one sample leaves in one layer ([`LayerTrace`]), the per-thread scratch of an LSH
//! query ([`SelectScratch`]), and how a batch's samples are handed to the update
//! ([`LayerBatch`]).

use slide_lsh::{CodeBuffer, QueryScratch, SampleCounts, Vector};

/// What one sample left in one layer: which neurons were active, their outputs, and the
/// gradient of the loss on them. Owned by the caller and reused from sample to sample (its
/// buffers keep their capacity, so warm passes do not allocate).
///
/// [`SparseLayer::select_active`](crate::SparseLayer::select_active) fills the active set,
/// [`SparseLayer::forward`](crate::SparseLayer::forward) the outputs; the caller writes the
/// gradient on the outputs into [`gradient_mut`](Self::gradient_mut) and
/// [`SparseLayer::backward`](crate::SparseLayer::backward) turns it into the gradient on
/// the pre-activations, which [`SparseLayer::update`](crate::SparseLayer::update) reads.
#[derive(Debug, Clone, Default)]
pub struct LayerTrace {
    /// Every neuron active (`active` unused, positions are neuron ids).
    pub(crate) dense: bool,
    pub(crate) active: Vec<u32>,
    pub(crate) out: Vec<f32>,
    pub(crate) delta: Vec<f32>,
    /// Where the active ids came from (all zero when every neuron is active); `forced`
    /// counts the labels and the shared negatives.
    pub(crate) sources: SampleCounts,
    /// How many of the forced ids were the layer's shared negatives.
    pub(crate) shared: usize,
    /// Added to the logits from position `shift_from` on before a softmax (the log-Q
    /// correction of a training pass; 0 otherwise).
    pub(crate) logit_shift: f32,
    /// First active position the log-Q shift applies to (see
    /// [`Negatives::log_q`](crate::Negatives::log_q)).
    pub(crate) shift_from: usize,
    /// `(in_dim, out_dim)` of the layer whose active set this is (`(0, 0)` before the
    /// first selection), so a trace handed to another layer is refused, not misread.
    pub(crate) shape: (usize, usize),
    /// After a softmax layer's forward pass: the largest active logit (shift included) and
    /// the sum of `exp(logit - largest)` over the active outputs, which the ranks of a
    /// sharded network combine into the normaliser of the whole layer.
    pub(crate) softmax: (f32, f32),
}

impl LayerTrace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes room for `n` neurons, so the passes never reallocate.
    pub(crate) fn reserve(&mut self, n: usize) {
        for v in [&mut self.out, &mut self.delta] {
            if v.capacity() < n {
                v.reserve(n - v.len());
            }
        }
        if self.active.capacity() < n {
            self.active.reserve(n - self.active.len());
        }
    }

    /// Active neurons after the forward pass (all of them for a dense pass).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether no neuron is active.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Whether every neuron was active (position `p` is neuron `p`).
    pub fn is_dense(&self) -> bool {
        self.dense
    }

    /// The neuron at active position `position`. Panics if `position >= len()`.
    pub fn id(&self, position: usize) -> u32 {
        if self.dense {
            position as u32
        } else {
            self.active[position]
        }
    }

    /// The active neurons' ids, in position order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        (0..self.len()).map(|p| self.id(p))
    }

    /// The active neurons' outputs (after the activation), in position order.
    pub fn outputs(&self) -> &[f32] {
        &self.out
    }

    /// The gradient buffer, one value per active position: write the gradient of the loss
    /// with respect to the outputs into it before
    /// [`SparseLayer::backward`](crate::SparseLayer::backward), which replaces it with the
    /// gradient with respect to the pre-activations. Sized (zero-filled) to [`len`](Self::len).
    pub fn gradient_mut(&mut self) -> &mut [f32] {
        self.delta.clear();
        self.delta.resize(self.out.len(), 0.0);
        &mut self.delta
    }

    /// The gradient buffer as it stands (see [`gradient_mut`](Self::gradient_mut)).
    pub fn gradient(&self) -> &[f32] {
        &self.delta
    }

    /// Where the active ids came from (labels and shared negatives forced in, the tables'
    /// picks, random fill); all zero for a dense pass.
    pub fn sources(&self) -> SampleCounts {
        self.sources
    }

    /// The layer's output as the next layer's input: dense, or sparse over the active ids.
    pub fn as_input(&self) -> Vector<'_> {
        if self.dense {
            Vector::Dense(&self.out)
        } else {
            Vector::Sparse {
                indices: &self.active,
                values: &self.out,
            }
        }
    }
}

/// The scratch one LSH query of one layer needs (hash codes, the bucket union's bitmap,
/// forced ids, a centered query): made by
/// [`SparseLayer::select_scratch`](crate::SparseLayer::select_scratch), sized up front so
/// that no query allocates, and used by one thread at a time. Empty for a layer without LSH.
#[derive(Debug, Default)]
pub struct SelectScratch {
    pub(crate) buffers: Option<QueryBuffers>,
    /// `(in_dim, out_dim)` of the layer it was made for.
    pub(crate) shape: (usize, usize),
}

#[derive(Debug, Default)]
pub(crate) struct QueryBuffers {
    pub(crate) codes: CodeBuffer,
    pub(crate) query: QueryScratch,
    /// The forced ids of one query: labels, then the layer's shared negatives (the
    /// sample's own, with a pool).
    pub(crate) forced: Vec<u32>,
    /// A pool's scoring of one sample (see `Negatives::shared_pool`).
    pub(crate) pool: PoolScratch,
    /// A centered query.
    pub(crate) centered: Vec<f32>,
}

/// The buffers of one sample's scoring of a pool of shared negatives.
#[derive(Debug, Default)]
pub(crate) struct PoolScratch {
    /// The pool's scores, and as sort keys with their ids.
    pub(crate) logits: Vec<f32>,
    pub(crate) keys: Vec<u64>,
    /// The inputs the pool is scored with when only the largest count
    /// (`Negatives::shared_pool_inputs`): selection keys, then their indices and values.
    pub(crate) input_keys: Vec<u64>,
    pub(crate) indices: Vec<u32>,
    pub(crate) values: Vec<f32>,
}

/// The samples of a batch as one layer saw them: each sample's input to the layer and its
/// trace after the backward pass. [`SparseLayer::update`](crate::SparseLayer::update) reads
/// the gradient from it. Implemented for slices of `(input, &trace)` pairs.
pub trait LayerBatch: Sync {
    /// Samples in the batch.
    fn samples(&self) -> usize;
    /// Sample `s`'s input to the layer.
    fn input(&self, s: usize) -> Vector<'_>;
    /// Sample `s`'s trace in the layer.
    fn trace(&self, s: usize) -> &LayerTrace;
}

impl LayerBatch for [(Vector<'_>, &LayerTrace)] {
    fn samples(&self) -> usize {
        self.len()
    }

    fn input(&self, s: usize) -> Vector<'_> {
        self[s].0
    }

    fn trace(&self, s: usize) -> &LayerTrace {
        self[s].1
    }
}
