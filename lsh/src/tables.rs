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
//!
//! # Files
//!
//! The [`TablesConfig`] and [`BucketPolicy`] a caller chooses, one table's buckets and
//! store, the [`HashTables`] over `L` of them with their inserts and checks, the block
//! layout of a rebuild's codes, the parallel rebuild, the [`TablesStats`] summary and the
//! checkpoint [`TablesState`] each have a file; this one only declares and re-exports them.

mod codes;
mod config;
mod hash_tables;
mod policy;
mod rebuild;
mod state;
mod stats;
mod table;

pub use config::TablesConfig;
pub use hash_tables::HashTables;
pub use policy::BucketPolicy;
pub use state::{ReadArray, TablesArray, TablesState};
pub use stats::TablesStats;
