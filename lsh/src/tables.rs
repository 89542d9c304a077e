//! `L` hash tables of `2^range_pow` buckets holding ids, with bounded buckets.
//!
//! # Layout
//!
//! A table is one `u32` id store plus a 12-byte header per bucket (start, length, segment
//! size, ids seen). A bucket's ids sit contiguously in a segment of the store; when a bucket
//! outgrows its segment it moves to a new segment of twice the size at the end of the store
//! (amortised O(1) inserts), and the abandoned space is reclaimed by compaction after every
//! rebuild or whenever it exceeds half of the store. Memory therefore follows the number of
//! ids actually stored, not `2^range_pow * bucket_capacity` as with the fixed per-bucket
//! arrays of the reference SLIDE code (6.7 GB at its Amazon-670K setting of 50 tables of
//! `2^18` buckets of 128 ids, against about 160 MB here).
//!
//! # Full buckets
//!
//! A bucket holds at most `bucket_capacity` ids. When a full bucket receives another id:
//! * [`BucketPolicy::Fifo`] overwrites the oldest, so the bucket keeps the newest ids;
//! * [`BucketPolicy::Reservoir`] keeps the new id with probability `capacity / seen`
//!   (reservoir sampling), so the bucket holds a uniform sample of every id it was offered.
//!
//! The policy governs single and batch inserts. A rebuild offers every id at once, so it
//! always keeps a uniform sample of each full bucket (a FIFO replay in id order would keep
//! the highest ids of every crowded bucket and never return the others).
//!
//! # Determinism
//!
//! Each table owns a random generator seeded from the tables' seed, the table's index and a
//! generation counter that [`HashTables::clear`] advances. Batch inserts and rebuilds insert
//! into each table in id order (tables are filled in parallel, each by one thread), so the
//! result is identical for any number of threads.

use std::sync::Mutex;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;

use crate::error::{LshError, Result, invalid};
use crate::family::{CodeBuffer, HashFamily, LshParams, check_rows, mix64};
use crate::vector::Vector;

mod state;
pub use state::{ReadArray, TablesArray, TablesState};

/// What a full bucket does with a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum BucketPolicy {
    /// Replace the oldest id: the bucket keeps the newest `capacity` ids.
    #[default]
    Fifo,
    /// Reservoir sampling: the bucket keeps a uniform sample of all ids offered to it.
    Reservoir,
}

/// How to build [`HashTables`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TablesConfig {
    /// Number of tables, `L`.
    pub l: usize,
    /// Each table has `2^range_pow` buckets.
    pub range_pow: u32,
    /// Most ids one bucket holds (1..=65535; SLIDE uses 128).
    pub bucket_capacity: usize,
    /// What a full bucket does.
    pub policy: BucketPolicy,
    /// Ids are `0..num_ids` (the neurons of one layer).
    pub num_ids: usize,
    /// Seed for the reservoir policy's random choices.
    pub seed: u64,
}

impl TablesConfig {
    /// A config whose `L` and `range_pow` match a hash family's.
    pub fn for_family(
        params: LshParams,
        num_ids: usize,
        bucket_capacity: usize,
        policy: BucketPolicy,
        seed: u64,
    ) -> Self {
        TablesConfig {
            l: params.l,
            range_pow: params.range_pow,
            bucket_capacity,
            policy,
            num_ids,
            seed,
        }
    }

    /// Heap bytes the tables take at most once built and rebuilt: the bucket index
    /// (`L * 2^range_pow` buckets), each table's id store and its compaction spare (at most
    /// every id once per table, or every bucket full), and the rebuild's codes of every id.
    pub fn estimated_bytes(&self) -> u64 {
        let (l, buckets) = (self.l as u64, 1u64 << self.range_pow);
        let stored = (self.num_ids as u64).min(buckets * self.bucket_capacity as u64);
        let codes = (self.num_ids as u64).div_ceil(ROWS_PER_TASK as u64) * ROWS_PER_TASK as u64;
        l * (buckets * std::mem::size_of::<Bucket>() as u64 + 2 * stored * 4 + codes * 4)
    }

    /// Checks the limits: `L`, `range_pow` as a family's, bucket capacity 1..=65535 with at
    /// most 2^31 slots per table, 1 to 2^32 - 1 ids.
    pub fn validate(&self) -> Result<()> {
        // `L` and `range_pow` obey the same limits as a family's.
        LshParams {
            k: 1,
            l: self.l,
            range_pow: self.range_pow,
        }
        .validate()?;
        if !(1..=u16::MAX as usize).contains(&self.bucket_capacity) {
            return Err(invalid(
                "bucket_capacity",
                self.bucket_capacity,
                "must be between 1 and 65535",
            ));
        }
        if (self.bucket_capacity as u64) << self.range_pow > 1 << 31 {
            return Err(invalid(
                "bucket_capacity",
                self.bucket_capacity,
                "bucket_capacity * 2^range_pow must not exceed 2^31 ids per table",
            ));
        }
        if self.num_ids == 0 || self.num_ids > u32::MAX as usize {
            return Err(invalid(
                "num_ids",
                self.num_ids,
                "must be between 1 and 2^32 - 1",
            ));
        }
        Ok(())
    }
}

/// Summary of what the tables hold, for logs and reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TablesStats {
    /// Ids stored, summed over tables.
    pub stored_ids: usize,
    /// Buckets holding at least one id, summed over tables.
    pub non_empty_buckets: usize,
    /// Largest bucket.
    pub max_bucket_len: usize,
    /// Buckets that reached capacity, summed over tables.
    pub full_buckets: usize,
    /// Mean ids per non-empty bucket.
    pub mean_non_empty_len: f64,
    /// Buckets, summed over tables (`L * 2^range_pow`).
    pub buckets: usize,
    /// Ids offered to full buckets and not kept since the last clear, summed over tables
    /// (after a rebuild: the ids no query of that table can return).
    pub dropped_ids: usize,
    /// Heap bytes held by the tables.
    pub memory_bytes: usize,
}

/// `L` bucketed hash tables over ids `0..num_ids`. See the module documentation.
#[derive(Debug)]
pub struct HashTables {
    config: TablesConfig,
    generation: u64,
    tables: Vec<Table>,
    /// Every id's bucket codes from the last rebuild (`num_ids * L`, rounded up to whole
    /// blocks of `ROWS_PER_TASK` ids; table-major within a block).
    all_codes: Vec<u32>,
    /// One hashing buffer per worker thread of the pool that runs the rebuild.
    code_buffers: Vec<Mutex<CodeBuffer>>,
}

/// Rows hashed per parallel task during a rebuild, and the block size of the stored codes.
/// A table's codes are read in runs of this many, one run per block, the blocks `L` runs
/// apart: at 64 (256-byte runs 12.8 KB apart, a miss at every run that the hardware
/// prefetcher does not cover) filling the 50 tables of 670,091 ids took 204-241 ms per
/// rebuild on 2 threads, at 256 74-78 ms (1-KB runs), with hashing unchanged (186-210 ms
/// against 198-200); at 512 and 1,024 the filling gains little more (65-72 ms) and the
/// hashing slows (217-260 ms: the task's rows no longer sit in the core's cache).
const ROWS_PER_TASK: usize = 256;

/// Where the reservoir policy puts the id that arrives when a full bucket has seen `seen`
/// ids: a uniform slot of `0..=seen`, kept only if it falls inside the bucket. The one draw
/// that `insert` and a rebuild's fill both make, so a rebuild replays inserts exactly.
fn reservoir_slot(rng: &mut Xoshiro256PlusPlus, seen: u32, capacity: u16) -> Option<usize> {
    let j = rng.random_range(0..=seen as usize);
    (j < usize::from(capacity)).then_some(j)
}

#[derive(Debug, Clone)]
struct Table {
    buckets: Vec<Bucket>,
    store: Vec<u32>,
    /// Second store that compaction copies into, kept to avoid reallocating.
    spare: Vec<u32>,
    /// Store slots no bucket uses any more.
    garbage: usize,
    rng: Xoshiro256PlusPlus,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    start: u32,
    /// Ids offered to this bucket since the last clear (saturating).
    seen: u32,
    len: u16,
    segment: u16,
}

/// One table's codes in the rebuild's block layout (blocks of `ROWS_PER_TASK` ids,
/// table-major inside a block).
#[derive(Clone, Copy)]
struct TableCodes<'a> {
    all: &'a [u32],
    table: usize,
    l: usize,
    num_ids: usize,
}

impl TableCodes<'_> {
    /// Calls `f(id, code)` for ids `0..num_ids` in order. Plain loops over each block's run
    /// of this table's codes: with a `flat_map` of the runs, filling the 50 tables of
    /// 670,091 ids took 262-286 ms per rebuild on 2 threads, 174-226 ms with these.
    #[inline]
    fn for_each(self, mut f: impl FnMut(u32, u32)) {
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

impl Table {
    fn new(num_buckets: usize, rng: Xoshiro256PlusPlus) -> Self {
        Table {
            buckets: vec![Bucket::default(); num_buckets],
            store: Vec::new(),
            spare: Vec::new(),
            garbage: 0,
            rng,
        }
    }

    fn bucket(&self, code: u32) -> &[u32] {
        let b = self.buckets[code as usize];
        &self.store[b.start as usize..b.start as usize + b.len as usize]
    }

    fn insert(&mut self, code: u32, id: u32, capacity: u16, policy: BucketPolicy) {
        let b = self.buckets[code as usize];
        if b.len < capacity {
            let mut b = b;
            if b.len == b.segment {
                let segment = b.segment.saturating_mul(2).max(2).min(capacity);
                if self.store.len() + segment as usize > u32::MAX as usize {
                    self.compact();
                }
                let start = self.store.len();
                self.store
                    .extend_from_within(b.start as usize..b.start as usize + b.len as usize);
                self.store.resize(start + segment as usize, 0);
                self.garbage += b.segment as usize;
                b.start = start as u32;
                b.segment = segment;
            }
            self.store[b.start as usize + b.len as usize] = id;
            b.len += 1;
            b.seen = b.seen.saturating_add(1);
            self.buckets[code as usize] = b;
            return;
        }
        let slot = match policy {
            BucketPolicy::Fifo => Some(b.seen as usize % capacity as usize),
            BucketPolicy::Reservoir => reservoir_slot(&mut self.rng, b.seen, capacity),
        };
        if let Some(slot) = slot {
            self.store[b.start as usize + slot] = id;
        }
        self.buckets[code as usize].seen = b.seen.saturating_add(1);
    }

    /// Copies every bucket's ids into an exactly sized segment of the spare store, in bucket
    /// order, and swaps the stores. Keeps each full bucket's slot order, which FIFO relies on.
    fn compact(&mut self) {
        self.spare.clear();
        for b in &mut self.buckets {
            let start = self.spare.len();
            self.spare.extend_from_slice(
                &self.store[b.start as usize..b.start as usize + b.len as usize],
            );
            b.start = start as u32;
            b.segment = b.len;
        }
        std::mem::swap(&mut self.store, &mut self.spare);
        self.garbage = 0;
    }

    /// Fills an empty table from the codes of ids `0, 1, 2, ...` in that order: counts the
    /// load of each bucket, gives each bucket an exactly sized segment, then replays the
    /// inserts through [`insert`](Self::insert), which never needs to move a segment.
    ///
    /// The replay always uses reservoir sampling, whatever the tables' policy: every id
    /// arrives at once, so "the newest ids" would only mean "the highest ids", and a FIFO
    /// replay in id order would let full buckets keep their last `capacity` ids, making
    /// the lower ids of every crowded bucket unreachable until the next rebuild. Reservoir
    /// sampling keeps a uniform sample of the ids offered to each bucket.
    fn build(&mut self, codes: TableCodes<'_>, capacity: u16) {
        debug_assert!(self.store.is_empty());
        codes.for_each(|_, code| {
            let b = &mut self.buckets[code as usize];
            b.seen = b.seen.saturating_add(1);
        });
        let mut next = 0u32;
        for b in &mut self.buckets {
            let len = b.seen.min(u32::from(capacity)) as u16;
            *b = Bucket {
                start: next,
                seen: 0,
                len: 0,
                segment: len,
            };
            next += u32::from(len);
        }
        self.store.resize(next as usize, 0);
        // `insert` with the reservoir policy, for segments that never need to grow: the
        // same stores and the same random draws, without the growth checks.
        let (buckets, store, rng) = (&mut self.buckets, &mut self.store, &mut self.rng);
        codes.for_each(|id, code| {
            let b = &mut buckets[code as usize];
            if b.len < b.segment {
                store[(b.start + u32::from(b.len)) as usize] = id;
                b.len += 1;
            } else if let Some(j) = reservoir_slot(rng, b.seen, capacity) {
                store[b.start as usize + j] = id;
            }
            b.seen = b.seen.saturating_add(1);
        });
    }

    fn clear(&mut self, rng: Xoshiro256PlusPlus) {
        self.buckets.fill(Bucket::default());
        self.store.clear();
        self.garbage = 0;
        self.rng = rng;
    }
}

impl HashTables {
    /// Empty tables.
    pub fn new(config: TablesConfig) -> Result<Self> {
        config.validate()?;
        let tables = (0..config.l)
            .map(|t| Table::new(1 << config.range_pow, table_rng(config.seed, t, 0)))
            .collect();
        Ok(HashTables {
            config,
            generation: 0,
            tables,
            all_codes: Vec::new(),
            code_buffers: Vec::new(),
        })
    }

    /// The configuration the tables were built with.
    pub fn config(&self) -> &TablesConfig {
        &self.config
    }

    /// Number of tables, `L`.
    pub fn num_tables(&self) -> usize {
        self.config.l
    }

    /// Ids are below this.
    pub fn num_ids(&self) -> usize {
        self.config.num_ids
    }

    /// The ids in bucket `code` of table `table`. Panics if either is out of range, like
    /// slice indexing.
    pub fn bucket(&self, table: usize, code: u32) -> &[u32] {
        self.tables[table].bucket(code)
    }

    /// Removes every id. Reservoir choices after a clear differ from those before it (the
    /// generation counter advances) but are still fixed by the seed.
    pub fn clear(&mut self) {
        self.generation += 1;
        let (seed, generation) = (self.config.seed, self.generation);
        for (t, table) in self.tables.iter_mut().enumerate() {
            table.clear(table_rng(seed, t, generation));
        }
    }

    /// Inserts one id, whose `L` bucket codes (one per table) are `codes`.
    pub fn insert(&mut self, id: u32, codes: &[u32]) -> Result<()> {
        self.check_ids(std::slice::from_ref(&id))?;
        self.check_codes(codes, 1)?;
        let (capacity, policy) = (self.config.bucket_capacity as u16, self.config.policy);
        for (table, &code) in self.tables.iter_mut().zip(codes) {
            table.insert(code, id, capacity, policy);
            table.compact_if_wasteful();
        }
        Ok(())
    }

    /// Inserts many ids; `codes` holds `L` codes per id, id-major (`codes[i * L + t]`).
    /// Tables are filled in parallel; each table receives the ids in the order given, so the
    /// result does not depend on the number of threads.
    pub fn insert_many(&mut self, ids: &[u32], codes: &[u32]) -> Result<()> {
        self.check_ids(ids)?;
        self.check_codes(codes, ids.len())?;
        self.insert_unchecked(ids.iter().copied(), codes);
        self.tables
            .par_iter_mut()
            .for_each(Table::compact_if_wasteful);
        Ok(())
    }

    fn insert_unchecked(
        &mut self,
        ids: impl Iterator<Item = u32> + Clone + Send + Sync,
        codes: &[u32],
    ) {
        let (l, capacity, policy) = (
            self.config.l,
            self.config.bucket_capacity as u16,
            self.config.policy,
        );
        self.tables
            .par_iter_mut()
            .enumerate()
            .for_each(|(t, table)| {
                for (i, id) in ids.clone().enumerate() {
                    table.insert(codes[i * l + t], id, capacity, policy);
                }
            });
    }

    /// Clears the tables and inserts every id `0..num_ids`, hashing `row(id)` with `family`.
    ///
    /// Rows are hashed in parallel; then each table (in parallel over tables) counts its
    /// buckets' loads, lays the buckets out back to back with exact sizes, and replays the
    /// inserts in id order, keeping a uniform sample of the ids offered to a full bucket
    /// (reservoir sampling, whatever the policy: see the module documentation). The result
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
        let threads = rayon::current_num_threads();
        if self.code_buffers.len() < threads {
            // Sized here for a whole task (the row-batch scratch of `hash_rows` too), not by
            // the first task a worker happens to take: which worker takes tasks varies from
            // run to run, and a worker's first task would then allocate in a steady-state
            // step (the allocation test caught it about once in ten runs).
            let dim = family.dim();
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
        // Codes are stored in blocks of ROWS_PER_TASK ids, table-major inside a block, so
        // each table then reads its own codes in runs of ROWS_PER_TASK consecutive values
        // instead of one per cache line.
        let blocks = num_ids.div_ceil(ROWS_PER_TASK);
        self.all_codes.resize(blocks * ROWS_PER_TASK * l, 0);
        let buffers = &self.code_buffers;
        self.all_codes
            .par_chunks_mut(ROWS_PER_TASK * l)
            .enumerate()
            .try_for_each(|(task, block)| -> Result<()> {
                let worker = rayon::current_thread_index().unwrap_or(0) % buffers.len();
                // Each worker locks only its own buffer, so the lock is never contended.
                let mut guard = buffers[worker].lock().unwrap_or_else(|e| e.into_inner());
                let buffer = &mut *guard;
                let first = task * ROWS_PER_TASK;
                let count = ROWS_PER_TASK.min(num_ids - first);
                let mut rows = std::mem::take(&mut buffer.rows);
                rows.resize(ROWS_PER_TASK * l, 0);
                let hashed = hash(first, count, buffer, &mut rows);
                for (r, codes) in rows.chunks_exact(l).take(count).enumerate() {
                    for (t, &code) in codes.iter().enumerate() {
                        block[t * ROWS_PER_TASK + r] = code;
                    }
                }
                buffer.rows = rows;
                hashed
            })?;
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
        Ok(())
    }

    /// What the tables hold.
    pub fn stats(&self) -> TablesStats {
        let mut stats = TablesStats {
            stored_ids: 0,
            non_empty_buckets: 0,
            max_bucket_len: 0,
            full_buckets: 0,
            mean_non_empty_len: 0.0,
            buckets: self.tables.len() << self.config.range_pow,
            dropped_ids: 0,
            memory_bytes: self.all_codes.capacity() * 4,
        };
        for table in &self.tables {
            for b in &table.buckets {
                let len = b.len as usize;
                stats.stored_ids += len;
                stats.non_empty_buckets += usize::from(len > 0);
                stats.full_buckets += usize::from(len == self.config.bucket_capacity);
                stats.max_bucket_len = stats.max_bucket_len.max(len);
                stats.dropped_ids += (b.seen as usize).saturating_sub(len);
            }
            stats.memory_bytes += table.buckets.capacity() * std::mem::size_of::<Bucket>()
                + (table.store.capacity() + table.spare.capacity()) * 4;
        }
        if stats.non_empty_buckets > 0 {
            stats.mean_non_empty_len = stats.stored_ids as f64 / stats.non_empty_buckets as f64;
        }
        stats
    }

    pub(crate) fn check_family<F: HashFamily + ?Sized>(&self, family: &F) -> Result<()> {
        let p = family.params();
        if p.l != self.config.l || p.range_pow != self.config.range_pow {
            return Err(LshError::FamilyMismatch {
                family_tables: p.l,
                family_range_pow: p.range_pow,
                tables: self.config.l,
                range_pow: self.config.range_pow,
            });
        }
        Ok(())
    }

    pub(crate) fn check_ids(&self, ids: &[u32]) -> Result<()> {
        match ids.iter().find(|&&id| id as usize >= self.config.num_ids) {
            Some(&id) => Err(LshError::IdOutOfRange {
                id,
                num_ids: self.config.num_ids,
            }),
            None => Ok(()),
        }
    }

    /// `codes` must hold `L` codes for each of `count` ids, each below `2^range_pow`.
    pub(crate) fn check_codes(&self, codes: &[u32], count: usize) -> Result<()> {
        let l = self.config.l;
        if codes.len() != l * count {
            return Err(LshError::CodeCountMismatch {
                expected: l * count,
                actual: codes.len(),
            });
        }
        let limit = 1u64 << self.config.range_pow;
        match codes.iter().position(|&c| u64::from(c) >= limit) {
            Some(i) => Err(LshError::CodeOutOfRange {
                code: codes[i],
                table: i % l,
                range_pow: self.config.range_pow,
            }),
            None => Ok(()),
        }
    }
}

impl Table {
    /// Single inserts can abandon segments; reclaim them once they are half the store.
    fn compact_if_wasteful(&mut self) {
        if self.garbage > 1 << 12 && self.garbage * 2 > self.store.len() {
            self.compact();
        }
    }
}

fn table_rng(seed: u64, table: usize, generation: u64) -> Xoshiro256PlusPlus {
    let stream = mix64(seed ^ mix64((table as u64) << 32 ^ generation ^ 0x0074_6162_6c65_7300));
    Xoshiro256PlusPlus::seed_from_u64(stream)
}
