//! A sample's K best outputs (5 for P@k, a wide head's shortlist when one re-ranks them),
//! with one tie rule: what evaluation, prediction and the training step's evaluation pass
//! rank with.

use crate::layer::ranks_before;

/// A sample's `K` best `(score, neuron)` pairs, best first; ties go to the lower neuron id
/// (see [`ranks_before`]), so the result does not depend on the order offers arrive in.
/// Empty slots are `(-inf, u32::MAX)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Top<const K: usize>([(f32, u32); K]);

/// The 5 best: what P@1, P@3 and P@5 and a prediction read.
pub(crate) type Top5 = Top<5>;

impl<const K: usize> Default for Top<K> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<const K: usize> Top<K> {
    pub(crate) const EMPTY: Self = Top([(f32::NEG_INFINITY, u32::MAX); K]);

    #[inline]
    pub(crate) fn offer(&mut self, z: f32, id: u32) {
        if !ranks_before((z, id), self.0[K - 1]) {
            return;
        }
        let mut i = K - 1;
        while i > 0 && ranks_before((z, id), self.0[i - 1]) {
            self.0[i] = self.0[i - 1];
            i -= 1;
        }
        self.0[i] = (z, id);
    }

    /// The offered `(neuron, score)` pairs, best first (at most `K`).
    pub(crate) fn ranked(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        self.0
            .iter()
            .filter(|&&(_, id)| id != u32::MAX)
            .map(|&(z, id)| (id, z))
    }

    /// The `K`th best score (`-inf` while fewer than `K` were offered): a score below it
    /// cannot enter.
    #[inline]
    pub(crate) fn last(&self) -> f32 {
        self.0[K - 1].0
    }

    /// Offers every pair `other` holds.
    pub(crate) fn merge(&mut self, other: &Self) {
        for &(z, id) in &other.0 {
            self.offer(z, id);
        }
    }

    /// The best neuron (`u32::MAX` if nothing was offered).
    pub(crate) fn first(&self) -> u32 {
        self.0[0].1
    }

    /// The offered `(score, neuron)` pairs, best first, as a slice (at most `K`).
    pub(crate) fn pairs(&self) -> &[(f32, u32)] {
        let n = self.0.iter().take_while(|&&(_, id)| id != u32::MAX).count();
        &self.0[..n]
    }
}

impl Top5 {
    /// The 5 best of `pairs`, which are ranked best first already.
    pub(crate) fn from_ranked(pairs: &[(f32, u32)]) -> Self {
        let mut top = Self::EMPTY;
        for (slot, &pair) in top.0.iter_mut().zip(pairs) {
            *slot = pair;
        }
        top
    }

    /// How many of `labels` are among the 1, 3 and 5 best.
    pub(crate) fn hits(&self, labels: &[u32]) -> [u8; 3] {
        let hit = |n: usize| {
            self.0[..n]
                .iter()
                .filter(|&&(_, id)| id != u32::MAX && labels.contains(&id))
                .count() as u8
        };
        [hit(1), hit(3), hit(5)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers in any order give the same 5, best first, ties to the lower id.
    #[test]
    fn top5_keeps_the_best_five_with_ties_to_the_lower_id() {
        let offers = [
            (0.5, 9),
            (2.0, 4),
            (0.5, 3),
            (1.0, 8),
            (-1.0, 1),
            (0.5, 6),
            (3.0, 7),
        ];
        let mut forward = Top5::EMPTY;
        let mut backward = Top5::EMPTY;
        for &(z, id) in &offers {
            forward.offer(z, id);
        }
        for &(z, id) in offers.iter().rev() {
            backward.offer(z, id);
        }
        let want = Top([(3.0, 7), (2.0, 4), (1.0, 8), (0.5, 3), (0.5, 6)]);
        assert_eq!(forward, want);
        assert_eq!(backward, want);
        assert_eq!(want.first(), 7);
        assert_eq!(want.hits(&[4, 6, 11]), [0, 1, 2]);
    }

    /// Fewer than 5 offers leave empty slots that are never hits; no offer, no prediction.
    #[test]
    fn top5_with_few_offers_has_empty_slots() {
        let mut top = Top5::EMPTY;
        assert_eq!(top.first(), u32::MAX);
        top.offer(1.0, 2);
        assert_eq!(top.first(), 2);
        assert_eq!(top.hits(&[2, u32::MAX]), [1, 1, 1]);
    }

    /// A wider top keeps as many as it holds, in the same order as a Top5 of the same offers.
    #[test]
    fn a_wider_top_agrees_with_top5_on_its_first_five() {
        let (mut wide, mut five) = (Top::<8>::EMPTY, Top5::EMPTY);
        for (i, z) in [0.3f32, 2.0, -1.0, 2.0, 0.7, 5.0, 0.1]
            .into_iter()
            .enumerate()
        {
            wide.offer(z, i as u32);
            five.offer(z, i as u32);
        }
        assert_eq!(wide.pairs().len(), 7);
        assert_eq!(wide.last(), f32::NEG_INFINITY);
        assert_eq!(Top5::from_ranked(wide.pairs()), five);
        assert_eq!(wide.pairs()[6], (-1.0, 2));
    }
}
