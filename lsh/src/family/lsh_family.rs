//! [`LshFamily`]: any of the crate's families behind one type, built from a
//! [`FamilyKind`].

use super::buffer::CodeBuffer;
use super::hash_family::HashFamily;
use super::kind::FamilyKind;
use super::minhash::DophMinHash;
use super::params::LshParams;
use super::shape::FamilyShape;
use super::simhash::SimHash;
use super::wta::{Wta, WtaMode};
use crate::error::Result;
use crate::vector::Vector;

/// Any of the crate's families behind one type, so a layer can hold "some LSH family"
/// chosen from a config without generics or trait objects.
#[derive(Debug, Clone)]
pub enum LshFamily {
    /// See [`SimHash`].
    SimHash(SimHash),
    /// See [`Wta`] (both WTA and DWTA).
    Wta(Wta),
    /// See [`DophMinHash`].
    MinHash(DophMinHash),
}

impl LshFamily {
    /// Builds the family `kind` for `dim`-dimensional inputs; the same seed gives the same
    /// family.
    pub fn new(kind: FamilyKind, dim: usize, params: LshParams, seed: u64) -> Result<Self> {
        Ok(match kind {
            FamilyKind::SimHash(projection) => {
                LshFamily::SimHash(SimHash::new(dim, params, projection, seed)?)
            }
            FamilyKind::Wta { bin_size } => {
                LshFamily::Wta(Wta::new(dim, params, bin_size, WtaMode::Plain, seed)?)
            }
            FamilyKind::Dwta { bin_size } => {
                LshFamily::Wta(Wta::new(dim, params, bin_size, WtaMode::Densified, seed)?)
            }
            FamilyKind::MinHash { bits } => {
                LshFamily::MinHash(DophMinHash::new(dim, params, bits, seed)?)
            }
        })
    }

    fn inner(&self) -> &dyn HashFamily {
        match self {
            LshFamily::SimHash(f) => f,
            LshFamily::Wta(f) => f,
            LshFamily::MinHash(f) => f,
        }
    }
}

impl HashFamily for LshFamily {
    fn shape(&self) -> &FamilyShape {
        self.inner().shape()
    }
    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        self.inner().raw_hashes(x, buf)
    }
    fn hash_rows(
        &self,
        matrix: &[f32],
        row_stride: usize,
        count: usize,
        buf: &mut CodeBuffer,
        out: &mut [u32],
    ) -> Result<()> {
        self.inner().hash_rows(matrix, row_stride, count, buf, out)
    }
}
