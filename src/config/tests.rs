//! Unit tests of the network config: its hash and description, the output activations'
//! checks, and the memory estimate against built networks.

use super::*;
use crate::Network;
use crate::layer::{Init, LshConfig, Negatives, Retrieval};
use crate::layer::{Precision, SecondMoment, WeightLayout};
use slide_lsh::{BucketPolicy, FamilyKind, LshParams, Sampling};

fn config() -> NetworkConfig {
    let layers = vec![
        LayerConfig::new(8, Activation::Relu),
        LayerConfig::new(3, Activation::Softmax),
    ];
    NetworkConfig {
        rebuild: RebuildSchedule::Fixed { every: 5 },
        seed: 1,
        ..NetworkConfig::new(10, layers)
    }
}

/// The hash is a fixed number for a fixed config (it names checkpoints' networks across
/// versions), ignores training-only settings and changes with the network.
#[test]
fn architecture_hash_is_stable_and_ignores_training_settings() {
    let base = config();
    assert_eq!(base.architecture_hash(), 0xace3_a60e_1fd1_8647);
    let mut trained_differently = base.clone();
    trained_differently.adam.lr = 0.5;
    trained_differently.rebuild = RebuildSchedule::Fixed { every: 9 };
    trained_differently.layers[0].init = Init::FanIn;
    trained_differently.layers[1].moments = Precision::Bf16;
    trained_differently.layers[1].weights = Precision::Bf16;
    trained_differently.layers[1].second_moment = SecondMoment::Row;
    trained_differently.layers[1].softmax_loss = SoftmaxLoss::Decoupled;
    trained_differently.layers[1].lr_scale = 2.0;
    let described = trained_differently.describe();
    assert!(described.contains(&("layers.1.lr_scale".into(), "2".into())));
    assert!(described.contains(&("layers.1.second_moment".into(), "Row".into())));
    assert!(described.contains(&("layers.1.softmax_loss".into(), "Decoupled".into())));
    assert_eq!(
        trained_differently.architecture_hash(),
        base.architecture_hash()
    );
    let mut wider = base.clone();
    wider.layers[0].out_dim = 9;
    assert_ne!(wider.architecture_hash(), base.architecture_hash());
    let mut reseeded = base.clone();
    reseeded.seed = 2;
    assert_ne!(reseeded.architecture_hash(), base.architecture_hash());
    // The input power is the model's (it reads every input through it), named when not 1.
    assert!(!base.describe().iter().any(|(k, _)| k == "input_power"));
    let powered = NetworkConfig {
        input_power: 0.5,
        ..base.clone()
    };
    assert!(
        powered
            .describe()
            .contains(&("input_power".into(), "0.5".into()))
    );
    assert_ne!(powered.architecture_hash(), base.architecture_hash());
    let keys: Vec<String> = base.describe().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys[..3], ["input_dim", "seed", "layers.0.out_dim"]);
}

/// A sampled layer's settings: SimHash, 16 shared negatives, no pool.
fn lsh_config() -> LshConfig {
    LshConfig {
        retrieval: Retrieval {
            family: FamilyKind::SimHash(slide_lsh::Projection::Gaussian),
            params: LshParams {
                k: 10,
                l: 8,
                range_pow: 10,
            },
            bucket_capacity: 64,
            policy: BucketPolicy::Fifo,
            sampling: Sampling::vanilla().with_budget(100),
            ..Default::default()
        },
        negatives: Negatives {
            shared_negatives: 16,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A pool of shared negatives is named (and hashed: checkpoints hold it) only when it is
/// larger than the shared negatives, so configs from before it existed keep their hash.
#[test]
fn a_pool_is_part_of_the_architecture_when_it_is_used() {
    let with_pool = |shared_pool| {
        let mut config = config();
        let mut lsh = lsh_config();
        lsh.negatives.shared_pool = shared_pool;
        config.layers[1].lsh = Some(lsh);
        config
    };
    let hash = |pool| with_pool(pool).architecture_hash();
    assert_eq!(hash(16), hash(0));
    assert_ne!(hash(17), hash(0));
    let described = with_pool(40).describe();
    assert!(described.contains(&("layers.1.lsh.shared_pool".to_string(), "40".to_string())));
    // How a sample scores the pool is named but not hashed: it holds no weights.
    let mut fewer_inputs = with_pool(40);
    if let Some(lsh) = &mut fewer_inputs.layers[1].lsh {
        lsh.negatives.shared_pool_inputs = 8;
    }
    assert!(fewer_inputs.describe().contains(&(
        "layers.1.lsh.shared_pool_inputs".to_string(),
        "8".to_string()
    )));
    assert_eq!(fewer_inputs.architecture_hash(), hash(40));
    // So is the smallest gradient that trains: it holds no weights either.
    let mut cut = with_pool(40);
    if let Some(lsh) = &mut cut.layers[1].lsh {
        lsh.negatives.min_gradient = 0.001;
    }
    assert!(
        cut.describe()
            .contains(&("layers.1.lsh.min_gradient".to_string(), "0.001".to_string()))
    );
    assert_eq!(cut.architecture_hash(), hash(40));
    assert!(
        !with_pool(0)
            .describe()
            .iter()
            .any(|(k, _)| k.ends_with("shared_pool"))
    );
}

/// A sigmoid output layer is accepted; a sigmoid or softmax below the output, a ReLU
/// output, a log-Q correction of a sigmoid, a layer's `lr_scale` that is not positive and
/// decoupled softmax targets on a sigmoid are refused, each naming the layer or the setting.
#[test]
fn output_activations_are_checked() {
    let mut sigmoid = config();
    sigmoid.layers[1].activation = Activation::Sigmoid;
    sigmoid.validate().unwrap();
    let mut hidden = config();
    hidden.layers[0].activation = Activation::Sigmoid;
    let message = hidden.validate().unwrap_err().to_string();
    assert!(message.contains("layers[0]"), "{message}");
    let mut relu = config();
    relu.layers[1].activation = Activation::Relu;
    let message = relu.validate().unwrap_err().to_string();
    assert!(message.contains("softmax or the sigmoid"), "{message}");
    let lsh = LshConfig {
        negatives: Negatives {
            log_q: true,
            ..Default::default()
        },
        ..LshConfig::default()
    };
    let mut corrected = sigmoid.clone();
    corrected.layers[1] = corrected.layers[1].sampled(lsh);
    let message = corrected.validate().unwrap_err().to_string();
    assert!(message.contains("log_q"), "{message}");
    corrected.layers[1].lsh.as_mut().unwrap().negatives.log_q = false;
    corrected.validate().unwrap();
    for bad in [0.0, -1.0, f32::NAN] {
        let mut scaled = config();
        scaled.layers[1].lr_scale = bad;
        let message = Network::new(scaled).err().unwrap().to_string();
        assert!(message.contains("lr_scale"), "{message}");
    }
    // Decoupled softmax targets belong to a softmax layer alone.
    let mut decoupled = config();
    decoupled.layers[1].softmax_loss = SoftmaxLoss::Decoupled;
    decoupled.layers[1].validate().unwrap();
    Network::new(decoupled.clone()).unwrap();
    decoupled.layers[1].activation = Activation::Sigmoid;
    let message = decoupled.layers[1].validate().unwrap_err().to_string();
    assert!(message.contains("softmax_loss"), "{message}");
    let message = Network::new(decoupled).err().unwrap().to_string();
    assert!(
        message.contains("layers[1]") && message.contains("softmax_loss"),
        "{message}"
    );
}

/// The estimate is close to what a built network holds (its parameters and tables after
/// the first rebuild, which store every id) and to the size of its exported state.
#[test]
fn estimated_bytes_match_a_built_network() {
    let (f32, bf16) = (Precision::F32, Precision::Bf16);
    for (weights, moments) in [(f32, f32), (f32, bf16), (bf16, bf16)] {
        estimate_matches(weights, moments);
    }
}

/// Rank 0 of 2 holds the hidden layer and the first half of the outputs, with tables
/// tuned for its half: the per-rank estimate matches what it allocates as closely as
/// the whole network's does, and is a little over half of the whole (0.559 at this
/// shape: the hidden layer is whole on each rank).
#[test]
fn estimated_bytes_per_rank_match_a_built_rank() {
    let config = wide(Precision::F32, Precision::F32, 1000);
    let estimate = config.estimated_bytes_per_rank(2);
    let rank = crate::comm::InProcess::group(2).remove(0);
    let mut net = Network::sharded(config.clone(), std::sync::Arc::new(rank)).unwrap();
    net.rebuild_tables().unwrap();
    estimate_holds(&mut net, estimate);
    let whole = config.estimated_bytes().model() as f64;
    let share = estimate.model() as f64 / whole;
    assert!(
        (0.5..0.6).contains(&share),
        "a rank holds {share} of the whole"
    );
}

/// 300 inputs -> 64 (input-major) -> 5,000 outputs with tables and a pool of `pool`.
fn wide(weights: Precision, moments: Precision, pool: usize) -> NetworkConfig {
    let mut config = config();
    config.layers[1].moments = moments;
    config.layers[1].weights = weights;
    config.input_dim = 300;
    config.layers[0].layout = WeightLayout::InputMajor;
    config.layers[0].out_dim = 64;
    config.layers[1].out_dim = 5000;
    let mut lsh = lsh_config();
    lsh.negatives.shared_pool = pool;
    config.layers[1].lsh = Some(lsh);
    config
}

/// Asserts that `estimate` is at most 10% above what `net` (a [`wide`] network) holds,
/// its pool's copied rows (about a tenth of the BF16 network) included: they exist once
/// the pool is refreshed.
fn estimate_holds(net: &mut Network, estimate: MemoryEstimate) {
    net.layer_mut(1).refresh_mean_input(&[0.5; 64]);
    let held = net.memory_bytes() as f64;
    let ratio = estimate.model() as f64 / held;
    assert!(
        (1.0..1.1).contains(&ratio),
        "estimate {estimate:?}, held {held}"
    );
}

fn estimate_matches(weights: Precision, moments: Precision) {
    let config = wide(weights, moments, 2000);
    let estimate = config.estimated_bytes();
    let mut net = Network::new(config).unwrap();
    for _ in 0..3 {
        net.rebuild_tables().unwrap();
    }
    estimate_holds(&mut net, estimate);
    let state = net.export_state();
    let exported: usize = state
        .layers
        .iter()
        .map(|l| {
            4 * (l.weights.len() * 3 + l.row_steps.len() + l.bias.len() * 4 + l.shared.len())
                + l.tables
                    .as_ref()
                    .map_or(0, |t| 4 * (t.buckets.len() + t.store.len()))
        })
        .sum();
    let ratio = estimate.state as f64 / exported as f64;
    assert!(
        (1.0..1.1).contains(&ratio),
        "estimate {estimate:?}, exported {exported}"
    );
}
