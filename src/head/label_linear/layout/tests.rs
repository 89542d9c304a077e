//! The dense and hashed layouts of the per-label linear head: which one a shape gets, and a
//! table read across layouts and label counts (old checkpoints, grown networks).
use super::super::{LabelLinearConfig, LabelLinearHead, TABLE};
use super::*;
use crate::head::{Head, HeadTensor};
use crate::network_state::MemorySource;
use slide_lsh::Vector;

fn shape(inputs: usize, outputs: usize) -> HeadShape {
    HeadShape { inputs, outputs }
}

fn config(bits: u32) -> LabelLinearConfig {
    LabelLinearConfig {
        bits,
        ..LabelLinearConfig::default()
    }
}

/// Samples on `inputs` features: sample `k` has three features and label `k % labels`.
fn samples(inputs: u32, labels: u32) -> Vec<(Vec<u32>, Vec<f32>, u32)> {
    (0..60u32)
        .map(|k| {
            let mut f = vec![k % inputs, (k * 7 + 3) % inputs, (k * 13 + 5) % inputs];
            f.sort_unstable();
            f.dedup();
            let v = f.iter().map(|&j| 0.3 + (j % 5) as f32 * 0.1).collect();
            (f, v, k % labels)
        })
        .collect()
}

/// A few SGD steps on `samples` with shortlists of three labels.
fn train(head: &mut LabelLinearHead, data: &[(Vec<u32>, Vec<f32>, u32)], labels: u32) {
    for (f, v, y) in data {
        let x = Vector::Sparse {
            indices: f,
            values: v,
        };
        let shortlist = [*y, (y + 1) % labels, (y + 5) % labels];
        let mut updates = Vec::new();
        head.gradients(x, &shortlist, &[*y], &mut updates);
        head.apply(x, &updates, 0.3);
    }
}

/// `head`'s table as a network state's tensor.
fn state(head: &LabelLinearHead) -> crate::NetworkState {
    crate::NetworkState {
        heads: HeadTensor::all(head.state_tensors(), |name, sink| {
            head.write_state_tensor(name, sink)
        })
        .unwrap(),
        ..Default::default()
    }
}

fn scores(head: &LabelLinearHead, data: &[(Vec<u32>, Vec<f32>, u32)], labels: u32) -> Vec<f32> {
    data.iter()
        .flat_map(|(f, v, _)| {
            (0..labels).map(move |l| {
                head.score(
                    Vector::Sparse {
                        indices: f,
                        values: v,
                    },
                    l,
                )
            })
        })
        .collect()
}

#[test]
fn a_table_that_fits_holds_one_weight_per_pair() {
    // 20 labels x (30 features + the bias) = 620 weights <= 2^10: dense; 40 labels are
    // too many.
    let head = LabelLinearHead::new(config(10), shape(30, 20)).unwrap();
    assert!(head.is_dense());
    assert_eq!(head.table().len(), 620);
    assert_eq!(head.state_tensors()[0].shape, [620]);
    let mut seen = vec![false; 620];
    for l in 0..20 {
        for j in (0..30).chain([BIAS_FEATURE]) {
            let s = head.slot(j, l);
            assert!(!seen[s], "pair ({j}, {l}) shares slot {s}");
            seen[s] = true;
        }
    }
    let hashed = LabelLinearHead::new(config(10), shape(30, 40)).unwrap();
    assert!(!hashed.is_dense());
    assert_eq!(hashed.table().len(), 1024);
}

#[test]
fn a_hashed_table_reads_into_a_dense_head_with_the_same_scores() {
    // What a checkpoint written before dense tables holds: the same settings, hashed.
    let data = samples(30, 20);
    let mut old = LabelLinearHead::new(config(10), shape(30, 20)).unwrap();
    old.layout = Layout::Hashed { bits: 10 };
    old.table = vec![0.0; 1024];
    train(&mut old, &data, 20);
    let mut dense = LabelLinearHead::new(config(10), shape(30, 20)).unwrap();
    let tensor = &old.state_tensors()[0];
    assert!(dense.carries(tensor));
    dense
        .read_state(9, 20, &mut MemorySource(&state(&old)))
        .unwrap();
    assert!(dense.is_dense());
    assert_eq!(scores(&dense, &data, 20), scores(&old, &data, 20));
}

#[test]
fn a_grown_network_keeps_its_labels_weights_and_starts_new_ones_at_zero() {
    let data = samples(30, 20);
    let mut trained = LabelLinearHead::new(config(12), shape(30, 20)).unwrap();
    train(&mut trained, &data, 20);
    // Dense to dense: 32 x 31 weights fit in 2^12.
    let mut grown = LabelLinearHead::new(config(12), shape(30, 32)).unwrap();
    assert!(grown.carries(&trained.state_tensors()[0]));
    grown
        .read_state(0, 32, &mut MemorySource(&state(&trained)))
        .unwrap();
    assert_eq!(&grown.table()[..620], trained.table());
    assert!(grown.table()[620..].iter().all(|&w| w == 0.0));
    assert_eq!(scores(&grown, &data, 20), scores(&trained, &data, 20));
    // Dense to hashed: 40 x 31 weights do not fit in 2^10; every weight is added to its
    // pair's slot (pairs may now share one), so their sum is kept.
    let mut trained = LabelLinearHead::new(config(10), shape(30, 20)).unwrap();
    train(&mut trained, &data, 20);
    let mut hashed = LabelLinearHead::new(config(10), shape(30, 40)).unwrap();
    assert!(!hashed.is_dense());
    hashed
        .read_state(0, 40, &mut MemorySource(&state(&trained)))
        .unwrap();
    let sum = |t: &[f32]| t.iter().map(|&w| f64::from(w)).sum::<f64>();
    assert!((sum(hashed.table()) - sum(trained.table())).abs() < 1e-4);
    assert!(hashed.table().iter().any(|&w| w != 0.0));
    // A table of another length is neither carried nor read.
    let other = LabelLinearHead::new(config(12), shape(29, 20)).unwrap();
    let mut head = LabelLinearHead::new(config(12), shape(30, 32)).unwrap();
    assert!(!head.carries(&other.state_tensors()[0]));
    let err = head
        .read_state(0, 32, &mut MemorySource(&state(&other)))
        .unwrap_err();
    assert!(err.to_string().contains(TABLE), "{err}");
}

#[test]
fn a_table_of_exactly_two_to_the_bits_pairs_is_hashed() {
    // 32 labels x (31 features + the bias) = 1,024 = 2^10: hashed, so that its length
    // never reads as a dense table's (nor an old hashed one's as dense).
    let head = LabelLinearHead::new(config(10), shape(31, 32)).unwrap();
    assert!(!head.is_dense());
    let below = LabelLinearHead::new(config(10), shape(30, 33)).unwrap();
    assert!(below.is_dense() && below.table().len() == 1023);
}
