//! The [`HashFamily`] trait every family implements, the shape checks of its batched path,
//! and [`CodeBuffer::for_family`], which sizes a buffer by hashing through the trait.

use super::buffer::CodeBuffer;
use super::params::LshParams;
use super::shape::FamilyShape;
use crate::error::{LshError, Result, invalid};
use crate::vector::Vector;

/// A locality-sensitive hash family over vectors of a fixed dimension.
///
/// Implementations are immutable after construction and `Sync`, so one family serves every
/// thread; each thread brings its own [`CodeBuffer`]. A family provides its
/// [`FamilyShape`] and its [`raw_hashes`](Self::raw_hashes); the getters and the
/// combination of raw sub-hashes into codes ([`hash`](Self::hash)) follow from those.
pub trait HashFamily: Send + Sync {
    /// What the family shares with every other: dimension, parameters, bits per code and
    /// the combination of sub-hashes into codes.
    fn shape(&self) -> &FamilyShape;
    /// Computes the `K * L` raw sub-hashes of `x` into `buf` and returns them.
    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]>;

    /// Input dimension.
    fn dim(&self) -> usize {
        self.shape().dim()
    }
    /// `K`, `L` and `range_pow`.
    fn params(&self) -> LshParams {
        self.shape().params()
    }
    /// Bits each raw sub-hash contributes to an exactly concatenated bucket code.
    fn bits_per_code(&self) -> u32 {
        self.shape().bits_per_code()
    }
    /// Computes the `L` bucket codes of `x` (each below `2^range_pow`) and returns them.
    fn hash<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        self.raw_hashes(x, buf)?;
        Ok(self.shape().combiner().combine(buf))
    }
    /// The bucket codes of `count` dense rows, row `r` being
    /// `matrix[r * row_stride..][..dim]`, written row after row into `out[..count * L]`:
    /// the same codes as [`hash`](Self::hash) gives each row, and the same error for the
    /// first invalid row. Families override it where hashing rows together is faster (WTA
    /// and DWTA hash 16 rows at a time, one per SIMD lane); a table rebuild goes through it.
    fn hash_rows(
        &self,
        matrix: &[f32],
        row_stride: usize,
        count: usize,
        buf: &mut CodeBuffer,
        out: &mut [u32],
    ) -> Result<()> {
        check_rows(self, matrix, row_stride, count, out.len())?;
        let (dim, l) = (self.dim(), self.params().l);
        for (r, codes) in out.chunks_exact_mut(l).take(count).enumerate() {
            let row = &matrix[r * row_stride..][..dim];
            codes.copy_from_slice(self.hash(Vector::Dense(row), buf)?);
        }
        Ok(())
    }
}

/// The shape checks of [`HashFamily::hash_rows`]: the stride holds a row, `matrix` holds
/// `count` rows and `out` their codes.
pub(crate) fn check_rows<F: HashFamily + ?Sized>(
    family: &F,
    matrix: &[f32],
    row_stride: usize,
    count: usize,
    out_len: usize,
) -> Result<()> {
    let dim = family.dim();
    if count == 0 {
        return Ok(());
    }
    let needed = (count - 1)
        .checked_mul(row_stride)
        .and_then(|n| n.checked_add(dim));
    if row_stride < dim || needed.is_none_or(|n| n > matrix.len()) {
        return Err(LshError::DimensionMismatch {
            expected: needed.unwrap_or(usize::MAX),
            actual: matrix.len(),
        });
    }
    if out_len < count.saturating_mul(family.params().l) {
        return Err(invalid(
            "out",
            out_len,
            "must hold the L codes of each of the count rows",
        ));
    }
    Ok(())
}

// `for_family` lives here rather than in `buffer.rs`: it hashes through the trait, and the
// trait's methods take the buffer, so one of the two files has to hold both.
impl CodeBuffer {
    /// A buffer already sized for `family`: hashing with it never allocates, even the first
    /// time. (It hashes the zero vector once, which exercises the largest scratch a family
    /// uses.)
    pub fn for_family<F: HashFamily + ?Sized>(family: &F) -> Self {
        let mut buffer = CodeBuffer::new();
        let zeros = vec![0.0f32; family.dim()];
        family
            .hash(Vector::Dense(&zeros), &mut buffer)
            .expect("the zero vector of the family's dimension is valid input");
        buffer
    }
}
