//! Unit tests of the config: the shipped configs, overrides, and the keys that reach the
//! core's types or are refused.

use super::*;
use slide::config::fnv1a;
use slide::{NetworkConfig, Precision, SecondMoment};

/// Every shipped config parses and passes validation (data files are not needed for that:
/// a config that takes its output size from the data's header is given `data.labels`).
#[test]
fn shipped_configs_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let config = load(&path, &[])
                .or_else(|_| load(&path, &["data.labels=1000".into()]))
                .unwrap_or_else(|e| panic!("{e:#}"));
            checked += 1;
            assert!(!config.network.layers.is_empty());
            // The resolved core config goes through serde (the core's `serde` feature)
            // and back unchanged.
            let network = config.network(1000, 1000);
            let text = serde_json::to_string(&network).unwrap();
            let back: NetworkConfig = serde_json::from_str(&text).unwrap();
            assert_eq!(back, network, "{}", path.display());
        }
    }
    assert!(checked >= 6, "only {checked} configs");
}

/// An output layer without `size` takes the label count: from `data.labels`, else from the
/// XMC training file's header; a missing file is named, with the key being filled.
#[test]
fn the_output_size_comes_from_the_data() {
    let dir = std::env::temp_dir().join(format!("slide-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let train = dir.join("train.txt");
    std::fs::write(&train, "2 5 37\n0 1:1\n36 4:0.5\n").unwrap();
    let text = |data: &str| {
        format!(
            "[data]\nformat = \"xmc\"\ntrain = \"{}\"\ntest = \"{}\"\n{data}\n\
             [[network.layers]]\nsize = 8\nactivation = \"relu\"\n\
             [[network.layers]]\nactivation = \"sigmoid\"\n",
            train.display(),
            train.display()
        )
    };
    let path = Path::new("sizes.toml");
    let from_header = parse(&text(""), path, &[]).unwrap();
    assert_eq!(from_header.network.layers[1].out_dim, 37);
    assert_eq!(from_header.network.layers[0].out_dim, 8);
    let declared = parse(&text("labels = 12"), path, &[]).unwrap();
    assert_eq!(declared.network.layers[1].out_dim, 12);
    let given = parse(&text(""), path, &["network.layers.1.size=5".into()]).unwrap();
    assert_eq!(given.network.layers[1].out_dim, 5);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = format!("{:#}", parse(&text(""), path, &[]).unwrap_err());
    assert!(
        err.contains("network.layers[1].size is left out") && err.contains("train.txt"),
        "{err}"
    );
}

#[test]
fn overrides_reach_tables_and_list_entries() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mnist.toml");
    let config = load(
        &path,
        &[
            "train.lr=0.5".into(),
            "network.layers.0.size=77".into(),
            "data.dir=elsewhere".into(),
        ],
    )
    .unwrap();
    assert_eq!(config.train.adam.lr, 0.5);
    assert_eq!(config.network.layers[0].out_dim, 77);
    assert_eq!(config.data.dir.as_deref(), Some(Path::new("elsewhere")));
    let err = load(&path, &["network.layers.x.size=1".into()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "--set network.layers.x.size=1: `x` is not an index into a list"
    );
    let err = load(&path, &["nonsense".into()]).unwrap_err().to_string();
    assert_eq!(err, "--set nonsense: expected section.key=value");

    // The moments' precision reaches the core's layer config; other values are refused.
    let bf16 = load(&path, &["network.layers.1.moments=\"bf16\"".into()]).unwrap();
    let layers = bf16.network(784, 1000).layers;
    assert_eq!(layers[0].moments, Precision::F32);
    assert_eq!(layers[1].moments, Precision::Bf16);
    let err = load(&path, &["network.layers.1.moments=\"f16\"".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown variant `f16`"), "{err}");

    // And the second moment's form.
    let row = load(&path, &["network.layers.1.second_moment=\"row\"".into()]).unwrap();
    let layers = row.network(784, 1000).layers;
    assert_eq!(
        (layers[0].second_moment, layers[1].second_moment),
        (SecondMoment::Element, SecondMoment::Row)
    );
    let err = load(&path, &["network.layers.1.second_moment=\"column\"".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown variant `column`"), "{err}");

    // So does the weights' precision, which needs BF16 moments.
    let both = [
        "network.layers.1.moments=\"bf16\"".into(),
        "network.layers.1.weights=\"bf16\"".into(),
    ];
    let layers = load(&path, &both).unwrap().network(784, 1000).layers;
    assert_eq!(
        (layers[0].weights, layers[1].weights),
        (Precision::F32, Precision::Bf16)
    );
    let err = load(&path, &["network.layers.1.weights=\"bf16\"".into()]).unwrap_err();
    assert!(
        format!("{err:#}").ends_with(
            ": network.layers[1]: invalid configuration of layer: BF16 weights need BF16 moments"
        ),
        "{err:#}"
    );
}

/// The shared negatives' shift, pool and refresh period reach the core's LSH config
/// (the period is 8 steps unless set); a pool wider than the layer is the whole layer (one
/// recipe for any label count); a shift outside [0, 1] or a period of 0 is refused when the
/// config is loaded.
#[test]
fn shared_shift_is_a_fraction_and_the_pool_fits_the_layer() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
    let shipped = load(&path, &[]).unwrap().network(135_909, 20_000);
    let lsh = shipped.layers[1].lsh.unwrap();
    assert_eq!(
        (lsh.negatives.shared_shift, lsh.negatives.shared_pool),
        (0.5, 2048)
    );
    assert_eq!(lsh.negatives.shared_refresh, 32);
    // xmc.toml scores its pool with 64 inputs; on 100 labels, fewer than its 128 shared
    // negatives, there is no pool, and the setting goes with it.
    let xmc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/xmc.toml");
    let sized = |labels: usize| {
        let sets = [
            "data.features=50".to_string(),
            format!("data.labels={labels}"),
            format!("network.layers.1.size={labels}"),
        ];
        load(&xmc, &sets).unwrap().network(50, labels)
    };
    let narrow = sized(100);
    let negatives = narrow.layers[1].lsh.unwrap().negatives;
    assert_eq!(
        (negatives.shared_pool, negatives.shared_pool_inputs),
        (100, 0)
    );
    narrow.validate().unwrap();
    let wide = sized(5_000);
    let negatives = wide.layers[1].lsh.unwrap().negatives;
    assert_eq!(
        (negatives.shared_pool, negatives.shared_pool_inputs),
        (2048, 64)
    );
    let mnist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mnist.toml");
    let unset = load(&mnist, &[]).unwrap().network(784, 60_000).layers[0].lsh;
    assert_eq!(unset.unwrap().negatives.shared_refresh, 8);
    let err = load(&path, &["network.layers.1.lsh.shared_refresh=0".into()]).unwrap_err();
    assert!(
        format!("{err:#}").ends_with("shared_refresh must be at least 1 step"),
        "{err:#}"
    );
    let err = load(&path, &["network.layers.1.lsh.shared_shift=1.5".into()]).unwrap_err();
    assert!(
        format!("{err:#}").ends_with("shared_shift must be in [0, 1], got 1.5"),
        "{err:#}"
    );
    // Weighted MinHash (a family of the lsh crate for weighted sets, not signed weight
    // rows) is no family a layer can name: refused by the type, naming the ones it can.
    let err = load(
        &path,
        &[r#"network.layers.1.lsh.family="weighted_minhash""#.into()],
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("unknown variant `weighted_minhash`"),
        "{err:#}"
    );
    let whole = load(&path, &["network.layers.1.lsh.shared_pool=700000".into()]).unwrap();
    let lsh = whole.network(135_909, 20_000).layers[1].lsh.unwrap();
    assert_eq!(lsh.negatives.shared_pool, 670_091);
    let small = load(&path, &["network.layers.1.size=591".into()]).unwrap();
    assert_eq!(
        small.network.layers[1].lsh.unwrap().negatives.shared_pool,
        591
    );
}

/// The warm-up's random negatives reach the core's LSH config (the shipped 128 for half
/// an epoch: 78 of the 157 steps of 20,000 samples, 391 of 782 for 100,000, at least 1),
/// on top of the uniform ablation's too; a length in steps or in epochs, not both; one
/// without the other, or a length that is not positive, is refused when the config is
/// loaded.
#[test]
fn warm_up_negatives_reach_the_core() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
    let warm = |overrides: &[String], samples: usize| {
        let network = load(&path, overrides).unwrap().network(135_909, samples);
        let lsh = network.layers[1].lsh.unwrap();
        let warmup = lsh.warmup.unwrap();
        let slide::WarmupLength::Steps(steps) = warmup.length else {
            panic!("{warmup:?} is not in steps");
        };
        (lsh.effective_sampling().random_extra, warmup.random, steps)
    };
    assert_eq!(warm(&[], 20_000), (0, 128, 78));
    assert_eq!(warm(&[], 100_000), (0, 128, 391));
    assert_eq!(warm(&[], 10), (0, 128, 1));
    // Uniform picks are an ablation, read only with the `ablations` feature.
    #[cfg(feature = "ablations")]
    {
        let uniform = ["network.layers.1.lsh.picks=\"uniform\"".into()];
        assert_eq!(warm(&uniform, 20_000), (128, 128, 78));
    }
    let in_steps = ["network.layers.1.lsh.warmup.length={ steps = 100 }".into()];
    assert_eq!(warm(&in_steps, 20_000), (0, 128, 100));
    let layer = "network.layers[1].lsh: invalid configuration of lsh: ";
    for (bad, expected) in [
        (
            "warmup.random=0",
            "warmup.random must be at least 1 (no warm-up: leave it out)",
        ),
        (
            "warmup.length={ steps = 0 }",
            "warmup.length: steps must be at least 1",
        ),
        (
            "warmup.length={ epochs = -1.0 }",
            "warmup.length: epochs must be a positive number, got -1",
        ),
    ] {
        let overrides = [format!("network.layers.1.lsh.{bad}")];
        let err = format!("{:#}", load(&path, &overrides).unwrap_err());
        assert!(
            err.ends_with(&format!("{layer}{expected}")),
            "{bad:?}: {err}"
        );
    }
    // What serde refuses names the key.
    for (bad, expected) in [
        ("warmup={ random = 128 }", "missing field `length`"),
        ("warmup.length={ steps = 1, epochs = 0.5 }", "length"),
    ] {
        let overrides = [format!("network.layers.1.lsh.{bad}")];
        let err = format!("{:#}", load(&path, &overrides).unwrap_err());
        assert!(err.contains(expected), "{bad:?}: {err}");
    }
}

/// The TOML keys reach the core's schedule; a factor above 1 is refused.
#[test]
fn learning_rate_schedules() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mnist.toml");
    let sets = [
        "train.lr=0.01",
        "train.lr_schedule=\"cosine\"",
        "train.lr_min=0.001",
        "train.lr_gamma=0.5",
        "train.warmup_steps=10",
    ];
    let overrides: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let mut config = load(&path, &overrides).unwrap();
    let t = &mut config.train;
    let schedule = t.schedule;
    assert_eq!(t.adam.lr, 0.01);
    assert_eq!(
        schedule,
        slide::LrSchedule {
            decay: slide::Decay::Cosine,
            lr_min: 0.001,
            lr_gamma: 0.5,
            warmup_steps: 10
        }
    );
    // Half-way through the warm-up, the cosine still at its start (0.0099996).
    assert!((schedule.rate(t.adam.lr, 5, 1000, 1) - 0.005).abs() < 1e-6);
    t.schedule.lr_gamma = 1.5;
    assert!(
        config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("lr_gamma")
    );
}

/// What checkpoints record of each shipped config (and of the ablations' and the random
/// ids' old spellings on the Amazon-670K one): the architecture hash, and a hash of every
/// described setting (the training-only ones too, which a resume names when they change),
/// for 1,000 inputs and 20,000 training samples. Recorded before the config keys were
/// renamed (issue 28): configs that mean the same network describe it the same way, so
/// checkpoints written before still load. The Amazon-670K configs' settings hash moved when
/// they took `shared_pool_inputs = 128`, again with `min_gradient = 0.0005` and with
/// `rebuild_every = 100` (training settings: their checkpoints still evaluate, and resuming
/// an older one names the changed setting). Their architecture hash moved when the output
/// layer's `budget` and `min_active` went from 256 to 128 (the tables' K and L follow the
/// budget): with those two set back to 256 the hash is the one older checkpoints carry, so
/// they evaluate as before.
#[test]
fn shipped_configs_describe_their_networks_as_recorded() {
    let recorded: &[(&str, u64, u64)] = &[
        (
            "amazon670k-synthetic.toml ",
            0xf9272769a9a1ded1,
            0x546eb9a4f654bf12,
        ),
        (
            "amazon670k-synthetic.toml network.layers.1.lsh.budget=256 network.layers.1.lsh.min_active=256",
            0x9a7a83cdefa97001,
            0xea1120d6c6bacbfe,
        ),
        (
            "amazon670k-synthetic.toml network.layers.1.lsh.exact_picks=true",
            0xf9272769a9a1ded1,
            0x973fd0de9008b3d0,
        ),
        (
            "amazon670k-synthetic.toml network.layers.1.lsh.uniform=true",
            0x3280d8cab78a691f,
            0x5dd0fbef99d93744,
        ),
        (
            "amazon670k-synthetic.toml network.layers.1.lsh.uniform_negatives=7",
            0x5c643fb93f56af60,
            0x9f72741fee66fd61,
        ),
        ("amazon670k.toml ", 0xf9272769a9a1ded1, 0x546eb9a4f654bf12),
        (
            "delicious200k.toml ",
            0x55d1e5376e6df96a,
            0xd2f83ff47a21715b,
        ),
        (
            "fashion-mnist.toml ",
            0x16eec6fbebd3054f,
            0x2e51dcf6a2cb5494,
        ),
        ("mnist.toml ", 0x97247b6c79930137, 0x0df38f2165f138ac),
        ("quickstart.toml ", 0x0dc47d32804f442b, 0xc7458173bf96cfdc),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") && load(&path, &[]).is_ok() {
            cases.push((path.file_name().unwrap().to_string_lossy().into(), vec![]));
        }
    }
    // The ablations' picks only where the trainer is built with the `ablations` feature
    // (as `cargo test --workspace` builds it); elsewhere they are refused (legacy/tests.rs).
    let built = |name: &str| {
        cfg!(feature = "ablations") || !(name.contains("exact_picks") || name.contains("uniform="))
    };
    let recorded: Vec<(&str, u64, u64)> = recorded.iter().copied().filter(|r| built(r.0)).collect();
    for set in ["uniform=true", "exact_picks=true", "uniform_negatives=7"]
        .into_iter()
        .filter(|set| built(set))
    {
        let set = format!("network.layers.1.lsh.{set}");
        cases.push(("amazon670k-synthetic.toml".into(), vec![set]));
    }
    // The budget the Amazon-670K configs had before: the network their older checkpoints
    // were written for.
    cases.push((
        "amazon670k-synthetic.toml".into(),
        vec![
            "network.layers.1.lsh.budget=256".into(),
            "network.layers.1.lsh.min_active=256".into(),
        ],
    ));
    let mut seen = Vec::new();
    for (name, overrides) in cases {
        let network = load(&dir.join(&name), &overrides)
            .unwrap()
            .network(1000, 20_000);
        let described = network
            .describe()
            .iter()
            .fold(slide::config::FNV_OFFSET, |h, (key, value)| {
                fnv1a(fnv1a(h, key.as_bytes()), value.as_bytes())
            });
        let name = format!("{name} {}", overrides.join(" "));
        seen.push((name, network.architecture_hash(), described));
    }
    seen.sort();
    for (name, hash, described) in &seen {
        println!("(\"{name}\", {hash:#018x}, {described:#018x}),");
    }
    let seen: Vec<(&str, u64, u64)> = seen.iter().map(|(n, h, d)| (n.as_str(), *h, *d)).collect();
    assert_eq!(seen, recorded);
}

/// `[train]` reads the core's settings under their own keys into the core's types (Adam's,
/// the schedule's, the rebuilds', the evaluations'), each left out at the core's default;
/// a key nobody knows is refused by name, and the core's checks name the key.
#[test]
fn train_keys_reach_the_core_types() {
    let data = "[data]\nformat = \"xmc\"\ntrain = \"a\"\ntest = \"b\"\n\
                [[network.layers]]\nsize = 4\nactivation = \"softmax\"\n";
    let path = Path::new("train.toml");
    let defaults = parse(data, path, &[]).unwrap().train;
    assert_eq!(defaults.adam, slide::AdamConfig::default());
    assert_eq!(defaults.schedule, slide::LrSchedule::default());
    assert_eq!(defaults.rebuild, slide::RebuildSchedule::default());
    assert_eq!(defaults.eval, slide::EvalOptions::default());
    assert_eq!(defaults.adam.lr, 0.001, "PyTorch's default");
    let set = |keys: &[&str]| {
        let keys: Vec<String> = keys.iter().map(|k| format!("train.{k}")).collect();
        parse(data, path, &keys)
    };
    let t = set(&[
        "beta2=0.99",
        "bias_correction=\"per-row\"",
        "rebuild_every=7",
        "rebuild_growth=1.5",
        "eval_mode=\"lsh\"",
        "eval_pool=64",
        "eval_picks=3",
        "warmup_steps=5",
    ])
    .unwrap()
    .train;
    assert_eq!(t.adam.beta2, 0.99);
    assert_eq!(t.adam.bias_correction, slide::BiasCorrection::PerRow);
    assert_eq!(
        t.rebuild,
        slide::RebuildSchedule::Exponential {
            first: 7,
            growth: 1.5
        }
    );
    assert_eq!(
        t.eval,
        slide::EvalOptions {
            mode: slide::Mode::EvalLsh,
            pool: 64,
            picks: Some(3),
            ..slide::EvalOptions::default()
        }
    );
    assert_eq!(t.schedule.warmup_steps, 5);
    for (bad, expected) in [
        ("lrr=0.1", "train: unknown field `lrr`"),
        ("eval_mode=\"train\"", "unknown variant `train`"),
        (
            "rebuild_growth=0.5",
            "train.rebuild_growth: must be a finite number >= 1",
        ),
        (
            "rebuild_every=0",
            "train.rebuild_every: the period must be at least 1 step",
        ),
        ("beta1=1.0", "train.beta1 and beta2: must be in [0, 1)"),
        ("eps=0.0", "train.eps: must be positive"),
        ("lr_gamma=0.0", "train.lr_gamma: must be in (0, 1], got 0"),
    ] {
        let err = format!("{:#}", set(&[bad]).unwrap_err());
        assert!(err.contains(expected), "{bad}: {err}");
    }
}

/// `[[network.layers]]` and `[network.layers.lsh]` are read straight into the core's
/// `LayerConfig` and `LshConfig`: an unknown key, sizes half given or a strategy without its
/// setting is refused naming the layer, and sizes left out are tuned from the budget and the
/// layer's width as the layer is read.
#[test]
fn layers_are_the_cores_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
    let tuned = load(&path, &[]).unwrap().network.layers[1].lsh.unwrap();
    let expected = slide::lsh::tune_for_budget(670_091, 128, 3).unwrap();
    assert_eq!(
        (tuned.retrieval.params, tuned.retrieval.bucket_capacity),
        (expected.params, expected.bucket_capacity)
    );
    for (set, expected) in [
        ("lsh.bogus=1", "network.layers[1]: unknown field `bogus`"),
        ("bogus=1", "network.layers[1]: unknown field `bogus`"),
        (
            "lsh.k=4",
            "network.layers[1]: invalid configuration of lsh: give all of k, l and range_pow, \
             or none of them (tuned from budget)",
        ),
        (
            "lsh.strategy=\"threshold\"",
            "network.layers[1]: invalid configuration of lsh: strategy threshold needs min_hits",
        ),
    ] {
        let err = load(&path, &[format!("network.layers.1.{set}")]).unwrap_err();
        assert!(format!("{err:#}").contains(expected), "{set}: {err:#}");
    }
    // Read alone, an LSH table has no width to tune its sizes for.
    let lsh: toml::Table =
        toml::from_str("family = { dwta = { bin_size = 8 } }\nstrategy = \"top-k\"\nbudget = 64")
            .unwrap();
    let err = slide::LshConfig::deserialize(lsh).unwrap_err().to_string();
    assert!(err.contains("the layer's width"), "{err}");
}

/// configs/README.md's `[train]` table and the types agree: every key the types read (the
/// default config written back by serde, plus the optional ones it leaves out) has one row,
/// every row names a key the types read, and each row's default is the types' default.
#[test]
fn the_train_table_of_configs_readme_matches_the_types() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/README.md"))
            .unwrap();
    let section = readme
        .split("\n## [train]\n")
        .nth(1)
        .expect("configs/README.md has a `## [train]` section");
    let rows: Vec<(String, String)> = section
        .lines()
        .skip_while(|l| !l.starts_with("| `"))
        .take_while(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let key = cells[0].trim_start_matches("| ").trim_matches('`');
            (key.to_string(), cells[1].trim_matches('`').to_string())
        })
        .collect();
    let defaults = toml::Table::try_from(TrainConfig::default()).unwrap();
    let optional = ["eval_picks"];
    let mut documented: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
    let mut known: Vec<&str> = defaults.keys().map(String::as_str).collect();
    known.extend(optional);
    documented.sort_unstable();
    known.sort_unstable();
    assert_eq!(
        documented, known,
        "configs/README.md's [train] rows vs the types' keys"
    );
    for (key, default) in &rows {
        let Some(value) = defaults.get(key) else {
            assert_eq!(default, "unset", "{key}: the types leave it unset");
            continue;
        };
        let written: toml::Value = toml::from_str::<toml::Table>(&format!("v = {default}"))
            .unwrap_or_else(|e| panic!("{key}: default `{default}` is not TOML: {e}"))["v"]
            .clone();
        let same = match (value, &written) {
            (toml::Value::Float(a), b) => {
                let b = b.as_float().or(b.as_integer().map(|i| i as f64)).unwrap();
                (*a as f32) == (b as f32)
            }
            (a, b) => a == b,
        };
        assert!(
            same,
            "{key}: configs/README.md says {default}, the types {value}"
        );
    }
}

/// The keys a type reads from a config file, as serde lists them: a deserializer that
/// records the field names of the first struct asked for and stops.
fn keys_of<T: for<'de> serde::Deserialize<'de>>() -> Vec<&'static str> {
    use serde::de::{self, Visitor};
    struct Names(std::cell::RefCell<Vec<&'static str>>);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("stop")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> de::Deserializer<'de> for &Names {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.borrow_mut().extend(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let names = Names(std::cell::RefCell::new(Vec::new()));
    let _ = T::deserialize(&names);
    names.0.into_inner()
}

/// Every shipped config loads and reads as a recipe: at most 80 lines (what a key does in a
/// line or two; the measurements live in docs/notebook/).
#[test]
fn shipped_configs_load_and_stay_recipes() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&configs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        seen += 1;
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 80, "{}: {lines} lines", path.display());
        load(&path, &["data.labels=1000".into()]).unwrap_or_else(|e| panic!("{e:#}"));
    }
    assert!(seen >= 7, "{seen} configs");
}

/// The number after the first "default " that follows `` `key` `` in `text` (configs/README.md's
/// prose sections name a key in backticks and then its default).
fn prose_default(text: &str, key: &str) -> Option<f64> {
    let after = &text[text.find(&format!("`{key}`"))?..];
    let rest = &after[after.find("default ")? + "default ".len()..];
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    number.trim_end_matches('.').parse().ok()
}

/// The defaults configs/README.md gives in prose are the types' (each written once, in the
/// core's type; this test reads them from the types): `[network] input_power` and every
/// key of each head kind, read from that kind's paragraph.
#[test]
fn prose_defaults_of_configs_readme_match_the_types() {
    use slide::head::label_linear::LabelLinearConfig;
    use slide::head::rare_labels::RareLabelsConfig;
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/README.md"))
            .unwrap();
    let power = f64::from(slide::NetworkConfig::DEFAULT_INPUT_POWER);
    let network = &readme[readme.find("`[network] input_power`").unwrap()..];
    assert!(
        network.contains(&format!("default {power}")),
        "input_power's default"
    );
    let kinds = [
        (
            "kind = \"label-linear\"",
            toml::Table::try_from(LabelLinearConfig::default()).unwrap(),
        ),
        (
            "kind = \"rare-labels\"",
            toml::Table::try_from(RareLabelsConfig::default()).unwrap(),
        ),
    ];
    for (kind, defaults) in kinds {
        let paragraph = &readme[readme.find(kind).unwrap_or_else(|| panic!("{kind}"))..];
        for (key, value) in &defaults {
            let want = value
                .as_float()
                .or(value.as_integer().map(|v| v as f64))
                .unwrap_or_else(|| panic!("{kind} {key}: a number"));
            assert_eq!(
                prose_default(paragraph, key),
                Some(want),
                "configs/README.md, {kind}: `{key}`'s default"
            );
        }
    }
}

/// Every key the other sections' types read is documented in configs/README.md (the
/// `[train]` table is checked both ways above): `[data]`, `[[network.layers]]`,
/// `[network]`'s own keys, `[network.layers.lsh]` and its warm-up, each head kind's
/// `[[network.heads]]` keys, `[log]`, `[checkpoint]`.
#[test]
fn configs_readme_names_every_key_of_every_section() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/README.md"))
            .unwrap();
    // `[network.layers.lsh]` flattens its concepts' keys, which serde does not list: the
    // keys every shipped config's LSH settings write back (each key but the unset options),
    // and the negatives' (all of them).
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut lsh_keys: Vec<&'static str> = keys_of::<slide::Negatives>();
    let mut written = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&configs).unwrap() {
        let path = entry.unwrap().path();
        let Ok(config) = load(&path, &["data.labels=1000".into()]) else {
            continue;
        };
        for lsh in config.network.layers.iter().filter_map(|l| l.lsh) {
            written.extend(
                toml::Table::try_from(lsh)
                    .unwrap()
                    .into_iter()
                    .map(|(k, _)| k),
            );
        }
    }
    assert!(written.len() >= 12, "{written:?}");
    let written: Vec<&'static str> = written
        .into_iter()
        .map(|k| &*Box::leak(k.into_boxed_str()))
        .collect();
    lsh_keys.extend(written);
    // `[network]`'s own keys, less its two sub-tables (named as sections below).
    let network: Vec<&'static str> = keys_of::<NetworkSection>()
        .into_iter()
        .filter(|k| !["layers", "heads"].contains(k))
        .collect();
    let sections = [
        ("[data]", keys_of::<DataConfig>()),
        ("[network]", network),
        ("[[network.layers]]", keys_of::<slide::LayerConfig>()),
        ("[network.layers.lsh]", lsh_keys),
        ("[network.layers.lsh.warmup]", keys_of::<slide::Warmup>()),
        (
            "kind = \"label-linear\"",
            keys_of::<slide::head::label_linear::LabelLinearConfig>(),
        ),
        (
            "kind = \"rare-labels\"",
            keys_of::<slide::head::rare_labels::RareLabelsConfig>(),
        ),
        ("[log]", keys_of::<LogConfig>()),
        ("[checkpoint]", keys_of::<CheckpointConfig>()),
    ];
    for (section, keys) in sections {
        assert!(!keys.is_empty(), "{section}: no keys read");
        for key in keys {
            // Named in backticks, with a value, or as a sub-table (`[network.layers.lsh]`).
            let named = [format!("`{key}`"), format!("`{key} ="), format!(".{key}]`")];
            assert!(
                named.iter().any(|n| readme.contains(n.as_str())),
                "configs/README.md does not name {section} key `{key}`"
            );
        }
    }
}

/// `[[network.heads]]` reach the core's head configs with their defaults for the keys left
/// out and into the network config; a value out of range is refused naming the key, an
/// unknown key or kind by name. `[network.wide]` of old reads as the two heads it was.
#[test]
fn head_keys_reach_the_core_types() {
    use slide::head::label_linear::LabelLinearConfig;
    use slide::head::rare_labels::RareLabelsConfig;
    let data = "[data]\nformat = \"xmc\"\ntrain = \"a\"\ntest = \"b\"\n\
                [[network.layers]]\nsize = 4\nactivation = \"softmax\"\n";
    let path = Path::new("heads.toml");
    assert_eq!(parse(data, path, &[]).unwrap().network.heads, vec![]);
    let with_heads = |heads: &str| format!("{data}{heads}");
    let linear =
        "[[network.heads]]\nkind = \"label-linear\"\nbits = 20\nweight = 0.25\nepochs = 3\n";
    let rare = "[[network.heads]]\nkind = \"rare-labels\"\nlabels = 8\n";
    let config = parse(&with_heads(&format!("{linear}{rare}")), path, &[]).unwrap();
    let want = vec![
        slide::HeadConfig::LabelLinear(LabelLinearConfig {
            bits: 20,
            weight: 0.25,
            epochs: 3,
            ..LabelLinearConfig::default()
        }),
        slide::HeadConfig::RareLabels(RareLabelsConfig {
            labels: 8,
            ..RareLabelsConfig::default()
        }),
    ];
    assert_eq!(config.network.heads, want);
    assert_eq!(config.network(10, 100).heads, want);
    let old = "[network.wide]\nbits = 20\nweight = 0.25\nepochs = 3\nrare_labels = 8\n";
    assert_eq!(
        parse(&with_heads(old), path, &[]).unwrap().network.heads,
        want
    );
    let message = |set: &str| {
        let text = with_heads(linear);
        format!("{:#}", parse(&text, path, &[set.into()]).unwrap_err())
    };
    let bad = message("network.heads.0.bits=40");
    assert!(
        bad.contains("network.heads.label-linear.bits: must be between 10 and 32"),
        "{bad}"
    );
    let bad = message("network.heads.0.bias=-1");
    assert!(
        bad.contains("network.heads.label-linear.bias: must be 0 or more"),
        "{bad}"
    );
    let unknown = message("network.heads.0.buckets=20");
    assert!(unknown.contains("buckets"), "{unknown}");
    let unknown = message("network.heads.0.kind=\"tree\"");
    assert!(unknown.contains("tree"), "{unknown}");
}

/// `[network] input_power` reaches the core's network config (1, the inputs as stored,
/// when left out); a power that is not above 0 is refused before any work, naming the key.
#[test]
fn the_input_power_reaches_the_core() {
    let data = "[data]\nformat = \"xmc\"\ntrain = \"a\"\ntest = \"b\"\n\
                [[network.layers]]\nsize = 4\nactivation = \"softmax\"\n";
    let path = Path::new("power.toml");
    assert_eq!(
        parse(data, path, &[]).unwrap().network(10, 100).input_power,
        1.0
    );
    let config = parse(data, path, &["network.input_power=0.5".into()]).unwrap();
    assert_eq!(config.network(10, 100).input_power, 0.5);
    for bad in ["0", "-1", "nan"] {
        let set = format!("network.input_power={bad}");
        let err = format!("{:#}", parse(data, path, &[set]).unwrap_err());
        assert!(
            err.contains("network.input_power: must be a finite number above 0"),
            "{bad}: {err}"
        );
    }
}

/// A small training set gets smaller batches, so that an epoch takes at least
/// `min_steps_per_epoch` steps (the schedule and the warm-ups follow); 0 is refused.
#[test]
fn small_training_sets_get_smaller_batches() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let xmc: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("xmc.toml")).unwrap()).unwrap();
    let t: TrainConfig = xmc["train"].clone().try_into().unwrap();
    assert_eq!((t.batch_size, t.min_steps_per_epoch), (512, 16));
    assert_eq!((t.batch(45_660), t.steps_per_epoch(45_660)), (512, 90));
    assert_eq!((t.batch(4_880), t.steps_per_epoch(4_880)), (305, 16));
    assert_eq!((t.batch(5), t.steps_per_epoch(5)), (1, 5));
    // 100 samples: batches of 6, 17 steps (ceil(100 / 16) = 7 would give 15).
    assert_eq!((t.batch(100), t.steps_per_epoch(100)), (6, 17));
    // Without a minimum the batch is `batch_size`, whatever the set's size.
    assert_eq!(TrainConfig::default().batch(100), 128);
    assert_eq!(TrainConfig::default().steps_per_epoch(100), 1);
    let path = root.join("amazon670k-synthetic.toml");
    let err = load(&path, &["train.min_steps_per_epoch=0".into()]).unwrap_err();
    assert!(
        format!("{err:#}").contains("train.min_steps_per_epoch must be at least 1"),
        "{err:#}"
    );
}
