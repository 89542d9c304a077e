//! Unit tests of [`LshConfig`]: its default is its concepts', its description keeps
//! the names and values checkpoints recorded, each concept's check refuses through it, the
//! ranks' shares add up to it, and a warm-up in epochs is turned into steps before a
//! network is built from it.

use slide_lsh::{BucketPolicy, FamilyKind, LshParams, Strategy};

use super::*;
use crate::{Activation, LayerConfig, Network, NetworkConfig, SlideError};

/// Every setting away from its default (the picks aside: the product has one).
fn everything_set() -> LshConfig {
    LshConfig {
        retrieval: Retrieval {
            family: FamilyKind::Wta { bin_size: 4 },
            params: LshParams {
                k: 3,
                l: 8,
                range_pow: 10,
            },
            bucket_capacity: 64,
            policy: BucketPolicy::Reservoir,
            sampling: Sampling::top_k(20).with_min_active(30).with_random_extra(5),
            center_queries: true,
            dense_share: 0.75,
        },
        negatives: Negatives {
            log_q: true,
            shared_negatives: 4,
            shared_shift: 0.5,
            shared_pool: 16,
            shared_pool_inputs: 3,
            shared_refresh: 32,
            shared_rescore: 4,
            min_gradient: 0.001,
        },
        warmup: Some(Warmup {
            random: 8,
            length: WarmupLength::Steps(100),
        }),
        ..LshConfig::default()
    }
}

/// The default is each concept's default, the tables' picks and no warm-up; every setting
/// away from its default still passes the checks.
#[test]
fn the_default_is_the_concepts_defaults() {
    let default = LshConfig::default();
    assert_eq!(default.retrieval, Retrieval::default());
    assert_eq!(default.negatives, Negatives::default());
    assert_eq!((default.picks, default.warmup), (Picks::Tables, None));
    everything_set().validate(100).unwrap();
}

/// What a checkpoint records of the settings, name and value, as before the settings were
/// split by concept (the trainer's `shipped_configs_describe_their_networks_as_recorded`
/// pins the shipped configs' hashes): the first eight always, the rest only when set.
#[test]
fn describe_keeps_the_names_and_values_checkpoints_recorded() {
    let described = |config: &LshConfig| {
        let mut settings = Vec::new();
        config.describe(&mut |name, value| settings.push(format!("{name}={value}")));
        settings
    };
    let always = [
        "family=Dwta { bin_size: 8 }",
        "params=LshParams { k: 4, l: 16, range_pow: 12 }",
        "bucket_capacity=128",
        "policy=Fifo",
        "sampling=Sampling { strategy: Vanilla, budget: None, min_active: 0, random_extra: 0 }",
        "log_q=false",
        "shared_negatives=0",
        "center_queries=false",
    ];
    assert_eq!(described(&LshConfig::default()), always);
    assert_eq!(
        described(&everything_set())[4..],
        [
            "sampling=Sampling { strategy: TopK { k: 20 }, budget: None, min_active: 30, \
             random_extra: 5 }",
            "log_q=true",
            "shared_negatives=4",
            "center_queries=true",
            "shared_pool=16",
            "shared_shift=0.5",
            "shared_pool_inputs=3",
            "shared_refresh=32",
            "shared_rescore=4",
            "min_gradient=0.001",
            "dense_share=0.75",
            "warmup_random=8",
            "warmup_steps=100",
        ]
    );
}

/// Each concept's check refuses through [`LshConfig::validate`], under the name "lsh".
#[test]
fn each_concepts_check_refuses_through_the_config() {
    let refused = |config: LshConfig, expected: &str| {
        let err = config.validate(100).unwrap_err();
        assert!(
            matches!(&err, SlideError::InvalidConfig { what, reason }
                if what == "lsh" && reason.contains(expected)),
            "{expected}: {err}"
        );
    };
    let lsh = LshConfig::default();
    refused(
        LshConfig {
            negatives: Negatives {
                shared_shift: 2.0,
                ..lsh.negatives
            },
            ..lsh
        },
        "shared_shift must be in [0, 1]",
    );
    refused(
        LshConfig {
            negatives: Negatives {
                shared_pool: 101,
                shared_negatives: 1,
                ..lsh.negatives
            },
            ..lsh
        },
        "at most the layer's 100 neurons",
    );
    for dense_share in [0.0, 1.5, f32::NAN] {
        refused(
            LshConfig {
                retrieval: Retrieval {
                    dense_share,
                    ..lsh.retrieval
                },
                ..lsh
            },
            "dense_share must be in (0, 1]",
        );
    }
    refused(
        LshConfig {
            negatives: Negatives {
                shared_rescore: 0,
                ..lsh.negatives
            },
            ..lsh
        },
        "shared_rescore must be at least 1 step",
    );
    for min_gradient in [-0.001, 1.0, f32::NAN] {
        refused(
            LshConfig {
                negatives: Negatives {
                    min_gradient,
                    ..lsh.negatives
                },
                ..lsh
            },
            "min_gradient must be in [0, 1)",
        );
    }
    let no_ids = Warmup {
        random: 0,
        length: WarmupLength::Steps(1),
    };
    refused(
        LshConfig {
            warmup: Some(no_ids),
            ..lsh
        },
        "warmup.random must be at least 1",
    );
    let err = LshConfig {
        retrieval: Retrieval {
            sampling: Sampling::top_k(0),
            ..lsh.retrieval
        },
        ..lsh
    }
    .validate(100)
    .unwrap_err();
    assert!(err.to_string().contains("must be at least 1"), "{err}");
    #[cfg(feature = "ablations")]
    refused(
        LshConfig {
            picks: Picks::Uniform,
            ..lsh
        },
        "uniform picks need a budget",
    );
}

/// The ranks' shares of every size add up to the whole (each at least 1 where the whole
/// is); everything else is every rank's.
#[test]
fn the_ranks_shares_add_up_to_the_whole() {
    let whole = everything_set();
    let parts: Vec<LshConfig> = (0..3).map(|rank| whole.rank_share(rank, 3)).collect();
    let sum = |size: fn(&LshConfig) -> usize| parts.iter().map(size).sum::<usize>();
    let top_k = |l: &LshConfig| match l.retrieval.sampling.strategy {
        Strategy::TopK { k } => k,
        _ => unreachable!("top-k stays top-k"),
    };
    assert_eq!(sum(top_k), 20);
    assert_eq!(sum(|l| l.retrieval.sampling.min_active), 30);
    assert_eq!(sum(|l| l.retrieval.sampling.random_extra), 5);
    assert_eq!(sum(|l| l.negatives.shared_negatives), 4);
    assert_eq!(sum(|l| l.negatives.shared_pool), 16);
    assert_eq!(sum(|l| l.warmup.unwrap().random), 8);
    for part in &parts {
        assert_eq!(part.retrieval.params, whole.retrieval.params);
        assert_eq!(
            (part.negatives.log_q, part.negatives.shared_shift),
            (true, 0.5)
        );
        assert_eq!(part.warmup.unwrap().length, WarmupLength::Steps(100));
    }
}

/// A network is not built from a warm-up still in epochs;
/// [`NetworkConfig::with_epoch_length`] turns it into steps (157 steps an epoch: half an
/// epoch is 78), which the layer then runs.
#[test]
fn a_warm_up_in_epochs_is_turned_into_steps_before_the_network_is_built() {
    let lsh = LshConfig {
        warmup: Some(Warmup {
            random: 4,
            length: WarmupLength::Epochs(0.5),
        }),
        ..Default::default()
    };
    let layers = vec![LayerConfig::new(40, Activation::Softmax).sampled(lsh)];
    let config = NetworkConfig::new(10, layers);
    assert!(config.layers[0].validate().is_ok());
    assert!(matches!(
        Network::new(config.clone()),
        Err(SlideError::InvalidConfig { .. })
    ));
    let resolved = config.with_epoch_length(157);
    let lsh = resolved.layers[0].lsh.unwrap();
    let in_steps = Warmup {
        random: 4,
        length: WarmupLength::Steps(78),
    };
    assert_eq!(lsh.warmup, Some(in_steps));
    assert_eq!(lsh.warmup_random_and_steps(), (4, 78));
    Network::new(resolved).unwrap();
}
