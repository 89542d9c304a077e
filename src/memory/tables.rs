//! Hash tables over a memory's units: SLIDE's selection, for data where the feature-major
//! walk is costly (dense inputs, whose every feature is shared by most units).

use slide_lsh::{
    BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, TablesConfig, Vector,
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
}

/// The family and the tables, built once from the units (rebuilt when a saved memory is
/// read).
#[derive(Debug)]
pub(super) struct UnitTables {
    family: LshFamily,
    tables: HashTables,
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
        let bits = lsh.family.bits_per_code()?;
        let tuned = slide_lsh::tune_for_budget(units.rows(), lsh.budget, bits)?;
        let family = LshFamily::new(lsh.family, input_dim, tuned.params, 0x6d65_6d6f_7279)?;
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
            let codes = family.hash(Vector::Sparse { indices, values }, &mut buf)?;
            tables.insert(unit as u32, codes)?;
        }
        Ok(UnitTables { family, tables })
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
