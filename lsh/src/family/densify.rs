//! Optimal densification of empty bins, shared by densified WTA and densified MinHash.

use super::mix::{mix64, reduce};

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
