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
use slide::formats::printable;
use slide::lsh::TablesState;
use slide::{LayerState, NetworkState};

/// The format written by this version; a different one is refused on load.
pub const FORMAT_VERSION: &str = "1";
const FORMAT_NAME: &str = "slide-checkpoint";

/// Where in the run a checkpoint was taken (after `batch` batches of `epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Epoch in progress (1-based).
    pub epoch: usize,
    /// Batches of that epoch already trained.
    pub batch: usize,
}

/// FNV-1a, 64 bits: a cheap checksum that catches flipped and truncated bytes.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

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
    identity: &str,
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
    let checksum = tensors
        .iter()
        .fold(FNV_OFFSET, |h, t| fnv1a(fnv1a(h, t.0.as_bytes()), &t.3));
    let mut metadata = HashMap::from([
        ("format".to_string(), FORMAT_NAME.to_string()),
        ("version".to_string(), FORMAT_VERSION.to_string()),
        ("identity".to_string(), identity.to_string()),
        ("step".to_string(), state.step.to_string()),
        ("next_rebuild".to_string(), state.next_rebuild.to_string()),
        (
            "rebuild_period_bits".to_string(),
            state.rebuild_period.to_bits().to_string(),
        ),
        ("epoch".to_string(), position.epoch.to_string()),
        ("batch".to_string(), position.batch.to_string()),
        ("checksum".to_string(), format!("{checksum:016x}")),
    ]);
    for (i, layer) in state.layers.iter().enumerate() {
        if let Some(t) = &layer.tables {
            metadata.insert(
                format!("layers.{i}.tables.generation"),
                t.generation.to_string(),
            );
        }
    }
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
        if name.starts_with(".checkpoint-") && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
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
/// the network `identity` describes.
pub fn load(path: &Path, identity: &str) -> Result<(NetworkState, Position)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    load_bytes(&bytes, path, identity)
}

/// [`load`] of a checkpoint's bytes; `path` names it in errors.
pub fn load_bytes(bytes: &[u8], path: &Path, identity: &str) -> Result<(NetworkState, Position)> {
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
    if get("identity")? != identity {
        bail!(fail(
            "was written for a different network or training config".into()
        ));
    }
    let mut names: Vec<String> = tensors.names().into_iter().map(str::to_string).collect();
    names.sort();
    let mut checksum = FNV_OFFSET;
    for name in &names {
        let view = tensors.tensor(name).map_err(|e| fail(e.to_string()))?;
        checksum = fnv1a(fnv1a(checksum, name.as_bytes()), view.data());
    }
    if format!("{checksum:016x}") != get("checksum")? {
        bail!(fail("checksum mismatch: the file is corrupt".into()));
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
