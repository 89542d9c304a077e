//! The network's view of a sample's input: the stored features, or with an
//! [`input_power`](crate::NetworkConfig::input_power) other than 1 each value raised to that
//! power, the row keeping its L2 norm.

use slide_lsh::Vector;

use crate::data::Examples;

/// A sample's input as the first layer and the heads read it, filled once per pass by
/// [`SampleInput::fill`]; with the power 1 it holds nothing and hands out the stored input.
#[derive(Debug, Default)]
pub(crate) struct SampleInput {
    /// Feature ids of a sparse input.
    indices: Vec<u32>,
    /// The transformed values (all of a dense input, the nonzeros of a sparse one).
    values: Vec<f32>,
    /// What `indices` and `values` hold.
    held: Held,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Nothing: the stored input is the network's.
    #[default]
    Stored,
    Sparse,
    Dense,
}

impl SampleInput {
    /// `x` as the network reads it under `power`: each value `v` becomes `sign(v) |v|^power`
    /// and the whole row is scaled back to `x`'s L2 norm (a zero row stays zero). With
    /// `power = 1` nothing is copied.
    pub(crate) fn fill(&mut self, x: Vector<'_>, power: f32) {
        self.indices.clear();
        self.values.clear();
        if power == 1.0 {
            self.held = Held::Stored;
            return;
        }
        let values = match x {
            Vector::Sparse { indices, values } => {
                self.indices.extend_from_slice(indices);
                self.held = Held::Sparse;
                values
            }
            Vector::Dense(values) => {
                self.held = Held::Dense;
                values
            }
        };
        self.values
            .extend(values.iter().map(|&v| v.signum() * v.abs().powf(power)));
        let square = |v: &[f32]| v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>();
        let (before, after) = (square(values), square(&self.values));
        if after > 0.0 {
            let scale = (before / after).sqrt() as f32;
            self.values.iter_mut().for_each(|v| *v *= scale);
        }
    }

    /// The input the network reads for `sample` of `data`, which [`fill`](Self::fill) was
    /// last given.
    #[inline]
    pub(crate) fn get<'a>(&'a self, data: &'a dyn Examples, sample: usize) -> Vector<'a> {
        match self.held {
            Held::Stored => data.input(sample),
            Held::Sparse => Vector::Sparse {
                indices: &self.indices,
                values: &self.values,
            },
            Held::Dense => Vector::Dense(&self.values),
        }
    }
}

/// The default [`NetworkConfig::input_power`](crate::NetworkConfig::input_power): 1, the
/// inputs as stored.
#[cfg(feature = "serde")]
pub(crate) fn stored() -> f32 {
    crate::NetworkConfig::DEFAULT_INPUT_POWER
}

/// Whether an input power is the default (left out of a config's serde form).
#[cfg(feature = "serde")]
pub(crate) fn is_stored(power: &f32) -> bool {
    *power == crate::NetworkConfig::DEFAULT_INPUT_POWER
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::SparseExamples;

    /// The square root of a unit row's values, scaled back to unit norm; a dense row keeps
    /// its norm and its signs; the power 1 hands out the stored row.
    #[test]
    fn values_take_the_power_and_rows_keep_their_norm() {
        let mut data = SparseExamples::new();
        data.push(&[3, 7], &[0.6, 0.8], &[0]);
        let mut input = SampleInput::default();
        input.fill(data.input(0), 0.5);
        let Vector::Sparse { indices, values } = input.get(&data, 0) else {
            panic!("a sparse row stays sparse");
        };
        assert_eq!(indices, &[3, 7]);
        let norm = (0.6f32 + 0.8).sqrt();
        let expected = [0.6f32.sqrt() / norm, 0.8f32.sqrt() / norm];
        for (got, want) in values.iter().zip(expected) {
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        }
        let dense = [2.0f32, -1.0, 0.0, 2.0];
        input.fill(Vector::Dense(&dense), 2.0);
        let Vector::Dense(values) = input.get(&data, 0) else {
            panic!("a dense row stays dense");
        };
        // Squares 4, -1, 0, 4 scaled by 3 / sqrt(33) to the norm 3.
        let scale = 3.0 / 33f32.sqrt();
        assert_eq!(values.len(), 4);
        for (got, want) in values.iter().zip([4.0 * scale, -scale, 0.0, 4.0 * scale]) {
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        }
        input.fill(Vector::Dense(&[0.0, 0.0]), 0.5);
        assert_eq!(input.get(&data, 0), Vector::Dense(&[0.0, 0.0]));
        input.fill(data.input(0), 1.0);
        assert_eq!(input.get(&data, 0), data.input(0));
    }
}
