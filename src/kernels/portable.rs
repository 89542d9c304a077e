//! `wide` kernels, 8 lanes at a time with a scalar tail: AVX2 + FMA on x86-64 (the
//! workspace's `x86-64-v3` baseline), NEON on aarch64, plain loops elsewhere. The BF16-row
//! kernels sum in the same order as their f32 twins, so a BF16 row computes exactly as its
//! widened f32 row does; the BF16 Adam update is [`bf16::adam`] to the bit.

use wide::bytemuck::cast;
use wide::{f32x8, u16x8, u32x8};

use super::adam_step::AdamStep;
use super::bf16::{self, ValuesMut};
use super::prefetch::Ahead;
use super::scalar;

#[inline]
fn load(chunk: &[f32]) -> f32x8 {
    let mut lanes = [0.0f32; 8];
    lanes.copy_from_slice(chunk);
    f32x8::from(lanes)
}

/// `sum(a[i] * b[i])`.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [f32x8::ZERO; 2];
    let mut a16 = a.chunks_exact(16);
    let mut b16 = b.chunks_exact(16);
    for (x, y) in (&mut a16).zip(&mut b16) {
        acc[0] = load(&x[..8]).mul_add(load(&y[..8]), acc[0]);
        acc[1] = load(&x[8..]).mul_add(load(&y[8..]), acc[1]);
    }
    let (ra, rb) = (a16.remainder(), b16.remainder());
    let mut a8 = ra.chunks_exact(8);
    let mut b8 = rb.chunks_exact(8);
    for (x, y) in (&mut a8).zip(&mut b8) {
        acc[0] = load(x).mul_add(load(y), acc[0]);
    }
    (acc[0] + acc[1]).reduce_add() + scalar::dot(a8.remainder(), b8.remainder())
}

/// `y[i] += alpha * x[i]`.
pub fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let a = f32x8::splat(alpha);
    let mut y8 = y.chunks_exact_mut(8);
    let mut x8 = x.chunks_exact(8);
    for (yc, xc) in (&mut y8).zip(&mut x8) {
        let r = load(xc).mul_add(a, load(yc));
        yc.copy_from_slice(&r.to_array());
    }
    scalar::axpy(alpha, x8.remainder(), y8.into_remainder());
}

/// Adam on one row (see [`super::Kernels::adam`]).
pub fn adam(w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamStep) {
    let n = w.len();
    let (b1, b2) = (f32x8::splat(s.beta1), f32x8::splat(s.beta2));
    let (c1, c2) = (f32x8::splat(1.0 - s.beta1), f32x8::splat(1.0 - s.beta2));
    let (step, inv, eps) = (
        f32x8::splat(s.step_size),
        f32x8::splat(s.inv_sqrt_bias2),
        f32x8::splat(s.eps),
    );
    let full = n - n % 8;
    for i in (0..full).step_by(8) {
        let gi = load(&g[i..i + 8]);
        let mi = b1 * load(&m[i..i + 8]) + c1 * gi;
        let vi = b2 * load(&v[i..i + 8]) + c2 * gi * gi;
        let wi = load(&w[i..i + 8]) - step * mi / (vi.sqrt() * inv + eps);
        m[i..i + 8].copy_from_slice(&mi.to_array());
        v[i..i + 8].copy_from_slice(&vi.to_array());
        w[i..i + 8].copy_from_slice(&wi.to_array());
    }
    scalar::adam(
        &mut w[full..],
        &g[full..],
        &mut m[full..],
        &mut v[full..],
        s,
    );
}

/// Eight BF16 values widened to f32 (exact: a 16-bit shift into the upper half).
#[inline(always)]
fn widen(chunk: &[u16]) -> f32x8 {
    let mut lanes = [0u16; 8];
    lanes.copy_from_slice(chunk);
    let bits: u32x8 = u32x8::from(u16x8::new(lanes)) << 16;
    cast(bits)
}

/// `sum(to_f32(w[i]) * x[i])`: a BF16 row's dot product, in [`dot`]'s order, so a BF16 row
/// scores exactly as its widened f32 row does through [`dot`].
pub fn dot_bf16(w: &[u16], x: &[f32]) -> f32 {
    let n = w.len().min(x.len());
    let (w, x) = (&w[..n], &x[..n]);
    let mut acc = [f32x8::ZERO; 2];
    let mut w16 = w.chunks_exact(16);
    let mut x16 = x.chunks_exact(16);
    for (a, b) in (&mut w16).zip(&mut x16) {
        acc[0] = widen(&a[..8]).mul_add(load(&b[..8]), acc[0]);
        acc[1] = widen(&a[8..]).mul_add(load(&b[8..]), acc[1]);
    }
    let (rw, rx) = (w16.remainder(), x16.remainder());
    let mut w8 = rw.chunks_exact(8);
    let mut x8 = rx.chunks_exact(8);
    for (a, b) in (&mut w8).zip(&mut x8) {
        acc[0] = widen(a).mul_add(load(b), acc[0]);
    }
    (acc[0] + acc[1]).reduce_add() + bf16::dot(w8.remainder(), x8.remainder())
}

/// `y[i] += alpha * to_f32(w[i])`, in [`axpy`]'s order (one fused multiply-add per element
/// but the tail's).
pub fn axpy_bf16(alpha: f32, w: &[u16], y: &mut [f32]) {
    let n = w.len().min(y.len());
    let (w, y) = (&w[..n], &mut y[..n]);
    let a = f32x8::splat(alpha);
    let mut y8 = y.chunks_exact_mut(8);
    let mut w8 = w.chunks_exact(8);
    for (yc, wc) in (&mut y8).zip(&mut w8) {
        let r = widen(wc).mul_add(a, load(yc));
        yc.copy_from_slice(&r.to_array());
    }
    bf16::axpy(alpha, w8.remainder(), y8.into_remainder());
}

/// The 16 xorshift32 streams of [`bf16::adam`], as two vectors of 8 lanes.
#[derive(Clone, Copy)]
struct Streams([u32x8; 2]);

impl Streams {
    /// Advances every stream once (`x ^= x << 13; x ^= x >> 17; x ^= x << 5`) and returns
    /// the new values.
    #[inline(always)]
    fn next(&mut self) -> [u32x8; 2] {
        for x in &mut self.0 {
            *x ^= *x << 13;
            *x ^= *x >> 17;
            *x ^= *x << 5;
        }
        self.0
    }
}

/// `value`'s bits plus `bits` (the lower 16 of each lane), shifted down: stochastic rounding
/// to BF16 ([`bf16::from_f32_stochastic`]), stored into `out` (8 values).
#[inline(always)]
fn round_into(value: f32x8, bits: u32x8, out: &mut [u16]) {
    let rounded: u32x8 = (cast::<f32x8, u32x8>(value) + (bits & u32x8::splat(0xffff))) >> 16;
    for (o, r) in out.iter_mut().zip(rounded.to_array()) {
        *o = r as u16;
    }
}

/// [`bf16::adam`] eight elements at a time, bit for bit: the same products and sums in the
/// same order (no fused multiply-adds; `sqrt` and division are correctly rounded in both),
/// the same 16 xorshift streams, lane `k` of half `h` being stream `8 h + k`.
pub fn adam_bf16(
    mut w: ValuesMut<'_>,
    g: &[f32],
    m: &mut [u16],
    v: &mut [u16],
    s: &AdamStep,
    seed: u32,
    mut ahead: Ahead,
) {
    let n = w.len().min(g.len()).min(m.len()).min(v.len());
    let lanes = bf16::seed_streams(seed);
    let half = |h: usize| u32x8::new(std::array::from_fn(|k| lanes[8 * h + k]));
    let mut streams = Streams([half(0), half(1)]);
    let (b1, c1) = (f32x8::splat(s.beta1), f32x8::splat(1.0 - s.beta1));
    let (b2, c2) = (f32x8::splat(s.beta2), f32x8::splat(1.0 - s.beta2));
    let (step, inv, eps) = (
        f32x8::splat(s.step_size),
        f32x8::splat(s.inv_sqrt_bias2),
        f32x8::splat(s.eps),
    );
    let full = n - n % bf16::LANES;
    let per = ahead.per_step(full / bf16::LANES);
    for start in (0..full).step_by(bf16::LANES) {
        ahead.fetch(per);
        let bits = streams.next();
        let w_bits = match w {
            ValuesMut::F32(_) => None,
            ValuesMut::Bf16(_) => Some(streams.next()),
        };
        for h in 0..2 {
            let i = start + 8 * h;
            let gi = load(&g[i..i + 8]);
            let mi = b1 * widen(&m[i..i + 8]) + c1 * gi;
            let vi = b2 * widen(&v[i..i + 8]) + c2 * gi * gi;
            let delta = step * mi / (vi.sqrt() * inv + eps);
            round_into(mi, bits[h], &mut m[i..i + 8]);
            round_into(vi, bits[h] >> 16, &mut v[i..i + 8]);
            match (&mut w, w_bits) {
                (ValuesMut::F32(w), _) => {
                    let wi = load(&w[i..i + 8]) - delta;
                    w[i..i + 8].copy_from_slice(&wi.to_array());
                }
                (ValuesMut::Bf16(w), Some(w_bits)) => {
                    let wi = widen(&w[i..i + 8]) - delta;
                    round_into(wi, w_bits[h], &mut w[i..i + 8]);
                }
                (ValuesMut::Bf16(_), None) => unreachable!("BF16 weights draw their bits"),
            }
        }
    }
    ahead.finish();
    let [low, high] = streams.0.map(u32x8::to_array);
    let mut rest: [u32; bf16::LANES] =
        std::array::from_fn(|k| if k < 8 { low[k] } else { high[k - 8] });
    bf16::finish_tail(&mut w, full, n, g, m, v, s, &mut rest);
}

/// [`adam_row_bf16`] without a first moment (`beta1 = 0`): `w -= scale * g`, eight
/// elements at a time, bit for bit [`bf16::adam_row`]'s (its `sgd_row`): the same streams,
/// each weight rounded with the upper 16 bits of its stream's value.
fn sgd_row_bf16(
    mut w: ValuesMut<'_>,
    g: &[f32],
    scale: f32,
    mut streams: Streams,
    mut ahead: Ahead,
) {
    let n = g.len();
    let scale8 = f32x8::splat(scale);
    let full = n - n % bf16::LANES;
    let per = ahead.per_step(n.div_ceil(bf16::LANES));
    for start in (0..full).step_by(bf16::LANES) {
        ahead.fetch(per);
        let bits = streams.next();
        for (h, bits) in bits.into_iter().enumerate() {
            let i = start + 8 * h;
            step_weights(&mut w, i, scale8 * load(&g[i..i + 8]), bits);
        }
    }
    ahead.finish();
    if full < n {
        let [low, high] = streams.next().map(u32x8::to_array);
        for (k, i) in (full..n).enumerate() {
            let bits = if k < 8 { low[k] } else { high[k - 8] };
            bf16::step_weight(&mut w, i, scale * g[i], bits);
        }
    }
}

/// Weights `i..i + 8` less `delta`, BF16 weights rounded with the upper 16 bits of each
/// lane of `bits` ([`bf16::step_weight`] eight at a time).
#[inline(always)]
fn step_weights(w: &mut ValuesMut<'_>, i: usize, delta: f32x8, bits: u32x8) {
    match w {
        ValuesMut::F32(w) => {
            let wi = load(&w[i..i + 8]) - delta;
            w[i..i + 8].copy_from_slice(&wi.to_array());
        }
        ValuesMut::Bf16(w) => {
            let wi = widen(&w[i..i + 8]) - delta;
            round_into(wi, bits >> 16, &mut w[i..i + 8]);
        }
    }
}

/// [`bf16::adam_row`] eight elements at a time, bit for bit: the same products and sums in
/// the same order (no fused multiply-adds), the same 16 xorshift streams, lane `k` of half
/// `h` being stream `8 h + k`.
pub fn adam_row_bf16(
    mut w: ValuesMut<'_>,
    g: &[f32],
    m: &mut [u16],
    beta1: f32,
    scale: f32,
    seed: u32,
    mut ahead: Ahead,
) {
    let n = w.len().min(g.len()).min(m.len());
    let lanes = bf16::seed_streams(seed);
    let half = |h: usize| u32x8::new(std::array::from_fn(|k| lanes[8 * h + k]));
    let mut streams = Streams([half(0), half(1)]);
    if beta1 == 0.0 {
        return sgd_row_bf16(w, &g[..n], scale, streams, ahead);
    }
    let (b1, c1, scale8) = (
        f32x8::splat(beta1),
        f32x8::splat(1.0 - beta1),
        f32x8::splat(scale),
    );
    let full = n - n % bf16::LANES;
    let per = ahead.per_step(full / bf16::LANES);
    for start in (0..full).step_by(bf16::LANES) {
        ahead.fetch(per);
        let bits = streams.next();
        for (h, bits) in bits.into_iter().enumerate() {
            let i = start + 8 * h;
            let mi = b1 * widen(&m[i..i + 8]) + c1 * load(&g[i..i + 8]);
            round_into(mi, bits, &mut m[i..i + 8]);
            step_weights(&mut w, i, scale8 * mi, bits);
        }
    }
    ahead.finish();
    if full < n {
        let [low, high] = streams.next().map(u32x8::to_array);
        for (k, i) in (full..n).enumerate() {
            let bits = if k < 8 { low[k] } else { high[k - 8] };
            bf16::row_update(&mut w, i, g[i], &mut m[i], beta1, scale, bits);
        }
    }
}
