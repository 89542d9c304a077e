//! [`TablesConfig`]: how many tables, buckets and ids, bucket capacity and policy, with
//! the limits they must respect and the memory they take.

use super::codes::ROWS_PER_TASK;
use super::policy::BucketPolicy;
use super::table::Bucket;
use crate::error::{Result, invalid};
use crate::family::LshParams;

/// How to build [`HashTables`](super::HashTables).
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
