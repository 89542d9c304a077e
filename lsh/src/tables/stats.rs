//! [`TablesStats`]: a summary of what the tables hold, for logs and reports.

use super::hash_tables::HashTables;
use super::table::Bucket;

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
    /// Ids whose rows the last rebuild hashed: every id, or the changed ones of
    /// [`rebuild_changed_filled`](HashTables::rebuild_changed_filled) (0 before any
    /// rebuild and after a restored state).
    pub rehashed_ids: usize,
    /// Ids the tables index (`num_ids`).
    pub ids: usize,
}

impl HashTables {
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
            rehashed_ids: self.rehashed_ids,
            ids: self.config.num_ids,
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
}
