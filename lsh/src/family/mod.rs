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

mod minhash;
mod simhash;
mod weighted;
mod wta;

pub use minhash::DophMinHash;
pub use simhash::{Projection, SimHash};
pub use weighted::{MAX_DRAWS as WEIGHTED_MAX_DRAWS, WeightedMinHash};
pub use wta::{Wta, WtaMode};

use crate::error::{Result, invalid};
use crate::vector::Vector;

/// Largest supported `range_pow`: codes are `u32` and tables allocate `2^range_pow` buckets.
pub const MAX_RANGE_POW: u32 = 30;
/// Largest supported `L`: per-id hit counts are kept in `u16` with one value reserved.
pub const MAX_TABLES: usize = u16::MAX as usize - 1;

/// The shape shared by every family: `K` sub-hashes per table, `L` tables, and
/// `2^range_pow` buckets per table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub struct LshParams {
    /// Sub-hashes concatenated into one bucket code (`K`).
    pub k: usize,
    /// Number of tables (`L`).
    pub l: usize,
    /// Bucket codes are below `2^range_pow`.
    pub range_pow: u32,
}

impl LshParams {
    /// Checks the ranges: `K >= 1`, `1 <= L <= MAX_TABLES`, `1 <= range_pow <= MAX_RANGE_POW`
    /// and `K * L` below `2^24` (the number of sub-hashes computed per vector).
    pub fn validate(&self) -> Result<()> {
        if self.k == 0 {
            return Err(invalid("k", self.k, "must be at least 1"));
        }
        if self.l == 0 || self.l > MAX_TABLES {
            return Err(invalid("l", self.l, "must be between 1 and 65534"));
        }
        if self.range_pow == 0 || self.range_pow > MAX_RANGE_POW {
            return Err(invalid(
                "range_pow",
                self.range_pow,
                "must be between 1 and 30",
            ));
        }
        if self.k.saturating_mul(self.l) >= 1 << 24 {
            return Err(invalid("k * l", self.k * self.l, "must be below 2^24"));
        }
        Ok(())
    }

    /// Number of raw sub-hashes per vector, `K * L`.
    pub fn num_hashes(&self) -> usize {
        self.k * self.l
    }
}

/// Reusable per-thread scratch for hashing, plus the results of the last call.
///
/// Sized on first use; afterwards hashing with the same family allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct CodeBuffer {
    pub(crate) raw: Vec<u32>,
    pub(crate) codes: Vec<u32>,
    pub(crate) acc: Vec<f32>,
    pub(crate) aux: Vec<u32>,
    /// Codes of a block of rows during a table rebuild.
    pub(crate) rows: Vec<u32>,
    /// A block of rows written out as f32 during a rebuild from another format.
    pub(crate) matrix: Vec<f32>,
}

impl CodeBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer already sized for `family`: hashing with it never allocates, even the first
    /// time. (It hashes the zero vector once, which exercises the largest scratch a family
    /// uses.)
    pub fn for_family<F: HashFamily + ?Sized>(family: &F) -> Self {
        let mut buffer = CodeBuffer::new();
        let zeros = vec![0.0f32; family.dim()];
        family
            .hash(Vector::Dense(&zeros), &mut buffer)
            .expect("the zero vector of the family's dimension is valid input");
        buffer
    }

    /// The `L` bucket codes of the last [`HashFamily::hash`] call.
    pub fn codes(&self) -> &[u32] {
        &self.codes
    }

    /// The `K * L` raw sub-hashes of the last call, table-major (`raw[t * K + j]`).
    pub fn raw(&self) -> &[u32] {
        &self.raw
    }
}

/// A locality-sensitive hash family over vectors of a fixed dimension.
///
/// Implementations are immutable after construction and `Sync`, so one family serves every
/// thread; each thread brings its own [`CodeBuffer`].
pub trait HashFamily: Send + Sync {
    /// Input dimension.
    fn dim(&self) -> usize;
    /// `K`, `L` and `range_pow`.
    fn params(&self) -> LshParams;
    /// Bits each raw sub-hash contributes to an exactly concatenated bucket code.
    fn bits_per_code(&self) -> u32;
    /// Computes the `K * L` raw sub-hashes of `x` into `buf` and returns them.
    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]>;
    /// Computes the `L` bucket codes of `x` (each below `2^range_pow`) and returns them.
    fn hash<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]>;
    /// The bucket codes of `count` dense rows, row `r` being
    /// `matrix[r * row_stride..][..dim]`, written row after row into `out[..count * L]`:
    /// the same codes as [`hash`](Self::hash) gives each row, and the same error for the
    /// first invalid row. Families override it where hashing rows together is faster (WTA
    /// and DWTA hash 16 rows at a time, one per SIMD lane); a table rebuild goes through it.
    fn hash_rows(
        &self,
        matrix: &[f32],
        row_stride: usize,
        count: usize,
        buf: &mut CodeBuffer,
        out: &mut [u32],
    ) -> Result<()> {
        check_rows(self, matrix, row_stride, count, out.len())?;
        let (dim, l) = (self.dim(), self.params().l);
        for (r, codes) in out.chunks_exact_mut(l).take(count).enumerate() {
            let row = &matrix[r * row_stride..][..dim];
            codes.copy_from_slice(self.hash(Vector::Dense(row), buf)?);
        }
        Ok(())
    }
}

/// The shape checks of [`HashFamily::hash_rows`]: the stride holds a row, `matrix` holds
/// `count` rows and `out` their codes.
pub(crate) fn check_rows<F: HashFamily + ?Sized>(
    family: &F,
    matrix: &[f32],
    row_stride: usize,
    count: usize,
    out_len: usize,
) -> Result<()> {
    let dim = family.dim();
    if count == 0 {
        return Ok(());
    }
    let needed = (count - 1)
        .checked_mul(row_stride)
        .and_then(|n| n.checked_add(dim));
    if row_stride < dim || needed.is_none_or(|n| n > matrix.len()) {
        return Err(crate::error::LshError::DimensionMismatch {
            expected: needed.unwrap_or(usize::MAX),
            actual: matrix.len(),
        });
    }
    if out_len < count.saturating_mul(family.params().l) {
        return Err(invalid(
            "out",
            out_len,
            "must hold the L codes of each of the count rows",
        ));
    }
    Ok(())
}

/// Which family to build, with its family-specific settings. In TOML (the `serde`
/// feature): `{ dwta = { bin_size = 8 } }`, `{ wta = { bin_size = 8 } }`,
/// `{ simhash = { sparse = { density = 0.33 } } }`, `{ simhash = "gaussian" }`,
/// `{ minhash = { bits = 3 } }` or `"weighted_minhash"`; a setting left out takes SLIDE's
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
        #[cfg_attr(feature = "serde", serde(default = "serde_defaults::bin_size"))]
        bin_size: usize,
    },
    /// Densified winner-take-all: empty bins of sparse inputs borrow another bin's winner.
    Dwta {
        /// Coordinates competing in one bin (a power of two, 2..=65536).
        #[cfg_attr(feature = "serde", serde(default = "serde_defaults::bin_size"))]
        bin_size: usize,
    },
    /// Densified one-permutation MinHash over the set of nonzero coordinates.
    MinHash {
        /// Bits of each bin's minimum kept in an exactly concatenated bucket code (1..=16).
        #[cfg_attr(feature = "serde", serde(default = "serde_defaults::bits"))]
        bits: u32,
    },
    /// Weighted MinHash by exponential races over the coordinates' squared values: for
    /// sparse inputs whose rare coordinates weigh more (IDF-weighted bags of words).
    #[cfg_attr(feature = "serde", serde(rename = "weighted_minhash"))]
    WeightedMinHash,
}

/// The values a family's setting takes when a config leaves it out (SLIDE's).
#[cfg(feature = "serde")]
pub(crate) mod serde_defaults {
    /// WTA and DWTA bins of 8 coordinates.
    pub(crate) fn bin_size() -> usize {
        8
    }
    /// MinHash codes of 3 bits.
    pub(crate) fn bits() -> u32 {
        3
    }
    /// Sparse SimHash reading a third of the coordinates.
    pub(crate) fn density() -> f32 {
        1.0 / 3.0
    }
}

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
    /// See [`WeightedMinHash`].
    WeightedMinHash(WeightedMinHash),
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
    /// [`HashFamily::bits_per_code`] of the built family returns, and what
    /// [`tune_for_budget`](crate::tune_for_budget) needs): 1 for SimHash, `log2(bin_size)`
    /// for WTA and DWTA, `bits` for MinHash; for weighted MinHash, whose sub-hash is a
    /// coordinate, 32 (the built family knows its input dimension and says
    /// `ceil(log2(dim))`), so tuning takes one sub-hash per table. Fails when the family's
    /// own settings are out of range (see [`validate`](Self::validate)).
    pub fn bits_per_code(&self) -> Result<u32> {
        match *self {
            FamilyKind::SimHash(Projection::Sparse { density }) => {
                simhash::check_density(density).map(|_| 1)
            }
            FamilyKind::SimHash(Projection::Gaussian) => Ok(1),
            FamilyKind::Wta { bin_size } | FamilyKind::Dwta { bin_size } => {
                wta::check_bin_size(bin_size).map(|_| bin_size.trailing_zeros())
            }
            FamilyKind::MinHash { bits } => minhash::check_bits(bits).map(|_| bits),
            FamilyKind::WeightedMinHash => Ok(32),
        }
    }
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
            FamilyKind::WeightedMinHash => {
                LshFamily::WeightedMinHash(WeightedMinHash::new(dim, params, seed)?)
            }
        })
    }

    fn inner(&self) -> &dyn HashFamily {
        match self {
            LshFamily::SimHash(f) => f,
            LshFamily::Wta(f) => f,
            LshFamily::MinHash(f) => f,
            LshFamily::WeightedMinHash(f) => f,
        }
    }
}

impl HashFamily for LshFamily {
    fn dim(&self) -> usize {
        self.inner().dim()
    }
    fn params(&self) -> LshParams {
        self.inner().params()
    }
    fn bits_per_code(&self) -> u32 {
        self.inner().bits_per_code()
    }
    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        self.inner().raw_hashes(x, buf)
    }
    fn hash<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        self.inner().hash(x, buf)
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

/// Turns `K * L` raw sub-hashes into `L` bucket codes (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Combiner {
    params: LshParams,
    bits: u32,
    exact: bool,
    salt: u64,
}

impl Combiner {
    pub(crate) fn new(params: LshParams, bits: u32, seed: u64) -> Self {
        let exact = (params.k as u64) * u64::from(bits) <= u64::from(params.range_pow);
        Combiner {
            params,
            bits,
            exact,
            salt: mix64(seed ^ 0x636f_6d62_696e_6572),
        }
    }

    /// Reads `buf.raw`, writes `buf.codes`.
    pub(crate) fn combine<'b>(&self, buf: &'b mut CodeBuffer) -> &'b [u32] {
        let LshParams { k, l, range_pow } = self.params;
        buf.codes.resize(l, 0);
        let raw = &buf.raw[..k * l];
        for (code, subs) in buf.codes.iter_mut().zip(raw.chunks_exact(k)) {
            *code = if self.exact {
                let mask = (1u32 << self.bits) - 1;
                subs.iter()
                    .enumerate()
                    .fold(0, |acc, (j, &s)| acc | (s & mask) << (j as u32 * self.bits))
            } else {
                let h = subs.iter().fold(self.salt, |h, &s| mix64(h ^ u64::from(s)));
                (h >> (64 - range_pow)) as u32
            };
        }
        // Tables differ in their sub-hashes, so equal raw values in two tables are unrelated;
        // folding with one salt for all tables is therefore enough.
        &buf.codes
    }

    /// [`combine`](Self::combine) for `rows` vectors at once: `raw[i * LANES + lane]` is
    /// sub-hash `i` of vector `lane`; the codes go row after row into `out` (`rows * L`).
    /// The same codes, computed a sub-hash at a time for all lanes, so the seeded mixing of
    /// 16 vectors runs side by side instead of as one chain per table.
    pub(crate) fn combine_lanes(&self, raw: &[u32], rows: usize, out: &mut [u32]) {
        use wta::LANES;
        let LshParams { k, l, range_pow } = self.params;
        debug_assert!(raw.len() >= k * l * LANES && out.len() >= rows * l && rows <= LANES);
        for t in 0..l {
            let subs = |j: usize| -> &[u32; LANES] {
                raw[(t * k + j) * LANES..][..LANES]
                    .try_into()
                    .expect("a sub-hash holds LANES values")
            };
            let mut codes = [0u32; LANES];
            if self.exact {
                let mask = (1u32 << self.bits) - 1;
                for j in 0..k {
                    let s = subs(j);
                    for lane in 0..LANES {
                        codes[lane] |= (s[lane] & mask) << (j as u32 * self.bits);
                    }
                }
            } else {
                let mut h = [self.salt; LANES];
                for j in 0..k {
                    let s = subs(j);
                    for lane in 0..LANES {
                        h[lane] = mix64(h[lane] ^ u64::from(s[lane]));
                    }
                }
                for lane in 0..LANES {
                    codes[lane] = (h[lane] >> (64 - range_pow)) as u32;
                }
            }
            for (lane, &code) in codes.iter().enumerate().take(rows) {
                out[lane * l + t] = code;
            }
        }
    }
}

/// Marks a bin that no nonzero coordinate reached.
pub(crate) const EMPTY: u32 = u32::MAX;

/// Optimal densification (Shrivastava, ICML 2017): every empty bin `i` probes bins
/// `h(i, 1), h(i, 2), ...` of a seeded hash sequence shared by all vectors, and copies the
/// first non-empty bin's value. Two vectors therefore agree on a densified bin exactly when
/// they agree on the bin it borrowed from, which keeps the collision probability of the
/// underlying scheme. After `8 * H` failed probes (probability below `e^-8` even with a single
/// non-empty bin) the next non-empty bin in index order is taken, which is just as
/// deterministic. If every bin is empty (the zero vector) all values become 0.
pub(crate) fn densify(original: &[u32], out: &mut [u32], salt: u64) {
    let h = original.len();
    debug_assert_eq!(h, out.len());
    if original.iter().all(|&v| v == EMPTY) {
        out.fill(0);
        return;
    }
    let max_probes = 8 * h as u64;
    for (i, slot) in out.iter_mut().enumerate() {
        if original[i] != EMPTY {
            *slot = original[i];
            continue;
        }
        let mut value = EMPTY;
        for probe in 1..=max_probes {
            let j = reduce(mix64(salt ^ ((i as u64) << 32 | probe)), h);
            if original[j] != EMPTY {
                value = original[j];
                break;
            }
        }
        if value == EMPTY {
            value = (1..h)
                .map(|step| original[(i + step) % h])
                .find(|&v| v != EMPTY)
                .unwrap_or(0);
        }
        *slot = value;
    }
}

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

/// Builds an input-major incidence list: for each coordinate `d`, the entries that read it.
/// `pairs` holds `(coordinate, entry)`; the result is CSR offsets (`dim + 1`) and entries,
/// each coordinate's entries in the order they were given.
pub(crate) fn by_coordinate<T: Copy + Default>(
    dim: usize,
    pairs: &[(u32, T)],
) -> (Vec<u32>, Vec<T>) {
    let mut offsets = vec![0u32; dim + 1];
    for &(d, _) in pairs {
        offsets[d as usize + 1] += 1;
    }
    for d in 0..dim {
        offsets[d + 1] += offsets[d];
    }
    let mut cursor = offsets.clone();
    let mut entries = vec![T::default(); pairs.len()];
    for &(d, entry) in pairs {
        let at = &mut cursor[d as usize];
        entries[*at as usize] = entry;
        *at += 1;
    }
    (offsets, entries)
}

/// Common argument checks for a family's constructor.
pub(crate) fn check_dim(dim: usize) -> Result<()> {
    if dim == 0 || dim > u32::MAX as usize {
        return Err(invalid("dim", dim, "must be between 1 and 2^32 - 1"));
    }
    Ok(())
}
