//! Hash tables over a memory's units: SLIDE's selection, for data where the feature-major
//! walk is costly (dense inputs, whose every feature is shared by most units).

use slide_lsh::{
    BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, LshParams,
    TablesConfig, Tuned, Vector,
};

use super::Compressed;
use crate::error::Result;

/// Where a memory's tables come from: a hash family and the number of candidates a query
/// should find (`K`, `L`, the buckets and their capacity are tuned from it and the number
/// of units). In TOML: `[memory.lsh] family = { simhash = "gaussian" }`, `budget = 512`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct MemoryLsh {
    /// Hash family over the units' weights (IDF-weighted, unit length).
    pub family: FamilyKind,
    /// Candidates a query should find (about): each is then scored exactly.
    pub budget: usize,
    /// Compute only this many of the candidates, those found in the most tables (SLIDE's
    /// top-k by frequency), instead of all of them (`None`). A candidate's weights are a
    /// row of the memory, read from main memory at random: computing them, not finding
    /// them, is what a query through the tables spends its time on.
    #[cfg_attr(feature = "serde", serde(default))]
    pub rescore: Option<usize>,
}

/// Seed of a memory's hash family.
const SEED: u64 = 0x6d65_6d6f_7279;

/// Tables whose buckets are counted to tune a weighted MinHash memory.
const PROBE_TABLES: usize = 8;

/// Most tables a weighted MinHash memory takes.
const MAX_WEIGHTED_TABLES: usize = 256;

/// `K`, `L`, `range_pow` and the bucket capacity of weighted MinHash tables over `units`
/// for a query to find about `budget` units. A sub-hash is one of a unit's features, so
/// a table is one code per feature (`K = 1`, `range_pow` the bits of a feature: codes are
/// the features themselves), and the buckets are as uneven as the features' frequencies.
/// A query drawn like the units meets, per table, a bucket of `sum n_f^2 / n` units on
/// average (`n_f` units won by feature `f`, `n` units), counted in [`PROBE_TABLES`] first
/// tables over all units (one table is a noisy count: a common feature whose draw is
/// small wins most of its units); `L` is the budget over that. A bucket keeps at most
/// `budget` units (and at most 2^31 slots per table).
fn tune_weighted(units: &Compressed, input_dim: usize, budget: usize) -> Result<Tuned> {
    let probes = LshParams {
        k: 1,
        l: PROBE_TABLES,
        range_pow: 1,
    };
    let probe = LshFamily::new(FamilyKind::WeightedMinHash, input_dim, probes, SEED)?;
    let range_pow = probe.bits_per_code().min(slide_lsh::family::MAX_RANGE_POW);
    let mut won = vec![0u64; input_dim * PROBE_TABLES];
    let mut buf = CodeBuffer::new();
    for unit in 0..units.rows() {
        let (indices, values) = units.row(unit);
        if indices.is_empty() {
            continue;
        }
        let raw = probe.raw_hashes(Vector::Sparse { indices, values }, &mut buf)?;
        for (table, &feature) in raw.iter().enumerate() {
            won[feature as usize * PROBE_TABLES + table] += 1;
        }
    }
    let n = (units.rows().max(1) * PROBE_TABLES) as f64;
    let met = won.iter().map(|&c| (c * c) as f64).sum::<f64>() / n;
    // The family keeps a draw per feature and table: at most WEIGHTED_MAX_DRAWS of them.
    let most = MAX_WEIGHTED_TABLES.min(slide_lsh::family::WEIGHTED_MAX_DRAWS / input_dim.max(1));
    let l = ((budget as f64 / met.max(1.0)).round() as usize).clamp(1, most.max(1));
    Ok(Tuned {
        params: LshParams { k: 1, l, range_pow },
        // The tables hold at most 2^31 slots each.
        bucket_capacity: budget.clamp(1, (u16::MAX as usize).min(1 << (31 - range_pow))),
    })
}

/// The family and the tables, built once from the units (rebuilt when a saved memory is
/// read).
#[derive(Debug)]
pub(super) struct UnitTables {
    family: LshFamily,
    tables: HashTables,
    rescore: Option<usize>,
}

impl PartialEq for UnitTables {
    /// Tables are derived from the units and the settings, which their owners compare;
    /// here only their shape.
    fn eq(&self, other: &Self) -> bool {
        self.tables.config() == other.tables.config()
    }
}

impl UnitTables {
    /// Hashes every unit of `units` (`input_dim` features) into tables tuned for `lsh`.
    pub(super) fn build(units: &Compressed, input_dim: usize, lsh: MemoryLsh) -> Result<Self> {
        let tuned = match lsh.family {
            FamilyKind::WeightedMinHash => tune_weighted(units, input_dim, lsh.budget)?,
            kind => slide_lsh::tune_for_budget(units.rows(), lsh.budget, kind.bits_per_code()?)?,
        };
        let family = LshFamily::new(lsh.family, input_dim, tuned.params, SEED)?;
        let mut tables = HashTables::new(TablesConfig::for_family(
            tuned.params,
            units.rows(),
            tuned.bucket_capacity,
            BucketPolicy::Reservoir,
            1,
        ))?;
        let mut buf = CodeBuffer::for_family(&family);
        for unit in 0..units.rows() {
            let (indices, values) = units.row(unit);
            // A unit without features (all of its sample's features weighed 0) would hash
            // as the zero vector, into one bucket per table that every such query reads.
            if indices.is_empty() {
                continue;
            }
            let codes = family.hash(Vector::Sparse { indices, values }, &mut buf)?;
            tables.insert(unit as u32, codes)?;
        }
        Ok(UnitTables {
            family,
            tables,
            rescore: lsh.rescore,
        })
    }

    /// How many candidates are computed (`None`: all).
    pub(super) fn rescore(&self) -> Option<usize> {
        self.rescore
    }

    /// `K`, `L` and `range_pow` of the tables.
    pub(super) fn params(&self) -> LshParams {
        self.family.params()
    }

    /// Calls `found` with every unit in the buckets of `query` (repeats included).
    pub(super) fn candidates(
        &self,
        indices: &[u32],
        values: &[f32],
        buf: &mut CodeBuffer,
        mut found: impl FnMut(u32),
    ) -> Result<()> {
        let codes = self.family.hash(Vector::Sparse { indices, values }, buf)?;
        for (table, &code) in codes.iter().enumerate() {
            self.tables
                .bucket(table, code)
                .iter()
                .for_each(|&u| found(u));
        }
        Ok(())
    }
}
