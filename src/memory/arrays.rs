//! A memory's arrays, for saving and loading it.

use super::{Compressed, Memory, MemoryConfig};
use crate::error::{Result, config_error};

/// The arrays of a [`Memory`], borrowed ([`Memory::arrays`]) for saving it and owned
/// ([`Memory::from_arrays`]) for loading it: everything but the feature-major copy, which is
/// rebuilt. Offsets are `u64` so that a file reads the same on every platform.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryArrays<O, I, V> {
    /// Per feature, the factor a value is multiplied by before scaling to unit length.
    pub feature_weights: V,
    /// Row starts of the units into `unit_features` / `unit_values` (`len() + 1`).
    pub unit_offsets: O,
    /// Each unit's features.
    pub unit_features: I,
    /// Each unit's weights (unit length per unit).
    pub unit_values: V,
    /// Row starts of the units into `labels` (`len() + 1`).
    pub label_offsets: O,
    /// Each unit's labels.
    pub labels: I,
}

/// A memory's arrays, borrowed.
pub type MemoryArraysRef<'a> = MemoryArrays<Vec<u64>, &'a [u32], &'a [f32]>;
/// A memory's arrays, owned.
pub type MemoryArraysOwned = MemoryArrays<Vec<u64>, Vec<u32>, Vec<f32>>;

impl Memory {
    /// The arrays to save (the offsets widened to `u64`).
    pub fn arrays(&self) -> MemoryArraysRef<'_> {
        let wide = |o: &[usize]| o.iter().map(|&x| x as u64).collect();
        MemoryArrays {
            feature_weights: &self.feature_weights,
            unit_offsets: wide(&self.units.offsets),
            unit_features: &self.units.ids,
            unit_values: &self.units.values,
            label_offsets: wide(&self.labels.offsets),
            labels: &self.labels.ids,
        }
    }

    /// A memory from saved arrays, each checked (lengths, offsets, ids in range, finite
    /// values): a damaged file gives an error naming the array, never a panic later.
    pub fn from_arrays(
        config: MemoryConfig,
        input_dim: usize,
        num_labels: usize,
        arrays: MemoryArraysOwned,
    ) -> Result<Memory> {
        config.validate()?;
        let bad = |what: &str| {
            config_error(
                format!("memory array {what}"),
                "inconsistent with the others or out of range",
            )
        };
        let rows = |offsets: Vec<u64>, ids: Vec<u32>, values: Vec<f32>, bound: usize, name| {
            let offsets: Vec<usize> = offsets.iter().map(|&o| o as usize).collect();
            let ok = offsets.first() == Some(&0)
                && offsets.last() == Some(&ids.len())
                && offsets.windows(2).all(|w| w[0] <= w[1])
                && ids.len() == values.len()
                && ids.iter().all(|&i| (i as usize) < bound)
                && values.iter().all(|v| v.is_finite());
            if ok {
                Ok(Compressed {
                    offsets,
                    ids,
                    values,
                })
            } else {
                Err(bad(name))
            }
        };
        if arrays.feature_weights.len() != input_dim
            || !arrays.feature_weights.iter().all(|w| w.is_finite())
        {
            return Err(bad("feature_weights"));
        }
        let units = rows(
            arrays.unit_offsets,
            arrays.unit_features,
            arrays.unit_values,
            input_dim,
            "units",
        )?;
        let ones = vec![1.0; arrays.labels.len()];
        let labels = rows(
            arrays.label_offsets,
            arrays.labels,
            ones,
            num_labels,
            "labels",
        )?;
        if units.rows() != labels.rows() || units.rows() == 0 {
            return Err(bad("label_offsets"));
        }
        Memory::assemble(
            config,
            (input_dim, num_labels),
            arrays.feature_weights,
            units,
            labels,
        )
    }
}
