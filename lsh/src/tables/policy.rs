//! [`BucketPolicy`]: what a full bucket does with a new id, and the reservoir policy's
//! draw that single inserts and rebuilds share.

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

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

/// Where the reservoir policy puts the id that arrives when a full bucket has seen `seen`
/// ids: a uniform slot of `0..=seen`, kept only if it falls inside the bucket. The one draw
/// that `insert` and a rebuild's fill both make, so a rebuild replays inserts exactly.
pub(super) fn reservoir_slot(
    rng: &mut Xoshiro256PlusPlus,
    seen: u32,
    capacity: u16,
) -> Option<usize> {
    let j = rng.random_range(0..=seen as usize);
    (j < usize::from(capacity)).then_some(j)
}
