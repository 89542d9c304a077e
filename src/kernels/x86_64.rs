//! AVX-512 kernels (x86-64 only), installed by [`super::avx512`] after
//! `is_x86_feature_detected!("avx512f")` confirmed the CPU supports them.

use std::arch::x86_64::*;

use super::{AdamStep, Kernels};

/// The AVX-512 kernel table. Only [`super::avx512`] hands it out, after checking the CPU.
pub(super) const AVX512: Kernels = Kernels {
    name: "avx512",
    dot,
    axpy,
    adam,
};

/// Lanes `0..n` set, for the masked tail of a loop (`n < 16`).
#[inline]
fn tail_mask(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // SAFETY: this function is reachable only through `AVX512`, which `super::avx512` returns
    // only when the running CPU reports AVX-512F.
    unsafe { dot_avx512(a, b) }
}

#[target_feature(enable = "avx512f")]
fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc0 = _mm512_setzero_ps();
    let mut acc1 = _mm512_setzero_ps();
    let mut i = 0;
    // SAFETY (all loads below): `i + 32 <= n` / `i + 16 <= n` keep full loads inside both
    // slices, which are at least `n` long; the masked tail load reads only lanes below `n`.
    unsafe {
        while i + 32 <= n {
            acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm512_fmadd_ps(
                _mm512_loadu_ps(pa.add(i + 16)),
                _mm512_loadu_ps(pb.add(i + 16)),
                acc1,
            );
            i += 32;
        }
        if i + 16 <= n {
            acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)), acc0);
            i += 16;
        }
        if i < n {
            let k = tail_mask(n - i);
            acc1 = _mm512_fmadd_ps(
                _mm512_maskz_loadu_ps(k, pa.add(i)),
                _mm512_maskz_loadu_ps(k, pb.add(i)),
                acc1,
            );
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1))
}

fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    // SAFETY: reachable only through `AVX512`, handed out only on CPUs with AVX-512F.
    unsafe { axpy_avx512(alpha, x, y) }
}

#[target_feature(enable = "avx512f")]
fn axpy_avx512(alpha: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let (px, py) = (x.as_ptr(), y.as_mut_ptr());
    let a = _mm512_set1_ps(alpha);
    let mut i = 0;
    // SAFETY: full loads and stores stay below `n <= len` of both slices; the tail uses
    // masked loads and stores that touch only lanes below `n`. `y` is borrowed mutably, so
    // nothing else reads or writes it meanwhile.
    unsafe {
        while i + 16 <= n {
            let r = _mm512_fmadd_ps(_mm512_loadu_ps(px.add(i)), a, _mm512_loadu_ps(py.add(i)));
            _mm512_storeu_ps(py.add(i), r);
            i += 16;
        }
        if i < n {
            let k = tail_mask(n - i);
            let r = _mm512_fmadd_ps(
                _mm512_maskz_loadu_ps(k, px.add(i)),
                a,
                _mm512_maskz_loadu_ps(k, py.add(i)),
            );
            _mm512_mask_storeu_ps(py.add(i), k, r);
        }
    }
}

fn adam(w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamStep) {
    assert!(g.len() == w.len() && m.len() == w.len() && v.len() == w.len());
    // SAFETY: reachable only through `AVX512`, handed out only on CPUs with AVX-512F.
    unsafe { adam_avx512(w, g, m, v, s) }
}

#[target_feature(enable = "avx512f")]
fn adam_avx512(w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamStep) {
    let n = w.len();
    let (b1, b2) = (_mm512_set1_ps(s.beta1), _mm512_set1_ps(s.beta2));
    let (c1, c2) = (_mm512_set1_ps(1.0 - s.beta1), _mm512_set1_ps(1.0 - s.beta2));
    let (step, inv, eps) = (
        _mm512_set1_ps(s.step_size),
        _mm512_set1_ps(s.inv_sqrt_bias2),
        _mm512_set1_ps(s.eps),
    );
    let (pw, pg, pm, pv) = (w.as_mut_ptr(), g.as_ptr(), m.as_mut_ptr(), v.as_mut_ptr());
    let mut i = 0;
    while i < n {
        let k = if i + 16 <= n {
            0xffff
        } else {
            tail_mask(n - i)
        };
        // SAFETY: the caller checked that all four slices are `n` long; mask `k` limits every
        // load and store to lanes below `n`. The three mutable slices are distinct borrows.
        unsafe {
            let gi = _mm512_maskz_loadu_ps(k, pg.add(i));
            let mi = _mm512_fmadd_ps(
                b1,
                _mm512_maskz_loadu_ps(k, pm.add(i)),
                _mm512_mul_ps(c1, gi),
            );
            let vi = _mm512_fmadd_ps(
                b2,
                _mm512_maskz_loadu_ps(k, pv.add(i)),
                _mm512_mul_ps(c2, _mm512_mul_ps(gi, gi)),
            );
            let denom = _mm512_fmadd_ps(_mm512_sqrt_ps(vi), inv, eps);
            let wi = _mm512_sub_ps(
                _mm512_maskz_loadu_ps(k, pw.add(i)),
                _mm512_div_ps(_mm512_mul_ps(step, mi), denom),
            );
            _mm512_mask_storeu_ps(pm.add(i), k, mi);
            _mm512_mask_storeu_ps(pv.add(i), k, vi);
            _mm512_mask_storeu_ps(pw.add(i), k, wi);
        }
        i += 16;
    }
}
