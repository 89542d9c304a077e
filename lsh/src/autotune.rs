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

/// Tables a tuned layer uses. A query's union is sized by the bucket size, not by `L`, so
/// fewer, larger buckets retrieve as many candidates for a fraction of the hashing: at the
/// Amazon-670K shape (budget 1,024) 16 tables trained to the same exact P@1 as SLIDE's 50
/// (after 3 epochs 0.5135 / 0.513 against 0.5115 / 0.5125, seeds 1 / 2; 0.5785 / 0.5770
/// against 0.5750 / 0.5825 at 100,000 labels), and cut the epoch from 6.0 / 6.4 s to 5.3 /
/// 5.2 s against uniform sampling's 5.1 / 5.0 s (docs/notebook/accuracy.md, "A warm-up of uniform
/// negatives, 16 tables").
pub const TUNED_TABLES: usize = 16;

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
        // 670,091 outputs, budget 1,024, 16 tables, DWTA bins of 8 (3 bits): buckets of
        // about 128 ids -> 5,235 buckets -> 2^12 (164 ids each), K = 4 (12 bits).
        let t = tune_for_budget(670_091, 1024, 3).unwrap();
        assert_eq!(
            t.params,
            LshParams {
                k: 4,
                l: 16,
                range_pow: 12
            }
        );
        assert_eq!(t.bucket_capacity, 655);
        // The expected union before overlaps: L * n / 2^range_pow = 2,618, within a power
        // of two's rounding (a factor of sqrt(2)) of twice the budget.
        let union = 16.0 * 670_091.0 / f64::from(1u32 << 12);
        let ratio = union / 1024.0 / OVERSHOOT;
        assert!((0.5f64.sqrt()..=2f64.sqrt()).contains(&ratio), "{union}");
    }

    #[test]
    fn small_and_degenerate_layers() {
        // 1,024 neurons, budget 512: buckets of 64 -> 16 buckets -> 2^4, K = 2.
        let t = tune_for_budget(1024, 512, 3).unwrap();
        assert_eq!((t.params.range_pow, t.params.k), (4, 2));
        assert_eq!(t.bucket_capacity, 256);
        let t = tune_for_budget(100_000, 1024, 1).unwrap();
        // s = 128 -> 781 buckets -> 2^10; SimHash needs 10 bits.
        assert_eq!((t.params.range_pow, t.params.k), (10, 10));
        // A budget above the layer: one bucket per table would do, at least 2 are made.
        let t = tune_for_budget(100, 1024, 3).unwrap();
        assert_eq!((t.params.range_pow, t.params.k), (1, 1));
        assert_eq!(t.bucket_capacity, 200);
        assert!(tune_for_budget(10, 0, 3).is_err());
        assert!(tune_for_budget(0, 10, 3).is_err());
    }
}
