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

/// Adam on one row (see [`super::Kernels::adam`]).
pub fn adam(w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamStep) {
    for (((wi, &gi), mi), vi) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        *mi = s.beta1 * *mi + (1.0 - s.beta1) * gi;
        *vi = s.beta2 * *vi + (1.0 - s.beta2) * gi * gi;
        *wi -= s.step_size * *mi / (vi.sqrt() * s.inv_sqrt_bias2 + s.eps);
    }
}
