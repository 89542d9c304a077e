//! Checkpoints: the network's tensors in safetensors format (readable from Python with
//! `safetensors.numpy.load_file`), the run's position and identity in its metadata, a
//! checksum over all tensor bytes, written atomically (temporary file in the same folder,
//! fsync, rename, fsync of the folder).
//!
//! Tensors per layer `i`: `layers.i.weight`, `.adam_m`, `.adam_v` (`[rows, row_len]` f32;
//! rows are neurons for neuron-major layers, inputs for input-major ones), `.row_steps`
//! (u32), `.bias`, `.bias_adam_m`, `.bias_adam_v` (f32), `.bias_steps` (u32), and for LSH
//! layers `.tables.buckets`, `.tables.store` (u32), `.tables.store_offsets` (u64), and
//! where in use `.shared_negatives` (u32) and `.query_center` (f32).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use slide::config::{FNV_OFFSET, fnv1a};
use slide::formats::printable;
use slide::lsh::TablesState;
use slide::{LayerState, NetworkConfig, NetworkState};

/// The format written by this version; a different one is refused on load.
pub const FORMAT_VERSION: &str = "2";
const FORMAT_NAME: &str = "slide-checkpoint";

/// Where in the run a checkpoint was taken (after `batch` batches of `epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Epoch in progress (1-based).
    pub epoch: usize,
    /// Batches of that epoch already trained.
    pub batch: usize,
}

/// What a checkpoint was written for: the network's architecture hash (what evaluation
/// needs to match) and every setting of the run (what a resume needs to match), from
/// [`NetworkConfig::describe`].
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// [`NetworkConfig::architecture_hash`].
    pub network: u64,
    /// `(name, value)` of every setting.
    pub settings: Vec<(String, String)>,
}

impl Identity {
    /// The identity of a run of `config` with batches of `batch_size`.
    pub fn of(config: &NetworkConfig, batch_size: usize) -> Self {
        let mut settings = config.describe();
        settings.push(("train.batch_size".into(), batch_size.to_string()));
        Identity {
            network: config.architecture_hash(),
            settings,
        }
    }
}

/// How much of the identity a load requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Require {
    /// The same network (evaluation).
    Network,
    /// The same network and training settings (resuming).
    Everything,
}

/// The checksum of a checkpoint: its tensors' names and bytes, sorted by name, then every
/// metadata entry but the checksum itself (position, identity, table generations), sorted
/// by key.
fn checksum<'a>(
    tensors: impl Iterator<Item = (&'a str, &'a [u8])>,
    metadata: &HashMap<String, String>,
) -> String {
    let mut hash = tensors.fold(FNV_OFFSET, |h, (name, bytes)| {
        fnv1a(fnv1a(h, name.as_bytes()), bytes)
    });
    let mut keys: Vec<&String> = metadata.keys().filter(|k| *k != "checksum").collect();
    keys.sort();
    for key in keys {
        hash = fnv1a(
            fnv1a(fnv1a(hash, key.as_bytes()), b"="),
            metadata[key].as_bytes(),
        );
    }
    format!("{hash:016x}")
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes `state` as `dir/checkpoint-STEP.safetensors` and removes all but the newest
/// `keep_last` checkpoints. `identity` describes the network config; loading checks it.
pub fn save(
    dir: &Path,
    state: &NetworkState,
    position: Position,
    identity: &Identity,
    keep_last: usize,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (i, layer) in state.layers.iter().enumerate() {
        let p = format!("layers.{i}");
        let matrix = vec![layer.rows, layer.row_len];
        tensors.push((
            format!("{p}.weight"),
            Dtype::F32,
            matrix.clone(),
            f32_bytes(&layer.weights),
        ));
        tensors.push((
            format!("{p}.adam_m"),
            Dtype::F32,
            matrix.clone(),
            f32_bytes(&layer.m),
        ));
        tensors.push((
            format!("{p}.adam_v"),
            Dtype::F32,
            matrix,
            f32_bytes(&layer.v),
        ));
        tensors.push((
            format!("{p}.row_steps"),
            Dtype::U32,
            vec![layer.rows],
            u32_bytes(&layer.row_steps),
        ));
        let n = layer.bias.len();
        tensors.push((
            format!("{p}.bias"),
            Dtype::F32,
            vec![n],
            f32_bytes(&layer.bias),
        ));
        tensors.push((
            format!("{p}.bias_adam_m"),
            Dtype::F32,
            vec![n],
            f32_bytes(&layer.bias_m),
        ));
        tensors.push((
            format!("{p}.bias_adam_v"),
            Dtype::F32,
            vec![n],
            f32_bytes(&layer.bias_v),
        ));
        tensors.push((
            format!("{p}.bias_steps"),
            Dtype::U32,
            vec![n],
            u32_bytes(&layer.bias_steps),
        ));
        if !layer.shared.is_empty() {
            tensors.push((
                format!("{p}.shared_negatives"),
                Dtype::U32,
                vec![layer.shared.len()],
                u32_bytes(&layer.shared),
            ));
        }
        if !layer.center.is_empty() {
            tensors.push((
                format!("{p}.query_center"),
                Dtype::F32,
                vec![layer.center.len()],
                f32_bytes(&layer.center),
            ));
        }
        if let Some(t) = &layer.tables {
            tensors.push((
                format!("{p}.tables.buckets"),
                Dtype::U32,
                vec![t.buckets.len()],
                u32_bytes(&t.buckets),
            ));
            tensors.push((
                format!("{p}.tables.store"),
                Dtype::U32,
                vec![t.store.len()],
                u32_bytes(&t.store),
            ));
            tensors.push((
                format!("{p}.tables.store_offsets"),
                Dtype::U64,
                vec![t.store_offsets.len()],
                u64_bytes(&t.store_offsets),
            ));
        }
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let mut metadata = HashMap::from([
        ("format".to_string(), FORMAT_NAME.to_string()),
        ("version".to_string(), FORMAT_VERSION.to_string()),
        ("network".to_string(), format!("{:016x}", identity.network)),
        ("step".to_string(), state.step.to_string()),
        ("next_rebuild".to_string(), state.next_rebuild.to_string()),
        (
            "rebuild_period_bits".to_string(),
            state.rebuild_period.to_bits().to_string(),
        ),
        ("epoch".to_string(), position.epoch.to_string()),
        ("batch".to_string(), position.batch.to_string()),
    ]);
    for (key, value) in &identity.settings {
        metadata.insert(format!("setting.{key}"), value.clone());
    }
    for (i, layer) in state.layers.iter().enumerate() {
        if let Some(t) = &layer.tables {
            metadata.insert(
                format!("layers.{i}.tables.generation"),
                t.generation.to_string(),
            );
        }
    }
    let sum = checksum(
        tensors.iter().map(|t| (t.0.as_str(), t.3.as_slice())),
        &metadata,
    );
    metadata.insert("checksum".to_string(), sum);
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            TensorView::new(*dtype, shape.clone(), bytes).map(|v| (name.clone(), v))
        })
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("cannot lay out checkpoint tensors: {e}"))?;
    let bytes = safetensors::serialize(views, Some(metadata))
        .map_err(|e| anyhow!("cannot serialise checkpoint: {e}"))?;

    let name = format!("checkpoint-{:010}.safetensors", state.step);
    let final_path = dir.join(&name);
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::File::create(&temp)
        .with_context(|| format!("cannot create {}", temp.display()))?;
    file.write_all(&bytes)
        .with_context(|| format!("cannot write {}", temp.display()))?;
    file.sync_all()
        .with_context(|| format!("cannot sync {}", temp.display()))?;
    drop(file);
    std::fs::rename(&temp, &final_path).with_context(|| {
        format!(
            "cannot rename {} to {}",
            temp.display(),
            final_path.display()
        )
    })?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    let mut existing = list(dir)?;
    while existing.len() > keep_last.max(1) {
        let oldest = existing.remove(0);
        let _ = std::fs::remove_file(oldest);
    }
    Ok(final_path)
}

/// Removes the temporary files that writers killed mid-write left in `dir` (never a
/// complete checkpoint: those are only ever created by a rename). Best effort.
pub fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if is_own_temporary(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `name` is a temporary file of [`save`]: `.checkpoint-STEP.safetensors.PID.tmp`
/// with digits for STEP and PID, and nothing else.
fn is_own_temporary(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix(".checkpoint-")
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .and_then(|rest| rest.split_once(".safetensors."))
        .is_some_and(|(step, pid)| digits(step) && digits(pid))
}

/// Complete checkpoints in `dir`, oldest first (temporary files are never listed).
pub fn list(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("checkpoint-") && n.ends_with(".safetensors"))
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Reads a checkpoint, checking its format, version, checksum and that it was written for
/// `identity` (its network, or everything, as `require` says).
pub fn load(
    path: &Path,
    identity: &Identity,
    require: Require,
) -> Result<(NetworkState, Position)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    load_bytes(&bytes, path, identity, require)
}

/// The settings that differ between a checkpoint's metadata and `identity`, as
/// `name: checkpoint X, config Y` (at most 3 named).
fn differences(meta: &HashMap<String, String>, identity: &Identity) -> String {
    let missing = "(none)".to_string();
    let mut found: Vec<String> = identity
        .settings
        .iter()
        .filter_map(|(key, value)| {
            let saved = meta.get(&format!("setting.{key}")).unwrap_or(&missing);
            (saved != value).then(|| format!("{key}: checkpoint {saved}, config {value}"))
        })
        .collect();
    let more = found.len().saturating_sub(3);
    found.truncate(3);
    if more > 0 {
        found.push(format!("and {more} more"));
    }
    found.join("; ")
}

/// [`load`] of a checkpoint's bytes; `path` names it in errors.
pub fn load_bytes(
    bytes: &[u8],
    path: &Path,
    identity: &Identity,
    require: Require,
) -> Result<(NetworkState, Position)> {
    let fail = |problem: String| anyhow!("{}: {}", path.display(), printable(&problem));
    let tensors = SafeTensors::deserialize(bytes)
        .map_err(|e| fail(format!("not a readable safetensors checkpoint ({e})")))?;
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| fail(format!("unreadable header ({e})")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |key: &str| {
        meta.get(key)
            .cloned()
            .ok_or_else(|| fail(format!("metadata `{key}` is missing")))
    };
    if get("format")? != FORMAT_NAME {
        bail!(fail("not a slide checkpoint".into()));
    }
    let version = get("version")?;
    if version != FORMAT_VERSION {
        bail!(fail(format!(
            "checkpoint format version {version}; this slide-train reads version {FORMAT_VERSION}"
        )));
    }
    let mut names: Vec<String> = tensors.names().into_iter().map(str::to_string).collect();
    names.sort();
    let views = names
        .iter()
        .map(|name| tensors.tensor(name).map_err(|e| fail(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    let sum = checksum(
        names
            .iter()
            .map(String::as_str)
            .zip(views.iter().map(|v| v.data())),
        &meta,
    );
    if sum != get("checksum")? {
        bail!(fail("checksum mismatch: the file is corrupt".into()));
    }
    if get("network")? != format!("{:016x}", identity.network) {
        bail!(fail(format!(
            "was written for a different network ({})",
            differences(&meta, identity)
        )));
    }
    if require == Require::Everything {
        let differ = differences(&meta, identity);
        if !differ.is_empty() {
            bail!(fail(format!(
                "was written with other training settings ({differ}); resume with the same settings"
            )));
        }
    }
    let number = |key: &str| -> Result<u64> {
        get(key)?
            .parse::<u64>()
            .map_err(|_| fail(format!("metadata `{key}` is not a number")))
    };
    // A tensor's bytes, after checking its element type.
    let bytes_of = |name: &str, dtype: Dtype| -> Result<&[u8]> {
        let view = tensors
            .tensor(name)
            .map_err(|e| fail(format!("{name}: {e}")))?;
        if view.dtype() != dtype {
            bail!(fail(format!(
                "{name} is {:?}, expected {dtype:?}",
                view.dtype()
            )));
        }
        Ok(view.data())
    };
    let f32s = |name: &str| -> Result<Vec<f32>> {
        let bytes = bytes_of(name, Dtype::F32)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    };
    let u32s = |name: &str| -> Result<Vec<u32>> {
        let bytes = bytes_of(name, Dtype::U32)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    };
    let mut layers = Vec::new();
    for i in 0.. {
        let p = format!("layers.{i}");
        let Ok(weight) = tensors.tensor(&format!("{p}.weight")) else {
            break;
        };
        let shape = weight.shape().to_vec();
        if shape.len() != 2 {
            bail!(fail(format!("{p}.weight is not a matrix")));
        }
        let tables = if names.contains(&format!("{p}.tables.store")) {
            let offsets = bytes_of(&format!("{p}.tables.store_offsets"), Dtype::U64)?;
            Some(TablesState {
                generation: number(&format!("{p}.tables.generation"))?,
                buckets: u32s(&format!("{p}.tables.buckets"))?,
                store: u32s(&format!("{p}.tables.store"))?,
                store_offsets: offsets
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            })
        } else {
            None
        };
        layers.push(LayerState {
            rows: shape[0],
            row_len: shape[1],
            weights: f32s(&format!("{p}.weight"))?,
            m: f32s(&format!("{p}.adam_m"))?,
            v: f32s(&format!("{p}.adam_v"))?,
            row_steps: u32s(&format!("{p}.row_steps"))?,
            bias: f32s(&format!("{p}.bias"))?,
            bias_m: f32s(&format!("{p}.bias_adam_m"))?,
            bias_v: f32s(&format!("{p}.bias_adam_v"))?,
            bias_steps: u32s(&format!("{p}.bias_steps"))?,
            tables,
            shared: if names.contains(&format!("{p}.shared_negatives")) {
                u32s(&format!("{p}.shared_negatives"))?
            } else {
                Vec::new()
            },
            center: if names.contains(&format!("{p}.query_center")) {
                f32s(&format!("{p}.query_center"))?
            } else {
                Vec::new()
            },
        });
    }
    let state = NetworkState {
        step: number("step")?,
        next_rebuild: number("next_rebuild")?,
        rebuild_period: f64::from_bits(number("rebuild_period_bits")?),
        layers,
    };
    let position = Position {
        epoch: number("epoch")? as usize,
        batch: number("batch")? as usize,
    };
    Ok((state, position))
}

#[cfg(test)]
mod tests {
    use super::*;
    use slide::{
        Activation, AdamConfig, Init, LayerConfig, Network, RebuildSchedule, WeightLayout,
    };

    fn config(lr: f32) -> NetworkConfig {
        let layer = |out_dim, activation| LayerConfig {
            out_dim,
            activation,
            layout: WeightLayout::NeuronMajor,
            init: Init::Glorot,
            lsh: None,
        };
        NetworkConfig {
            input_dim: 6,
            layers: vec![layer(4, Activation::Relu), layer(3, Activation::Softmax)],
            adam: AdamConfig {
                lr,
                ..AdamConfig::default()
            },
            rebuild: RebuildSchedule::Fixed { every: 5 },
            seed: 3,
        }
    }

    fn saved(dir: &str) -> (PathBuf, Identity) {
        let dir = std::env::temp_dir().join(format!("slide-ckpt-{dir}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let identity = Identity::of(&config(0.01), 8);
        let net = Network::new(config(0.01)).unwrap();
        let position = Position { epoch: 1, batch: 3 };
        (
            save(&dir, &net.export_state(), position, &identity, 1).unwrap(),
            identity,
        )
    }

    /// Evaluation needs the same network only; a resume needs every setting and names the
    /// ones that differ.
    #[test]
    fn evaluation_needs_the_network_and_a_resume_every_setting() {
        let (path, identity) = saved("identity");
        assert!(load(&path, &identity, Require::Everything).is_ok());
        let other_lr = Identity::of(&config(0.5), 8);
        assert!(load(&path, &other_lr, Require::Network).is_ok());
        let e = load(&path, &other_lr, Require::Everything)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("other training settings (adam: checkpoint AdamConfig { lr: 0.01"),
            "{e}"
        );
        let mut wider = config(0.01);
        wider.layers[0].out_dim = 5;
        let e = load(&path, &Identity::of(&wider, 8), Require::Network)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("different network (layers.0.out_dim: checkpoint 4, config 5)"),
            "{e}"
        );
    }

    /// The checksum covers the run's position: an edited epoch is refused as corrupt.
    #[test]
    fn a_changed_position_fails_the_checksum() {
        let (path, identity) = saved("position");
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let at = text.find("\"batch\":\"3\"").expect("batch in the header");
        let mut edited = bytes.clone();
        edited[at + 9] = b'4';
        let e = load_bytes(&edited, &path, &identity, Require::Network)
            .unwrap_err()
            .to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn only_the_trainers_own_temporaries_are_stale() {
        assert!(is_own_temporary(
            ".checkpoint-0000000100.safetensors.4242.tmp"
        ));
        for other in [
            "notes.tmp",
            ".checkpoint-.safetensors.1.tmp",
            ".checkpoint-0000000100.safetensors.tmp",
            ".checkpoint-12ab.safetensors.1.tmp",
            "checkpoint-0000000100.safetensors.1.tmp",
            ".checkpoint-0000000100.safetensors.1.tmp.keep",
        ] {
            assert!(!is_own_temporary(other), "{other}");
        }
    }
}
