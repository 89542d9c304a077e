//! AVX-512 kernels (x86-64 only), installed by [`super::avx512`] after
//! `is_x86_feature_detected!("avx512f")` confirmed the CPU supports them.

use std::arch::x86_64::*;

use super::adam_step::AdamStep;
use super::bf16::{self, ValuesMut};
use super::prefetch::Ahead;
use super::scalar;
use super::table::Kernels;

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
    adam_bf16,
    // Memory-bound and without a square root per element: the 256-bit kernel.
    adam_row_bf16: super::portable::adam_row_bf16,
    dot_bf16,
    axpy_bf16,
    scores: super::scores::gemm,
};

/// Lanes `0..n` set, for the masked tail of a loop (`n < 16`).
#[inline]
pub(super) fn tail_mask(n: usize) -> __mmask16 {
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

fn adam_bf16(
    w: ValuesMut<'_>,
    g: &[f32],
    m: &mut [u16],
    v: &mut [u16],
    s: &AdamStep,
    seed: u32,
    ahead: Ahead,
) {
    // SAFETY: reachable only through `AVX512`, handed out only on CPUs with AVX-512F.
    unsafe { adam_bf16_avx512(w, g, m, v, s, seed, ahead) }
}

/// [`bf16::adam`] 16 elements at a time, bit for bit: the same products and sums in the
/// same order (no fused multiply-adds), the same xorshift streams, one per lane.
#[target_feature(enable = "avx512f")]
fn adam_bf16_avx512(
    mut w: ValuesMut<'_>,
    g: &[f32],
    m: &mut [u16],
    v: &mut [u16],
    s: &AdamStep,
    seed: u32,
    mut ahead: Ahead,
) {
    let n = w.len().min(g.len()).min(m.len()).min(v.len());
    let full = n - n % bf16::LANES;
    let per = ahead.per_step(full / bf16::LANES);
    let (b1, c1) = (_mm512_set1_ps(s.beta1), _mm512_set1_ps(1.0 - s.beta1));
    let (b2, c2) = (_mm512_set1_ps(s.beta2), _mm512_set1_ps(1.0 - s.beta2));
    let (step, inv, eps) = (
        _mm512_set1_ps(s.step_size),
        _mm512_set1_ps(s.inv_sqrt_bias2),
        _mm512_set1_ps(s.eps),
    );
    let low = _mm512_set1_epi32(0xffff);
    let (pg, pm, pv) = (g.as_ptr(), m.as_mut_ptr(), v.as_mut_ptr());
    let mut x = seed_streams(seed);
    let mut i = 0;
    let xorshift = |x: __m512i| {
        let x = _mm512_xor_si512(x, _mm512_slli_epi32::<13>(x));
        let x = _mm512_xor_si512(x, _mm512_srli_epi32::<17>(x));
        _mm512_xor_si512(x, _mm512_slli_epi32::<5>(x))
    };
    // SAFETY (loads and stores in the loop): `i + 16 <= full <= n`, and every slice is at
    // least `n` long: 16 f32 of `w`/`g` and 16 u16 (256 bits) of `w`/`m`/`v` from `i` lie
    // inside them. `w`, `m` and `v` are borrowed mutably, so nothing else accesses them
    // meanwhile.
    unsafe {
        let widen = |p: *const u16| {
            let halves = _mm256_loadu_si256(p.cast());
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(halves)))
        };
        let round = |value: __m512, bits: __m512i| {
            let sum = _mm512_add_epi32(_mm512_castps_si512(value), bits);
            _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(sum))
        };
        while i < full {
            ahead.fetch(per);
            x = xorshift(x);
            let gi = _mm512_loadu_ps(pg.add(i));
            let mi = _mm512_add_ps(_mm512_mul_ps(b1, widen(pm.add(i))), _mm512_mul_ps(c1, gi));
            let vi = _mm512_add_ps(
                _mm512_mul_ps(b2, widen(pv.add(i))),
                _mm512_mul_ps(_mm512_mul_ps(c2, gi), gi),
            );
            let denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), inv), eps);
            let delta = _mm512_div_ps(_mm512_mul_ps(step, mi), denom);
            _mm256_storeu_si256(pm.add(i).cast(), round(mi, _mm512_and_si512(x, low)));
            _mm256_storeu_si256(pv.add(i).cast(), round(vi, _mm512_srli_epi32::<16>(x)));
            match &mut w {
                ValuesMut::F32(w) => {
                    let pw = w.as_mut_ptr().add(i);
                    _mm512_storeu_ps(pw, _mm512_sub_ps(_mm512_loadu_ps(pw), delta));
                }
                ValuesMut::Bf16(w) => {
                    x = xorshift(x);
                    let pw = w.as_mut_ptr().add(i);
                    let wi = _mm512_sub_ps(widen(pw), delta);
                    _mm256_storeu_si256(pw.cast(), round(wi, _mm512_and_si512(x, low)));
                }
            }
            i += bf16::LANES;
        }
    }
    ahead.finish();
    let mut streams = [0u32; bf16::LANES];
    // SAFETY: `streams` is 16 u32, one unaligned 512-bit store.
    unsafe { _mm512_storeu_si512(streams.as_mut_ptr().cast(), x) };
    bf16::finish_tail(&mut w, full, n, g, m, v, s, &mut streams);
}

/// [`bf16::dot`], 32 values at a time in two accumulators.
fn dot_bf16(w: &[u16], x: &[f32]) -> f32 {
    // SAFETY: reachable only through `AVX512`, handed out only on CPUs with AVX-512F.
    unsafe { dot_bf16_avx512(w, x) }
}

/// 16 BF16 values from `p` (unaligned), widened to f32 (exact).
///
/// # Safety
/// 32 bytes from `p` must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn widen16(p: *const u16) -> __m512 {
    // SAFETY: the caller guarantees 32 readable bytes.
    let halves = unsafe { _mm256_loadu_si256(p.cast()) };
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(halves)))
}

/// `tail` (fewer than 16 BF16 values) widened into the first lanes, the others zero.
#[inline]
#[target_feature(enable = "avx512f")]
fn widen_tail(tail: &[u16]) -> __m512 {
    let mut lanes = [0u16; 16];
    lanes[..tail.len()].copy_from_slice(tail);
    // SAFETY: `lanes` is 32 readable bytes.
    unsafe { widen16(lanes.as_ptr()) }
}

#[target_feature(enable = "avx512f")]
fn dot_bf16_avx512(w: &[u16], x: &[f32]) -> f32 {
    let n = w.len().min(x.len());
    let (pw, px) = (w.as_ptr(), x.as_ptr());
    let mut acc0 = _mm512_setzero_ps();
    let mut acc1 = _mm512_setzero_ps();
    let mut i = 0;
    // SAFETY (all loads below): `i + 32 <= n` / `i + 16 <= n` keep full loads inside both
    // slices, which are at least `n` long; the masked tail loads read only lanes below `n`.
    unsafe {
        while i + 32 <= n {
            acc0 = _mm512_fmadd_ps(widen16(pw.add(i)), _mm512_loadu_ps(px.add(i)), acc0);
            acc1 = _mm512_fmadd_ps(
                widen16(pw.add(i + 16)),
                _mm512_loadu_ps(px.add(i + 16)),
                acc1,
            );
            i += 32;
        }
        if i + 16 <= n {
            acc0 = _mm512_fmadd_ps(widen16(pw.add(i)), _mm512_loadu_ps(px.add(i)), acc0);
            i += 16;
        }
        if i < n {
            let k = tail_mask(n - i);
            acc1 = _mm512_fmadd_ps(
                widen_tail(&w[i..n]),
                _mm512_maskz_loadu_ps(k, px.add(i)),
                acc1,
            );
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1))
}

/// [`bf16::axpy`], 16 values at a time.
fn axpy_bf16(alpha: f32, w: &[u16], y: &mut [f32]) {
    // SAFETY: reachable only through `AVX512`, handed out only on CPUs with AVX-512F.
    unsafe { axpy_bf16_avx512(alpha, w, y) }
}

#[target_feature(enable = "avx512f")]
fn axpy_bf16_avx512(alpha: f32, w: &[u16], y: &mut [f32]) {
    let n = w.len().min(y.len());
    let (pw, py) = (w.as_ptr(), y.as_mut_ptr());
    let a = _mm512_set1_ps(alpha);
    let mut i = 0;
    // SAFETY: full loads and stores stay below `n <= len` of both slices; the tail uses
    // masked loads and stores that touch only lanes below `n`. `y` is borrowed mutably, so
    // nothing else reads or writes it meanwhile.
    unsafe {
        while i + 16 <= n {
            let r = _mm512_fmadd_ps(widen16(pw.add(i)), a, _mm512_loadu_ps(py.add(i)));
            _mm512_storeu_ps(py.add(i), r);
            i += 16;
        }
        if i < n {
            let k = tail_mask(n - i);
            let r = _mm512_fmadd_ps(widen_tail(&w[i..n]), a, _mm512_maskz_loadu_ps(k, py.add(i)));
            _mm512_mask_storeu_ps(py.add(i), k, r);
        }
    }
}

/// [`bf16::seed_streams`], the 16 lanes at once.
#[target_feature(enable = "avx512f")]
fn seed_streams(seed: u32) -> __m512i {
    let lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    let golden = _mm512_set1_epi32(0x9e37_79b9_u32 as i32);
    let mut x = _mm512_xor_si512(
        _mm512_set1_epi32(seed as i32),
        _mm512_mullo_epi32(lanes, golden),
    );
    // mix32
    x = _mm512_xor_si512(x, _mm512_srli_epi32::<16>(x));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x21f0_aaad));
    x = _mm512_xor_si512(x, _mm512_srli_epi32::<15>(x));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x735a_2d97));
    x = _mm512_xor_si512(x, _mm512_srli_epi32::<15>(x));
    _mm512_or_si512(x, _mm512_set1_epi32(1))
}
