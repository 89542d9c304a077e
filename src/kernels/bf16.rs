//! BF16 storage for weights and Adam's moments: conversions, the dot product and axpy of a
//! BF16 row with f32 values, and the row update that reads and writes BF16 values with f32
//! arithmetic.
//!
//! BF16 is the upper half of an f32 (sign, the same 8-bit exponent, 7 mantissa bits), so a
//! value converts to f32 exactly by a shift, and an f32 converts to BF16 by dropping its
//! lower 16 bits after rounding. Adam's moments are sums of many small increments: rounded
//! to nearest every step, an increment smaller than half a BF16 unit would vanish every
//! time. Stochastic rounding (round up with probability equal to the dropped fraction)
//! keeps the expected value exact, which is what Optimized SLIDE's BF16 mode and the
//! literature on low-precision optimizer state rely on.

use super::adam_step::AdamStep;
use super::prefetch::Ahead;

/// The f32 whose upper 16 bits are `b` (exact).
#[inline]
pub fn to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// `x` rounded to the nearest BF16 (ties to even; NaN stays NaN, infinities stay infinite,
/// finite values past the largest BF16 round to infinity).
#[inline]
pub fn from_f32_nearest(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        // Keep the sign, force a quiet NaN (the payload may sit in the dropped bits).
        return ((bits >> 16) | 0x0040) as u16;
    }
    let odd = (bits >> 16) & 1;
    (bits.wrapping_add(0x7fff + odd) >> 16) as u16
}

/// `x` rounded to one of its two neighbouring BF16 values, up (away from zero) when the
/// dropped lower 16 bits plus `r` carry: with `r` uniform on `0..2^16`, the probability of
/// rounding up is the dropped fraction, so the rounded value's expectation is `x`. NaN and
/// infinities stay non-finite; a finite value within one BF16 unit of the largest may round
/// to infinity.
#[inline]
pub fn from_f32_stochastic(x: f32, r: u16) -> u16 {
    (x.to_bits().wrapping_add(u32::from(r)) >> 16) as u16
}

/// A well-mixed 32-bit hash (Chris Wellons' `lowbias32`): the random bits of stochastic
/// rounding, a pure function of its input so results do not depend on threads.
#[inline]
pub fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x21f0_aaad);
    x ^= x >> 15;
    x = x.wrapping_mul(0x735a_2d97);
    x ^ (x >> 15)
}

/// The seed of one row's update: the row and the optimizer's step, mixed, so that every
/// update of every row draws its own rounding bits.
#[inline]
pub fn row_seed(row: u32, step: u64) -> u32 {
    mix32(row ^ mix32((step as u32) ^ ((step >> 32) as u32).wrapping_mul(0x9e37_79b9)))
}

/// Elements whose rounding bits are drawn together, one xorshift stream each.
pub const LANES: usize = 16;

/// A run of stored values in either precision: a row of a layer's weights, f32 or BF16.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    /// 32-bit floats.
    F32(&'a [f32]),
    /// BF16 values (see [`to_f32`]).
    Bf16(&'a [u16]),
}

/// A mutable run of stored values in either precision (see [`Values`]).
#[derive(Debug)]
pub enum ValuesMut<'a> {
    /// 32-bit floats.
    F32(&'a mut [f32]),
    /// BF16 values (see [`to_f32`]).
    Bf16(&'a mut [u16]),
}

impl<'a> Values<'a> {
    /// Number of values.
    #[inline]
    pub fn len(self) -> usize {
        match self {
            Values::F32(x) => x.len(),
            Values::Bf16(x) => x.len(),
        }
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The first `n` values. Panics if there are fewer, like slicing.
    #[inline]
    pub fn first(self, n: usize) -> Values<'a> {
        match self {
            Values::F32(x) => Values::F32(&x[..n]),
            Values::Bf16(x) => Values::Bf16(&x[..n]),
        }
    }

    /// Value `i` as an f32 (exact). Panics if `i` is out of range, like indexing.
    #[inline]
    pub fn get(self, i: usize) -> f32 {
        match self {
            Values::F32(x) => x[i],
            Values::Bf16(x) => to_f32(x[i]),
        }
    }

    /// Copies the values, widened to f32 (exact), into `out` (as long as the values).
    pub fn widen_into(self, out: &mut [f32]) {
        match self {
            Values::F32(x) => out.copy_from_slice(x),
            Values::Bf16(x) => {
                for (o, &b) in out.iter_mut().zip(x) {
                    *o = to_f32(b);
                }
            }
        }
    }

    /// Whether every value is finite.
    pub fn is_finite(self) -> bool {
        match self {
            Values::F32(x) => x.iter().all(|v| v.is_finite()),
            // Exponent all ones: infinity or NaN.
            Values::Bf16(x) => x.iter().all(|&b| b & 0x7f80 != 0x7f80),
        }
    }

    /// Where the values start and how many bytes they take (for prefetching).
    #[inline]
    pub fn bytes(self) -> (*const u8, usize) {
        match self {
            Values::F32(x) => (x.as_ptr().cast(), std::mem::size_of_val(x)),
            Values::Bf16(x) => (x.as_ptr().cast(), std::mem::size_of_val(x)),
        }
    }
}

impl ValuesMut<'_> {
    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            ValuesMut::F32(x) => x.len(),
            ValuesMut::Bf16(x) => x.len(),
        }
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` values. Panics if there are fewer, like slicing.
    #[inline]
    pub fn first(&mut self, n: usize) -> ValuesMut<'_> {
        match self {
            ValuesMut::F32(x) => ValuesMut::F32(&mut x[..n]),
            ValuesMut::Bf16(x) => ValuesMut::Bf16(&mut x[..n]),
        }
    }

    /// Stores `value` at `i`, rounded to nearest if BF16. Panics if `i` is out of range.
    pub fn set_nearest(&mut self, i: usize, value: f32) {
        match self {
            ValuesMut::F32(x) => x[i] = value,
            ValuesMut::Bf16(x) => x[i] = from_f32_nearest(value),
        }
    }

    /// Stores `values` (as many as there are values here), BF16 ones rounded to nearest.
    pub fn store_nearest(&mut self, values: &[f32]) {
        match self {
            ValuesMut::F32(x) => x.copy_from_slice(values),
            ValuesMut::Bf16(x) => {
                for (b, &v) in x.iter_mut().zip(values) {
                    *b = from_f32_nearest(v);
                }
            }
        }
    }
}

/// `sum(to_f32(w[i]) * x[i])` over the shorter length: a BF16 row's dot product with f32
/// values, every product exact in f32 arithmetic.
pub fn dot(w: &[u16], x: &[f32]) -> f32 {
    w.iter().zip(x).map(|(&a, b)| to_f32(a) * b).sum()
}

/// `y[i] += alpha * to_f32(w[i])` over the shorter length.
pub fn axpy(alpha: f32, w: &[u16], y: &mut [f32]) {
    for (yi, &wi) in y.iter_mut().zip(w) {
        *yi += alpha * to_f32(wi);
    }
}

/// Adam on one row whose moments, and possibly weights, are stored in BF16: the stored
/// values are widened to f32, the update is [`scalar::adam`](super::scalar::adam)'s to the
/// last bit, and the new moments (and BF16 weights) are stored with stochastic rounding.
/// The rounding bits come from [`LANES`] xorshift32 streams seeded from `seed`: element `i`
/// takes stream `i % LANES`'s next 32 bits (the lower 16 for `m`, the upper 16 for `v`)
/// and, with BF16 weights, the lower 16 of the value after that for `w`; so they depend on
/// `seed` alone, not on threads. Written as plain loops over fixed-size chunks, which the
/// workspace's AVX2 baseline vectorises. `ahead` is fetched a little per chunk (a hint).
pub fn adam(
    mut w: ValuesMut<'_>,
    g: &[f32],
    m: &mut [u16],
    v: &mut [u16],
    s: &AdamStep,
    seed: u32,
    mut ahead: Ahead,
) {
    let n = w.len().min(g.len()).min(m.len()).min(v.len());
    let mut streams = seed_streams(seed);
    let full = n - n % LANES;
    let per = ahead.per_step(full / LANES);
    for start in (0..full).step_by(LANES) {
        ahead.fetch(per);
        let bits = next(&mut streams);
        let w_bits = weight_bits(&w, &mut streams);
        for k in 0..LANES {
            let i = start + k;
            update(&mut w, i, g[i], &mut m[i], &mut v[i], s, bits[k], w_bits[k]);
        }
    }
    ahead.finish();
    finish_tail(&mut w, full, n, g, m, v, s, &mut streams);
}

/// [`scalar::adam_row`](super::scalar::adam_row) on a row whose first moments, and possibly
/// weights, are BF16: the stored values widened to f32, the new ones stored with stochastic
/// rounding. The rounding bits come from [`LANES`] xorshift32 streams seeded from `seed`:
/// element `i` takes stream `i % LANES`'s next 32 bits, the lower 16 for `m` and the upper
/// 16 for BF16 weights. Plain loops over fixed-size chunks, one implementation for every
/// kernel set, which the `x86-64-v3` baseline vectorises. `ahead` is fetched a little per
/// chunk (a hint).
///
/// With `beta1 = 0` the first moment is the gradient itself: `m` is neither read nor
/// written and `w -= scale * g`, the same bits as keeping it (`0 m + 1 g` is `g`).
pub fn adam_row(
    mut w: ValuesMut<'_>,
    g: &[f32],
    m: &mut [u16],
    beta1: f32,
    scale: f32,
    seed: u32,
    mut ahead: Ahead,
) {
    let n = w.len().min(g.len()).min(m.len());
    if beta1 == 0.0 {
        return sgd_row(w, &g[..n], scale, seed, ahead);
    }
    let mut streams = seed_streams(seed);
    let full = n - n % LANES;
    let per = ahead.per_step(full / LANES);
    for start in (0..full).step_by(LANES) {
        ahead.fetch(per);
        let bits = next(&mut streams);
        for (k, &b) in bits.iter().enumerate() {
            let i = start + k;
            row_update(&mut w, i, g[i], &mut m[i], beta1, scale, b);
        }
    }
    ahead.finish();
    if full < n {
        let bits = next(&mut streams);
        for (k, i) in (full..n).enumerate() {
            row_update(&mut w, i, g[i], &mut m[i], beta1, scale, bits[k]);
        }
    }
}

/// [`adam_row`] without a first moment (`beta1 = 0`): `w -= scale * g` on `g.len()`
/// elements, each BF16 weight rounded with the upper 16 bits of its stream's next value, as
/// [`adam_row`] rounds it.
fn sgd_row(mut w: ValuesMut<'_>, g: &[f32], scale: f32, seed: u32, mut ahead: Ahead) {
    let mut streams = seed_streams(seed);
    let n = g.len();
    let per = ahead.per_step(n.div_ceil(LANES));
    for start in (0..n).step_by(LANES) {
        ahead.fetch(per);
        let bits = next(&mut streams);
        for (k, &b) in bits.iter().enumerate().take(n - start) {
            let i = start + k;
            step_weight(&mut w, i, scale * g[i], b);
        }
    }
    ahead.finish();
}

/// Weight `i` less `delta`, a BF16 weight rounded with the upper 16 bits of `bits` (the
/// lower 16 are a first moment's): the weight's part of every row update here.
#[inline(always)]
pub(crate) fn step_weight(w: &mut ValuesMut<'_>, i: usize, delta: f32, bits: u32) {
    match w {
        ValuesMut::F32(w) => w[i] -= delta,
        ValuesMut::Bf16(w) => {
            w[i] = from_f32_stochastic(to_f32(w[i]) - delta, (bits >> 16) as u16);
        }
    }
}

/// Element `i` of [`adam_row`].
#[inline(always)]
pub(crate) fn row_update(
    w: &mut ValuesMut<'_>,
    i: usize,
    g: f32,
    m: &mut u16,
    beta1: f32,
    scale: f32,
    bits: u32,
) {
    let mi = beta1 * to_f32(*m) + (1.0 - beta1) * g;
    step_weight(w, i, scale * mi, bits);
    *m = from_f32_stochastic(mi, bits as u16);
}

/// The xorshift32 streams of a row's update, seeded from `seed` (never zero, xorshift's one
/// fixed point).
#[inline]
pub(crate) fn seed_streams(seed: u32) -> [u32; LANES] {
    std::array::from_fn(|lane| mix32(seed ^ (lane as u32).wrapping_mul(0x9e37_79b9)) | 1)
}

/// The weights' rounding bits of one chunk: the streams' next values for BF16 weights
/// (which advances them), nothing for f32 ones.
#[inline(always)]
fn weight_bits(w: &ValuesMut<'_>, streams: &mut [u32; LANES]) -> [u32; LANES] {
    match w {
        ValuesMut::F32(_) => [0; LANES],
        ValuesMut::Bf16(_) => next(streams),
    }
}

/// Elements `from..n` of [`adam`] (fewer than [`LANES`]), each with its stream's next
/// value.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn finish_tail(
    w: &mut ValuesMut<'_>,
    from: usize,
    n: usize,
    g: &[f32],
    m: &mut [u16],
    v: &mut [u16],
    s: &AdamStep,
    streams: &mut [u32; LANES],
) {
    if from == n {
        return;
    }
    let bits = next(streams);
    let w_bits = weight_bits(w, streams);
    for (k, i) in (from..n).enumerate() {
        update(w, i, g[i], &mut m[i], &mut v[i], s, bits[k], w_bits[k]);
    }
}

/// Advances every xorshift32 stream once and returns the new values.
#[inline(always)]
fn next(streams: &mut [u32; LANES]) -> [u32; LANES] {
    for x in streams.iter_mut() {
        *x ^= *x << 13;
        *x ^= *x >> 17;
        *x ^= *x << 5;
    }
    *streams
}

/// Element `i` of [`adam`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn update(
    w: &mut ValuesMut<'_>,
    i: usize,
    g: f32,
    m: &mut u16,
    v: &mut u16,
    s: &AdamStep,
    bits: u32,
    w_bits: u32,
) {
    let mi = s.beta1 * to_f32(*m) + (1.0 - s.beta1) * g;
    let vi = s.beta2 * to_f32(*v) + (1.0 - s.beta2) * g * g;
    let delta = s.step_size * mi / (vi.sqrt() * s.inv_sqrt_bias2 + s.eps);
    match w {
        ValuesMut::F32(w) => w[i] -= delta,
        ValuesMut::Bf16(w) => w[i] = from_f32_stochastic(to_f32(w[i]) - delta, w_bits as u16),
    }
    *m = from_f32_stochastic(mi, bits as u16);
    *v = from_f32_stochastic(vi, (bits >> 16) as u16);
}

#[cfg(test)]
mod tests;
