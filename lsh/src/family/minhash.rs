//! Densified one-permutation MinHash (Shrivastava & Li 2014; optimal densification,
//! Shrivastava 2017) for sparse binary inputs.
//!
//! The input is read as the set of its nonzero coordinates. One random permutation maps the
//! coordinates onto `K * L` equal-width bins; a bin's sub-hash is the smallest permuted
//! position that falls in it, and empty bins borrow through the densification sequence. For
//! two sets with Jaccard similarity `J`, each sub-hash collides with probability `J`.
//!
//! The sub-hash is the *global* permuted position, not the offset within the bin, so values
//! borrowed from different bins never coincide by accident (and bins of width 1, when
//! `K * L >= dim`, still carry information). Exactly concatenated codes keep its low `bits`
//! bits (b-bit minwise hashing).

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;

use super::buffer::CodeBuffer;
use super::densify::{EMPTY, densify};
use super::hash_family::HashFamily;
use super::mix::mix64;
use super::params::LshParams;
use super::shape::FamilyShape;
use crate::error::{Result, invalid};
use crate::vector::Vector;

/// Densified one-permutation MinHash. Build with [`DophMinHash::new`].
#[derive(Debug, Clone)]
pub struct DophMinHash {
    shape: FamilyShape,
    /// Width of each bin in permuted coordinates, `ceil(dim / (K * L))`.
    width: u32,
    permutation: Vec<u32>,
    salt: u64,
}

impl DophMinHash {
    /// Draws the permutation for `dim`-dimensional inputs from `seed`. `bits` (1..=16) is how
    /// many low bits of each bin's minimum enter an exactly concatenated bucket code.
    /// Meaningful for inputs much sparser than `dim`: a set holding every coordinate, like a
    /// dense vector without zeros, has the same MinHash under every permutation.
    pub fn new(dim: usize, params: LshParams, bits: u32, seed: u64) -> Result<Self> {
        let shape = FamilyShape::new(dim, params, bits, seed)?;
        check_bits(bits)?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ 0x004d_494e_4841_5348));
        let mut permutation: Vec<u32> = (0..dim as u32).collect();
        permutation.shuffle(&mut rng);
        Ok(DophMinHash {
            shape,
            width: dim.div_ceil(params.num_hashes()) as u32,
            permutation,
            salt: mix64(seed ^ 0x646f_7068_2064_656e),
        })
    }
}

impl HashFamily for DophMinHash {
    fn shape(&self) -> &FamilyShape {
        &self.shape
    }

    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        x.validate(self.shape.dim())?;
        let num_bins = self.shape.params().num_hashes();
        buf.aux.clear();
        buf.aux.resize(num_bins, EMPTY);
        let minimum = &mut buf.aux[..];
        x.for_each_nonzero(|d, _| {
            let p = self.permutation[d];
            let bin = (p / self.width) as usize;
            minimum[bin] = minimum[bin].min(p);
        });
        buf.raw.resize(num_bins, 0);
        densify(&buf.aux, &mut buf.raw, self.salt);
        Ok(&buf.raw)
    }
}

/// Bits kept of each bin's minimum: 1 to 16.
pub(crate) fn check_bits(bits: u32) -> Result<()> {
    if !(1..=16).contains(&bits) {
        return Err(invalid("bits", bits, "must be between 1 and 16"));
    }
    Ok(())
}
