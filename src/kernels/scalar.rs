//! Reference kernels: straightforward loops, the ground truth for the others.

use super::adam_step::AdamStep;

/// `sum(a[i] * b[i])`.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `y[i] += alpha * x[i]`.
pub fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// `sum(g[i]^2) / len` (0 for an empty row), summed in 16 lanes (lane `k` takes the
/// elements `i` with `i % 16 == k`, in order) and then the lanes in order: one order on
/// every CPU and in every kernel set, which the `x86-64-v3` baseline vectorises.
pub fn mean_square(g: &[f32]) -> f32 {
    if g.is_empty() {
        return 0.0;
    }
    let mut lanes = [0.0f32; 16];
    let mut chunks = g.chunks_exact(16);
    for chunk in &mut chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane += x * x;
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(chunks.remainder()) {
        *lane += x * x;
    }
    lanes.iter().sum::<f32>() / g.len() as f32
}

/// The step of a row whose second moment is `v` (one per row,
/// [`SecondMoment::Row`](crate::SecondMoment::Row)): `step_size / (sqrt(v) *
/// inv_sqrt_bias2 + eps)`, what every weight's first moment is multiplied by.
pub fn row_scale(s: &AdamStep, v: f32) -> f32 {
    s.step_size / (v.sqrt() * s.inv_sqrt_bias2 + s.eps)
}

/// Adam with a second moment per row on one row of f32 moments: `m = beta1 m + (1 - beta1)
/// g`, then `w -= scale * m` ([`row_scale`]). One implementation for every kernel set.
/// With `beta1 = 0`, `m` is neither read nor written: `w -= scale * g`, the same bits.
pub fn adam_row(w: &mut [f32], g: &[f32], m: &mut [f32], beta1: f32, scale: f32) {
    if beta1 == 0.0 {
        for (wi, &gi) in w.iter_mut().zip(g).take(m.len()) {
            *wi -= scale * gi;
        }
        return;
    }
    let c1 = 1.0 - beta1;
    for ((wi, &gi), mi) in w.iter_mut().zip(g).zip(m.iter_mut()) {
        *mi = beta1 * *mi + c1 * gi;
        *wi -= scale * *mi;
    }
}

/// Adam on one row (see [`super::Kernels::adam`]).
pub fn adam(w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamStep) {
    for (((wi, &gi), mi), vi) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        *mi = s.beta1 * *mi + (1.0 - s.beta1) * gi;
        *vi = s.beta2 * *vi + (1.0 - s.beta2) * gi * gi;
        *wi -= s.step_size * *mi / (vi.sqrt() * s.inv_sqrt_bias2 + s.eps);
    }
}
