//! The input vectors every hash family accepts: dense slices and sparse (index, value) lists.

use crate::error::{LshError, Result};

/// A vector to hash, borrowed from the caller.
///
/// A vector hashes to the same codes whichever representation carries it: a dense slice and
/// the sparse list of its nonzero entries are interchangeable. Sparse indices must be distinct;
/// their order does not matter, with one floating-point caveat: SimHash adds the entries in
/// the order they arrive, so a projection within rounding error of zero can take the other
/// sign for a sparse list that is not in ascending index order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Vector<'a> {
    /// Every coordinate, `len() == dim`.
    Dense(&'a [f32]),
    /// Only the nonzero coordinates: `values[i]` sits at coordinate `indices[i]`.
    Sparse {
        /// Coordinates of the stored entries.
        indices: &'a [u32],
        /// Values of the stored entries.
        values: &'a [f32],
    },
}

impl<'a> Vector<'a> {
    /// A dense vector.
    pub fn dense(values: &'a [f32]) -> Self {
        Vector::Dense(values)
    }

    /// A sparse vector; fails when the two slices differ in length.
    pub fn sparse(indices: &'a [u32], values: &'a [f32]) -> Result<Self> {
        if indices.len() != values.len() {
            return Err(LshError::SparseLengthMismatch {
                indices: indices.len(),
                values: values.len(),
            });
        }
        Ok(Vector::Sparse { indices, values })
    }

    /// Stored entries: the length of a dense vector, the number of sparse entries.
    pub fn nnz(&self) -> usize {
        match self {
            Vector::Dense(values) => values.len(),
            Vector::Sparse { indices, .. } => indices.len(),
        }
    }

    /// Checks the vector against a family's input dimension: dense length, sparse index
    /// range and slice lengths, and that every value is finite.
    pub fn validate(&self, dim: usize) -> Result<()> {
        match *self {
            Vector::Dense(values) => {
                if values.len() != dim {
                    return Err(LshError::DimensionMismatch {
                        expected: dim,
                        actual: values.len(),
                    });
                }
                if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                    return Err(LshError::NonFiniteValue {
                        index: i as u32,
                        value: values[i],
                    });
                }
            }
            Vector::Sparse { indices, values } => {
                if indices.len() != values.len() {
                    return Err(LshError::SparseLengthMismatch {
                        indices: indices.len(),
                        values: values.len(),
                    });
                }
                for (&index, &value) in indices.iter().zip(values) {
                    if index as usize >= dim {
                        return Err(LshError::IndexOutOfRange { index, dim });
                    }
                    if !value.is_finite() {
                        return Err(LshError::NonFiniteValue { index, value });
                    }
                }
            }
        }
        Ok(())
    }

    /// Calls `f(index, value)` for every nonzero entry. Explicit zeros of either
    /// representation are skipped, which is what makes the two representations hash alike.
    #[inline]
    pub fn for_each_nonzero(&self, mut f: impl FnMut(usize, f32)) {
        match *self {
            Vector::Dense(values) => {
                for (i, &v) in values.iter().enumerate() {
                    if v != 0.0 {
                        f(i, v);
                    }
                }
            }
            Vector::Sparse { indices, values } => {
                for (&i, &v) in indices.iter().zip(values) {
                    if v != 0.0 {
                        f(i as usize, v);
                    }
                }
            }
        }
    }
}
