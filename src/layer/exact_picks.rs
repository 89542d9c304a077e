//! The exact-picks ablation ([`Picks::Exact`], built with the `ablations` feature): each
//! training sample's table picks replaced by the neurons that score highest for it, the
//! picks perfect retrieval would make.

use slide_lsh::{SampleCounts, Vector};

use super::SparseLayer;
#[cfg(doc)]
use super::picks::Picks;

impl SparseLayer {
    /// [`Picks::Exact`]: the tables' picks in `active` (after the `sources.forced` forced
    /// ids) replaced by as many of the highest-scoring neurons that are not forced, the
    /// random ids after them kept unless now picked (`sources` counts what is left). Scores
    /// every neuron; allocates.
    pub(super) fn replace_picks_with_exact(
        &self,
        input: Vector<'_>,
        sources: &mut SampleCounts,
        active: &mut Vec<u32>,
    ) {
        let (forced, picks) = (sources.forced, sources.from_tables);
        let random = active.split_off(forced + picks);
        active.truncate(forced);
        let mut taken = active.clone();
        taken.sort_unstable();
        let best = self.top_neurons(input, forced + picks);
        let exact = best
            .into_iter()
            .filter(|id| taken.binary_search(id).is_err());
        active.extend(exact.take(picks));
        taken.extend_from_slice(&active[forced..]);
        taken.sort_unstable();
        sources.from_tables = active.len() - forced;
        active.extend(
            random
                .into_iter()
                .filter(|id| taken.binary_search(id).is_err()),
        );
        sources.random_fill = active.len() - forced - sources.from_tables;
    }
}
