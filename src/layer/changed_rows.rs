//! [`ChangedRows`]: which neurons' weight rows were written since the layer's tables were
//! last rebuilt, so that a rebuild hashes those alone and keeps every other row's codes
//! ([`HashTables::rebuild_changed_filled`](slide_lsh::HashTables::rebuild_changed_filled)).

/// The neurons whose weights changed since the last rebuild of the tables: one bit per
/// neuron, or all of them (after construction, a restored state, or a rebuild that failed).
#[derive(Debug)]
pub(crate) struct ChangedRows {
    bits: Vec<u64>,
    all: bool,
    /// The marked neurons in increasing order, collected by [`ids`](Self::ids) (kept for
    /// its capacity: sized for every neuron at the first collection, so a training step
    /// allocates nothing for it later).
    ids: Vec<u32>,
    neurons: usize,
}

impl ChangedRows {
    /// Every one of `neurons` neurons marked: nothing is known of the tables yet.
    pub(crate) fn all(neurons: usize) -> Self {
        ChangedRows {
            bits: vec![0; neurons.div_ceil(64)],
            all: true,
            ids: Vec::new(),
            neurons,
        }
    }

    /// Marks `neurons` (each below the layer's count; panics otherwise).
    pub(crate) fn mark(&mut self, neurons: &[u32]) {
        if self.all {
            return;
        }
        for &n in neurons {
            let n = n as usize;
            assert!(n < self.neurons, "neuron {n} of {}", self.neurons);
            self.bits[n / 64] |= 1 << (n % 64);
        }
    }

    /// Marks every neuron.
    pub(crate) fn mark_all(&mut self) {
        self.all = true;
    }

    /// Whether every neuron is marked.
    pub(crate) fn is_all(&self) -> bool {
        self.all
    }

    /// The marked neurons, in increasing order (not meaningful when [`is_all`](Self::is_all)).
    pub(crate) fn ids(&mut self) -> &[u32] {
        if self.ids.capacity() < self.neurons {
            self.ids.reserve_exact(self.neurons - self.ids.len());
        }
        self.ids.clear();
        for (w, &word) in self.bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                self.ids.push((w * 64) as u32 + rest.trailing_zeros());
                rest &= rest - 1;
            }
        }
        &self.ids
    }

    /// Unmarks every neuron: the tables now hold every row as it is.
    pub(crate) fn clear(&mut self) {
        self.bits.fill(0);
        self.all = false;
    }
}

#[cfg(test)]
mod tests {
    use super::ChangedRows;

    #[test]
    fn marks_are_collected_in_order_until_cleared() {
        let mut changed = ChangedRows::all(200);
        assert!(changed.is_all());
        changed.clear();
        assert!(!changed.is_all());
        assert!(changed.ids().is_empty());
        changed.mark(&[199, 3, 64, 3, 63, 0]);
        assert_eq!(changed.ids(), &[0, 3, 63, 64, 199]);
        // Collecting does not unmark; clearing does.
        assert_eq!(changed.ids(), &[0, 3, 63, 64, 199]);
        changed.clear();
        changed.mark(&[128]);
        assert_eq!(changed.ids(), &[128]);
        changed.mark_all();
        assert!(changed.is_all());
        changed.clear();
        assert!(changed.ids().is_empty());
    }

    #[test]
    #[should_panic(expected = "neuron 200 of 200")]
    fn a_neuron_out_of_range_panics() {
        let mut changed = ChangedRows::all(200);
        changed.clear();
        changed.mark(&[200]);
    }
}
