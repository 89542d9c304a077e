//! SimHash: signed random projections (Charikar 2002).
//!
//! Each sub-hash is one bit, `sign(<r, x>)`, for a random direction `r`. For two vectors at
//! angle `theta` a bit collides with probability `1 - theta / pi`.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::buffer::CodeBuffer;
use super::hash_family::HashFamily;
use super::incidence::by_coordinate;
use super::mix::mix64;
use super::params::LshParams;
use super::shape::FamilyShape;
use crate::error::{Result, invalid};
use crate::vector::Vector;

/// How the random directions are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase", deny_unknown_fields)
)]
pub enum Projection {
    /// Sparse `±1` directions as in SLIDE: each direction reads `round(density * dim)`
    /// coordinates (at least one) chosen at random, each with a random sign. SLIDE's default
    /// is a density of 1/3. Cost per vector: `K * L * density` additions per nonzero entry.
    Sparse {
        /// Fraction of the input coordinates each direction reads, in `(0, 1]`.
        #[cfg_attr(feature = "serde", serde(default = "super::serde_defaults::density"))]
        density: f32,
    },
    /// Dense Gaussian directions: the textbook SimHash. Costs `K * L` multiply-adds per
    /// nonzero entry and `4 * K * L * dim` bytes.
    Gaussian,
}

/// Signed-random-projection hashing. Build with [`SimHash::new`].
///
/// The directions are stored input-major (for every coordinate, the directions that read it),
/// so a sparse input costs work proportional to its nonzeros and a dense input the same as
/// its nonzero count.
#[derive(Debug, Clone)]
pub struct SimHash {
    shape: FamilyShape,
    layout: Layout,
}

#[derive(Debug, Clone)]
enum Layout {
    /// CSR by coordinate; an entry is a direction index with the sign in the top bit.
    Sparse {
        offsets: Vec<u32>,
        entries: Vec<u32>,
    },
    /// `dim x (K * L)` row-major: row `d` holds every direction's `d`-th component. Used for
    /// Gaussian directions, and for sparse ones while the matrix has at most
    /// `DENSE_COLUMNS_MAX` entries (a scattered add per entry costs more than a dense,
    /// vectorised axpy at a density of 1/3).
    Columns { columns: Vec<f32> },
}

const SIGN_BIT: u32 = 1 << 31;
/// Largest `dim * K * L` for which sparse directions are expanded to a dense matrix (16 MB).
const DENSE_COLUMNS_MAX: usize = 1 << 22;

impl SimHash {
    /// Draws `K * L` directions for `dim`-dimensional inputs from `seed`.
    pub fn new(dim: usize, params: LshParams, projection: Projection, seed: u64) -> Result<Self> {
        let shape = FamilyShape::new(dim, params, 1, seed)?;
        let num_hashes = params.num_hashes();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ 0x0053_494d_4841_5348));
        let layout = match projection {
            Projection::Sparse { density } => {
                check_density(density)?;
                let per_direction = ((density as f64 * dim as f64).round() as usize).clamp(1, dim);
                let total = per_direction as u64 * num_hashes as u64;
                if total >= u64::from(u32::MAX) {
                    return Err(invalid(
                        "density",
                        density,
                        "K * L * density * dim must stay below 2^32 entries",
                    ));
                }
                // Partial Fisher-Yates over one persistent permutation: each direction takes
                // the first `per_direction` slots after shuffling them, in O(per_direction).
                let mut order: Vec<u32> = (0..dim as u32).collect();
                let mut pairs = Vec::with_capacity(total as usize);
                for direction in 0..num_hashes as u32 {
                    for slot in 0..per_direction {
                        let pick = rng.random_range(slot..dim);
                        order.swap(slot, pick);
                        let sign = if rng.random::<bool>() { SIGN_BIT } else { 0 };
                        pairs.push((order[slot], direction | sign));
                    }
                }
                if dim * num_hashes <= DENSE_COLUMNS_MAX {
                    // Small enough to expand: the same directions as a dense matrix of
                    // +-1 and 0, so each nonzero input costs one vectorised axpy.
                    let mut columns = vec![0.0f32; dim * num_hashes];
                    for &(d, entry) in &pairs {
                        let sign = if entry & SIGN_BIT != 0 { -1.0 } else { 1.0 };
                        columns[d as usize * num_hashes + (entry & !SIGN_BIT) as usize] = sign;
                    }
                    Layout::Columns { columns }
                } else {
                    let (offsets, entries) = by_coordinate(dim, &pairs);
                    Layout::Sparse { offsets, entries }
                }
            }
            Projection::Gaussian => {
                let len = dim
                    .checked_mul(num_hashes)
                    .filter(|&n| n < 1 << 34)
                    .ok_or_else(|| {
                        invalid("dim", dim, "dim * K * L Gaussian weights exceed 64 GiB")
                    })?;
                let mut columns = Vec::with_capacity(len);
                while columns.len() < len {
                    let (a, b) = standard_normal_pair(&mut rng);
                    columns.push(a);
                    if columns.len() < len {
                        columns.push(b);
                    }
                }
                Layout::Columns { columns }
            }
        };
        Ok(SimHash { shape, layout })
    }
}

/// Two independent standard normal samples (Box-Muller).
fn standard_normal_pair(rng: &mut Xoshiro256PlusPlus) -> (f32, f32) {
    // 1 - u keeps the logarithm's argument in (0, 1].
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    let radius = (-2.0 * u1.ln()).sqrt();
    let angle = std::f64::consts::TAU * u2;
    ((radius * angle.cos()) as f32, (radius * angle.sin()) as f32)
}

impl HashFamily for SimHash {
    fn shape(&self) -> &FamilyShape {
        &self.shape
    }

    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        x.validate(self.shape.dim())?;
        let num_hashes = self.shape.params().num_hashes();
        buf.acc.clear();
        buf.acc.resize(num_hashes, 0.0);
        let acc = &mut buf.acc[..];
        match &self.layout {
            Layout::Sparse { offsets, entries } => x.for_each_nonzero(|d, v| {
                let column = &entries[offsets[d] as usize..offsets[d + 1] as usize];
                for &entry in column {
                    // Flip the value's sign bit when the direction's sign bit is set.
                    let signed = f32::from_bits(v.to_bits() ^ (entry & SIGN_BIT));
                    acc[(entry & !SIGN_BIT) as usize] += signed;
                }
            }),
            Layout::Columns { columns } => x.for_each_nonzero(|d, v| {
                let row = &columns[d * num_hashes..(d + 1) * num_hashes];
                for (a, &r) in acc.iter_mut().zip(row) {
                    *a += v * r;
                }
            }),
        }
        buf.raw.clear();
        buf.raw.extend(buf.acc.iter().map(|&a| u32::from(a > 0.0)));
        Ok(&buf.raw)
    }
}

/// Sparse projections keep a share of the coordinates in (0, 1].
pub(crate) fn check_density(density: f32) -> Result<()> {
    if !(density > 0.0 && density <= 1.0) {
        return Err(invalid("density", density, "must be in (0, 1]"));
    }
    Ok(())
}
