//! A sample's `k` best outputs with one tie rule (the higher score, then the lower id; see
//! [`ranks_before`]), kept in a heap, so that any `k` costs `log k` per entering offer:
//! what evaluation and prediction rank with (from the 5 that P@k reads to the hundreds of a
//! shortlist for a re-ranker), and what a training sample's shortlist for the heads is
//! drawn from.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::layer::ranks_before;

/// A kept `(score, id)` pair, ordered so that the one that ranks last is the greatest (the
/// heap's top, the first to leave). Scores are never NaN (refused by [`TopN::offer`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Kept(f32, u32);

impl Eq for Kept {}

impl Ord for Kept {
    fn cmp(&self, other: &Self) -> Ordering {
        if ranks_before((self.0, self.1), (other.0, other.1)) {
            Ordering::Less
        } else if ranks_before((other.0, other.1), (self.0, self.1)) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }
}

impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The `k` best `(score, id)` pairs offered; the result does not depend on the order offers
/// arrive in. A NaN score never enters.
#[derive(Debug, Clone, Default)]
pub(crate) struct TopN {
    k: usize,
    heap: BinaryHeap<Kept>,
}

impl TopN {
    /// Keeps the `k` best.
    pub(crate) fn new(k: usize) -> Self {
        TopN {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    #[inline]
    pub(crate) fn offer(&mut self, z: f32, id: u32) {
        if z.is_nan() || self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(Kept(z, id));
        } else if let Some(mut worst) = self.heap.peek_mut()
            && ranks_before((z, id), (worst.0, worst.1))
        {
            *worst = Kept(z, id);
        }
    }

    /// The `k`th best score (`-inf` while fewer than `k` were offered): a score below it
    /// cannot enter.
    #[inline]
    pub(crate) fn last(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.k => worst.0,
            _ => f32::NEG_INFINITY,
        }
    }

    /// Offers every pair `other` holds.
    pub(crate) fn merge(&mut self, other: &Self) {
        for kept in &other.heap {
            self.offer(kept.0, kept.1);
        }
    }

    /// Empties it to keep the `k` best from now on; its buffer is kept.
    pub(crate) fn reset(&mut self, k: usize) {
        self.k = k;
        self.heap.clear();
    }

    /// Passes the kept pairs to `f`, best first, and empties it, keeping its buffer (what a
    /// buffer reused from sample to sample needs: no allocation once it has grown).
    pub(crate) fn drain_ranked(&mut self, mut f: impl FnMut(f32, u32)) {
        let mut sorted = std::mem::take(&mut self.heap).into_sorted_vec();
        sorted.iter().for_each(|&Kept(z, id)| f(z, id));
        sorted.clear();
        self.heap = BinaryHeap::from(sorted);
    }

    /// The kept `(score, id)` pairs, best first.
    pub(crate) fn into_ranked(self) -> Vec<(f32, u32)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Kept(z, id)| (z, id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers in any order give the same 5, best first, ties to the lower id.
    #[test]
    fn keeps_the_best_with_ties_to_the_lower_id() {
        let offers = [
            (0.5, 9),
            (2.0, 4),
            (0.5, 3),
            (1.0, 8),
            (-1.0, 1),
            (f32::NAN, 0),
            (0.5, 6),
            (3.0, 7),
        ];
        let mut forward = TopN::new(5);
        let mut backward = TopN::new(5);
        for &(z, id) in &offers {
            forward.offer(z, id);
        }
        for &(z, id) in offers.iter().rev() {
            backward.offer(z, id);
        }
        assert_eq!(forward.last(), 0.5);
        // Drained and reset, a reused one keeps the same best.
        let mut reused = forward.clone();
        let mut drained = Vec::new();
        reused.drain_ranked(|z, id| drained.push((z, id)));
        reused.reset(5);
        assert_eq!(reused.last(), f32::NEG_INFINITY);
        for &(z, id) in &offers {
            reused.offer(z, id);
        }
        assert_eq!(reused.into_ranked(), drained);
        let want = vec![(3.0, 7), (2.0, 4), (1.0, 8), (0.5, 3), (0.5, 6)];
        assert_eq!(forward.into_ranked(), want);
        assert_eq!(backward.into_ranked(), want);
    }

    /// Fewer than `k` offers: `last` stays `-inf` and every offer is kept; `k = 0` keeps none.
    #[test]
    fn few_offers_and_none_wanted() {
        let mut top = TopN::new(5);
        top.offer(1.0, 2);
        top.offer(f32::NEG_INFINITY, 9);
        assert_eq!(top.last(), f32::NEG_INFINITY);
        assert_eq!(top.into_ranked(), vec![(1.0, 2), (f32::NEG_INFINITY, 9)]);
        let mut none = TopN::new(0);
        none.offer(1.0, 1);
        assert!(none.into_ranked().is_empty());
    }

    /// Merging halves gives the top of the whole, and a wider top's first five are the top 5.
    #[test]
    fn merged_halves_and_wider_tops_agree() {
        let scores: Vec<f32> = (0..200).map(|i| ((i * 37) % 101) as f32 * 0.25).collect();
        let (mut a, mut b, mut whole, mut wider) =
            (TopN::new(8), TopN::new(8), TopN::new(8), TopN::new(100));
        for (i, &z) in scores.iter().enumerate() {
            if i % 2 == 0 { &mut a } else { &mut b }.offer(z, i as u32);
            whole.offer(z, i as u32);
            wider.offer(z, i as u32);
        }
        a.merge(&b);
        let whole = whole.into_ranked();
        assert_eq!(a.into_ranked(), whole);
        assert_eq!(wider.into_ranked()[..8], whole[..]);
        let mut sorted: Vec<(f32, u32)> = scores.iter().copied().zip(0..).collect();
        sorted.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        assert_eq!(whole, sorted[..8]);
    }
}
