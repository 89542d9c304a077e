//! Rows in compressed form, the storage of every part of a [`Memory`](super::Memory).

/// Rows in compressed form: row `r`'s entries are `ids[offsets[r]..offsets[r + 1]]` with
/// the matching `values`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Compressed {
    pub(crate) offsets: Vec<usize>,
    pub(crate) ids: Vec<u32>,
    pub(crate) values: Vec<f32>,
}

impl Compressed {
    pub(crate) fn row(&self, r: usize) -> (&[u32], &[f32]) {
        let range = self.offsets[r]..self.offsets[r + 1];
        (&self.ids[range.clone()], &self.values[range])
    }

    /// Asks the CPU to start loading row `r` (a hint, see
    /// [`prefetch_bytes`](crate::kernels::prefetch_bytes)): for rows read in an order the
    /// hardware cannot guess, such as a query's candidates, so that the next rows arrive
    /// while this one is computed instead of one after another.
    pub(crate) fn prefetch_row(&self, r: usize) {
        let (ids, values) = self.row(r);
        crate::kernels::prefetch_bytes(ids.as_ptr().cast(), std::mem::size_of_val(ids));
        crate::kernels::prefetch(values);
    }

    /// Entries of row `r`.
    pub(crate) fn row_len(&self, r: usize) -> usize {
        self.offsets[r + 1] - self.offsets[r]
    }

    pub(crate) fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The nonzero entries column by column (`columns` columns), row ids in ascending order.
    pub(super) fn transposed(&self, columns: usize) -> Compressed {
        let mut offsets = vec![0usize; columns + 1];
        for (&c, &v) in self.ids.iter().zip(&self.values) {
            offsets[c as usize + 1] += usize::from(v != 0.0);
        }
        for c in 0..columns {
            offsets[c + 1] += offsets[c];
        }
        let mut next = offsets.clone();
        let mut ids = vec![0u32; offsets[columns]];
        let mut values = vec![0f32; offsets[columns]];
        for r in 0..self.rows() {
            let (cols, vals) = self.row(r);
            for (&c, &v) in cols.iter().zip(vals).filter(|(_, v)| **v != 0.0) {
                let at = &mut next[c as usize];
                ids[*at] = r as u32;
                values[*at] = v;
                *at += 1;
            }
        }
        Compressed {
            offsets,
            ids,
            values,
        }
    }
}

/// Scales `values` to unit length (zeros stay zero).
pub(super) fn normalise(values: &mut [f32]) {
    let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        values.iter_mut().for_each(|v| *v /= norm);
    }
}
