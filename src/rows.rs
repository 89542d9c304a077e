//! The one place where rows of a layer's parameters are handed to several threads at once.

use std::marker::PhantomData;

use rayon::prelude::*;

/// One row of a layer's trainable state: weights, Adam moments and the row's update count.
pub(crate) struct RowMut<'a> {
    pub w: &'a mut [f32],
    pub m: &'a mut [f32],
    pub v: &'a mut [f32],
    pub steps: &'a mut u32,
}

/// A layer's row blocks (`rows` blocks of `[w | m | v]`, each part `stride` floats, plus one
/// `u32` update count per row) whose *distinct* rows may be updated from many threads at
/// once.
///
/// The only way in is [`DisjointRows::par_for_each`], which checks that the requested rows
/// are strictly increasing, hence distinct, before handing any out: no two threads ever hold
/// the same row, so the `&mut` slices never alias.
pub(crate) struct DisjointRows<'a> {
    params: *mut f32,
    steps: *mut u32,
    rows: usize,
    stride: usize,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: the pointers come from `&'a mut` borrows held for `'a` (so nothing else touches the
// buffers), and `par_for_each` gives each thread different rows only; f32 and u32 are Send.
unsafe impl Send for DisjointRows<'_> {}
// SAFETY: as above: shared access to `DisjointRows` only ever yields disjoint rows.
unsafe impl Sync for DisjointRows<'_> {}

/// How many rows ahead `par_for_each` prefetches.
const PREFETCH_DISTANCE: usize = 4;

impl<'a> DisjointRows<'a> {
    /// Hints the CPU to fetch row `r`'s block into cache. Never reads or writes the row.
    #[inline]
    fn prefetch(&self, r: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let block = self.params.wrapping_add(r * 3 * self.stride) as *const i8;
            for line in (0..3 * self.stride * 4).step_by(64) {
                // SAFETY: a prefetch is only a hint: it never faults and has no effect on
                // program state, whatever the address (and this one is inside the buffer).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(block.wrapping_add(line)) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = r;
    }

    /// Borrows the buffers; `params` is `steps.len() * 3 * stride` long.
    pub(crate) fn new(params: &'a mut [f32], steps: &'a mut [u32], stride: usize) -> Self {
        let rows = steps.len();
        assert_eq!(params.len(), rows * 3 * stride);
        DisjointRows {
            params: params.as_mut_ptr(),
            steps: steps.as_mut_ptr(),
            rows,
            stride,
            _borrow: PhantomData,
        }
    }

    /// Calls `f(state, k, row)` for each `k`, with `row` the `rows[k]`-th row, in parallel;
    /// `state` comes from `init`, called once per run of rows a thread takes (rayon's
    /// `for_each_init`), e.g. to lock that thread's scratch once rather than per row.
    /// Panics if `rows` is not strictly increasing or names a row out of range: that would
    /// be a bug in the caller, not bad user input.
    pub(crate) fn par_for_each_init<T, I, F>(&self, rows: &[u32], init: I, f: F)
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
        rows.par_iter()
            .enumerate()
            .for_each_init(init, |state, (k, &r)| {
                // The rows are scattered over a large matrix, so each update waits on memory;
                // ask for a block a few rows ahead (rayon hands each thread consecutive rows).
                if let Some(&ahead) = rows.get(k + PREFETCH_DISTANCE) {
                    self.prefetch(ahead as usize);
                }
                let start = r as usize * 3 * self.stride;
                // SAFETY: `r < self.rows`, so the block lies inside the borrowed buffer; rows are
                // distinct (strictly increasing), so no two calls create overlapping slices, and
                // the buffers are exclusively borrowed for `'a`, which outlives this call.
                let (block, steps) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(self.params.add(start), 3 * self.stride),
                        &mut *self.steps.add(r as usize),
                    )
                };
                let (w, rest) = block.split_at_mut(self.stride);
                let (m, v) = rest.split_at_mut(self.stride);
                f(state, k, RowMut { w, m, v, steps });
            });
    }
}
