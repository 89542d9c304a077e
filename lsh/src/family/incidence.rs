//! Input-major incidence lists: for each input coordinate, the entries of a family (SimHash
//! directions, WTA bin slots) that read it, so a sparse input costs work proportional to
//! its nonzeros.

/// Builds an input-major incidence list: for each coordinate `d`, the entries that read it.
/// `pairs` holds `(coordinate, entry)`; the result is CSR offsets (`dim + 1`) and entries,
/// each coordinate's entries in the order they were given.
pub(crate) fn by_coordinate<T: Copy + Default>(
    dim: usize,
    pairs: &[(u32, T)],
) -> (Vec<u32>, Vec<T>) {
    let mut offsets = vec![0u32; dim + 1];
    for &(d, _) in pairs {
        offsets[d as usize + 1] += 1;
    }
    for d in 0..dim {
        offsets[d + 1] += offsets[d];
    }
    let mut cursor = offsets.clone();
    let mut entries = vec![T::default(); pairs.len()];
    for &(d, entry) in pairs {
        let at = &mut cursor[d as usize];
        entries[*at as usize] = entry;
        *at += 1;
    }
    (offsets, entries)
}
