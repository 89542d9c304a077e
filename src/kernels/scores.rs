//! Scores of a block of neurons for a block of samples, `out[s * rows + j] = x_s . w_j`: the
//! matrix product behind exact evaluation, one implementation per kernel set
//! ([`Kernels::scores`](super::Kernels::scores)).
//!
//! `x` holds `n` samples of `dim` values (row-major); `w` holds `rows` weight rows of `dim`
//! values `row_stride` apart (the layers keep each row's Adam moments in between). Every
//! implementation panics if a slice is too short for the sizes given.

use std::cell::RefCell;

use wide::f32x8;

use super::scalar;

/// Signature of a score product: `(x, n, dim, w, rows, row_stride, out)`.
pub type ScoresFn = fn(&[f32], usize, usize, &[f32], usize, usize, &mut [f32]);

/// The sizes' checks every implementation makes (see the module's doc); false when there is
/// nothing to compute.
fn check(
    x: &[f32],
    n: usize,
    dim: usize,
    w: &[f32],
    rows: usize,
    row_stride: usize,
    out: &[f32],
) -> bool {
    if n == 0 || rows == 0 {
        return false;
    }
    assert!(row_stride >= dim, "rows overlap");
    assert!(x.len() >= n * dim, "x holds fewer than n rows of dim");
    assert!(
        w.len() >= (rows - 1) * row_stride + dim,
        "w holds fewer than rows rows"
    );
    assert!(out.len() >= n * rows, "out holds fewer than n rows of rows");
    true
}

/// The reference: one [`scalar::dot`] per sample and row.
pub fn reference(
    x: &[f32],
    n: usize,
    dim: usize,
    w: &[f32],
    rows: usize,
    row_stride: usize,
    out: &mut [f32],
) {
    if !check(x, n, dim, w, rows, row_stride, out) {
        return;
    }
    for (sample, scores) in x.chunks_exact(dim).take(n).zip(out.chunks_exact_mut(rows)) {
        for (j, score) in scores.iter_mut().enumerate() {
            *score = scalar::dot(sample, &w[j * row_stride..][..dim]);
        }
    }
}

/// Rows packed together by [`portable`]: two 8-lane vectors.
const GROUP: usize = 16;

/// Samples scored together by [`portable`]: 6 samples by 16 rows are 12 accumulators, which
/// with the two weight vectors and a broadcast input fill AVX2's 16 registers.
const TILE: usize = 6;

thread_local! {
    /// [`portable`]'s packed rows, kept between calls (one block of rows per call).
    static PACKED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `wide`'s register-tiled product: the rows are packed in groups of 16, value-major
/// (`packed[(g * dim + k) * 16 + r]` is value `k` of row `16 g + r`), and each tile of 6
/// samples by 16 rows is summed in 12 vector accumulators, one fused multiply-add of an
/// input value (broadcast) by 8 rows' values at a time: two loads and six broadcasts per
/// twelve multiply-adds, so the multiply-adds, not the loads, set the pace.
pub fn portable(
    x: &[f32],
    n: usize,
    dim: usize,
    w: &[f32],
    rows: usize,
    row_stride: usize,
    out: &mut [f32],
) {
    if !check(x, n, dim, w, rows, row_stride, out) {
        return;
    }
    PACKED.with_borrow_mut(|packed| {
        let groups = rows.div_ceil(GROUP);
        packed.clear();
        packed.resize(groups * dim * GROUP, 0.0);
        for j in 0..rows {
            let base = j / GROUP * dim * GROUP + j % GROUP;
            for (k, &value) in w[j * row_stride..][..dim].iter().enumerate() {
                packed[base + k * GROUP] = value;
            }
        }
        for (g, panel) in packed.chunks_exact(dim * GROUP).enumerate() {
            let first = g * GROUP;
            let width = GROUP.min(rows - first);
            let mut s = 0;
            while s + TILE <= n {
                tile::<TILE>(
                    &x[s * dim..][..TILE * dim],
                    panel,
                    &mut out[s * rows..],
                    rows,
                    first,
                    width,
                );
                s += TILE;
            }
            for s in s..n {
                tile::<1>(
                    &x[s * dim..][..dim],
                    panel,
                    &mut out[s * rows..],
                    rows,
                    first,
                    width,
                );
            }
        }
    });
}

/// The scores of `T` samples (`x`, `T * dim` values) for one packed group of rows (`panel`,
/// `dim * 16` values), written to `out[t * rows + first..][..width]`.
#[inline(always)]
fn tile<const T: usize>(
    x: &[f32],
    panel: &[f32],
    out: &mut [f32],
    rows: usize,
    first: usize,
    width: usize,
) {
    let dim = panel.len() / GROUP;
    let inputs: [&[f32]; T] = std::array::from_fn(|t| &x[t * dim..][..dim]);
    let mut acc = [[f32x8::ZERO; 2]; T];
    for (k, values) in panel.chunks_exact(GROUP).enumerate() {
        let (low, high) = (load(&values[..8]), load(&values[8..]));
        for (acc, input) in acc.iter_mut().zip(&inputs) {
            let v = f32x8::splat(input[k]);
            acc[0] = v.mul_add(low, acc[0]);
            acc[1] = v.mul_add(high, acc[1]);
        }
    }
    for (t, acc) in acc.iter().enumerate() {
        let mut lanes = [0.0f32; GROUP];
        lanes[..8].copy_from_slice(&acc[0].to_array());
        lanes[8..].copy_from_slice(&acc[1].to_array());
        out[t * rows + first..][..width].copy_from_slice(&lanes[..width]);
    }
}

#[inline(always)]
fn load(chunk: &[f32]) -> f32x8 {
    let mut lanes = [0.0f32; 8];
    lanes.copy_from_slice(chunk);
    f32x8::from(lanes)
}

/// matrixmultiply's packed, blocked sgemm, with its AVX-512, AVX2 + FMA or NEON kernel chosen
/// by the CPU at run time (the AVX-512 set's product).
pub fn gemm(
    x: &[f32],
    n: usize,
    dim: usize,
    w: &[f32],
    rows: usize,
    row_stride: usize,
    out: &mut [f32],
) {
    if !check(x, n, dim, w, rows, row_stride, out) {
        return;
    }
    // SAFETY: `check`'s asserts keep every element the product reads (`x[s * dim + k]`,
    // `w[j * row_stride + k]` for s < n, j < rows, k < dim) and writes (`out[s * rows + j]`)
    // inside its slice; `out` is exclusively borrowed, so it aliases neither input; with
    // beta = 0 its old contents are never read.
    unsafe {
        matrixmultiply::sgemm(
            n,
            dim,
            rows,
            1.0,
            x.as_ptr(),
            dim as isize,
            1,
            w.as_ptr(),
            1,
            row_stride as isize,
            0.0,
            out.as_mut_ptr(),
            rows as isize,
            1,
        );
    }
}
