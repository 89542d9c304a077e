//! Config keys of old (issue 28 gave each setting the core's name and type), read under
//! their new names with a note that says so, or refused with a message naming the new key
//! where the old spelling cannot be carried over: old config files and `--set` lines keep
//! working. The ablations' key, `picks`, is read by the core only with the `ablations`
//! feature; without it `picks = "uniform"` or `"exact"` is refused here, naming the
//! feature, and `picks = "tables"` (what such a build always does) read as left out. Runs
//! on the TOML value, after the overrides and before the sections are read.

use anyhow::{Result, bail};
use toml::{Table, Value};

#[cfg(test)]
mod tests;

/// `[network.layers.lsh]` keys renamed to the core's field names, old name first.
const RENAMED: [(&str, &str); 1] = [("uniform_negatives", "random_extra")];

/// The warm-up's flat keys of old, and their places in `[network.layers.lsh.warmup]`.
const WARMUP: [(&str, &str); 3] = [
    ("warmup_negatives", "random"),
    ("warmup_steps", "length.steps"),
    ("warmup_epochs", "length.epochs"),
];

/// The ablations' flags of old, and the `picks` each one set.
const ABLATIONS: [(&str, &str); 2] = [("uniform", "uniform"), ("exact_picks", "exact")];

/// Rewrites the old keys of every `[[network.layers]]` and `[network.layers.lsh]` in
/// `config` to their new names and returns one note per key rewritten.
pub(super) fn upgrade(config: &mut Table) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    if let Some(network) = config.get_mut("network").and_then(Value::as_table_mut) {
        upgrade_wide(network, &mut notes)?;
    }
    let layers = config
        .get_mut("network")
        .and_then(Value::as_table_mut)
        .and_then(|network| network.get_mut("layers"))
        .and_then(Value::as_array_mut);
    for (i, layer) in layers.into_iter().flatten().enumerate() {
        let Some(layer) = layer.as_table_mut() else {
            continue;
        };
        upgrade_init(layer, &format!("network.layers[{i}]"), &mut notes)?;
        if let Some(lsh) = layer.get_mut("lsh").and_then(Value::as_table_mut) {
            let place = format!("network.layers[{i}].lsh");
            upgrade_lsh(lsh, &place, &mut notes)?;
        }
    }
    Ok(notes)
}

/// `[network.wide]` of old, the wide head, is now two heads of `[[network.heads]]`: its
/// per-label linear classifiers (`kind = "label-linear"`, with `bits`, `lr`, `weight`,
/// `shortlist`, `epochs` and `bias`) and, with `rare_labels` above 0, the candidates from
/// rare features (`kind = "rare-labels"`: `labels` from `rare_labels`, `max_df` from
/// `rare_df`).
fn upgrade_wide(network: &mut Table, notes: &mut Vec<String>) -> Result<()> {
    let Some(wide) = network.remove("wide") else {
        return Ok(());
    };
    let Value::Table(mut linear) = wide else {
        bail!("network.wide: expected a table (now [[network.heads]])");
    };
    if network.contains_key("heads") {
        bail!("network.wide is the old form of [[network.heads]]; give the heads only");
    }
    let (labels, max_df) = (linear.remove("rare_labels"), linear.remove("rare_df"));
    linear.insert("kind".into(), Value::String("label-linear".into()));
    let mut heads = vec![Value::Table(linear)];
    if let Some(labels) = labels.filter(|l| l.as_integer() != Some(0)) {
        let mut rare = Table::from_iter([
            ("kind".to_string(), Value::String("rare-labels".into())),
            ("labels".to_string(), labels),
        ]);
        if let Some(max_df) = max_df {
            rare.insert("max_df".into(), max_df);
        }
        heads.push(Value::Table(rare));
    }
    network.insert("heads".into(), Value::Array(heads));
    notes.push(
        "network.wide is now [[network.heads]]: kind = \"label-linear\" (bits, lr, weight, \
         shortlist, epochs, bias) and, for its rare_labels and rare_df, kind = \"rare-labels\" \
         (labels, max_df); read as such"
            .to_string(),
    );
    Ok(())
}

/// `init = "normal"` or `"uniform"` with `init_scale = x` becomes the core's
/// `init = { normal = { std = x } }` or `{ uniform = { bound = x } }`.
fn upgrade_init(layer: &mut Table, place: &str, notes: &mut Vec<String>) -> Result<()> {
    let scale = layer.remove("init_scale");
    let name = layer
        .get("init")
        .and_then(Value::as_str)
        .map(str::to_string);
    let field = match name.as_deref() {
        Some("normal") => "std",
        Some("uniform") => "bound",
        _ => {
            if scale.is_some() {
                bail!(
                    "{place}: init_scale applies to normal and uniform only (now \
                     `init = {{ normal = {{ std = ... }} }}` or `{{ uniform = {{ bound = ... }} }}`)"
                );
            }
            return Ok(());
        }
    };
    let name = name.expect("matched a name");
    let Some(scale) = scale else {
        bail!(
            "{place}: init = \"{name}\" needs its scale: `init = {{ {name} = {{ {field} = ... }} }}`"
        );
    };
    let new = format!("init = {{ {name} = {{ {field} = {scale} }} }}");
    notes.push(format!(
        "{place}: `init = \"{name}\"` with `init_scale = {scale}` is now `{new}`; read as such"
    ));
    let inner = Table::from_iter([(field.to_string(), scale)]);
    let init = Table::from_iter([(name, Value::Table(inner))]);
    layer.insert("init".to_string(), Value::Table(init));
    Ok(())
}

fn upgrade_lsh(lsh: &mut Table, place: &str, notes: &mut Vec<String>) -> Result<()> {
    for (old, new) in RENAMED {
        if let Some(value) = lsh.remove(old) {
            if lsh.contains_key(new) {
                bail!("{place}: `{old}` is the old name of `{new}`; give `{new}` only");
            }
            lsh.insert(new.to_string(), value);
            notes.push(format!("{place}: `{old}` is now `{new}`; read as such"));
        }
    }
    upgrade_family(lsh, place, notes)?;
    upgrade_ablations(lsh, place, notes)?;
    refuse_unbuilt_ablation(lsh, place, notes)?;
    upgrade_warmup(lsh, place, notes)
}

/// `picks` in a trainer built without the `ablations` feature, whose core has no such key:
/// `"uniform"` or `"exact"` (or `uniform = true` / `exact_picks = true` of old) is refused
/// with the command that builds the ablations, rather than serde's "unknown field";
/// `"tables"`, what such a build always does, is read as left out, with a note.
fn refuse_unbuilt_ablation(lsh: &mut Table, place: &str, notes: &mut Vec<String>) -> Result<()> {
    if cfg!(feature = "ablations") {
        return Ok(());
    }
    let Some(picks) = lsh.get("picks") else {
        return Ok(());
    };
    let build = "built only with the trainer's `ablations` feature: cargo run --release -p \
                 slide-trainer --features ablations -- ...";
    match picks.as_str() {
        Some("tables") => {
            lsh.remove("picks");
            notes.push(format!(
                "{place}: `picks = \"tables\"` is what a build without the `ablations` feature \
                 always does; read as left out"
            ));
            Ok(())
        }
        Some(name) => match ABLATIONS.iter().find(|(_, picks)| *picks == name) {
            Some((old, _)) => bail!(
                "{place}: `picks = \"{name}\"` (`{old} = true` of old) is an ablation, {build}"
            ),
            None => bail!("{place}: `picks` chooses an ablation, {build}"),
        },
        None => bail!("{place}: `picks` chooses an ablation, {build}"),
    }
}

/// The family's flat keys of old: `family = "dwta"` with `bin_size`, `"simhash"` with
/// `density`, `"simhash-gaussian"`, `"minhash"` with `bits`, and the key each setting takes in
/// the lsh crate's `FamilyKind` now.
fn upgrade_family(lsh: &mut Table, place: &str, notes: &mut Vec<String>) -> Result<()> {
    let settings: Vec<(&str, Value)> = ["bin_size", "density", "bits"]
        .into_iter()
        .filter_map(|key| lsh.remove(key).map(|value| (key, value)))
        .collect();
    let Some(name) = lsh
        .get("family")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        if let Some((key, _)) = settings.first() {
            bail!(
                "{place}: `{key}` is a setting of the family now: `family = {{ dwta = {{ \
                 bin_size = 8 }} }}`, `{{ simhash = {{ sparse = {{ density = 0.33 }} }} }}` or \
                 `{{ minhash = {{ bits = 3 }} }}`"
            );
        }
        return Ok(());
    };
    let (own, applies): (Option<&str>, &[&str]) = match name.as_str() {
        "wta" | "dwta" => (Some("bin_size"), &["bin_size"]),
        "simhash" => (Some("density"), &["density"]),
        "minhash" => (Some("bits"), &["bits"]),
        _ => (None, &[]),
    };
    let mut inner = Table::new();
    for (key, value) in settings {
        if applies.contains(&key) {
            inner.insert(key.to_string(), value);
        } else {
            notes.push(format!(
                "{place}: `{key}` does not apply to {name}; ignored, as before"
            ));
        }
    }
    let family = match name.as_str() {
        "simhash" => Value::Table(Table::from_iter([(
            "simhash".to_string(),
            Value::Table(Table::from_iter([(
                "sparse".to_string(),
                Value::Table(inner),
            )])),
        )])),
        "simhash-gaussian" => Value::Table(Table::from_iter([(
            "simhash".to_string(),
            Value::String("gaussian".to_string()),
        )])),
        _ if own.is_some() => Value::Table(Table::from_iter([(name.clone(), Value::Table(inner))])),
        // Not a family of old either: the lsh crate's type names the ones it knows.
        _ => return Ok(()),
    };
    let new = format!("family = {}", family.to_string().replace('\n', " "));
    notes.push(format!(
        "{place}: `family = \"{name}\"` and its settings are now `{new}`; read as such"
    ));
    lsh.insert("family".to_string(), family);
    Ok(())
}

/// `uniform = true` and `exact_picks = true` become `picks = "uniform"` / `"exact"`;
/// `false` says what the default says.
fn upgrade_ablations(lsh: &mut Table, place: &str, notes: &mut Vec<String>) -> Result<()> {
    let mut chosen = Vec::new();
    for (old, picks) in ABLATIONS {
        let Some(value) = lsh.remove(old) else {
            continue;
        };
        let Some(set) = value.as_bool() else {
            bail!("{place}: `{old}` (now `picks = \"{picks}\"`) must be true or false");
        };
        notes.push(format!(
            "{place}: `{old} = {set}` is now {}; read as such",
            if set {
                format!("`picks = \"{picks}\"`")
            } else {
                "the default, `picks = \"tables\"`".to_string()
            }
        ));
        if set {
            chosen.push((old, picks));
        }
    }
    match chosen[..] {
        [] => Ok(()),
        [(old, picks)] => {
            if lsh.contains_key("picks") {
                bail!(
                    "{place}: `{old}` is the old spelling of `picks = \"{picks}\"`; give `picks` only"
                );
            }
            lsh.insert("picks".to_string(), Value::String(picks.to_string()));
            Ok(())
        }
        _ => bail!(
            "{place}: `uniform` and `exact_picks` are both ablations of where the picks come \
             from; give one, as `picks = \"uniform\"` or `picks = \"exact\"`"
        ),
    }
}

/// `warmup_negatives`, `warmup_steps` and `warmup_epochs` become the core's
/// `warmup = { random, length = { steps } | { epochs } }` (`[train] warmup_steps` is the
/// learning rate's warm-up); all of them 0, as the defaults were, is no warm-up.
fn upgrade_warmup(lsh: &mut Table, place: &str, notes: &mut Vec<String>) -> Result<()> {
    let old: Vec<(&str, &str, Value)> = WARMUP
        .iter()
        .filter_map(|&(old, new)| lsh.remove(old).map(|value| (old, new, value)))
        .collect();
    if old.is_empty() {
        return Ok(());
    }
    if lsh.contains_key("warmup") {
        bail!(
            "{place}: `{}` is an old name in `[{place}.warmup]`; give the warm-up there only",
            old[0].0
        );
    }
    for (key, new, _) in &old {
        notes.push(format!(
            "{place}: `{key}` is now `warmup.{new}`; read as such"
        ));
    }
    let zero = |v: &Value| v.as_integer() == Some(0) || v.as_float() == Some(0.0);
    let (random, lengths): (Vec<_>, Vec<_>) = old
        .into_iter()
        .filter(|(_, _, value)| !zero(value))
        .partition(|(_, new, _)| *new == "random");
    let form = "`warmup = { random = R, length = { steps = N } }` or `{ epochs = E }`";
    let length = match (&random[..], &lengths[..]) {
        ([], []) => return Ok(()),
        ([_], [(_, new, value)]) => {
            Table::from_iter([(new.trim_start_matches("length.").to_string(), value.clone())])
        }
        (_, [_, _]) => bail!("{place}: give warmup_steps or warmup_epochs, not both (now {form})"),
        ([_], []) => bail!(
            "{place}: warmup_negatives needs its length, warmup_steps or warmup_epochs (now \
             {form})"
        ),
        _ => bail!("{place}: a warm-up's length needs warmup_negatives (now {form})"),
    };
    let random = random.into_iter().next().expect("matched one").2;
    let warmup = Table::from_iter([
        ("random".to_string(), random),
        ("length".to_string(), Value::Table(length)),
    ]);
    lsh.insert("warmup".to_string(), Value::Table(warmup));
    Ok(())
}
