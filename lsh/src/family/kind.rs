//! [`FamilyKind`]: which family a configuration asks for, with its own settings, and the
//! checks that can be made before the input dimension is known.

use super::minhash::check_bits;
use super::params::LshParams;
use super::simhash::{Projection, check_density};
use super::wta::check_bin_size;
use crate::error::Result;

/// Which family to build, with its family-specific settings. In TOML (the `serde`
/// feature): `{ dwta = { bin_size = 8 } }`, `{ wta = { bin_size = 8 } }`,
/// `{ simhash = { sparse = { density = 0.33 } } }`, `{ simhash = "gaussian" }`,
/// `{ minhash = { bits = 3 } }`; a setting left out takes SLIDE's
/// value (bins of 8, density 1/3, 3 bits).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase", deny_unknown_fields)
)]
pub enum FamilyKind {
    /// Signed random projections.
    SimHash(Projection),
    /// Winner-take-all over random bins of `bin_size` coordinates.
    Wta {
        /// Coordinates competing in one bin (a power of two, 2..=65536).
        #[cfg_attr(feature = "serde", serde(default = "super::serde_defaults::bin_size"))]
        bin_size: usize,
    },
    /// Densified winner-take-all: empty bins of sparse inputs borrow another bin's winner.
    Dwta {
        /// Coordinates competing in one bin (a power of two, 2..=65536).
        #[cfg_attr(feature = "serde", serde(default = "super::serde_defaults::bin_size"))]
        bin_size: usize,
    },
    /// Densified one-permutation MinHash over the set of nonzero coordinates.
    MinHash {
        /// Bits of each bin's minimum kept in an exactly concatenated bucket code (1..=16).
        #[cfg_attr(feature = "serde", serde(default = "super::serde_defaults::bits"))]
        bits: u32,
    },
}

impl FamilyKind {
    /// Checks `params` and the family's own settings without building anything: what can be
    /// known before the input dimension (sparse SimHash density in (0, 1], WTA bin size a
    /// power of two in 2..=65536, MinHash bits in 1..=16). Codes wider than `range_pow`
    /// bits are folded, so `K` times the bits per code has no limit of its own.
    pub fn validate(&self, params: LshParams) -> Result<()> {
        params.validate()?;
        self.bits_per_code().map(|_| ())
    }

    /// Bits each sub-hash contributes to an exactly concatenated bucket code (what
    /// [`HashFamily::bits_per_code`](super::HashFamily::bits_per_code) of the built family
    /// returns, and what [`tune_for_budget`](crate::tune_for_budget) needs): 1 for SimHash,
    /// `log2(bin_size)` for WTA and DWTA, `bits` for MinHash. Fails when the family's
    /// own settings are out of range (see [`validate`](Self::validate)).
    pub fn bits_per_code(&self) -> Result<u32> {
        match *self {
            FamilyKind::SimHash(Projection::Sparse { density }) => {
                check_density(density).map(|_| 1)
            }
            FamilyKind::SimHash(Projection::Gaussian) => Ok(1),
            FamilyKind::Wta { bin_size } | FamilyKind::Dwta { bin_size } => {
                check_bin_size(bin_size).map(|_| bin_size.trailing_zeros())
            }
            FamilyKind::MinHash { bits } => check_bits(bits).map(|_| bits),
        }
    }
}
