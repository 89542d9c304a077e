//! Querying the tables: candidate retrieval with hit counts, and the sampling strategies
//! that turn candidates into an active set.

use rand::{Rng, RngExt};

use crate::error::{Result, invalid};
use crate::tables::HashTables;

/// How candidates become the active set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub enum Strategy {
    /// The union of the query's `L` buckets. With a budget, tables are visited from a random
    /// starting table and retrieval stops once the budget is reached (SLIDE's "vanilla"
    /// sampling, the cheapest).
    Vanilla,
    /// The `k` candidates found in the most tables (ties: the first retrieved).
    TopK {
        /// How many to keep.
        k: usize,
    },
    /// Candidates found in at least `min_hits` of the `L` tables. With a budget, the budget's
    /// worth with the most hits.
    Threshold {
        /// Tables a candidate must be found in.
        min_hits: u16,
    },
}

/// A sampling strategy with its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub struct Sampling {
    /// The rule that selects among candidates.
    pub strategy: Strategy,
    /// Most ids the strategy selects (forced ids and random fill come on top). Ignored by
    /// [`Strategy::TopK`], whose `k` is its budget.
    pub budget: Option<usize>,
    /// If fewer ids than this are selected (forced ids included), uniformly random other ids
    /// are added until there are this many (or every id is active).
    pub min_active: usize,
    /// This many further uniformly random ids, drawn after the selection and the fill from
    /// the ids not yet chosen (fewer only if every id is then active). Together with the
    /// fill they are a uniform sample of everything the forced ids and the strategy left
    /// out, which is what a sampled-softmax correction for the rest of the outputs needs.
    pub random_extra: usize,
}

impl Sampling {
    /// Union of buckets, no limits.
    pub fn vanilla() -> Self {
        Sampling {
            strategy: Strategy::Vanilla,
            budget: None,
            min_active: 0,
            random_extra: 0,
        }
    }

    /// The `k` most frequent candidates.
    pub fn top_k(k: usize) -> Self {
        Sampling {
            strategy: Strategy::TopK { k },
            budget: None,
            min_active: 0,
            random_extra: 0,
        }
    }

    /// Candidates found in at least `min_hits` tables.
    pub fn threshold(min_hits: u16) -> Self {
        Sampling {
            strategy: Strategy::Threshold { min_hits },
            budget: None,
            min_active: 0,
            random_extra: 0,
        }
    }

    /// The same strategy with a budget.
    pub fn with_budget(self, budget: usize) -> Self {
        Sampling {
            budget: Some(budget),
            ..self
        }
    }

    /// The same strategy with random fill up to `min_active` ids.
    pub fn with_min_active(self, min_active: usize) -> Self {
        Sampling { min_active, ..self }
    }

    /// The same strategy with `random_extra` uniformly random ids on top of everything else.
    pub fn with_random_extra(self, random_extra: usize) -> Self {
        Sampling {
            random_extra,
            ..self
        }
    }

    /// Whether the strategy takes anything from the tables: not with a budget of 0 (except
    /// [`Strategy::TopK`], whose `k` is at least 1). A sampling that does not (uniform
    /// sampling: forced ids and random ids only) needs neither hash codes nor built tables.
    pub fn uses_tables(&self) -> bool {
        matches!(self.strategy, Strategy::TopK { .. }) || self.budget != Some(0)
    }

    /// Checks the values against tables with `l` tables.
    pub fn validate(&self, l: usize) -> Result<()> {
        match self.strategy {
            Strategy::TopK { k: 0 } => return Err(invalid("k", 0, "must be at least 1")),
            Strategy::Threshold { min_hits } if min_hits == 0 || min_hits as usize > l => {
                return Err(invalid("min_hits", min_hits, "must be between 1 and L"));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Where the ids of one active set came from (see [`HashTables::sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleCounts {
    /// Forced ids (e.g. the sample's labels).
    pub forced: usize,
    /// Ids the strategy selected from the tables' candidates.
    pub from_tables: usize,
    /// Uniformly random ids: the fill to `min_active` and the `random_extra` ids.
    pub random_fill: usize,
    /// Distinct candidates the visited buckets held (forced ids excluded), before the
    /// strategy's selection.
    pub candidates: usize,
}

/// Per-thread scratch for queries: a hit counter per id, cleared sparsely after every query,
/// and the candidate list. Once sized, queries allocate nothing.
#[derive(Debug, Clone, Default)]
pub struct QueryScratch {
    hits: Vec<u16>,
    candidates: Vec<u32>,
    histogram: Vec<u32>,
}

/// Marks an id already in the output.
const SELECTED: u16 = u16::MAX;

impl QueryScratch {
    /// Scratch for tables over `num_ids` ids.
    pub fn new(num_ids: usize) -> Self {
        QueryScratch {
            hits: vec![0; num_ids],
            candidates: Vec::new(),
            histogram: Vec::new(),
        }
    }

    /// Sizes the scratch for tables of `num_ids` ids and `l` tables whose buckets hold at
    /// most `capacity` ids: no query can list more than `min(l * capacity, num_ids)`
    /// candidates, so reserving that once keeps queries allocation-free.
    /// Scratch sized for `tables`: queries on them never allocate, even the first.
    pub fn for_tables(tables: &HashTables) -> Self {
        let mut scratch = QueryScratch::new(tables.num_ids());
        scratch.fit(
            tables.num_ids(),
            tables.num_tables(),
            tables.config().bucket_capacity,
        );
        scratch
    }

    fn fit(&mut self, num_ids: usize, l: usize, capacity: usize) {
        if self.hits.len() < num_ids {
            self.hits.resize(num_ids, 0);
        }
        let most = l.saturating_mul(capacity).min(num_ids);
        if self.candidates.capacity() < most {
            self.candidates.reserve(most - self.candidates.len());
        }
        self.histogram.clear();
        self.histogram.resize(l + 1, 0);
    }

    /// Restores the all-zero invariant for the ids this query touched.
    fn reset(&mut self, selected: &[u32]) {
        for &id in self.candidates.iter().chain(selected) {
            self.hits[id as usize] = 0;
        }
        self.candidates.clear();
    }
}

impl HashTables {
    /// The most ids [`sample`](Self::sample) can return with `forced` forced ids:
    /// `max(forced + min(selected, L * bucket_capacity), min_active) + random_extra`, at
    /// most `num_ids`, where `selected` is the strategy's budget (or `k`).
    pub fn max_sampled(&self, sampling: &Sampling, forced: usize) -> usize {
        let union = self
            .num_tables()
            .saturating_mul(self.config().bucket_capacity);
        let selected = match sampling.strategy {
            Strategy::TopK { k } => k.min(union),
            _ => sampling.budget.unwrap_or(usize::MAX).min(union),
        };
        forced
            .saturating_add(selected)
            .max(sampling.min_active)
            .saturating_add(sampling.random_extra)
            .min(self.num_ids())
    }

    /// The union of the buckets `codes` (one per table) with each id's hit count (the number
    /// of tables it was found in), in retrieval order (table 0 first).
    pub fn query(
        &self,
        codes: &[u32],
        scratch: &mut QueryScratch,
        out: &mut Vec<(u32, u16)>,
    ) -> Result<()> {
        self.check_codes(codes, 1)?;
        scratch.fit(
            self.num_ids(),
            self.num_tables(),
            self.config().bucket_capacity,
        );
        self.gather(codes, 0, usize::MAX, scratch);
        out.clear();
        out.extend(
            scratch
                .candidates
                .iter()
                .map(|&id| (id, scratch.hits[id as usize])),
        );
        scratch.reset(&[]);
        Ok(())
    }

    /// The active set for one query: `forced` ids first (e.g. a sample's true labels), then
    /// the ids `sampling` selects among the candidates of the buckets `codes`, then random
    /// fill up to `sampling.min_active`, then `sampling.random_extra` more random ids. Every
    /// id appears once. Deterministic for a given `rng` state. At most
    /// [`max_sampled`](Self::max_sampled) ids: an `out` with that capacity never reallocates.
    /// Returns how many ids came from each source. A sampling that takes nothing from the
    /// tables ([`Sampling::uses_tables`]) reads neither `codes` (which may be empty) nor the
    /// buckets.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        codes: &[u32],
        sampling: &Sampling,
        forced: &[u32],
        rng: &mut R,
        scratch: &mut QueryScratch,
        out: &mut Vec<u32>,
    ) -> Result<SampleCounts> {
        let tabled = sampling.uses_tables();
        if tabled {
            self.check_codes(codes, 1)?;
        }
        self.check_ids(forced)?;
        sampling.validate(self.num_tables())?;
        let l = self.num_tables();
        scratch.fit(self.num_ids(), l, self.config().bucket_capacity);
        out.clear();
        for &id in forced {
            if scratch.hits[id as usize] != SELECTED {
                scratch.hits[id as usize] = SELECTED;
                out.push(id);
            }
        }
        let forced_count = out.len();
        match sampling.strategy {
            _ if !tabled => {}
            Strategy::Vanilla => {
                let budget = sampling.budget.unwrap_or(usize::MAX);
                let first_table = if budget < usize::MAX {
                    rng.random_range(0..l)
                } else {
                    0
                };
                self.gather(codes, first_table, budget, scratch);
                let take = scratch.candidates.len().min(budget);
                for &id in &scratch.candidates[..take] {
                    scratch.hits[id as usize] = SELECTED;
                    out.push(id);
                }
            }
            Strategy::TopK { k } => {
                self.gather(codes, 0, usize::MAX, scratch);
                select_most_hits(scratch, 1, k, out);
            }
            Strategy::Threshold { min_hits } => {
                self.gather(codes, 0, usize::MAX, scratch);
                select_most_hits(
                    scratch,
                    min_hits,
                    sampling.budget.unwrap_or(usize::MAX),
                    out,
                );
            }
        }
        let candidates = scratch.candidates.len();
        let selected = out.len();
        let target = selected
            .max(sampling.min_active)
            .saturating_add(sampling.random_extra)
            .min(self.num_ids());
        while out.len() < target {
            let id = rng.random_range(0..self.num_ids() as u32);
            if scratch.hits[id as usize] != SELECTED {
                scratch.hits[id as usize] = SELECTED;
                out.push(id);
            }
        }
        scratch.reset(out);
        Ok(SampleCounts {
            forced: forced_count,
            from_tables: selected - forced_count,
            random_fill: out.len() - selected,
            candidates,
        })
    }

    /// Counts hits over the tables, starting at `first_table` and wrapping around, and lists
    /// each newly seen id once. Stops after the table in which `limit` candidates are reached.
    /// Ids already marked selected are neither counted nor listed.
    fn gather(&self, codes: &[u32], first_table: usize, limit: usize, scratch: &mut QueryScratch) {
        let l = self.num_tables();
        for step in 0..l {
            let t = (first_table + step) % l;
            for &id in self.bucket(t, codes[t]) {
                let hits = &mut scratch.hits[id as usize];
                if *hits == SELECTED {
                    continue;
                }
                if *hits == 0 {
                    scratch.candidates.push(id);
                }
                // Saturate below the marker; only reachable if an id was inserted into one
                // table more than once.
                *hits = (*hits + 1).min(SELECTED - 1);
            }
            if scratch.candidates.len() >= limit {
                break;
            }
        }
    }
}

/// Appends to `out`, in retrieval order, the (at most) `limit` candidates with the most hits
/// among those with at least `floor` hits; ties at the cut go to the first retrieved.
/// A histogram of hit counts finds the cut in linear time.
fn select_most_hits(scratch: &mut QueryScratch, floor: u16, limit: usize, out: &mut Vec<u32>) {
    let top = scratch.histogram.len() - 1;
    let clamp = |h: u16| (h as usize).min(top);
    for &id in &scratch.candidates {
        scratch.histogram[clamp(scratch.hits[id as usize])] += 1;
    }
    let floor = floor as usize;
    let (mut cut, mut ties_left, mut above) = (floor, usize::MAX, 0usize);
    for h in (floor..=top).rev() {
        let count = scratch.histogram[h] as usize;
        if above + count >= limit {
            cut = h;
            ties_left = limit - above;
            break;
        }
        above += count;
    }
    for &id in &scratch.candidates {
        let h = clamp(scratch.hits[id as usize]);
        let keep = h > cut || (h == cut && ties_left > 0);
        if keep {
            if h == cut {
                ties_left -= 1;
            }
            scratch.hits[id as usize] = SELECTED;
            out.push(id);
        }
    }
}
