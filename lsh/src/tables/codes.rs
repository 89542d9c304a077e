//! The block layout of the bucket codes a rebuild computes: blocks of [`ROWS_PER_TASK`]
//! ids, table-major inside a block, and [`TableCodes`], one table's view of them.

/// Rows hashed per parallel task during a rebuild, and the block size of the stored codes.
/// A table's codes are read in runs of this many, one run per block, the blocks `L` runs
/// apart: at 64 (256-byte runs 12.8 KB apart, a miss at every run that the hardware
/// prefetcher does not cover) filling the 50 tables of 670,091 ids took 204-241 ms per
/// rebuild on 2 threads, at 256 74-78 ms (1-KB runs), with hashing unchanged (186-210 ms
/// against 198-200); at 512 and 1,024 the filling gains little more (65-72 ms) and the
/// hashing slows (217-260 ms: the task's rows no longer sit in the core's cache).
pub(super) const ROWS_PER_TASK: usize = 256;

/// One table's codes in the rebuild's block layout (blocks of `ROWS_PER_TASK` ids,
/// table-major inside a block).
#[derive(Clone, Copy)]
pub(super) struct TableCodes<'a> {
    /// Every table's codes, in blocks.
    pub(super) all: &'a [u32],
    /// The table read.
    pub(super) table: usize,
    /// Number of tables, `L`.
    pub(super) l: usize,
    /// Ids are `0..num_ids`.
    pub(super) num_ids: usize,
}

impl TableCodes<'_> {
    /// Calls `f(id, code)` for ids `0..num_ids` in order. Plain loops over each block's run
    /// of this table's codes: with a `flat_map` of the runs, filling the 50 tables of
    /// 670,091 ids took 262-286 ms per rebuild on 2 threads, 174-226 ms with these.
    #[inline]
    pub(super) fn for_each(self, mut f: impl FnMut(u32, u32)) {
        let mut id = 0u32;
        for block in self.all.chunks_exact(ROWS_PER_TASK * self.l) {
            let run = &block[self.table * ROWS_PER_TASK..][..ROWS_PER_TASK];
            let left = self.num_ids - id as usize;
            for &code in &run[..ROWS_PER_TASK.min(left)] {
                f(id, code);
                id += 1;
            }
        }
    }
}
