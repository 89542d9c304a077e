//! The rare-labels head's unit tests: its index, its candidates and its state.
use super::*;
use crate::head::{HeadConfig, Heads};

fn sparse<'a>(indices: &'a [u32], values: &'a [f32]) -> Vector<'a> {
    Vector::Sparse { indices, values }
}

/// Four samples: feature 1 is in three (not rare at `max_df` 2), features 2, 5, 6 and 7 in
/// one or two. A sample of features {1, 5, 6} draws label 10 from feature 5 and labels 10
/// and 11 from feature 6 (11 from two samples): 10 and 11 both count 2, the lower first.
#[test]
fn rare_features_name_the_labels_they_occur_with() {
    let mut data = crate::SparseExamples::new();
    data.push(&[1, 5], &[1.0, 1.0], &[10]);
    data.push(&[1, 6], &[1.0, 1.0], &[10, 11]);
    data.push(&[1, 7], &[1.0, 1.0], &[12]);
    data.push(&[2, 6], &[1.0, 1.0], &[11]);
    let index = RareIndex::build(&data, 2);
    let query = |indices: &[u32], skip: &[u32], take: usize, out: Vec<u32>| {
        let mut out = out;
        let values = vec![0.5; indices.len()];
        index.candidates(
            sparse(indices, &values),
            skip,
            take,
            &mut Vec::new(),
            &mut out,
        );
        out
    };
    assert_eq!(query(&[1, 5, 6], &[], 8, vec![]), vec![10, 11]);
    assert_eq!(query(&[1, 5, 6], &[], 1, vec![]), vec![10]);
    assert_eq!(query(&[1, 5, 6], &[10], 8, vec![]), vec![11]);
    // Already there: passed over, and the next one taken instead.
    assert_eq!(query(&[1, 5, 6, 7], &[], 1, vec![10]), vec![10, 11]);
    assert_eq!(
        query(&[1], &[], 8, vec![]),
        Vec::<u32>::new(),
        "feature 1 is common"
    );
    assert_eq!(
        query(&[40], &[], 8, vec![]),
        Vec::<u32>::new(),
        "never seen"
    );
    assert_eq!(query(&[2], &[], 8, vec![]), vec![11]);
    // With every feature rare, feature 1 adds 10 twice, 11 once and 12 once.
    let all = RareIndex::build(&data, 3);
    let mut out = Vec::new();
    all.candidates(sparse(&[1], &[1.0]), &[], 8, &mut Vec::new(), &mut out);
    assert_eq!(out, vec![10, 11, 12]);
    // The parts of a state file give the index back; parts that do not fit are refused.
    let (starts, entries) = (index.starts().to_vec(), index.entries().to_vec());
    assert_eq!(
        RareIndex::from_parts(starts.clone(), entries.clone()),
        Some(index.clone())
    );
    assert_eq!(index.label_bound(), 13, "labels 10 to 12");
    assert_eq!(
        RareIndex::from_parts(starts.clone(), entries[..entries.len() - 2].to_vec()),
        None
    );
    let mut falling = starts;
    falling[3] = 9;
    assert_eq!(RareIndex::from_parts(falling, entries), None);
}

/// Prediction's candidates: the network's first `shortlist` (the scoring head's), then the
/// rare features' labels not among them, each with the last shortlisted logit; before the
/// index is built, the shortlist alone. Without a head that scores, they keep that order.
#[test]
fn rare_labels_join_the_shortlist_at_its_last_logit() {
    let mut data = crate::SparseExamples::new();
    data.push(&[3], &[1.0], &[2]);
    data.push(&[4], &[1.0], &[9]);
    let rare = HeadConfig::RareLabels(RareLabelsConfig {
        labels: 4,
        ..RareLabelsConfig::default()
    });
    let best: Vec<(f32, u32)> = (0..7).map(|k| (10.0 - k as f32, k)).collect();
    let x = sparse(&[3, 4], &[1.0, 1.0]);
    let mut heads = Heads::new(std::slice::from_ref(&rare), SHAPE).unwrap();
    assert_eq!(
        heads.rerank(x, &best),
        best,
        "no index yet: the network's order"
    );
    heads.prepare(&data);
    assert_eq!(
        heads.rerank(x, &best),
        [&best[..], &[(4.0, 9)]].concat(),
        "label 2 is ranked already; label 9 joins at the last logit"
    );
    #[cfg(feature = "label-linear-head")]
    {
        let linear = HeadConfig::LabelLinear(crate::head::label_linear::LabelLinearConfig {
            bits: 12,
            shortlist: 5,
            ..Default::default()
        });
        let mut heads = Heads::new(&[linear, rare], SHAPE).unwrap();
        heads.prepare(&data);
        // An untrained linear head scores 0: the candidates keep their logits.
        assert_eq!(heads.rerank(x, &best), [&best[..5], &[(6.0, 9)]].concat());
    }
}

/// The index goes out as two tensors and comes back; a state without it is refused once
/// training began, and one naming a label beyond the layer is refused.
#[test]
fn the_index_round_trips_through_the_state_protocol() {
    let mut data = crate::SparseExamples::new();
    data.push(&[3], &[1.0], &[2]);
    data.push(&[4], &[1.0], &[9]);
    let config = RareLabelsConfig::default();
    let mut head = config.build(SHAPE).unwrap();
    assert!(head.state_tensors().is_empty());
    head.prepare(&data);
    let names: Vec<String> = head.state_tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names, [STARTS, ENTRIES]);
    let state = crate::NetworkState {
        heads: crate::head::HeadTensor::all(head.state_tensors(), |name, sink| {
            head.write_state_tensor(name, sink)
        })
        .unwrap(),
        ..Default::default()
    };
    let mut back = config.build(SHAPE).unwrap();
    back.read_state(5, 10, &mut crate::network_state::MemorySource(&state))
        .unwrap();
    assert_eq!(back, head);
    let err = back
        .read_state(5, 9, &mut crate::network_state::MemorySource(&state))
        .unwrap_err();
    assert!(err.to_string().contains("names label 9"), "{err}");
    let empty = crate::NetworkState::default();
    let mut fresh = config.build(SHAPE).unwrap();
    assert!(
        fresh
            .read_state(0, 10, &mut crate::network_state::MemorySource(&empty))
            .is_ok()
    );
    let err = fresh
        .read_state(1, 10, &mut crate::network_state::MemorySource(&empty))
        .unwrap_err();
    assert!(
        err.to_string().contains("remove the rare-labels head"),
        "{err}"
    );
}

/// A network of 8 input features and 10 outputs.
const SHAPE: crate::head::HeadShape = crate::head::HeadShape {
    inputs: 8,
    outputs: 10,
};
