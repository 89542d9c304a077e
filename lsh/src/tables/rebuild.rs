//! The rebuild of [`HashTables`] from a family and every id's row: rows hashed in parallel
//! blocks into the layout of [`codes`](super::codes), then every table filled in parallel
//! with exact-size buckets.

use std::sync::Mutex;

use rayon::prelude::*;

use super::codes::{ROWS_PER_TASK, TableCodes};
use super::hash_tables::HashTables;
use crate::error::{Result, invalid};
use crate::family::{CodeBuffer, HashFamily, check_rows};
use crate::vector::Vector;

impl HashTables {
    /// Clears the tables and inserts every id `0..num_ids`, hashing `row(id)` with `family`.
    ///
    /// Rows are hashed in parallel; then each table (in parallel over tables) counts its
    /// buckets' loads, lays the buckets out back to back with exact sizes, and replays the
    /// inserts in id order, keeping a uniform sample of the ids offered to a full bucket
    /// (reservoir sampling, whatever the policy: see the [`tables`](crate::tables) module
    /// documentation). The result
    /// equals inserting the ids one by one in id order after [`clear`](Self::clear) into
    /// reservoir tables of the same seed, for any number of threads, and leaves no unused
    /// space in the stores.
    ///
    /// The `num_ids * L` codes are kept between rebuilds (as are all other buffers), so a
    /// rebuild after the first allocates nothing as long as it runs in a thread pool of the
    /// same size.
    pub fn rebuild<'a, F, R>(&mut self, family: &F, row: R) -> Result<()>
    where
        F: HashFamily + ?Sized,
        R: Fn(u32) -> Vector<'a> + Sync,
    {
        let l = self.config.l;
        self.rebuild_with(family, |first, count, buffer, codes| {
            for (r, out) in codes.chunks_exact_mut(l).take(count).enumerate() {
                out.copy_from_slice(family.hash(row((first + r) as u32), buffer)?);
            }
            Ok(())
        })
    }

    /// [`rebuild`](Self::rebuild) from a row-major matrix: row `id` is
    /// `matrix[id * row_stride..][..family.dim()]` (a stride above `dim` allows padded rows).
    /// Rows are hashed in blocks through [`HashFamily::hash_rows`], the families' batched
    /// path; the tables are the same as from [`rebuild`](Self::rebuild).
    pub fn rebuild_dense<F: HashFamily + ?Sized>(
        &mut self,
        family: &F,
        matrix: &[f32],
        row_stride: usize,
    ) -> Result<()> {
        check_rows(family, matrix, row_stride, self.config.num_ids, usize::MAX)?;
        self.rebuild_with(family, |first, count, buffer, codes| {
            family.hash_rows(
                &matrix[first * row_stride..],
                row_stride,
                count,
                buffer,
                codes,
            )
        })
    }

    /// [`rebuild_dense`](Self::rebuild_dense) from rows stored in some other form (BF16,
    /// say): `fill(first, out)` writes rows `first, first + 1, ...` as f32, `family.dim()`
    /// values each without padding, into `out` (a whole number of rows, a few hundred at a
    /// time, into a per-thread buffer that is reused). The tables are the same as from
    /// [`rebuild_dense`](Self::rebuild_dense) over those f32 rows.
    pub fn rebuild_filled<F, W>(&mut self, family: &F, fill: W) -> Result<()>
    where
        F: HashFamily + ?Sized,
        W: Fn(usize, &mut [f32]) + Sync,
    {
        let dim = family.dim();
        self.rebuild_with(family, |first, count, buffer, codes| {
            let mut rows = std::mem::take(&mut buffer.matrix);
            rows.resize(ROWS_PER_TASK * dim, 0.0);
            fill(first, &mut rows[..count * dim]);
            let hashed = family.hash_rows(&rows, dim, count, buffer, codes);
            buffer.matrix = rows;
            hashed
        })
    }

    /// The rebuild itself: `hash(first, count, buffer, codes)` writes the codes of ids
    /// `first..first + count` row after row into `codes` (`count * L` values).
    fn rebuild_with<F, H>(&mut self, family: &F, hash: H) -> Result<()>
    where
        F: HashFamily + ?Sized,
        H: Fn(usize, usize, &mut CodeBuffer, &mut [u32]) -> Result<()> + Sync,
    {
        self.check_family(family)?;
        let (l, num_ids) = (self.config.l, self.config.num_ids);
        self.fit_code_buffers(family);
        // Until every block is hashed, the codes describe no one state of the rows.
        self.codes_kept = false;
        // Codes are stored in blocks of ROWS_PER_TASK ids, table-major inside a block, so
        // each table then reads its own codes in runs of ROWS_PER_TASK consecutive values
        // instead of one per cache line.
        let blocks = num_ids.div_ceil(ROWS_PER_TASK);
        self.all_codes.resize(blocks * ROWS_PER_TASK * l, 0);
        self.hash_blocks(|first, buffer, block| {
            let count = ROWS_PER_TASK.min(num_ids - first);
            let mut rows = std::mem::take(&mut buffer.rows);
            rows.resize(ROWS_PER_TASK * l, 0);
            let hashed = hash(first, count, buffer, &mut rows);
            scatter_codes(block, &rows, l, 0..count);
            buffer.rows = rows;
            hashed
        })?;
        self.build_from_codes();
        self.rehashed_ids = num_ids;
        Ok(())
    }

    /// Whether [`rebuild_changed_filled`](Self::rebuild_changed_filled) can run: the codes
    /// of every id are kept from a rebuild (not after [`new`](Self::new), nor after a
    /// [`read_state`](Self::read_state) or a rebuild that failed).
    pub fn codes_kept(&self) -> bool {
        self.codes_kept
    }

    /// A rebuild after only the rows of `changed` have moved since the last one: hashes
    /// those rows alone (`fill(ids, out)` writes rows `ids` as f32, `family.dim()` values
    /// each, into `out`), keeps every other id's codes from the last rebuild, and fills the
    /// tables from all of them as every rebuild does. Provided the other rows are as they
    /// were at the last rebuild and `family` is the one it hashed with, the tables are
    /// exactly those of [`rebuild_filled`](Self::rebuild_filled) over every row, at the
    /// cost of hashing the changed rows only.
    ///
    /// `changed` must be strictly increasing ids below `num_ids`; an error otherwise, and
    /// when no codes are kept ([`codes_kept`](Self::codes_kept)). After an error of the
    /// family (a row it rejects), the tables are left as they were and no codes are kept.
    pub fn rebuild_changed_filled<F, W>(
        &mut self,
        family: &F,
        changed: &[u32],
        fill: W,
    ) -> Result<()>
    where
        F: HashFamily + ?Sized,
        W: Fn(&[u32], &mut [f32]) + Sync,
    {
        self.check_family(family)?;
        if !self.codes_kept {
            return Err(invalid(
                "rebuild_changed_filled",
                "",
                "no rebuild's codes are kept to start from",
            ));
        }
        self.check_ids(changed)?;
        if changed.windows(2).any(|w| w[0] >= w[1]) {
            return Err(invalid(
                "rebuild_changed_filled",
                "",
                "changed ids must be strictly increasing",
            ));
        }
        let (dim, l) = (family.dim(), self.config.l);
        self.fit_code_buffers(family);
        // Each block of the codes' layout (ROWS_PER_TASK ids) hashes its own changed ids.
        let hashed = self.hash_blocks(|first, buffer, block| {
            let lo = changed.partition_point(|&id| (id as usize) < first);
            let hi = changed.partition_point(|&id| (id as usize) < first + ROWS_PER_TASK);
            let ids = &changed[lo..hi];
            if ids.is_empty() {
                return Ok(());
            }
            let (mut matrix, mut rows) = (
                std::mem::take(&mut buffer.matrix),
                std::mem::take(&mut buffer.rows),
            );
            matrix.resize(ROWS_PER_TASK * dim, 0.0);
            rows.resize(ROWS_PER_TASK * l, 0);
            fill(ids, &mut matrix[..ids.len() * dim]);
            let result = family.hash_rows(&matrix, dim, ids.len(), buffer, &mut rows);
            if result.is_ok() {
                scatter_codes(block, &rows, l, ids.iter().map(|&id| id as usize - first));
            }
            buffer.matrix = matrix;
            buffer.rows = rows;
            result
        });
        if let Err(e) = hashed {
            // Some blocks hold new codes, others old: they describe no one state of the rows.
            self.codes_kept = false;
            return Err(e);
        }
        self.build_from_codes();
        self.rehashed_ids = changed.len();
        Ok(())
    }

    /// `hash(first, buffer, block)` for each block of the codes' layout (the codes of ids
    /// `first..first + ROWS_PER_TASK`, table-major), in parallel over blocks, with the
    /// buffer of the worker that runs it ([`fit_code_buffers`](Self::fit_code_buffers) has
    /// made one per worker); the first error, if any.
    fn hash_blocks<H>(&mut self, hash: H) -> Result<()>
    where
        H: Fn(usize, &mut CodeBuffer, &mut [u32]) -> Result<()> + Sync,
    {
        let buffers = &self.code_buffers;
        self.all_codes
            .par_chunks_mut(ROWS_PER_TASK * self.config.l)
            .enumerate()
            .try_for_each(|(task, block)| {
                let worker = rayon::current_thread_index().unwrap_or(0) % buffers.len();
                // Each worker locks only its own buffer, so the lock is never contended.
                let mut guard = buffers[worker].lock().unwrap_or_else(|e| e.into_inner());
                hash(task * ROWS_PER_TASK, &mut guard, block)
            })
    }

    /// Clears the tables and fills each (in parallel over tables) from the kept codes.
    fn build_from_codes(&mut self) {
        let (l, num_ids) = (self.config.l, self.config.num_ids);
        self.clear();
        let capacity = self.config.bucket_capacity as u16;
        let codes = &self.all_codes;
        self.tables
            .par_iter_mut()
            .enumerate()
            .for_each(|(t, table)| {
                let table_codes = TableCodes {
                    all: codes,
                    table: t,
                    l,
                    num_ids,
                };
                table.build(table_codes, capacity);
            });
        self.codes_kept = true;
    }

    /// One hashing buffer per worker thread of the current pool, each sized for a whole
    /// task (the row-batch scratch of `hash_rows` too), not by the first task a worker
    /// happens to take: which worker takes tasks varies from run to run, and a worker's
    /// first task would then allocate in a steady-state step (the allocation test caught it
    /// about once in ten runs).
    fn fit_code_buffers<F: HashFamily + ?Sized>(&mut self, family: &F) {
        let threads = rayon::current_num_threads();
        if self.code_buffers.len() >= threads {
            return;
        }
        let (dim, l) = (family.dim(), self.config.l);
        let zeros = vec![0.0f32; ROWS_PER_TASK * dim];
        self.code_buffers.resize_with(threads, || {
            let mut buffer = CodeBuffer::for_family(family);
            let mut rows = vec![0u32; ROWS_PER_TASK * l];
            family
                .hash_rows(&zeros, dim, ROWS_PER_TASK, &mut buffer, &mut rows)
                .expect("zero rows of the family's dimension are valid input");
            buffer.rows = rows;
            buffer.matrix = zeros.clone();
            Mutex::new(buffer)
        });
    }
}

/// Writes the codes of `rows` (`l` a row, row after row) into `block` (a block of the codes'
/// layout: table-major, ROWS_PER_TASK ids a table) at the ids' `positions` in the block,
/// one position per row, in order.
fn scatter_codes(
    block: &mut [u32],
    rows: &[u32],
    l: usize,
    positions: impl Iterator<Item = usize>,
) {
    for (r, codes) in positions.zip(rows.chunks_exact(l)) {
        for (t, &code) in codes.iter().enumerate() {
            block[t * ROWS_PER_TASK + r] = code;
        }
    }
}
