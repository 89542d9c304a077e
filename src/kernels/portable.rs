//! `wide::f32x8` kernels: 8 lanes at a time, a scalar tail.

use wide::f32x8;

use super::{AdamStep, scalar};

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
