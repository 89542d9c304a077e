//! Winner-take-all hashing (Yagnik et al. 2011) and its densified variant for sparse inputs
//! (Chen & Shrivastava 2018, used by SLIDE).
//!
//! Each of the `K * L` sub-hashes looks at one *bin*: a set of coordinates taken from random
//! permutations of the input. The sub-hash is the position, within the bin, of the largest
//! value. Only nonzero coordinates compete, so the dense and sparse representations of a
//! vector hash alike, and a bin with no nonzero coordinate is *empty*:
//!
//! * plain WTA gives an empty bin the code 0, so sparse vectors collide spuriously;
//! * densified WTA (DWTA) lets an empty bin borrow the code of a non-empty one through a
//!   seeded probe sequence (optimal densification), so even a vector with a handful of
//!   nonzeros in a huge dimension gets informative codes.
//!
//! Bins hold `bin_size` coordinates, or more when `K * L * bin_size` is smaller than the
//! input dimension: every coordinate belongs to at least one bin, which is what guarantees a
//! nonzero vector at least one non-empty bin. With larger bins the position is reduced to its
//! low `log2(bin_size)` bits when codes are concatenated.

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;

use super::buffer::CodeBuffer;
use super::densify::{EMPTY, densify};
use super::hash_family::{HashFamily, check_rows};
use super::incidence::by_coordinate;
use super::mix::mix64;
use super::params::LshParams;
use super::shape::FamilyShape;
use crate::error::{Result, invalid};
use crate::vector::Vector;

/// Whether empty bins are densified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WtaMode {
    /// Classic WTA: an empty bin's code is 0.
    Plain,
    /// DWTA: an empty bin borrows a non-empty bin's code.
    Densified,
}

/// WTA or DWTA hashing. Build with [`Wta::new`].
#[derive(Debug, Clone)]
pub struct Wta {
    shape: FamilyShape,
    mode: WtaMode,
    bin_size: usize,
    bin_len: usize,
    salt: u64,
    /// CSR by coordinate: the `(bin, position)` slots each coordinate occupies. Sparse
    /// inputs walk this: work proportional to their nonzeros.
    offsets: Vec<u32>,
    slots: Vec<Slot>,
    /// Position-major: `by_position[position * num_bins + b]` is the coordinate in that slot
    /// of bin `b`. Dense inputs walk this: one gather, then for each position a running
    /// maximum over all bins at once, which the compiler vectorises across bins.
    by_position: Vec<u32>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    bin: u32,
    position: u32,
}

impl Wta {
    /// Draws the bins for `dim`-dimensional inputs from `seed`. `bin_size` must be a power of
    /// two between 2 and 65,536 (SLIDE uses 8).
    pub fn new(
        dim: usize,
        params: LshParams,
        bin_size: usize,
        mode: WtaMode,
        seed: u64,
    ) -> Result<Self> {
        let shape = FamilyShape::new(dim, params, bin_size.trailing_zeros(), seed)?;
        check_bin_size(bin_size)?;
        let num_bins = params.num_hashes();
        let bin_len = bin_size.max(dim.div_ceil(num_bins));
        let total = num_bins as u64 * bin_len as u64;
        if total >= u64::from(u32::MAX) {
            return Err(invalid(
                "bin_size",
                bin_size,
                "K * L * bin_size must stay below 2^32",
            ));
        }
        let total = total as usize;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ 0x5754_4120_6269_6e73));
        let mut permutation: Vec<u32> = (0..dim as u32).collect();
        let mut pairs = Vec::with_capacity(total);
        // Concatenated permutations, cut into consecutive bins of `bin_len` slots. Since
        // `total >= dim`, the first permutation is used whole: every coordinate is in a bin.
        while pairs.len() < total {
            permutation.shuffle(&mut rng);
            for &d in permutation.iter().take(total - pairs.len()) {
                let s = pairs.len();
                let slot = Slot {
                    bin: (s / bin_len) as u32,
                    position: (s % bin_len) as u32,
                };
                pairs.push((d, slot));
            }
        }
        let mut by_position = vec![0u32; total];
        for &(d, slot) in &pairs {
            by_position[slot.position as usize * num_bins + slot.bin as usize] = d;
        }
        let (offsets, slots) = by_coordinate(dim, &pairs);
        Ok(Wta {
            shape,
            mode,
            bin_size,
            bin_len,
            salt: mix64(seed ^ 0x6477_7461_2064_656e),
            offsets,
            slots,
            by_position,
        })
    }

    /// Whether this is WTA or DWTA.
    pub fn mode(&self) -> WtaMode {
        self.mode
    }

    /// Requested bin size.
    pub fn bin_size(&self) -> usize {
        self.bin_size
    }

    /// Coordinates actually in each bin (larger than `bin_size` for very wide inputs).
    pub fn bin_len(&self) -> usize {
        self.bin_len
    }
}

impl HashFamily for Wta {
    fn shape(&self) -> &FamilyShape {
        &self.shape
    }

    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        x.validate(self.shape.dim())?;
        let num_bins = self.shape.params().num_hashes();
        buf.aux.clear();
        buf.aux.resize(num_bins, EMPTY);
        match x {
            Vector::Dense(values) => {
                buf.acc.clear();
                buf.acc
                    .resize(self.by_position.len() + num_bins, f32::NEG_INFINITY);
                let (gathered, best) = buf.acc.split_at_mut(self.by_position.len());
                for (g, &d) in gathered.iter_mut().zip(&self.by_position) {
                    *g = values[d as usize];
                }
                for (position, row) in gathered.chunks_exact(num_bins).enumerate() {
                    let position = position as u32;
                    for ((b, w), &v) in best.iter_mut().zip(buf.aux.iter_mut()).zip(row) {
                        // Zeros do not compete; strictly greater keeps the lower position on
                        // ties. Written as selects so the loop vectorises across bins.
                        let v = if v != 0.0 { v } else { f32::NEG_INFINITY };
                        let better = v > *b;
                        *b = if better { v } else { *b };
                        *w = if better { position } else { *w };
                    }
                }
            }
            Vector::Sparse { .. } => {
                buf.acc.clear();
                buf.acc.resize(num_bins, f32::NEG_INFINITY);
                let (best, winner) = (&mut buf.acc[..], &mut buf.aux[..]);
                x.for_each_nonzero(|d, v| {
                    for slot in &self.slots[self.offsets[d] as usize..self.offsets[d + 1] as usize]
                    {
                        let b = slot.bin as usize;
                        // Ties go to the lower position, as in the dense path, so the result
                        // is independent of the order in which nonzeros arrive.
                        if v > best[b] || (v == best[b] && slot.position < winner[b]) {
                            best[b] = v;
                            winner[b] = slot.position;
                        }
                    }
                });
            }
        }
        buf.raw.resize(num_bins, 0);
        self.finish_raw(&buf.aux, &mut buf.raw);
        Ok(&buf.raw)
    }

    /// Hashes `LANES` rows at a time: their coordinates are transposed into a small
    /// coordinate-major block (zeros replaced by `-inf`, which never wins), so each bin's
    /// running maximum over its positions is one select per position for all the rows at
    /// once, kept in registers, where [`hash`](Self::hash) gathers every slot of every bin
    /// per row. Same codes, same ties (the lower position wins), same errors.
    fn hash_rows(
        &self,
        matrix: &[f32],
        row_stride: usize,
        count: usize,
        buf: &mut CodeBuffer,
        out: &mut [u32],
    ) -> Result<()> {
        check_rows(self, matrix, row_stride, count, out.len())?;
        let (dim, params) = (self.shape.dim(), self.shape.params());
        let (l, num_bins) = (params.l, params.num_hashes());
        buf.acc.resize(dim * LANES, f32::NEG_INFINITY);
        buf.aux.resize(num_bins * LANES, EMPTY);
        for (block, block_out) in out[..count * l].chunks_mut(LANES * l).enumerate() {
            let rows = block_out.len() / l;
            let columns = &mut buf.acc[..dim * LANES];
            let row = |lane: usize| &matrix[(block * LANES + lane) * row_stride..][..dim];
            for lane in 0..rows {
                Vector::Dense(row(lane)).validate(dim)?;
            }
            // Column-major (`columns[d * LANES + lane]`), a few coordinates of every lane at
            // a time: the stores of one such part stay in the L1 cache (all of a block's
            // columns, 64 KB at 1,024 coordinates, do not). Lane by lane over all of them, a
            // row of 1,024 took 2.06 microseconds to hash on one core; this way 1.31.
            for (part, out) in columns.chunks_mut(COORDINATES_PER_PART * LANES).enumerate() {
                let first = part * COORDINATES_PER_PART;
                for lane in 0..LANES {
                    let lane_out = out[lane..].iter_mut().step_by(LANES);
                    if lane >= rows {
                        lane_out.for_each(|c| *c = f32::NEG_INFINITY);
                        continue;
                    }
                    for (c, &v) in lane_out.zip(&row(lane)[first..]) {
                        *c = if v != 0.0 { v } else { f32::NEG_INFINITY };
                    }
                }
            }
            let columns = &buf.acc[..dim * LANES];
            // Winners bin-major (`aux[b * LANES + lane]`), so that the combination below
            // reads each sub-hash of all lanes at once.
            let mut empty = [false; LANES];
            for b in 0..num_bins {
                let mut best = [f32::NEG_INFINITY; LANES];
                let mut winner = [EMPTY; LANES];
                for position in 0..self.bin_len {
                    let d = self.by_position[position * num_bins + b] as usize;
                    let column: &[f32; LANES] = columns[d * LANES..][..LANES]
                        .try_into()
                        .expect("a column holds LANES values");
                    for lane in 0..LANES {
                        let better = column[lane] > best[lane];
                        best[lane] = if better { column[lane] } else { best[lane] };
                        winner[lane] = if better {
                            position as u32
                        } else {
                            winner[lane]
                        };
                    }
                }
                for lane in 0..LANES {
                    empty[lane] |= winner[lane] == EMPTY;
                }
                buf.aux[b * LANES..(b + 1) * LANES].copy_from_slice(&winner);
            }
            // Empty bins (rare in dense rows: all of a bin's coordinates zero) are filled
            // lane by lane, as `hash` fills them.
            for lane in (0..rows).filter(|&lane| empty[lane]) {
                buf.raw.clear();
                buf.raw
                    .extend((0..num_bins).map(|b| buf.aux[b * LANES + lane]));
                buf.codes.resize(num_bins, 0);
                self.finish_raw(&buf.raw, &mut buf.codes);
                for (b, &r) in buf.codes.iter().enumerate() {
                    buf.aux[b * LANES + lane] = r;
                }
            }
            self.shape.combiner().combine_lanes::<LANES>(
                &buf.aux[..num_bins * LANES],
                rows,
                block_out,
            );
        }
        Ok(())
    }
}

/// Rows [`Wta::hash_rows`] hashes together, one per lane of its running maxima.
const LANES: usize = 16;

/// Coordinates of every lane that [`Wta::hash_rows`] writes into its columns at a time (2 KB
/// of f32 columns; 16, 64 and 128 were no faster).
const COORDINATES_PER_PART: usize = 32;

impl Wta {
    /// Raw sub-hashes from each bin's winning position (`EMPTY` for an empty bin).
    fn finish_raw(&self, winners: &[u32], raw: &mut [u32]) {
        match self.mode {
            WtaMode::Plain => {
                for (r, &w) in raw.iter_mut().zip(winners) {
                    *r = if w == EMPTY { 0 } else { w };
                }
            }
            WtaMode::Densified => densify(winners, raw, self.salt),
        }
    }
}

/// Bins hold a power of two of coordinates, 2 to 65536.
pub(crate) fn check_bin_size(bin_size: usize) -> Result<()> {
    if !(2..=1 << 16).contains(&bin_size) || !bin_size.is_power_of_two() {
        return Err(invalid(
            "bin_size",
            bin_size,
            "must be a power of two in 2..=65536",
        ));
    }
    Ok(())
}
