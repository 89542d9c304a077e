//! Seeded random vectors with controlled similarity, shared by the integration tests.
#![allow(dead_code)]

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

pub fn gaussian(rng: &mut Xoshiro256PlusPlus) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

pub fn unit_vector(rng: &mut Xoshiro256PlusPlus, dim: usize) -> Vec<f64> {
    let v: Vec<f64> = (0..dim).map(|_| gaussian(rng)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

/// A unit vector whose cosine with the unit vector `x` is exactly `cosine`.
pub fn at_cosine(rng: &mut Xoshiro256PlusPlus, x: &[f64], cosine: f64) -> Vec<f64> {
    let z = unit_vector(rng, x.len());
    let dot: f64 = z.iter().zip(x).map(|(a, b)| a * b).sum();
    let orth: Vec<f64> = z.iter().zip(x).map(|(a, b)| a - dot * b).collect();
    let norm = orth.iter().map(|v| v * v).sum::<f64>().sqrt();
    let sine = (1.0 - cosine * cosine).sqrt();
    x.iter()
        .zip(&orth)
        .map(|(a, o)| cosine * a + sine * o / norm)
        .collect()
}

pub fn to_f32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// `count` distinct indices below `dim`, excluding those in `taken`.
pub fn distinct_indices(
    rng: &mut Xoshiro256PlusPlus,
    dim: usize,
    count: usize,
    taken: &[u32],
) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(count);
    while out.len() < count {
        let i = rng.random_range(0..dim as u32);
        if !out.contains(&i) && !taken.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// Fraction of positions where two equally long code slices agree.
pub fn agreement(a: &[u32], b: &[u32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
}
