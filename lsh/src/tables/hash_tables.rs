//! [`HashTables`]: `L` tables over ids `0..num_ids`, with inserts and the checks of ids,
//! codes and families that every entry point shares. Rebuilds, statistics and checkpoint
//! state add their methods in their own files.

use std::sync::Mutex;

use rayon::prelude::*;

use super::config::TablesConfig;
use super::table::{Table, table_rng};
use crate::error::{LshError, Result};
use crate::family::{CodeBuffer, HashFamily};

/// `L` bucketed hash tables over ids `0..num_ids`. See the [`tables`](crate::tables) module
/// documentation.
#[derive(Debug)]
pub struct HashTables {
    pub(super) config: TablesConfig,
    pub(super) generation: u64,
    pub(super) tables: Vec<Table>,
    /// Every id's bucket codes from the last rebuild (`num_ids * L`, rounded up to whole
    /// blocks of `ROWS_PER_TASK` ids; table-major within a block).
    pub(super) all_codes: Vec<u32>,
    /// Whether `all_codes` holds every id's codes from a rebuild (and the tables were built
    /// from them): what [`rebuild_changed_filled`](Self::rebuild_changed_filled) needs.
    pub(super) codes_kept: bool,
    /// Ids the last rebuild hashed (see [`TablesStats::rehashed_ids`](crate::TablesStats)).
    pub(super) rehashed_ids: usize,
    /// One hashing buffer per worker thread of the pool that runs the rebuild.
    pub(super) code_buffers: Vec<Mutex<CodeBuffer>>,
}

impl HashTables {
    /// Empty tables.
    pub fn new(config: TablesConfig) -> Result<Self> {
        config.validate()?;
        let tables = (0..config.l)
            .map(|t| Table::new(1 << config.range_pow, table_rng(config.seed, t, 0)))
            .collect();
        Ok(HashTables {
            config,
            generation: 0,
            tables,
            all_codes: Vec::new(),
            codes_kept: false,
            rehashed_ids: 0,
            code_buffers: Vec::new(),
        })
    }

    /// The configuration the tables were built with.
    pub fn config(&self) -> &TablesConfig {
        &self.config
    }

    /// Number of tables, `L`.
    pub fn num_tables(&self) -> usize {
        self.config.l
    }

    /// Ids are below this.
    pub fn num_ids(&self) -> usize {
        self.config.num_ids
    }

    /// The ids in bucket `code` of table `table`. Panics if either is out of range, like
    /// slice indexing.
    pub fn bucket(&self, table: usize, code: u32) -> &[u32] {
        self.tables[table].bucket(code)
    }

    /// Removes every id. Reservoir choices after a clear differ from those before it (the
    /// generation counter advances) but are still fixed by the seed.
    pub fn clear(&mut self) {
        self.generation += 1;
        let (seed, generation) = (self.config.seed, self.generation);
        for (t, table) in self.tables.iter_mut().enumerate() {
            table.clear(table_rng(seed, t, generation));
        }
    }

    /// Inserts one id, whose `L` bucket codes (one per table) are `codes`.
    pub fn insert(&mut self, id: u32, codes: &[u32]) -> Result<()> {
        self.check_ids(std::slice::from_ref(&id))?;
        self.check_codes(codes, 1)?;
        let (capacity, policy) = (self.config.bucket_capacity as u16, self.config.policy);
        for (table, &code) in self.tables.iter_mut().zip(codes) {
            table.insert(code, id, capacity, policy);
            table.compact_if_wasteful();
        }
        Ok(())
    }

    /// Inserts many ids; `codes` holds `L` codes per id, id-major (`codes[i * L + t]`).
    /// Tables are filled in parallel; each table receives the ids in the order given, so the
    /// result does not depend on the number of threads.
    pub fn insert_many(&mut self, ids: &[u32], codes: &[u32]) -> Result<()> {
        self.check_ids(ids)?;
        self.check_codes(codes, ids.len())?;
        self.insert_unchecked(ids.iter().copied(), codes);
        self.tables
            .par_iter_mut()
            .for_each(Table::compact_if_wasteful);
        Ok(())
    }

    fn insert_unchecked(
        &mut self,
        ids: impl Iterator<Item = u32> + Clone + Send + Sync,
        codes: &[u32],
    ) {
        let (l, capacity, policy) = (
            self.config.l,
            self.config.bucket_capacity as u16,
            self.config.policy,
        );
        self.tables
            .par_iter_mut()
            .enumerate()
            .for_each(|(t, table)| {
                for (i, id) in ids.clone().enumerate() {
                    table.insert(codes[i * l + t], id, capacity, policy);
                }
            });
    }

    pub(crate) fn check_family<F: HashFamily + ?Sized>(&self, family: &F) -> Result<()> {
        let p = family.params();
        if p.l != self.config.l || p.range_pow != self.config.range_pow {
            return Err(LshError::FamilyMismatch {
                family_tables: p.l,
                family_range_pow: p.range_pow,
                tables: self.config.l,
                range_pow: self.config.range_pow,
            });
        }
        Ok(())
    }

    pub(crate) fn check_ids(&self, ids: &[u32]) -> Result<()> {
        match ids.iter().find(|&&id| id as usize >= self.config.num_ids) {
            Some(&id) => Err(LshError::IdOutOfRange {
                id,
                num_ids: self.config.num_ids,
            }),
            None => Ok(()),
        }
    }

    /// `codes` must hold `L` codes for each of `count` ids, each below `2^range_pow`.
    pub(crate) fn check_codes(&self, codes: &[u32], count: usize) -> Result<()> {
        let l = self.config.l;
        if codes.len() != l * count {
            return Err(LshError::CodeCountMismatch {
                expected: l * count,
                actual: codes.len(),
            });
        }
        let limit = 1u64 << self.config.range_pow;
        match codes.iter().position(|&c| u64::from(c) >= limit) {
            Some(i) => Err(LshError::CodeOutOfRange {
                code: codes[i],
                table: i % l,
                range_pow: self.config.range_pow,
            }),
            None => Ok(()),
        }
    }
}
