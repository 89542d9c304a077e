//! What a network trains on: anything that can hand out samples by index.

use slide_lsh::Vector;

/// A labelled dataset, read by index. Implemented by the in-memory stores below and by the
/// trainer's readers; `Sync` so a batch's samples can be read from many threads.
pub trait Examples: Sync {
    /// Number of samples.
    fn len(&self) -> usize;
    /// Whether there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The input of sample `i` (dense or sparse). `i < len()`.
    fn input(&self, i: usize) -> Vector<'_>;
    /// The labels of sample `i` (class or label ids). `i < len()`.
    fn labels(&self, i: usize) -> &[u32];
}

/// Sparse samples in compressed rows: sample `i`'s features are
/// `indices[offsets[i]..offsets[i + 1]]` with the matching `values`; its labels likewise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseExamples {
    /// Row starts into `indices`/`values`, `len() + 1` entries.
    pub offsets: Vec<usize>,
    /// Feature ids.
    pub indices: Vec<u32>,
    /// Feature values.
    pub values: Vec<f32>,
    /// Row starts into `labels`, `len() + 1` entries.
    pub label_offsets: Vec<usize>,
    /// Label ids.
    pub labels: Vec<u32>,
}

impl SparseExamples {
    /// An empty store.
    pub fn new() -> Self {
        SparseExamples {
            offsets: vec![0],
            label_offsets: vec![0],
            ..Default::default()
        }
    }

    /// Appends one sample.
    pub fn push(&mut self, indices: &[u32], values: &[f32], labels: &[u32]) {
        self.indices.extend_from_slice(indices);
        self.values.extend_from_slice(values);
        self.offsets.push(self.indices.len());
        self.labels.extend_from_slice(labels);
        self.label_offsets.push(self.labels.len());
    }
}

impl Examples for SparseExamples {
    fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    fn input(&self, i: usize) -> Vector<'_> {
        let range = self.offsets[i]..self.offsets[i + 1];
        Vector::Sparse {
            indices: &self.indices[range.clone()],
            values: &self.values[range],
        }
    }
    fn labels(&self, i: usize) -> &[u32] {
        &self.labels[self.label_offsets[i]..self.label_offsets[i + 1]]
    }
}

/// Dense samples of a fixed dimension with one label each (e.g. images and classes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DenseExamples {
    /// Input dimension.
    pub dim: usize,
    /// `len() * dim` values, row-major.
    pub inputs: Vec<f32>,
    /// One class per sample.
    pub classes: Vec<u32>,
}

impl Examples for DenseExamples {
    fn len(&self) -> usize {
        self.classes.len()
    }
    fn input(&self, i: usize) -> Vector<'_> {
        Vector::Dense(&self.inputs[i * self.dim..(i + 1) * self.dim])
    }
    fn labels(&self, i: usize) -> &[u32] {
        std::slice::from_ref(&self.classes[i])
    }
}
