//! The one place where rows of a layer's parameters are handed to several threads at once
//! ([`DisjointRows`]).

use std::marker::PhantomData;

use rayon::prelude::*;

use crate::kernels::prefetch_bytes;
use crate::layer::MomentPrecision;

/// One row of a layer's trainable state: weights, Adam moments and the row's update count.
#[derive(Debug)]
pub struct RowMut<'a> {
    /// The weights (`stride` floats, the row's length then padding).
    pub w: &'a mut [f32],
    /// Adam's moments, `stride` of each.
    pub moments: RowMoments<'a>,
    /// Updates the row has received.
    pub steps: &'a mut u32,
}

/// A row's Adam moments, in the precision the layer stores them.
#[derive(Debug)]
pub enum RowMoments<'a> {
    /// f32 moments.
    F32 {
        /// First moments.
        m: &'a mut [f32],
        /// Second moments.
        v: &'a mut [f32],
    },
    /// BF16 moments (see [`crate::kernels::bf16`]).
    Bf16 {
        /// First moments.
        m: &'a mut [u16],
        /// Second moments.
        v: &'a mut [u16],
    },
}

/// A layer's row blocks (`rows` blocks of `[w | m | v]`, `w` `stride` floats and `m`, `v`
/// `stride` floats or, with BF16 moments, `stride` BF16 values each; plus one `u32` update
/// count per row) whose *distinct* rows may be updated from many threads at once.
///
/// The only way in is [`DisjointRows::par_for_each_init`], which checks that the requested
/// rows are strictly increasing, hence distinct, before handing any out, and takes
/// `&mut self`, so no second hand-out can run while one is under way: no two threads ever
/// hold the same row, so the `&mut` slices never alias.
///
/// ```
/// use slide::MomentPrecision;
/// use slide::rows::DisjointRows;
///
/// // 4 rows of stride 16: [w | m | v] blocks of 48 floats.
/// let (mut params, mut steps) = (vec![0.0f32; 4 * 3 * 16], vec![0u32; 4]);
/// let mut rows = DisjointRows::new(&mut params, &mut steps, 16, MomentPrecision::F32);
/// rows.par_for_each_init(&[0, 2, 3], || (), |_, k, row| {
///     row.w[0] = k as f32 + 1.0;
///     *row.steps += 1;
/// });
/// assert_eq!(steps, [1, 0, 1, 1]);
/// assert_eq!((params[0], params[2 * 48], params[3 * 48]), (1.0, 2.0, 3.0));
/// ```
///
/// Handing rows out again from inside a hand-out, which could give two threads the same
/// row, does not compile:
///
/// ```compile_fail
/// use slide::MomentPrecision;
/// use slide::rows::DisjointRows;
///
/// let (mut params, mut steps) = (vec![0.0f32; 2 * 3 * 16], vec![0u32; 2]);
/// let mut rows = DisjointRows::new(&mut params, &mut steps, 16, MomentPrecision::F32);
/// rows.par_for_each_init(&[0, 1], || (), |_, _, outer| {
///     rows.par_for_each_init(&[0, 1], || (), |_, _, inner| inner.w[0] = outer.w[0]);
/// });
/// ```
pub struct DisjointRows<'a> {
    params: *mut f32,
    steps: *mut u32,
    rows: usize,
    stride: usize,
    moments: MomentPrecision,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: the pointers come from `&'a mut` borrows held for `'a` (so nothing else touches the
// buffers), and `par_for_each_init` gives each thread different rows only; f32 and u32 are
// Send.
unsafe impl Send for DisjointRows<'_> {}
// SAFETY: as above: shared access to `DisjointRows` only ever yields disjoint rows.
unsafe impl Sync for DisjointRows<'_> {}

/// How many rows ahead `par_for_each` prefetches.
const PREFETCH_DISTANCE: usize = 4;

impl<'a> DisjointRows<'a> {
    /// Hints the CPU to fetch row `r`'s block into cache. Never reads or writes the row.
    #[inline]
    fn prefetch(&self, r: usize) {
        let block = self.params.wrapping_add(r * self.block());
        prefetch_bytes(block.cast(), self.block() * std::mem::size_of::<f32>());
    }

    /// Floats per row block.
    fn block(&self) -> usize {
        self.moments.block_factor() * self.stride
    }

    /// Borrows the buffers: `steps.len()` rows, `params` holding `3 * stride` floats per row
    /// (`2 * stride` with BF16 moments). Panics if `params` has another length.
    pub fn new(
        params: &'a mut [f32],
        steps: &'a mut [u32],
        stride: usize,
        moments: MomentPrecision,
    ) -> Self {
        let rows = steps.len();
        assert_eq!(params.len(), rows * moments.block_factor() * stride);
        DisjointRows {
            params: params.as_mut_ptr(),
            steps: steps.as_mut_ptr(),
            rows,
            stride,
            moments,
            _borrow: PhantomData,
        }
    }

    /// Calls `f(state, k, row)` for each `k`, with `row` the `rows[k]`-th row, in parallel;
    /// `state` comes from `init`, called once per run of rows a thread takes (rayon's
    /// `for_each_init`), e.g. to lock that thread's scratch once rather than per row.
    /// Panics if `rows` is not strictly increasing or names a row out of range: that would
    /// be a bug in the caller, not bad user input.
    pub fn par_for_each_init<T, I, F>(&mut self, rows: &[u32], init: I, f: F)
    where
        I: Fn() -> T + Sync + Send,
        F: Fn(&mut T, usize, RowMut<'_>) + Sync + Send,
    {
        assert!(
            rows.windows(2).all(|p| p[0] < p[1]),
            "rows must be strictly increasing"
        );
        assert!(
            rows.last().is_none_or(|&r| (r as usize) < self.rows),
            "row out of range"
        );
        let this = &*self;
        rows.par_iter()
            .enumerate()
            .for_each_init(init, |state, (k, &r)| {
                // The rows are scattered over a large matrix, so each update waits on memory;
                // ask for a block a few rows ahead (rayon hands each thread consecutive rows).
                if let Some(&ahead) = rows.get(k + PREFETCH_DISTANCE) {
                    this.prefetch(ahead as usize);
                }
                let start = r as usize * this.block();
                // SAFETY: `r < this.rows`, so the block lies inside the borrowed buffer; rows are
                // distinct (strictly increasing), so no two calls of this hand-out create
                // overlapping slices; `&mut self` excludes any other hand-out while this one
                // runs, and the buffers are exclusively borrowed for `'a`, which outlives it.
                let (block, steps) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(this.params.add(start), this.block()),
                        &mut *this.steps.add(r as usize),
                    )
                };
                let (w, rest) = block.split_at_mut(this.stride);
                let moments = match this.moments {
                    MomentPrecision::F32 => {
                        let (m, v) = rest.split_at_mut(this.stride);
                        RowMoments::F32 { m, v }
                    }
                    MomentPrecision::Bf16 => {
                        let (m, v) = bytemuck::cast_slice_mut(rest).split_at_mut(this.stride);
                        RowMoments::Bf16 { m, v }
                    }
                };
                f(state, k, RowMut { w, moments, steps });
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every requested row is handed out once, with its own block and count, whatever the
    /// thread that takes it, in either moment precision.
    #[test]
    fn each_requested_row_is_handed_out_once() {
        let stride = 16;
        for precision in [MomentPrecision::F32, MomentPrecision::Bf16] {
            let block = precision.block_factor() * stride;
            let (mut params, mut steps) = (vec![0.0f32; 64 * block], vec![0u32; 64]);
            let wanted: Vec<u32> = (0..64).filter(|r| r % 3 != 1).collect();
            let mut rows = DisjointRows::new(&mut params, &mut steps, stride, precision);
            rows.par_for_each_init(
                &wanted,
                || (),
                |_, k, row| {
                    row.w[1] += wanted[k] as f32;
                    match row.moments {
                        RowMoments::F32 { m, v } => {
                            m[2] += 1.0;
                            v[3] += 2.0;
                        }
                        RowMoments::Bf16 { m, v } => {
                            assert_eq!((m.len(), v.len()), (stride, stride));
                            m[2] = 0x3f80; // 1.0
                            v[3] = 0x4000; // 2.0
                        }
                    }
                    *row.steps += 1;
                },
            );
            for r in 0..64usize {
                let touched = r % 3 != 1;
                let block = &params[r * block..(r + 1) * block];
                assert_eq!(steps[r], u32::from(touched), "row {r}");
                let expect = if touched { r as f32 } else { 0.0 };
                assert_eq!(block[1], expect, "row {r}");
                let (m, v) = match precision {
                    MomentPrecision::F32 => (block[stride + 2], block[2 * stride + 3]),
                    MomentPrecision::Bf16 => {
                        let halves: &[u16] = bytemuck::cast_slice(&block[stride..]);
                        let bf16 = crate::kernels::bf16::to_f32;
                        (bf16(halves[2]), bf16(halves[stride + 3]))
                    }
                };
                assert_eq!((m, v), if touched { (1.0, 2.0) } else { (0.0, 0.0) });
            }
        }
    }

    #[test]
    #[should_panic(expected = "strictly increasing")]
    fn repeated_rows_are_refused() {
        let (mut params, mut steps) = (vec![0.0f32; 4 * 48], vec![0u32; 4]);
        DisjointRows::new(&mut params, &mut steps, 16, MomentPrecision::F32).par_for_each_init(
            &[1, 1],
            || (),
            |_, _, _| {},
        );
    }

    #[test]
    #[should_panic(expected = "row out of range")]
    fn rows_past_the_end_are_refused() {
        let (mut params, mut steps) = (vec![0.0f32; 4 * 48], vec![0u32; 4]);
        DisjointRows::new(&mut params, &mut steps, 16, MomentPrecision::F32).par_for_each_init(
            &[2, 4],
            || (),
            |_, _, _| {},
        );
    }
}
