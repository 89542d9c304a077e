//! Choosing `K`, `L`, `range_pow` and the bucket capacity from a retrieval budget, as BOLT
//! derives its hash parameters from a sparsity target.
//!
//! A query returns the union of one bucket per table. With `n` ids spread over
//! `2^range_pow` buckets, a bucket holds about `n / 2^range_pow` ids, and the union of `L`
//! of them about `L * n / 2^range_pow` before overlaps. [`tune_for_budget`] sizes the
//! buckets so that this is [`OVERSHOOT`] times the budget (overlaps between tables, empty
//! buckets and the strategy's cut take the rest), and takes enough sub-hashes per table
//! (`K`) that the codes can tell the buckets apart. The statistics the tables report
//! ([`TablesStats`](crate::TablesStats)) and the sampler's counts
//! ([`SampleCounts`](crate::SampleCounts)) show how close a layer comes.

use crate::error::{Result, invalid};
use crate::family::{LshParams, MAX_RANGE_POW};

/// Tables a tuned layer uses (SLIDE's setting).
pub const TUNED_TABLES: usize = 50;

/// The expected union of a query's buckets, before overlaps, as a multiple of the budget.
pub const OVERSHOOT: f64 = 2.0;

/// Hash parameters chosen for a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuned {
    /// `K`, `L`, `range_pow`.
    pub params: LshParams,
    /// Most ids per bucket.
    pub bucket_capacity: usize,
}

/// Parameters for tables over `num_ids` ids from which a query should retrieve about
/// `budget` candidates, for a family whose sub-hashes carry `bits_per_code` bits (3 for
/// DWTA with bins of 8, 1 for SimHash).
///
/// Bucket size `s = OVERSHOOT * budget / L`; `2^range_pow` the power of two nearest
/// `num_ids / s` (at least 2); `K = ceil(range_pow / bits_per_code)`, so the `K` sub-hashes
/// carry at least as many bits as the bucket index (more are folded); capacity `4 * s`
/// (at least 32): a bucket of trained weights may hold several times the mean before it
/// drops ids.
pub fn tune_for_budget(num_ids: usize, budget: usize, bits_per_code: u32) -> Result<Tuned> {
    if budget == 0 {
        return Err(invalid("budget", budget, "must be at least 1"));
    }
    if num_ids == 0 {
        return Err(invalid("num_ids", num_ids, "must be at least 1"));
    }
    if bits_per_code == 0 {
        return Err(invalid(
            "bits_per_code",
            bits_per_code,
            "must be at least 1",
        ));
    }
    let l = TUNED_TABLES;
    let bucket = (OVERSHOOT * budget as f64 / l as f64).max(1.0);
    let buckets = (num_ids as f64 / bucket).max(2.0);
    let range_pow = (buckets.log2().round() as u32).clamp(1, MAX_RANGE_POW.min(24));
    let k = range_pow.div_ceil(bits_per_code).max(1) as usize;
    let mean = num_ids as f64 / f64::from(1u32 << range_pow);
    let bucket_capacity = ((4.0 * mean).ceil() as usize).clamp(32, u16::MAX as usize);
    let params = LshParams { k, l, range_pow };
    params.validate()?;
    Ok(Tuned {
        params,
        bucket_capacity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amazon_output_layer() {
        // 670,091 outputs, budget 1,024, DWTA bins of 8 (3 bits): buckets of about 41 ids ->
        // 2^14 buckets (41 ids each), K = 5 (15 bits, folded to 14).
        let t = tune_for_budget(670_091, 1024, 3).unwrap();
        assert_eq!(
            t.params,
            LshParams {
                k: 5,
                l: 50,
                range_pow: 14
            }
        );
        assert_eq!(t.bucket_capacity, 164);
        // The expected union before overlaps: L * n / 2^range_pow = 2,045, twice the budget.
        let union = 50.0 * 670_091.0 / f64::from(1u32 << 14);
        assert!((union / 1024.0 - 2.0).abs() < 0.01, "{union}");
    }

    #[test]
    fn small_and_degenerate_layers() {
        // 1,024 neurons, budget 512: buckets of 20.5 -> 50 buckets -> 2^6, K = 2.
        let t = tune_for_budget(1024, 512, 3).unwrap();
        assert_eq!((t.params.range_pow, t.params.k), (6, 2));
        assert_eq!(t.bucket_capacity, 64);
        let t = tune_for_budget(100_000, 1024, 1).unwrap();
        // s = 41 -> 2,441 buckets -> 2^11; SimHash needs 11 bits.
        assert_eq!((t.params.range_pow, t.params.k), (11, 11));
        assert!(tune_for_budget(10, 0, 3).is_err());
        assert!(tune_for_budget(0, 10, 3).is_err());
    }
}
