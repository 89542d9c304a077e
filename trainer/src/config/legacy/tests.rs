//! Unit tests of the renamed keys: each old spelling loads into the same network as its new
//! one, with a note naming the new key, or is refused with a message naming it.

use std::path::{Path, PathBuf};

use crate::config::{Config, load, parse};

/// The shipped Amazon-670K config: its path and text.
fn shipped() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

/// [`parse`] of `text` with `overrides`.
fn parse_with(text: &str, path: &Path, overrides: &[&str]) -> anyhow::Result<Config> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    parse(text, path, &overrides)
}

/// Where the notes and errors of the shipped config's output layer start.
const PLACE: &str = "network.layers[1].lsh: ";

/// The keys renamed in issue 28 still load, with a note naming the new key, into the same
/// network: `uniform_negatives` (now `random_extra`), `warmup_negatives` / `warmup_steps` /
/// `warmup_epochs` (now `warmup = { random, length = { steps } | { epochs } }`, apart from
/// `[train] warmup_steps`).
#[test]
fn old_key_names_load_with_a_note() {
    let (path, text) = shipped();
    let old_text = text.replace(
        "[network.layers.lsh.warmup]\nrandom = 128\nlength = { epochs = 0.5 }\n",
        "warmup_negatives = 128\nwarmup_epochs = 0.5\nwarmup_steps = 0\nuniform_negatives = 3\n",
    );
    assert_ne!(old_text, text);
    let new = parse_with(&text, &path, &["network.layers.1.lsh.random_extra=3"]).unwrap();
    assert!(new.notes.is_empty(), "{:?}", new.notes);
    let old = parse_with(&old_text, &path, &[]).unwrap();
    assert_eq!(old.network(135_909, 20_000), new.network(135_909, 20_000));
    assert_eq!(
        old.notes,
        [
            "`uniform_negatives` is now `random_extra`; read as such",
            "`warmup_negatives` is now `warmup.random`; read as such",
            "`warmup_steps` is now `warmup.length.steps`; read as such",
            "`warmup_epochs` is now `warmup.length.epochs`; read as such",
        ]
        .map(|n| format!("{PLACE}{n}"))
    );
}

/// The ablations' flags of old, as benches/xmc/compare.py's --set lines spell them, in
/// a trainer built with the `ablations` feature (as the benchmarks' crate builds it):
/// `uniform = true` / `exact_picks = true` load as `picks = "uniform"` / `"exact"` with a
/// note.
#[cfg(feature = "ablations")]
#[test]
fn the_ablations_flags_of_old_load_as_picks() {
    let (path, text) = shipped();
    for (flag, name, picks) in [
        ("uniform", "uniform", slide::Picks::Uniform),
        ("exact_picks", "exact", slide::Picks::Exact),
    ] {
        let set = format!("network.layers.1.lsh.{flag}=true");
        let config = parse_with(&text, &path, &[&set]).unwrap();
        assert_eq!(
            config.network(135_909, 20_000).layers[1].lsh.unwrap().picks,
            picks
        );
        let note = format!("{PLACE}`{flag} = true` is now `picks = \"{name}\"`; read as such");
        assert_eq!(config.notes, [note]);
    }
}

/// `uniform = false` and `exact_picks = false` of old, and `picks = "tables"`, say what the
/// default says, in any build: the same network, with a note.
#[test]
fn the_tables_picks_in_any_spelling_load_as_the_default() {
    let (path, text) = shipped();
    let unchanged = parse_with(&text, &path, &[]).unwrap();
    // With the `ablations` feature `picks = "tables"` is a key like any other: no note.
    let old_key = cfg!(not(feature = "ablations"));
    for (set, noted) in [
        ("uniform=false", true),
        ("exact_picks=false", true),
        ("picks=\"tables\"", old_key),
    ] {
        let set = format!("network.layers.1.lsh.{set}");
        let config = parse_with(&text, &path, &[&set]).unwrap();
        assert_eq!(
            config.network(135_909, 20_000),
            unchanged.network(135_909, 20_000),
            "{set}"
        );
        assert_eq!(
            config.notes.len(),
            usize::from(noted),
            "{set}: {:?}",
            config.notes
        );
    }
}

/// A trainer built without the `ablations` feature, whose core reads no `picks` key,
/// refuses the ablations' picks, in either spelling, with a message naming the feature.
#[cfg(not(feature = "ablations"))]
#[test]
fn the_ablations_picks_without_the_feature_are_refused_naming_it() {
    let (path, text) = shipped();
    for (set, picks, old) in [
        ("exact_picks=true", "exact", "exact_picks"),
        ("picks=\"exact\"", "exact", "exact_picks"),
        ("uniform=true", "uniform", "uniform"),
        ("picks=\"uniform\"", "uniform", "uniform"),
    ] {
        let set = format!("network.layers.1.lsh.{set}");
        let err = format!("{:#}", parse_with(&text, &path, &[&set]).unwrap_err());
        let expected = format!(
            "network.layers[1].lsh: `picks = \"{picks}\"` (`{old} = true` of old) is an \
             ablation, built only with the trainer's `ablations` feature: cargo run \
             --release -p slide-trainer --features ablations -- ..."
        );
        assert!(err.ends_with(&expected), "{set}: {err}");
    }
    let set = "network.layers.1.lsh.picks=\"bogus\"";
    let err = format!("{:#}", parse_with(&text, &path, &[set]).unwrap_err());
    assert!(
        err.contains("`picks` chooses an ablation, built only with the trainer's `ablations`"),
        "{err}"
    );
}

/// An old key beside its new one, or both ablations at once, is refused with a message
/// naming the new key.
#[test]
fn an_old_key_beside_its_new_one_is_refused() {
    let (path, text) = shipped();
    for (overrides, expected) in [
        (
            vec![
                "network.layers.1.lsh.uniform=true",
                "network.layers.1.lsh.exact_picks=true",
            ],
            "`uniform` and `exact_picks` are both ablations of where the picks come from; give \
             one, as `picks = \"uniform\"` or `picks = \"exact\"`",
        ),
        (
            vec![
                "network.layers.1.lsh.uniform=true",
                "network.layers.1.lsh.picks=\"exact\"",
            ],
            "`uniform` is the old spelling of `picks = \"uniform\"`; give `picks` only",
        ),
        (
            vec!["network.layers.1.lsh.warmup_steps=5"],
            "`warmup_steps` is an old name in `[network.layers[1].lsh.warmup]`; give the \
             warm-up there only",
        ),
        (
            vec![
                "network.layers.1.lsh.uniform_negatives=1",
                "network.layers.1.lsh.random_extra=1",
            ],
            "`uniform_negatives` is the old name of `random_extra`; give `random_extra` only",
        ),
    ] {
        let err = format!("{:#}", parse_with(&text, &path, &overrides).unwrap_err());
        assert!(
            err.ends_with(&format!("{PLACE}{expected}")),
            "{overrides:?}: {err}"
        );
    }
}

/// Half a warm-up of old, or one with two lengths, is refused naming the new form; a whole
/// one in steps loads as such.
#[test]
fn a_warm_up_of_old_loads_whole_or_is_refused() {
    let (path, text) = shipped();
    let no_warmup = text.replace(
        "[network.layers.lsh.warmup]\nrandom = 128\nlength = { epochs = 0.5 }\n",
        "",
    );
    assert_ne!(no_warmup, text);
    let form = "(now `warmup = { random = R, length = { steps = N } }` or `{ epochs = E }`)";
    for (overrides, expected) in [
        (
            vec!["warmup_negatives=4"],
            format!("warmup_negatives needs its length, warmup_steps or warmup_epochs {form}"),
        ),
        (
            vec!["warmup_negatives=4", "warmup_steps=5", "warmup_epochs=1.0"],
            format!("give warmup_steps or warmup_epochs, not both {form}"),
        ),
        (
            vec!["warmup_steps=5"],
            format!("a warm-up's length needs warmup_negatives {form}"),
        ),
    ] {
        let overrides: Vec<String> = overrides
            .iter()
            .map(|s| format!("network.layers.1.lsh.{s}"))
            .collect();
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        let err = format!(
            "{:#}",
            parse_with(&no_warmup, &path, &overrides).unwrap_err()
        );
        assert!(
            err.ends_with(&format!("{PLACE}{expected}")),
            "{overrides:?}: {err}"
        );
    }
    let steps = parse_with(
        &no_warmup,
        &path,
        &[
            "network.layers.1.lsh.warmup_negatives=4",
            "network.layers.1.lsh.warmup_steps=5",
        ],
    )
    .unwrap();
    let warmup = steps.network(135_909, 20_000).layers[1].lsh.unwrap().warmup;
    let length = slide::WarmupLength::Steps(5);
    assert_eq!(warmup, Some(slide::Warmup { random: 4, length }));
}

/// `init` is the core's `Init`: `init = "normal"` with `init_scale` (the old spelling)
/// loads as `{ normal = { std = ... } }` with a note; a scale without a scaled init, a scaled
/// init without a scale, or a scale that is not positive, is refused naming the layer.
#[test]
fn init_is_the_cores_type() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/amazon670k-synthetic.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let old_text = text
        .replace(
            "init = { normal = { std = 1.0 } }",
            "init = \"normal\"\ninit_scale = 1.0",
        )
        .replace(
            "init = { uniform = { bound = 0.003 } }",
            "init = \"uniform\"\ninit_scale = 0.003",
        );
    let old = parse(&old_text, &path, &[]).unwrap();
    let new = parse(&text, &path, &[]).unwrap();
    assert_eq!(old.network(135_909, 20_000), new.network(135_909, 20_000));
    assert_eq!(
        new.network(135_909, 20_000).layers[1].init,
        slide::Init::Uniform { bound: 0.003 }
    );
    assert_eq!(
        old.notes,
        [
            "network.layers[0]: `init = \"normal\"` with `init_scale = 1.0` is now \
             `init = { normal = { std = 1.0 } }`; read as such",
            "network.layers[1]: `init = \"uniform\"` with `init_scale = 0.003` is now \
             `init = { uniform = { bound = 0.003 } }`; read as such",
        ]
    );
    for (overrides, expected) in [
        (
            vec!["network.layers.1.init=\"uniform\""],
            "network.layers[1]: init = \"uniform\" needs its scale: \
             `init = { uniform = { bound = ... } }`",
        ),
        (
            vec![
                "network.layers.1.init=\"glorot\"",
                "network.layers.1.init_scale=2.0",
            ],
            "network.layers[1]: init_scale applies to normal and uniform only (now \
             `init = { normal = { std = ... } }` or `{ uniform = { bound = ... } }`)",
        ),
        (
            vec!["network.layers.0.init={ normal = { std = -1.0 } }"],
            "network.layers[0]: invalid configuration of layer: the init scale must be a \
             positive number, got -1",
        ),
    ] {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let err = format!("{:#}", parse(&text, &path, &overrides).unwrap_err());
        assert!(err.ends_with(expected), "{overrides:?}: {err}");
    }
}

/// `family` is the lsh crate's `FamilyKind` with its settings: the old flat keys
/// (`family = "dwta"` with `bin_size`, `"simhash"` with `density`) load with a note into the
/// same network; a flat setting beside a new-style family is refused naming the new form.
#[test]
fn family_is_the_lsh_crates_type() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    for (name, new_form, old_form, note) in [
        (
            "amazon670k-synthetic.toml",
            "family = { dwta = { bin_size = 8 } }",
            "family = \"dwta\"\nbin_size = 8",
            "network.layers[1].lsh: `family = \"dwta\"` and its settings are now \
             `family = { dwta = { bin_size = 8 } }`; read as such",
        ),
        (
            "quickstart.toml",
            "family = { simhash = { sparse = { density = 0.33333334 } } }",
            "family = \"simhash\"",
            "network.layers[0].lsh: `family = \"simhash\"` and its settings are now \
             `family = { simhash = { sparse = {} } }`; read as such",
        ),
    ] {
        let path = configs.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(new_form), "{name}");
        let old = parse(&text.replace(new_form, old_form), &path, &[]).unwrap();
        let new = parse(&text, &path, &[]).unwrap();
        assert_eq!(old.network(1000, 1000), new.network(1000, 1000), "{name}");
        assert_eq!(old.notes, [note]);
    }
    let path = configs.join("amazon670k-synthetic.toml");
    let set = ["network.layers.1.lsh.family.dwta.bin_size=16".to_string()];
    let family = load(&path, &set).unwrap().network(1000, 1000).layers[1].lsh;
    let dwta16 = slide::lsh::FamilyKind::Dwta { bin_size: 16 };
    assert_eq!(family.unwrap().retrieval.family, dwta16);
    let err = format!(
        "{:#}",
        load(&path, &["network.layers.1.lsh.bin_size=16".into()]).unwrap_err()
    );
    assert!(
        err.ends_with(
            "network.layers[1].lsh: `bin_size` is a setting of the family now: `family = { dwta \
             = { bin_size = 8 } }`, `{ simhash = { sparse = { density = 0.33 } } }` or \
             `{ minhash = { bits = 3 } }`"
        ),
        "{err}"
    );
}
