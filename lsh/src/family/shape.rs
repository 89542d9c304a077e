//! [`FamilyShape`]: what every family shares (input dimension, `K`, `L`, `range_pow`, bits
//! per sub-hash, and the rule that combines sub-hashes into codes), embedded once in each
//! family so that [`HashFamily`](super::HashFamily)'s getters are written once.

use super::combine::Combiner;
use super::params::LshParams;
use crate::error::{Result, invalid};

/// The part of a family that does not depend on how it hashes: input dimension, `K`, `L`,
/// `range_pow`, the bits each sub-hash contributes to an exactly concatenated code, and the
/// seeded combination of each table's `K` sub-hashes into its bucket code. Every family
/// holds one and returns it from [`HashFamily::shape`](super::HashFamily::shape), which
/// gives it [`dim`](super::HashFamily::dim), [`params`](super::HashFamily::params),
/// [`bits_per_code`](super::HashFamily::bits_per_code) and
/// [`hash`](super::HashFamily::hash).
#[derive(Debug, Clone)]
pub struct FamilyShape {
    dim: usize,
    combiner: Combiner,
}

impl FamilyShape {
    /// The shape of a family over `dim`-dimensional inputs whose sub-hashes contribute
    /// `bits` bits each; `seed` salts the folding of wide codes. Checks `params` (see
    /// [`LshParams::validate`]) and then `dim` (1 to 2^32 - 1), in that order.
    pub fn new(dim: usize, params: LshParams, bits: u32, seed: u64) -> Result<Self> {
        params.validate()?;
        if dim == 0 || dim > u32::MAX as usize {
            return Err(invalid("dim", dim, "must be between 1 and 2^32 - 1"));
        }
        Ok(FamilyShape {
            dim,
            combiner: Combiner::new(params, bits, seed),
        })
    }

    /// Input dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// `K`, `L` and `range_pow`.
    pub fn params(&self) -> LshParams {
        self.combiner.params()
    }

    /// Bits each raw sub-hash contributes to an exactly concatenated bucket code.
    pub fn bits_per_code(&self) -> u32 {
        self.combiner.bits()
    }

    /// The combination of raw sub-hashes into bucket codes.
    pub(crate) fn combiner(&self) -> &Combiner {
        &self.combiner
    }
}
