//! AVX-512 kernels (x86-64 only), installed by [`super::avx512`] after
//! `is_x86_feature_detected!("avx512f")` confirmed the CPU supports them.

use std::arch::x86_64::*;

use super::{Kernels, scalar};

/// The AVX-512 kernel table. Only [`super::avx512`] hands it out, after checking the CPU.
///
/// The Adam row update is not written with 512-bit intrinsics: it needs a division and a
/// square root per element, whose 512-bit forms have less than half the per-element
/// throughput of the 256-bit ones on Sapphire Rapids. Measured (`cargo bench -p
/// slide-benches --bench kernels`, 128 floats): a 512-bit version took 47.8 ns, the scalar
/// loop, which the x86-64-v3 baseline compiles to AVX2, 43.4 ns. So the table uses that.
pub(super) const AVX512: Kernels = Kernels {
    name: "avx512",
    dot,
    axpy,
    adam: scalar::adam,
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
