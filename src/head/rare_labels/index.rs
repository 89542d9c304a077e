//! Candidates from rare features: the labels of the training samples that share a sample's
//! rarest words.
//!
//! On real data the network's shortlist misses the tail: on deb-deps, of the test labels
//! seen in fewer than 10 training samples only 15% are among the network's best 32, and
//! four fifths of what label trees gain over slide at P@5 are such labels, mostly in samples
//! with a near-duplicate in the training set (packages of one source that share a
//! description and differ in a few words; docs/notebook/real-data.md). A word that only a few
//! training samples have points at their labels whatever the network has learned about it.
//! The index keeps, for each feature that at most `max_df` training samples have, how often
//! each label occurs with it; a sample's candidates are the labels summed over its rare
//! features, the most frequent first. They join the shortlist, in training (as positives or
//! negatives of the heads that learn on it) and in prediction.

use slide_lsh::Vector;

use crate::data::Examples;

/// For each rare feature, its labels and how many training samples have both: a
/// compressed-rows table whose entries are `(label, count)` pairs stored flat, as a state
/// file holds them (`starts[f]..starts[f + 1]` index the pairs of feature `f`; empty for a
/// feature that is not rare).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RareIndex {
    starts: Vec<u32>,
    entries: Vec<u32>,
}

impl RareIndex {
    /// The index of `data`'s features that at most `max_df` of its samples have (a feature
    /// counts once per sample, whatever its value).
    pub fn build(data: &dyn Examples, max_df: u32) -> Self {
        let mut df: Vec<u32> = Vec::new();
        for i in 0..data.len() {
            data.input(i).for_each_nonzero(|j, _| {
                if j >= df.len() {
                    df.resize(j + 1, 0);
                }
                df[j] += 1;
            });
        }
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for i in 0..data.len() {
            let labels = data.labels(i);
            data.input(i).for_each_nonzero(|j, _| {
                if df[j] <= max_df {
                    pairs.extend(labels.iter().map(|&label| (j as u32, label)));
                }
            });
        }
        pairs.sort_unstable();
        let mut index = RareIndex {
            starts: vec![0; df.len() + 1],
            ..RareIndex::default()
        };
        for run in pairs.chunk_by(|a, b| a == b) {
            let (feature, label) = run[0];
            index.starts[feature as usize + 1] += 1;
            index.entries.extend([label, run.len() as u32]);
        }
        for f in 1..index.starts.len() {
            index.starts[f] += index.starts[f - 1];
        }
        index
    }

    /// Whether no feature is rare.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// One more than the largest label the index names (0 when empty).
    pub fn label_bound(&self) -> usize {
        self.entries
            .iter()
            .step_by(2)
            .max()
            .map_or(0, |&l| l as usize + 1)
    }

    /// Appends to `out` up to `take` labels for `input`, best first: the sum over its rare
    /// features of each label's count, ties to the lower label; labels in `skip` or
    /// already in `out` are passed over. `scratch` is reused between calls.
    pub fn candidates(
        &self,
        input: Vector<'_>,
        skip: &[u32],
        take: usize,
        scratch: &mut Vec<(u32, u32)>,
        out: &mut Vec<u32>,
    ) {
        scratch.clear();
        input.for_each_nonzero(|j, _| {
            if j + 1 < self.starts.len() {
                let pairs =
                    &self.entries[2 * self.starts[j] as usize..2 * self.starts[j + 1] as usize];
                scratch.extend(pairs.chunks_exact(2).map(|p| (p[0], p[1])));
            }
        });
        if scratch.is_empty() {
            return;
        }
        // Sum each label's counts, then order by sum (descending) and label.
        scratch.sort_unstable();
        let mut summed = 0;
        for k in 0..scratch.len() {
            let (label, count) = scratch[k];
            if summed > 0 && scratch[summed - 1].0 == label {
                scratch[summed - 1].1 += count;
            } else {
                scratch[summed] = (label, count);
                summed += 1;
            }
        }
        scratch.truncate(summed);
        scratch.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut added = 0;
        for &(label, _) in scratch.iter() {
            if added == take {
                break;
            }
            if !skip.contains(&label) && !out.contains(&label) {
                out.push(label);
                added += 1;
            }
        }
    }

    /// The row starts, for a state file: feature `f`'s pairs are `starts[f]..starts[f + 1]`.
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// The `(label, count)` pairs stored flat, for a state file.
    pub fn entries(&self) -> &[u32] {
        &self.entries
    }

    /// The index whose [`Self::starts`] and [`Self::entries`] a state file held, checked:
    /// the starts must rise from 0 to the pair count; `None` where they do not.
    pub fn from_parts(starts: Vec<u32>, entries: Vec<u32>) -> Option<Self> {
        let n = entries.len() / 2;
        let rising = starts.windows(2).all(|w| w[0] <= w[1]);
        if !entries.len().is_multiple_of(2)
            || starts.first().is_some_and(|&s| s != 0)
            || starts.last().map_or(n != 0, |&s| s as usize != n)
            || !rising
        {
            return None;
        }
        Some(RareIndex { starts, entries })
    }
}
