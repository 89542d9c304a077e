//! [`Kernels`]: one set of kernel implementations, a table of function pointers, and the
//! signatures of its Adam row updates.

use super::adam_step::AdamStep;
use super::bf16::{Values, ValuesMut};
use super::prefetch::Ahead;
use super::scores;

/// One set of kernel implementations.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// Which set this is: `"scalar"`, `"portable"` or `"avx512"`.
    pub name: &'static str,
    /// `sum(a[i] * b[i])` over the shorter length.
    pub dot: fn(&[f32], &[f32]) -> f32,
    /// `y[i] += alpha * x[i]` over the shorter length.
    pub axpy: fn(f32, &[f32], &mut [f32]),
    /// Adam on one row: `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`,
    /// `w -= step_size * m / (sqrt(v) * inv_sqrt_bias2 + eps)`. All slices equally long.
    pub adam: AdamFn,
    /// Adam on one row with BF16 moments and f32 or BF16 weights, stochastically rounded
    /// ([`bf16::adam`](super::bf16::adam), the reference, bit for bit).
    pub adam_bf16: AdamBf16Fn,
    /// Adam with a second moment per row on one row with BF16 first moments and f32 or BF16
    /// weights ([`bf16::adam_row`](super::bf16::adam_row), the reference, bit for bit).
    pub adam_row_bf16: AdamRowBf16Fn,
    /// [`bf16::dot`](super::bf16::dot): a BF16 row's dot product with f32 values.
    pub dot_bf16: fn(&[u16], &[f32]) -> f32,
    /// [`bf16::axpy`](super::bf16::axpy): `y[i] += alpha * w[i]` for a BF16 row `w`.
    pub axpy_bf16: fn(f32, &[u16], &mut [f32]),
    /// The scores of a block of rows for a block of samples, as one matrix product (exact
    /// evaluation; see [`scores`]).
    pub scores: scores::ScoresFn,
}

impl Kernels {
    /// `w . x` for a row `w` of either precision ([`dot`](Self::dot) or
    /// [`dot_bf16`](Self::dot_bf16)).
    #[inline]
    pub fn dot_row(&self, w: Values<'_>, x: &[f32]) -> f32 {
        match w {
            Values::F32(w) => (self.dot)(w, x),
            Values::Bf16(w) => (self.dot_bf16)(w, x),
        }
    }

    /// `y += alpha w` for a row `w` of either precision ([`axpy`](Self::axpy) or
    /// [`axpy_bf16`](Self::axpy_bf16)).
    #[inline]
    pub fn axpy_row(&self, alpha: f32, w: Values<'_>, y: &mut [f32]) {
        match w {
            Values::F32(w) => (self.axpy)(alpha, w, y),
            Values::Bf16(w) => (self.axpy_bf16)(alpha, w, y),
        }
    }
}

/// Signature of the Adam row kernel: `(w, g, m, v, step)`.
pub type AdamFn = fn(&mut [f32], &[f32], &mut [f32], &mut [f32], &AdamStep);

/// Signature of the BF16-moment Adam row kernel: `(w, g, m, v, step, seed, ahead)`, where
/// `ahead` is the next row's block, fetched a little at each step of the kernel's loop.
pub type AdamBf16Fn = fn(ValuesMut<'_>, &[f32], &mut [u16], &mut [u16], &AdamStep, u32, Ahead);

/// Signature of the per-row-second-moment row kernel: `(w, g, m, beta1, scale, seed,
/// ahead)` ([`bf16::adam_row`](super::bf16::adam_row)).
pub type AdamRowBf16Fn = fn(ValuesMut<'_>, &[f32], &mut [u16], f32, f32, u32, Ahead);
