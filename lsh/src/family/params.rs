//! [`LshParams`]: the `K`, `L` and `range_pow` every family and table set shares, with
//! their limits.

use crate::error::{Result, invalid};

/// Largest supported `range_pow`: codes are `u32` and tables allocate `2^range_pow` buckets.
pub const MAX_RANGE_POW: u32 = 30;
/// Largest supported `L`: per-id hit counts are kept in `u16` with one value reserved.
pub const MAX_TABLES: usize = u16::MAX as usize - 1;

/// The shape shared by every family: `K` sub-hashes per table, `L` tables, and
/// `2^range_pow` buckets per table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub struct LshParams {
    /// Sub-hashes concatenated into one bucket code (`K`).
    pub k: usize,
    /// Number of tables (`L`).
    pub l: usize,
    /// Bucket codes are below `2^range_pow`.
    pub range_pow: u32,
}

impl LshParams {
    /// Checks the ranges: `K >= 1`, `1 <= L <= MAX_TABLES`, `1 <= range_pow <= MAX_RANGE_POW`
    /// and `K * L` below `2^24` (the number of sub-hashes computed per vector).
    pub fn validate(&self) -> Result<()> {
        if self.k == 0 {
            return Err(invalid("k", self.k, "must be at least 1"));
        }
        if self.l == 0 || self.l > MAX_TABLES {
            return Err(invalid("l", self.l, "must be between 1 and 65534"));
        }
        if self.range_pow == 0 || self.range_pow > MAX_RANGE_POW {
            return Err(invalid(
                "range_pow",
                self.range_pow,
                "must be between 1 and 30",
            ));
        }
        if self.k.saturating_mul(self.l) >= 1 << 24 {
            return Err(invalid("k * l", self.k * self.l, "must be below 2^24"));
        }
        Ok(())
    }

    /// Number of raw sub-hashes per vector, `K * L`.
    pub fn num_hashes(&self) -> usize {
        self.k * self.l
    }
}
