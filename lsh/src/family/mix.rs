//! Seeded integer mixing: [`mix64`] derives independent streams from one seed, and
//! `reduce` maps a mixed value to a range.

/// SplitMix64's finaliser: a fast, well-mixing bijection on `u64`. The crates of slide use
/// it to derive independent seeds from one (per table, per step, per sample).
///
/// ```
/// assert_ne!(slide_lsh::mix64(1), slide_lsh::mix64(2));
/// assert_eq!(slide_lsh::mix64(0), 0);
/// ```
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Maps a uniform `u64` to `0..n` without division (Lemire's multiply-high).
#[inline]
pub(crate) fn reduce(x: u64, n: usize) -> usize {
    ((u128::from(x) * n as u128) >> 64) as usize
}
