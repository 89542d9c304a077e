//! Shared helpers of the core crate's integration tests: configs, data, and a plain f64
//! reference implementation of the network's loss.
#![allow(dead_code)]

pub mod scratch;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::{FamilyKind, LshParams, Projection, Sampling, Vector};
use slide::{
    Activation, AdamConfig, DenseExamples, Examples, LayerConfig, LayerGradients, LshConfig,
    Network, NetworkConfig, RebuildSchedule, Retrieval, SoftmaxLoss, SparseExamples, WeightLayout,
};

pub fn dense(out_dim: usize, activation: Activation) -> LayerConfig {
    LayerConfig::new(out_dim, activation)
}

pub fn input_major(out_dim: usize, activation: Activation) -> LayerConfig {
    LayerConfig {
        layout: WeightLayout::InputMajor,
        ..LayerConfig::new(out_dim, activation)
    }
}

/// An LSH-sampled layer: Gaussian SimHash K=3, L=4, union of buckets, at least `min_active`
/// neurons.
pub fn sampled(out_dim: usize, activation: Activation, min_active: usize) -> LayerConfig {
    LayerConfig::new(out_dim, activation).sampled(LshConfig {
        retrieval: Retrieval {
            family: FamilyKind::SimHash(Projection::Gaussian),
            params: LshParams {
                k: 3,
                l: 4,
                range_pow: 3,
            },
            bucket_capacity: 8,
            sampling: Sampling::vanilla()
                .with_budget(min_active)
                .with_min_active(min_active),
            ..Default::default()
        },
        ..Default::default()
    })
}

pub fn network(input_dim: usize, layers: Vec<LayerConfig>, lr: f32, seed: u64) -> Network {
    Network::new(NetworkConfig {
        adam: AdamConfig {
            lr,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Fixed { every: 5 },
        seed,
        ..NetworkConfig::new(input_dim, layers)
    })
    .expect("valid config")
}

/// The bits of a network's per-label linear head's weights, for comparisons bit for bit.
#[allow(irrefutable_let_patterns, unreachable_patterns)]
pub fn head_bits(net: &Network) -> Vec<u32> {
    let table = net
        .heads()
        .iter()
        .find_map(|head| match head {
            slide::head::AnyHead::LabelLinear(linear) => Some(linear.table()),
            _ => None,
        })
        .expect("a network with a per-label linear head");
    table.iter().map(|w| w.to_bits()).collect()
}

/// `n` dense samples of `dim` values in [-1, 1], one class below `classes` each.
pub fn dense_data(n: usize, dim: usize, classes: u32, seed: u64) -> DenseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    DenseExamples {
        dim,
        inputs: (0..n * dim).map(|_| rng.random_range(-1.0..1.0)).collect(),
        classes: (0..n).map(|_| rng.random_range(0..classes)).collect(),
    }
}

/// Learnable sparse multi-label data: each label owns 4 features; a sample has 1-3 labels
/// and their features (values in [0.5, 1.5]) plus 2 noise features.
pub fn sparse_data(n: usize, dim: usize, labels: u32, seed: u64) -> SparseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let prototypes: Vec<Vec<u32>> = (0..labels)
        .map(|_| (0..4).map(|_| rng.random_range(0..dim as u32)).collect())
        .collect();
    let mut data = SparseExamples::new();
    for _ in 0..n {
        let count = rng.random_range(1..=3usize);
        let mut ys: Vec<u32> = Vec::new();
        while ys.len() < count {
            let y = rng.random_range(0..labels);
            if !ys.contains(&y) {
                ys.push(y);
            }
        }
        let mut features: Vec<u32> = ys
            .iter()
            .flat_map(|&y| prototypes[y as usize].clone())
            .collect();
        features.extend((0..2).map(|_| rng.random_range(0..dim as u32)));
        features.sort_unstable();
        features.dedup();
        let values: Vec<f32> = features
            .iter()
            .map(|_| rng.random_range(0.5..1.5))
            .collect();
        data.push(&features, &values, &ys);
    }
    data
}

/// The network's parameters in f64, `w[l][neuron][input]`, `b[l][neuron]`.
#[derive(Clone)]
pub struct Reference {
    pub w: Vec<Vec<Vec<f64>>>,
    pub b: Vec<Vec<f64>>,
    pub activations: Vec<Activation>,
    /// Whether the loss applies the log-Q shift to the output layer's non-label logits.
    pub log_q: bool,
    /// With `log_q`: the output layer drew this many uniformly random ids at the end of
    /// each active set (`Sampling::random_extra`, no fill), so only they are shifted.
    pub random_tail: Option<usize>,
    /// With `log_q`: the output layer's shared negatives (forced like the labels) and the
    /// fraction of the shift they get (`Negatives::shared_shift`).
    pub shared: Vec<u32>,
    pub shared_fraction: f64,
    /// A softmax output's loss: each label against the active non-labels alone
    /// ([`SoftmaxLoss::Decoupled`]) instead of one softmax with targets `1/|y|`.
    pub decoupled: bool,
}

impl Reference {
    pub fn of(net: &Network) -> Self {
        let layers = net.layers();
        Reference {
            w: layers
                .iter()
                .map(|l| {
                    (0..l.out_dim())
                        .map(|j| (0..l.in_dim()).map(|i| f64::from(l.weight(j, i))).collect())
                        .collect()
                })
                .collect(),
            b: layers
                .iter()
                .map(|l| (0..l.out_dim()).map(|j| f64::from(l.bias(j))).collect())
                .collect(),
            activations: layers.iter().map(|l| l.activation()).collect(),
            log_q: false,
            random_tail: None,
            shared: Vec::new(),
            shared_fraction: 0.0,
            decoupled: net
                .config()
                .layers
                .last()
                .is_some_and(|l| l.softmax_loss == SoftmaxLoss::Decoupled),
        }
    }

    /// Output probabilities of one sample with every neuron active, or only `active[l]`
    /// (inactive neurons output 0; the softmax runs over the active outputs).
    pub fn forward(&self, input: &[f64], active: Option<&[&[u32]]>) -> Vec<f64> {
        self.forward_shifted(input, active, None)
    }

    /// [`forward`](Self::forward) with `shift = (s, labels)` added to the softmax layer's
    /// logits of every active output that is not in `labels` (the log-Q correction), a
    /// `shared_fraction` of it to those in `shared`.
    pub fn forward_shifted(
        &self,
        input: &[f64],
        active: Option<&[&[u32]]>,
        shift: Option<(f64, &[u32])>,
    ) -> Vec<f64> {
        let mut a = input.to_vec();
        for (l, (w, b)) in self.w.iter().zip(&self.b).enumerate() {
            let ids: Vec<usize> = match active {
                Some(sets) => sets[l].iter().map(|&j| j as usize).collect(),
                None => (0..w.len()).collect(),
            };
            let mut out = vec![0.0; w.len()];
            for &j in &ids {
                out[j] = b[j] + w[j].iter().zip(&a).map(|(x, y)| x * y).sum::<f64>();
            }
            match self.activations[l] {
                Activation::Relu => out.iter_mut().for_each(|z| *z = z.max(0.0)),
                Activation::Linear => {}
                Activation::Softmax => {
                    if let Some((by, labels)) = shift {
                        for &j in &ids {
                            if labels.contains(&(j as u32)) {
                                continue;
                            }
                            out[j] += if self.shared.contains(&(j as u32)) {
                                self.shared_fraction * by
                            } else {
                                by
                            };
                        }
                    }
                    let max = ids
                        .iter()
                        .map(|&j| out[j])
                        .fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = ids.iter().map(|&j| (out[j] - max).exp()).sum();
                    let mut p = vec![0.0; w.len()];
                    for &j in &ids {
                        p[j] = (out[j] - max).exp() / sum;
                    }
                    out = p;
                }
                Activation::Sigmoid => {
                    for &j in &ids {
                        out[j] = 1.0 / (1.0 + (-out[j]).exp());
                    }
                }
            }
            a = out;
        }
        a
    }

    /// Batch-mean loss: cross-entropy with soft targets `1/|y|` for a softmax output (with
    /// `decoupled`, each label's softmax against the active non-labels, averaged), one-vs-all
    /// binary cross-entropy summed over the active outputs for a sigmoid one.
    pub fn loss(
        &self,
        data: &dyn Examples,
        batch: &[usize],
        active: Option<&[LayerGradients]>,
    ) -> f64 {
        let mut total = 0.0;
        for (s, &i) in batch.iter().enumerate() {
            let x = dense_input(data.input(i), self.w[0][0].len());
            let sets: Option<Vec<&[u32]>> =
                active.map(|g| g.iter().map(|layer| layer.active[s].as_slice()).collect());
            let labels = data.labels(i);
            // The log-Q shift of this sample and the ids it spares: ln((n - f) / (a - f))
            // on everything but the f labels, or with a random tail of r ids,
            // ln((n - (a - r)) / r) on those r alone.
            let shift = match (self.log_q, &sets) {
                (true, Some(sets)) => {
                    let last = *sets.last().unwrap();
                    let (n, a) = (self.w.last().unwrap().len(), last.len());
                    match self.random_tail {
                        None => {
                            // Forced: the labels and the shared negatives among the active.
                            let shared = self.shared.iter().filter(|j| !labels.contains(j));
                            let f = labels.len() + shared.filter(|j| last.contains(j)).count();
                            Some((((n - f) as f64 / (a - f) as f64).ln(), labels))
                        }
                        Some(r) => Some((((n - (a - r)) as f64 / r as f64).ln(), &last[..a - r])),
                    }
                }
                _ => None,
            };
            let p = self.forward_shifted(&x, sets.as_deref(), shift);
            // The output layer's active ids (every output without sets).
            let active: Vec<u32> = match &sets {
                Some(sets) => sets.last().unwrap().to_vec(),
                None => (0..p.len() as u32).collect(),
            };
            if self.activations.last() == Some(&Activation::Sigmoid) {
                for j in active {
                    let q = p[j as usize];
                    total -= if labels.contains(&j) {
                        q.ln()
                    } else {
                        (1.0 - q).ln()
                    };
                }
                continue;
            }
            if self.decoupled {
                // Each label's softmax against the active non-labels: p_y / (p_y + N).
                let negatives: f64 = active
                    .iter()
                    .filter(|j| !labels.contains(j))
                    .map(|&j| p[j as usize])
                    .sum();
                for &y in labels {
                    let q = p[y as usize] / (p[y as usize] + negatives);
                    total -= q.ln() / labels.len() as f64;
                }
                continue;
            }
            for &y in labels {
                total -= p[y as usize].ln() / labels.len() as f64;
            }
        }
        total / batch.len() as f64
    }
}

pub fn dense_input(v: Vector<'_>, dim: usize) -> Vec<f64> {
    let mut x = vec![0.0; dim];
    match v {
        Vector::Dense(d) => x.iter_mut().zip(d).for_each(|(a, b)| *a = f64::from(*b)),
        Vector::Sparse { indices, values } => {
            for (&i, &v) in indices.iter().zip(values) {
                x[i as usize] = f64::from(v);
            }
        }
    }
    x
}
