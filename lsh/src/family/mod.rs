//! Hash families: each maps a vector to `L` bucket codes, one per table, each made of `K`
//! sub-hashes.
//!
//! Every family first computes `K * L` *raw sub-hashes* (a sign bit for SimHash, the winner's
//! position in a bin for WTA/DWTA, the minimum offset in a bin for MinHash) and then combines
//! each table's `K` sub-hashes into one bucket code below `2^range_pow`:
//!
//! * when `K * bits_per_code <= range_pow` the code is the exact concatenation of the `K`
//!   sub-hashes, each reduced to its low `bits_per_code` bits (as the reference SLIDE code does);
//! * otherwise the `K` full sub-hashes are mixed by a seeded 64-bit hash and the top
//!   `range_pow` bits are kept ("folding"). Two vectors whose `K` sub-hashes agree always land in
//!   the same bucket; others collide by chance with probability `2^-range_pow`. This keeps
//!   the paper's `K = 8` DWTA setting (24 bits) usable with `2^18` buckets per table.
//!
//! # Files
//!
//! The interface ([`HashFamily`], its scratch [`CodeBuffer`], the [`FamilyShape`] every
//! family embeds, [`LshParams`]) and the pieces families share (the combination of
//! sub-hashes into codes, densification, seeded mixing, coordinate incidence lists) each
//! have a file; so does each family, the [`FamilyKind`] a config names, and the
//! [`LshFamily`] enum over all of them. This file only declares and re-exports them.

mod buffer;
mod combine;
mod densify;
mod hash_family;
mod incidence;
mod kind;
mod lsh_family;
mod minhash;
mod mix;
mod params;
#[cfg(feature = "serde")]
mod serde_defaults;
mod shape;
mod simhash;
mod weighted;
mod wta;

pub use buffer::CodeBuffer;
pub use hash_family::HashFamily;
pub use kind::FamilyKind;
pub use lsh_family::LshFamily;
pub use minhash::DophMinHash;
pub use mix::mix64;
pub use params::{LshParams, MAX_RANGE_POW, MAX_TABLES};
pub use shape::FamilyShape;
pub use simhash::{Projection, SimHash};
pub use weighted::{MAX_DRAWS as WEIGHTED_MAX_DRAWS, WeightedMinHash};
pub use wta::{Wta, WtaMode};

pub(crate) use hash_family::check_rows;
