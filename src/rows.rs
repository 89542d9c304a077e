//! The one place where rows of a layer's parameters are handed to several threads at once
//! ([`DisjointRows`]).

use std::marker::PhantomData;

use rayon::prelude::*;

use crate::kernels::{Ahead, ValuesMut};
use crate::layer::{BlockLayout, Precision};

/// One row of a layer's trainable state: weights, Adam moments (`stride` values each, f32
/// or BF16, the row's length then padding) and the row's update count.
#[derive(Debug)]
pub struct RowMut<'a> {
    /// The weights.
    pub w: ValuesMut<'a>,
    /// Adam's first moments.
    pub m: ValuesMut<'a>,
    /// Adam's second moments.
    pub v: ValuesMut<'a>,
    /// Updates the row has received.
    pub steps: &'a mut u32,
    /// The block of the row handed out after this one by the same pass (nothing for the
    /// last): a row kernel fetches it while it works on this row ([`Ahead`]).
    pub ahead: Ahead,
}

/// A layer's row blocks (`rows` blocks of `[w | m | v]`, `stride` values each in the
/// precisions given; plus one `u32` update count per row) whose *distinct* rows may be
/// updated from many threads at once.
///
/// The only way in is [`DisjointRows::par_for_each_init`], which checks that the requested
/// rows are strictly increasing, hence distinct, before handing any out, and takes
/// `&mut self`, so no second hand-out can run while one is under way: no two threads ever
/// hold the same row, so the `&mut` slices never alias.
///
/// ```
/// use slide::Precision;
/// use slide::kernels::ValuesMut;
/// use slide::rows::DisjointRows;
///
/// // 4 rows of stride 16, all f32: [w | m | v] blocks of 48 floats.
/// let (mut params, mut steps) = (vec![0.0f32; 4 * 3 * 16], vec![0u32; 4]);
/// let f32 = Precision::F32;
/// let mut rows = DisjointRows::new(&mut params, &mut steps, 16, f32, f32);
/// rows.par_for_each_init(&[0, 2, 3], || (), |_, k, row| {
///     if let ValuesMut::F32(w) = row.w {
///         w[0] = k as f32 + 1.0;
///     }
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
/// use slide::Precision;
/// use slide::rows::DisjointRows;
///
/// let (mut params, mut steps) = (vec![0.0f32; 2 * 3 * 16], vec![0u32; 2]);
/// let f32 = Precision::F32;
/// let mut rows = DisjointRows::new(&mut params, &mut steps, 16, f32, f32);
/// rows.par_for_each_init(&[0, 1], || (), |_, _, outer| {
///     rows.par_for_each_init(&[0, 1], || (), |_, _, inner| *inner.steps = *outer.steps);
/// });
/// ```
pub struct DisjointRows<'a> {
    params: *mut f32,
    steps: *mut u32,
    rows: usize,
    layout: BlockLayout,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: the pointers come from `&'a mut` borrows held for `'a` (so nothing else touches the
// buffers), and `par_for_each_init` gives each thread different rows only; f32 and u32 are
// Send.
unsafe impl Send for DisjointRows<'_> {}
// SAFETY: as above: shared access to `DisjointRows` only ever yields disjoint rows.
unsafe impl Sync for DisjointRows<'_> {}

impl<'a> DisjointRows<'a> {
    /// Row `r`'s block as an [`Ahead`] (the address only: never read or written here).
    #[inline]
    fn ahead(&self, r: usize) -> Ahead {
        let block = self.params.wrapping_add(r * self.block());
        Ahead::new(block.cast(), self.block() * std::mem::size_of::<f32>())
    }

    /// Floats per row block.
    fn block(&self) -> usize {
        self.layout.block()
    }

    /// Borrows the buffers: `steps.len()` rows, `params` holding one block per row
    /// (`3 * stride` floats when all is f32, `2 * stride` with BF16 moments, `1.5 * stride`
    /// with BF16 weights too). Panics if `params` has another length, if `stride` is not a
    /// multiple of 16 or if BF16 weights come with f32 moments.
    pub fn new(
        params: &'a mut [f32],
        steps: &'a mut [u32],
        stride: usize,
        weights: Precision,
        moments: Precision,
    ) -> Self {
        let rows = steps.len();
        assert!(stride.is_multiple_of(16), "stride must be a multiple of 16");
        assert!(
            weights == Precision::F32 || moments == Precision::Bf16,
            "BF16 weights need BF16 moments"
        );
        let layout = BlockLayout {
            stride,
            weights,
            moments,
        };
        assert_eq!(params.len(), rows * layout.block());
        DisjointRows {
            params: params.as_mut_ptr(),
            steps: steps.as_mut_ptr(),
            rows,
            layout,
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
                // the next row's block goes with this one, for the kernel to fetch while it
                // works (rayon hands each thread consecutive rows).
                let ahead = rows
                    .get(k + 1)
                    .map_or(Ahead::NONE, |&next| this.ahead(next as usize));
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
                let [w, m, v] = this.layout.parts_mut(block);
                f(
                    state,
                    k,
                    RowMut {
                        w,
                        m,
                        v,
                        steps,
                        ahead,
                    },
                );
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every requested row is handed out once, with its own block and count, whatever the
    /// thread that takes it, in each storage: the parts at the byte offsets documented
    /// (f32 `[w | m | v]`; BF16 moments after f32 weights; BF16 weights then moments).
    #[test]
    fn each_requested_row_is_handed_out_once() {
        let stride = 16;
        let (f32, bf16) = (Precision::F32, Precision::Bf16);
        // (weights, moments, block in floats, byte offsets of w, m, v)
        let layouts = [
            (f32, f32, 48, [0, 64, 128]),
            (f32, bf16, 32, [0, 64, 96]),
            (bf16, bf16, 24, [0, 32, 64]),
        ];
        for (weights, moments, block, offsets) in layouts {
            let (mut params, mut steps) = (vec![0.0f32; 64 * block], vec![0u32; 64]);
            let wanted: Vec<u32> = (0..64).filter(|r| r % 3 != 1).collect();
            let mut rows = DisjointRows::new(&mut params, &mut steps, stride, weights, moments);
            rows.par_for_each_init(
                &wanted,
                || (),
                |_, k, mut row| {
                    assert_eq!((row.w.len(), row.m.len(), row.v.len()), (16, 16, 16));
                    row.w.set_nearest(1, wanted[k] as f32);
                    row.m.set_nearest(2, 1.0);
                    row.v.set_nearest(3, 2.0);
                    *row.steps += 1;
                },
            );
            let bytes: &[u8] = bytemuck::cast_slice(&params);
            // Value `i` of the part at byte `at` of row `r`'s block, in precision `p`.
            let read = |r: usize, at: usize, i: usize, p: Precision| {
                let at = r * block * 4 + at;
                match p {
                    Precision::F32 => {
                        f32::from_le_bytes(bytes[at + 4 * i..][..4].try_into().unwrap())
                    }
                    Precision::Bf16 => crate::kernels::bf16::to_f32(u16::from_le_bytes(
                        bytes[at + 2 * i..][..2].try_into().unwrap(),
                    )),
                }
            };
            for (r, &count) in steps.iter().enumerate() {
                let touched = r % 3 != 1;
                assert_eq!(count, u32::from(touched), "row {r}");
                let expect = if touched { r as f32 } else { 0.0 };
                assert_eq!(read(r, offsets[0], 1, weights), expect, "row {r}");
                let (m, v) = (
                    read(r, offsets[1], 2, moments),
                    read(r, offsets[2], 3, moments),
                );
                assert_eq!((m, v), if touched { (1.0, 2.0) } else { (0.0, 0.0) });
            }
        }
    }

    #[test]
    #[should_panic(expected = "BF16 weights need BF16 moments")]
    fn bf16_weights_with_f32_moments_are_refused() {
        let (mut params, mut steps) = (vec![0.0f32; 4 * 40], vec![0u32; 4]);
        DisjointRows::new(&mut params, &mut steps, 16, Precision::Bf16, Precision::F32);
    }

    #[test]
    #[should_panic(expected = "strictly increasing")]
    fn repeated_rows_are_refused() {
        let (mut params, mut steps) = (vec![0.0f32; 4 * 48], vec![0u32; 4]);
        DisjointRows::new(&mut params, &mut steps, 16, Precision::F32, Precision::F32)
            .par_for_each_init(&[1, 1], || (), |_, _, _| {});
    }

    #[test]
    #[should_panic(expected = "row out of range")]
    fn rows_past_the_end_are_refused() {
        let (mut params, mut steps) = (vec![0.0f32; 4 * 48], vec![0u32; 4]);
        DisjointRows::new(&mut params, &mut steps, 16, Precision::F32, Precision::F32)
            .par_for_each_init(&[2, 4], || (), |_, _, _| {});
    }
}
