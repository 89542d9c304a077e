//! Scoring with AVX512-BF16 (x86-64 only): weight rows and inputs rounded to BF16 and
//! multiplied by `vdpbf16ps`, products summed in f32 (exact evaluation with
//! `EvalPrecision::Bf16`); used only where [`has_bf16_dot`] says the CPU has it.

use std::arch::x86_64::*;

use super::bf16;
use super::x86_64::tail_mask;

/// Samples scored together by [`scores_bf16`] (one accumulator each per row group).
pub const BF16_SAMPLES: usize = 8;

/// Rows scored together by [`scores_bf16`] (two groups of 16 lanes).
pub const BF16_ROWS: usize = 32;

/// Whether this CPU runs [`scores_bf16`] (AVX-512F and AVX512-BF16).
pub fn has_bf16_dot() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// Packs `rows` weight rows of `2 * pairs` values (`w[r * row_stride..]`, the last pair's
/// second value taken as 0 when `dim` is odd) for [`scores_bf16`]: each value rounded to
/// the nearest BF16, two neighbours per `u32` (the even one in the low half), and the rows
/// transposed in groups of 16 so that one 512-bit load holds one pair of 16 rows:
/// `packed[(g * pairs + p) * 16 + r]` is pair `p` of row `16 g + r`, zero past `rows`
/// (which is padded to [`BF16_ROWS`]).
pub fn pack_rows_bf16(
    w: &[f32],
    rows: usize,
    row_stride: usize,
    dim: usize,
    packed: &mut Vec<u32>,
) {
    let pairs = dim.div_ceil(2);
    let groups = rows.div_ceil(BF16_ROWS) * (BF16_ROWS / 16);
    packed.clear();
    packed.resize(groups * pairs * 16, 0);
    let vector = has_bf16_dot();
    for r in 0..rows {
        let row = &w[r * row_stride..][..dim];
        let (g, lane) = (r / 16, r % 16);
        // 16 pairs (32 values) at a time with `vcvtne2ps2bf16` where the CPU has it (it
        // rounds to nearest even like `from_f32_nearest`, but reads and writes subnormals
        // as zero: they add nothing to a score), the rest one pair at a time.
        let mut first = 0;
        if vector {
            let mut lanes = [0u32; 16];
            while 2 * first + 32 <= dim {
                // SAFETY: the CPU has AVX512-BF16 (checked above) and `row[2 * first..][..32]`
                // is inside the row.
                unsafe { convert_32(&row[2 * first..2 * first + 32], &mut lanes) };
                for (p, &pair) in lanes.iter().enumerate() {
                    packed[(g * pairs + first + p) * 16 + lane] = pair;
                }
                first += 16;
            }
        }
        for p in first..pairs {
            packed[(g * pairs + p) * 16 + lane] = bf16_pair(row, p);
        }
    }
}

/// Values `2p` and `2p + 1` of `v` (the second taken as 0 past the end) rounded to the
/// nearest BF16 and paired in a `u32`, the even one in the low half.
fn bf16_pair(v: &[f32], p: usize) -> u32 {
    let even = bf16::from_f32_nearest(v[2 * p]);
    let odd = v.get(2 * p + 1).map_or(0, |&x| bf16::from_f32_nearest(x));
    u32::from(even) | u32::from(odd) << 16
}

/// `out[p]` = values `2p` and `2p + 1` of `values` (32 of them) as a BF16 pair, rounded to
/// nearest even.
#[target_feature(enable = "avx512f,avx512bf16")]
fn convert_32(values: &[f32], out: &mut [u32; 16]) {
    assert_eq!(values.len(), 32);
    // SAFETY: `values` holds 32 floats (asserted): two unaligned 512-bit loads; `out` 16 u32:
    // one unaligned 512-bit store.
    unsafe {
        let low = _mm512_loadu_ps(values.as_ptr());
        let high = _mm512_loadu_ps(values.as_ptr().add(16));
        // The second operand fills the lower half: lane p holds values 2p and 2p + 1.
        let pairs = _mm512_cvtne2ps_pbh(high, low);
        _mm512_storeu_si512(
            out.as_mut_ptr().cast(),
            std::mem::transmute::<__m512bh, __m512i>(pairs),
        );
    }
}

/// Packs `n` input vectors of `dim` values (`x`, row-major) for [`scores_bf16`]: pairs of
/// BF16 values as [`pack_rows_bf16`] makes them, `pairs` per sample, and zero samples up to
/// a multiple of [`BF16_SAMPLES`].
pub fn pack_inputs_bf16(x: &[f32], n: usize, dim: usize, packed: &mut Vec<u32>) {
    let pairs = dim.div_ceil(2);
    packed.clear();
    packed.resize(n.div_ceil(BF16_SAMPLES) * BF16_SAMPLES * pairs, 0);
    for s in 0..n {
        let v = &x[s * dim..][..dim];
        for p in 0..pairs {
            packed[s * pairs + p] = bf16_pair(v, p);
        }
    }
}

/// `out[s * rows + j] = x_s . w_j` for the `n` samples packed by [`pack_inputs_bf16`] and the
/// `rows` rows packed by [`pack_rows_bf16`] (both with `pairs` pairs): products of BF16 values
/// summed in f32 by AVX512-BF16's `vdpbf16ps`, two per lane and instruction (twice the
/// multiply-adds of an f32 FMA). Panics if this CPU lacks AVX512-BF16 ([`has_bf16_dot`]) or a
/// slice is too short for the sizes given.
pub fn scores_bf16(
    x: &[u32],
    n: usize,
    pairs: usize,
    packed: &[u32],
    rows: usize,
    out: &mut [f32],
) {
    assert!(has_bf16_dot(), "this CPU has no AVX512-BF16");
    let samples = n.div_ceil(BF16_SAMPLES) * BF16_SAMPLES;
    let groups = rows.div_ceil(BF16_ROWS) * (BF16_ROWS / 16);
    assert!(
        x.len() >= samples * pairs,
        "x holds fewer than n padded samples"
    );
    assert!(
        packed.len() >= groups * pairs * 16,
        "packed holds fewer rows"
    );
    assert!(out.len() >= n * rows, "out holds fewer than n rows of rows");
    // SAFETY: the CPU has AVX-512F and AVX512-BF16 (asserted), and the asserts above bound
    // every access the kernel makes (see `scores_bf16_avx512`).
    unsafe { scores_bf16_avx512(x, n, pairs, packed, rows, out) }
}

/// [`scores_bf16`]'s loop. Safety: the caller checked the CPU and that `x` holds
/// `n.div_ceil(8) * 8 * pairs` values, `packed` `rows.div_ceil(32) * 2 * pairs * 16` and
/// `out` `n * rows`.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn scores_bf16_avx512(
    x: &[u32],
    n: usize,
    pairs: usize,
    packed: &[u32],
    rows: usize,
    out: &mut [f32],
) {
    let (px, pw, po) = (x.as_ptr(), packed.as_ptr(), out.as_mut_ptr());
    for g in (0..rows.div_ceil(BF16_ROWS) * 2).step_by(2) {
        let (w0, w1) = (
            pw.wrapping_add(g * pairs * 16),
            pw.wrapping_add((g + 1) * pairs * 16),
        );
        for s0 in (0..n).step_by(BF16_SAMPLES) {
            let mut acc = [[_mm512_setzero_ps(); 2]; BF16_SAMPLES];
            for p in 0..pairs {
                // SAFETY: group g + 1 < the padded group count and p < pairs keep both loads
                // inside `packed`; sample s0 + t < the padded sample count and p < pairs keep
                // the broadcast inside `x`.
                // (A 512-bit vector reinterpreted as 32 BF16 values: same size, any bits valid.)
                unsafe {
                    let bf = |v: __m512i| std::mem::transmute::<__m512i, __m512bh>(v);
                    let a = bf(_mm512_loadu_si512(w0.add(p * 16).cast()));
                    let b = bf(_mm512_loadu_si512(w1.add(p * 16).cast()));
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let v = bf(_mm512_set1_epi32(*px.add((s0 + t) * pairs + p) as i32));
                        acc[0] = _mm512_dpbf16_ps(acc[0], v, a);
                        acc[1] = _mm512_dpbf16_ps(acc[1], v, b);
                    }
                }
            }
            for (t, acc) in acc.iter().enumerate().take(n - s0) {
                for (half, &sums) in acc.iter().enumerate() {
                    let first = (g + half) * 16;
                    if first >= rows {
                        continue;
                    }
                    let k = if rows - first >= 16 {
                        0xffff
                    } else {
                        tail_mask(rows - first)
                    };
                    // SAFETY: lanes below `rows - first` of row s0 + t < n lie inside `out`
                    // (`n * rows` long); the mask writes no others.
                    unsafe { _mm512_mask_storeu_ps(po.add((s0 + t) * rows + first), k, sums) };
                }
            }
        }
    }
}
