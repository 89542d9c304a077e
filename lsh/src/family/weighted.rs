//! Weighted MinHash by exponential races (P-MinHash: Moulton & Jiang, "Maximally consistent
//! sampling and the Jaccard index of probability distributions", ICDM 2018), for sparse
//! inputs whose coordinates carry weights, such as IDF-weighted bags of words.
//!
//! Each of the `K * L` sub-hashes runs a race: coordinate `i` finishes at
//! `E_j(i) / x_i^2`, where `E_j(i)` is a fixed exponential draw of sub-hash `j` for
//! coordinate `i`, and the sub-hash is the coordinate that finishes first. A coordinate
//! wins with probability `x_i^2 / |x|^2` (for a unit vector, its share of the squared
//! length), and two vectors agree on a sub-hash with probability equal to the probability
//! Jaccard index of their distributions `p = x^2 / |x|^2` and `q = y^2 / |y|^2`,
//! `J_P(p, q) = sum over i with p_i q_i > 0 of 1 / sum_k max(p_k / p_i, q_k / q_i)`: 1 for
//! vectors with the same direction, 0 for vectors without a shared coordinate. Signs are
//! ignored, so it suits nonnegative inputs such as tf-idf rows. Unlike [`DophMinHash`],
//! which reads only the set of nonzero coordinates, a rare feature of large weight wins
//! far more often than a common one of small weight, so the buckets gather inputs that
//! share their heaviest features.
//!
//! The sub-hash is the winning coordinate, so its code carries `ceil(log2(dim))` bits:
//! with `K = 1` and `range_pow` that large a table is an index of one sampled feature per
//! input. The draws are a seeded hash of `(sub-hash, coordinate)`, so sub-hash `j` is the
//! same whatever `K` and `L` are.
//!
//! [`DophMinHash`]: super::DophMinHash

use super::buffer::CodeBuffer;
use super::hash_family::HashFamily;
use super::mix::mix64;
use super::params::LshParams;
use super::shape::FamilyShape;
use crate::error::{Result, invalid};
use crate::vector::Vector;

/// Most exponential draws a family keeps (`dim * K * L`): 2^28, 1 GiB of `f32`.
pub const MAX_DRAWS: usize = 1 << 28;

/// Weighted MinHash (exponential races). Build with [`WeightedMinHash::new`].
#[derive(Debug, Clone)]
pub struct WeightedMinHash {
    shape: FamilyShape,
    /// Coordinate-major: `draws[i * K * L + j]` is `ln E_j(i)`, so an input's nonzero reads
    /// one contiguous row. The race is run in logarithms, `ln E_j(i) - 2 ln |x_i|`, which
    /// orders the coordinates as `E_j(i) / x_i^2` does for every finite nonzero value
    /// (the quotient itself overflows or vanishes in `f32` for values beyond about 1e19 or
    /// below 1e-19).
    draws: Vec<f32>,
}

impl WeightedMinHash {
    /// Draws the races for `dim`-dimensional inputs from `seed`. Fails when `dim * K * L`
    /// exceeds 2^28 draws.
    pub fn new(dim: usize, params: LshParams, seed: u64) -> Result<Self> {
        let shape = FamilyShape::new(dim, params, bits_for(dim), seed)?;
        let hashes = params.num_hashes();
        if dim.saturating_mul(hashes) > MAX_DRAWS {
            return Err(invalid(
                "k * l",
                hashes,
                "times the input dimension must be at most 2^28 for weighted MinHash",
            ));
        }
        let salt = mix64(seed ^ 0x7765_6967_6874_6564);
        let mut draws = Vec::with_capacity(dim * hashes);
        for i in 0..dim as u64 {
            draws.extend((0..hashes as u64).map(|j| exponential(salt, j, i).ln()));
        }
        Ok(WeightedMinHash { shape, draws })
    }
}

/// Bits a coordinate of a `dim`-dimensional input takes: `ceil(log2(dim))`, at least 1.
pub(crate) fn bits_for(dim: usize) -> u32 {
    (usize::BITS - dim.saturating_sub(1).leading_zeros()).max(1)
}

/// `E_j(i)`: a standard exponential draw from a seeded hash of the sub-hash and the
/// coordinate (`-ln U`, with `U` uniform in (0, 1]).
fn exponential(salt: u64, j: u64, i: u64) -> f32 {
    let h = mix64(salt ^ mix64(j << 32 ^ i));
    let u = ((h >> 11) + 1) as f64 / (1u64 << 53) as f64;
    -(u.ln()) as f32
}

impl HashFamily for WeightedMinHash {
    fn shape(&self) -> &FamilyShape {
        &self.shape
    }

    fn raw_hashes<'b>(&self, x: Vector<'_>, buf: &'b mut CodeBuffer) -> Result<&'b [u32]> {
        x.validate(self.shape.dim())?;
        let hashes = self.shape.params().num_hashes();
        buf.acc.clear();
        buf.acc.resize(hashes, f32::INFINITY);
        buf.raw.clear();
        buf.raw.resize(hashes, 0);
        let (finish, winner) = (&mut buf.acc[..], &mut buf.raw[..]);
        x.for_each_nonzero(|i, v| {
            let weight = 2.0 * v.abs().ln();
            let draws = &self.draws[i * hashes..][..hashes];
            let i = i as u32;
            for ((f, w), &e) in finish.iter_mut().zip(winner.iter_mut()).zip(draws) {
                let t = e - weight;
                // Ties (equal finishing times) go to the lower coordinate, whatever order
                // the nonzeros come in.
                if t < *f || (t == *f && i < *w) {
                    *f = t;
                    *w = i;
                }
            }
        });
        // A zero vector has no race: every sub-hash stays 0, as densified families give it.
        Ok(&buf.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(dim: usize, k: usize, l: usize) -> WeightedMinHash {
        let params = LshParams {
            k,
            l,
            range_pow: 20,
        };
        WeightedMinHash::new(dim, params, 7).unwrap()
    }

    fn raw(f: &WeightedMinHash, indices: &[u32], values: &[f32]) -> Vec<u32> {
        let mut buf = CodeBuffer::new();
        f.raw_hashes(Vector::Sparse { indices, values }, &mut buf)
            .unwrap()
            .to_vec()
    }

    #[test]
    fn bits_cover_the_coordinates() {
        assert_eq!(bits_for(1), 1);
        assert_eq!(bits_for(2), 1);
        assert_eq!(bits_for(3), 2);
        assert_eq!(bits_for(128), 7);
        assert_eq!(bits_for(129), 8);
        assert_eq!(bits_for(135_909), 18);
    }

    #[test]
    fn a_coordinate_wins_in_proportion_to_its_squared_weight() {
        // Weights 1, 2 and 3 (squares 1, 4, 9 of 14): over 4,096 races the shares are
        // 1/14, 4/14 and 9/14 within 4 standard deviations (at most 0.030).
        let f = family(50, 1, 4096);
        let wins = raw(&f, &[3, 17, 40], &[1.0, 2.0, 3.0]);
        for (coordinate, share) in [(3u32, 1.0 / 14.0), (17, 4.0 / 14.0), (40, 9.0 / 14.0)] {
            let got = wins.iter().filter(|&&w| w == coordinate).count() as f64 / 4096.0;
            assert!(
                (got - share).abs() < 0.030,
                "{coordinate}: {got} against {share}"
            );
        }
        assert!(wins.iter().all(|w| [3, 17, 40].contains(w)));
    }

    #[test]
    fn collisions_follow_the_jaccard_index_of_the_distributions() {
        // x^2 = (0.5, 0.5, 0), y^2 = (0.5, 0, 0.5): the probability Jaccard index is
        // sum_i 1 / sum_j max(x_j / x_i, y_j / y_i) over the shared coordinate 0 =
        // 1 / (1 + 1 + 1) = 1/3. Over 4,096 sub-hashes: within 0.030 (4 standard deviations).
        let f = family(10, 1, 4096);
        let h = std::f32::consts::FRAC_1_SQRT_2;
        let x = raw(&f, &[0, 1], &[h, h]);
        let y = raw(&f, &[0, 2], &[h, h]);
        let agree = x.iter().zip(&y).filter(|(a, b)| a == b).count() as f64 / 4096.0;
        assert!((agree - 1.0 / 3.0).abs() < 0.030, "{agree}");
        // Scale does not matter, nor the sign, nor dense against sparse.
        let scaled = raw(&f, &[0, 1], &[-3.0 * h, 3.0 * h]);
        assert_eq!(x, scaled);
        let mut dense = vec![0.0f32; 10];
        dense[0] = h;
        dense[1] = h;
        let mut buf = CodeBuffer::new();
        assert_eq!(
            f.raw_hashes(Vector::Dense(&dense), &mut buf).unwrap(),
            &x[..]
        );
        // Disjoint supports never agree.
        let z = raw(&f, &[5, 6], &[1.0, 1.0]);
        assert!(x.iter().zip(&z).all(|(a, b)| a != b));
    }

    #[test]
    fn sub_hashes_do_not_depend_on_k_and_l() {
        let (indices, values) = ([2u32, 9, 31], [0.3f32, 0.9, 0.2]);
        let one = raw(&family(40, 1, 8), &indices, &values);
        let more = raw(&family(40, 2, 16), &indices, &values);
        assert_eq!(one, more[..8]);
    }

    #[test]
    fn order_of_nonzeros_and_the_zero_vector() {
        let f = family(40, 2, 32);
        let a = raw(&f, &[2, 9, 31], &[0.3, 0.9, 0.2]);
        let b = raw(&f, &[31, 2, 9], &[0.2, 0.3, 0.9]);
        assert_eq!(a, b);
        assert!(raw(&f, &[], &[]).iter().all(|&w| w == 0));
    }

    #[test]
    fn too_many_draws_is_an_error() {
        let params = LshParams {
            k: 1,
            l: 4096,
            range_pow: 18,
        };
        let err = WeightedMinHash::new(135_909, params, 1).unwrap_err();
        assert!(err.to_string().contains("2^28"), "{err}");
    }
}
