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

/// Row-aligned buffers (`rows x stride` floats, plus one `u32` per row) whose *distinct* rows
/// may be updated from many threads at once.
///
/// The only way in is [`DisjointRows::par_for_each`], which checks that the requested rows
/// are strictly increasing, hence distinct, before handing any out: no two threads ever hold
/// the same row, so the `&mut` slices never alias.
pub(crate) struct DisjointRows<'a> {
    w: *mut f32,
    m: *mut f32,
    v: *mut f32,
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

impl<'a> DisjointRows<'a> {
    /// Borrows the buffers; `w`, `m`, `v` are `steps.len() * stride` long.
    pub(crate) fn new(
        w: &'a mut [f32],
        m: &'a mut [f32],
        v: &'a mut [f32],
        steps: &'a mut [u32],
        stride: usize,
    ) -> Self {
        let rows = steps.len();
        assert!(w.len() == rows * stride && m.len() == w.len() && v.len() == w.len());
        DisjointRows {
            w: w.as_mut_ptr(),
            m: m.as_mut_ptr(),
            v: v.as_mut_ptr(),
            steps: steps.as_mut_ptr(),
            rows,
            stride,
            _borrow: PhantomData,
        }
    }

    /// Calls `f(k, row)` for each `k`, with `row` the `rows[k]`-th row, in parallel.
    /// Panics if `rows` is not strictly increasing or names a row out of range: that would
    /// be a bug in the caller, not bad user input.
    pub(crate) fn par_for_each<F>(&self, rows: &[u32], f: F)
    where
        F: Fn(usize, RowMut<'_>) + Sync,
    {
        assert!(
            rows.windows(2).all(|p| p[0] < p[1]),
            "rows must be strictly increasing"
        );
        assert!(
            rows.last().is_none_or(|&r| (r as usize) < self.rows),
            "row out of range"
        );
        rows.par_iter().enumerate().for_each(|(k, &r)| {
            let start = r as usize * self.stride;
            // SAFETY: `r < self.rows`, so the ranges lie inside the borrowed buffers; rows
            // are distinct (strictly increasing), so no two calls create overlapping slices,
            // and the buffers are exclusively borrowed for `'a`, which outlives this call.
            let row = unsafe {
                RowMut {
                    w: std::slice::from_raw_parts_mut(self.w.add(start), self.stride),
                    m: std::slice::from_raw_parts_mut(self.m.add(start), self.stride),
                    v: std::slice::from_raw_parts_mut(self.v.add(start), self.stride),
                    steps: &mut *self.steps.add(r as usize),
                }
            };
            f(k, row);
        });
    }
}
