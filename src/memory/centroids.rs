//! The label centroids: per label, the sum of its units' weights at unit length, pruned to
//! its largest weights.

use rayon::prelude::*;

use super::{Compressed, MemoryConfig, normalise};

/// Per label, the sum of the rows of `units` that carry it, scaled to unit length (labels
/// without a unit get an empty row); no rows at all unless `config.centroids`. Labels go
/// through in parallel chunks, each summing into a dense row of `input_dim`.
pub(super) fn label_centroids(
    units: &Compressed,
    labels: &Compressed,
    num_labels: usize,
    input_dim: usize,
    config: MemoryConfig,
) -> Compressed {
    if !config.centroids {
        return Compressed {
            offsets: vec![0],
            ..Default::default()
        };
    }
    let by_label = labels.transposed(num_labels);
    let ids: Vec<u32> = (0..num_labels as u32).collect();
    let chunks: Vec<Compressed> = ids
        .par_chunks(4096)
        .map(|chunk| {
            let mut sum = vec![0f32; input_dim];
            let mut touched = Vec::new();
            let mut rows = Compressed {
                offsets: vec![0],
                ..Default::default()
            };
            for &label in chunk {
                for &unit in by_label.row(label as usize).0 {
                    let (features, values) = units.row(unit as usize);
                    for (&f, &v) in features.iter().zip(values) {
                        if sum[f as usize] == 0.0 {
                            touched.push(f);
                        }
                        sum[f as usize] += v;
                    }
                }
                touched.sort_unstable();
                let start = rows.ids.len();
                for &f in &touched {
                    if sum[f as usize] != 0.0 {
                        rows.ids.push(f);
                        rows.values.push(sum[f as usize]);
                    }
                    sum[f as usize] = 0.0;
                }
                touched.clear();
                normalise(&mut rows.values[start..]);
                keep_largest(&mut rows, start, config.centroid_features);
                rows.offsets.push(rows.ids.len());
            }
            rows
        })
        .collect();
    let mut all = Compressed {
        offsets: vec![0],
        ..Default::default()
    };
    for chunk in chunks {
        let base = all.ids.len();
        all.offsets
            .extend(chunk.offsets[1..].iter().map(|&o| o + base));
        all.ids.extend(chunk.ids);
        all.values.extend(chunk.values);
    }
    all
}

/// Keeps the `cap` largest values (ties: the lower feature) of the row that starts at
/// `start` at the end of `rows`, in feature order; `cap` 0 keeps all.
fn keep_largest(rows: &mut Compressed, start: usize, cap: usize) {
    if cap == 0 || rows.ids.len() - start <= cap {
        return;
    }
    let mut row: Vec<(f32, u32)> = rows.values[start..]
        .iter()
        .zip(&rows.ids[start..])
        .map(|(&v, &f)| (v, f))
        .collect();
    row.select_nth_unstable_by_key(cap - 1, |&(v, f)| crate::layer::rank_key(v, f));
    row.truncate(cap);
    row.sort_unstable_by_key(|&(_, f)| f);
    rows.ids.truncate(start);
    rows.values.truncate(start);
    for (v, f) in row {
        rows.ids.push(f);
        rows.values.push(v);
    }
}
