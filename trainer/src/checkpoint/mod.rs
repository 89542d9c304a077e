//! Checkpoints: the network's tensors in safetensors format (readable from Python with
//! `safetensors.numpy.load_file`), the run's position and identity in its metadata, a
//! checksum over all tensor bytes, written atomically (temporary file in the same folder,
//! fsync, rename, fsync of the folder). [`save`] does it all; [`write`](fn@write) and
//! [`Unsynced::finish`] split it, so that the trainer syncs and renames a checkpoint while
//! it trains on.
//!
//! Tensors per layer `i`: `layers.i.weight`, `.adam_m`, `.adam_v` (`[rows, row_len]` f32;
//! rows are neurons for neuron-major layers, inputs for input-major ones), `.row_steps`
//! (u32), `.bias`, `.bias_adam_m`, `.bias_adam_v` (f32), `.bias_steps` (u32), and for LSH
//! layers `.tables.buckets`, `.tables.store` (u32), `.tables.store_offsets` (u64), and
//! where in use `.shared_negatives` (u32; with `shared_pool`, the pool) and `.query_center`
//! (f32).

mod files;
mod format;
mod identity;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use safetensors::tensor::{Metadata, TensorInfo};
use slide::Network;
use slide::formats::printable;

pub use files::{list, remove_stale_temporaries};
use format::{PENDING_CHECKSUM, checksum, dtype, read_checkpoint, read_header, write_tensors};
use identity::FORMAT_NAME;
pub use identity::{FORMAT_VERSION, Identity, Position, Require};

/// Writes `net`'s training state as `dir/checkpoint-STEP.safetensors` and removes all but
/// the newest `keep_last` checkpoints. `identity` describes the run; loading checks it.
///
/// The tensors go from the layers' own storage into the file piece by piece (see
/// [`Network::write_state_tensor`]): the writer holds one 512 KiB piece, not a copy of
/// the state. The header is written first with the checksum pending; the checksum, known once
/// every tensor has been hashed on its way out, is then written into its place. The file
/// is a temporary one in `dir` until it is complete and synced, then renamed.
pub fn save(
    dir: &Path,
    net: &Network,
    position: Position,
    identity: &Identity,
    keep_last: usize,
) -> Result<PathBuf> {
    write(dir, net, position, identity)?.finish(keep_last)
}

/// A checkpoint written to its temporary file but not yet synced or renamed: what
/// [`write`](fn@write) returns and [`Unsynced::finish`] completes. The trainer finishes it on another
/// thread while training goes on (the network is no longer read), so that the disk's
/// write-back overlaps the next steps instead of stalling them.
#[derive(Debug)]
pub struct Unsynced {
    file: std::fs::File,
    temp: PathBuf,
    final_path: PathBuf,
    dir: PathBuf,
}

impl Unsynced {
    /// Where the checkpoint will be once finished.
    pub fn path(&self) -> &Path {
        &self.final_path
    }

    /// Syncs the temporary file, renames it to its final name, syncs the folder and removes
    /// all but the newest `keep_last` checkpoints (at least 1). Until the rename, the newest
    /// complete checkpoint in the folder is the previous one.
    pub fn finish(self, keep_last: usize) -> Result<PathBuf> {
        let Unsynced {
            file,
            temp,
            final_path,
            dir,
        } = self;
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
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        let mut existing = list(&dir)?;
        while existing.len() > keep_last.max(1) {
            let oldest = existing.remove(0);
            let _ = std::fs::remove_file(oldest);
        }
        Ok(final_path)
    }
}

/// The first half of [`save`]: writes the checkpoint to a temporary file in `dir` (into the
/// page cache, at memory speed) and returns it for [`Unsynced::finish`].
pub fn write(
    dir: &Path,
    net: &Network,
    position: Position,
    identity: &Identity,
) -> Result<Unsynced> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let scalars = net.state_scalars();
    let mut metadata = HashMap::from([
        ("format".to_string(), FORMAT_NAME.to_string()),
        ("version".to_string(), FORMAT_VERSION.to_string()),
        ("network".to_string(), format!("{:016x}", identity.network)),
        ("step".to_string(), scalars.step.to_string()),
        (
            "earlier_steps".to_string(),
            scalars.earlier_steps.to_string(),
        ),
        ("next_rebuild".to_string(), scalars.next_rebuild.to_string()),
        (
            "rebuild_period_bits".to_string(),
            scalars.rebuild_period.to_bits().to_string(),
        ),
        ("epoch".to_string(), position.epoch.to_string()),
        ("batch".to_string(), position.batch.to_string()),
        ("checksum".to_string(), PENDING_CHECKSUM.to_string()),
    ]);
    for (key, value) in &identity.settings {
        metadata.insert(format!("setting.{key}"), value.clone());
    }
    for (i, generation) in scalars.generations.iter().enumerate() {
        if let Some(g) = generation {
            metadata.insert(format!("layers.{i}.tables.generation"), g.to_string());
        }
    }
    // The tensors in name order, laid out one after another in that order.
    let tensors = net.state_tensors();
    let mut offset = 0;
    let infos = tensors
        .iter()
        .map(|t| {
            let info = TensorInfo {
                dtype: dtype(t.elem),
                shape: t.shape.clone(),
                data_offsets: (offset, offset + t.byte_len()),
            };
            offset += t.byte_len();
            (t.name.clone(), info)
        })
        .collect();
    let header = Metadata::new(Some(metadata.clone()), infos)
        .map_err(|e| anyhow!("cannot lay out checkpoint tensors: {e}"))?;
    let mut json = serde_json::to_string(&header).context("cannot write the checkpoint header")?;
    // safetensors pads the header with spaces so that the data starts 8-byte aligned.
    json.extend(std::iter::repeat_n(' ', (8 - json.len() % 8) % 8));
    // Where the pending checksum's digits sit in the file (after the 8-byte length).
    let key = "\"checksum\":\"";
    let checksum_at = 8
        + key.len() as u64
        + json
            .find(&format!("{key}{PENDING_CHECKSUM}\""))
            .context("checksum missing from the header")? as u64;

    let name = format!("checkpoint-{:010}.safetensors", scalars.step);
    let final_path = dir.join(&name);
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let writing = || format!("cannot write {}", temp.display());
    let mut file = std::fs::File::create(&temp)
        .with_context(|| format!("cannot create {}", temp.display()))?;
    file.write_all(&(json.len() as u64).to_le_bytes())
        .and_then(|()| file.write_all(json.as_bytes()))
        .with_context(writing)?;
    let (mut file, tensors_hash) = write_tensors(net, &tensors, file, &writing)?;
    let sum = checksum(tensors_hash, &metadata);
    file.seek(SeekFrom::Start(checksum_at))
        .and_then(|_| file.write_all(sum.as_bytes()))
        .with_context(writing)?;
    Ok(Unsynced {
        file,
        temp,
        final_path,
        dir: dir.to_path_buf(),
    })
}

/// Reads the checkpoint at `path` into `net`, checking its format, version, checksum and
/// that it was written for `identity` (its network, or everything, as `require` says), and
/// returns where in the run it was taken. See [`load_from`].
pub fn load(
    path: &Path,
    net: &mut Network,
    identity: &Identity,
    require: Require,
) -> Result<Position> {
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    load_from(file, path, net, identity, require)
}

/// [`load`] from any seekable reader of a checkpoint's bytes; `path` names it in errors,
/// which are one line that starts with it.
///
/// Reads the header, then every tensor in name order for the checksum, then (only once the
/// checksum and identity hold) the tensors again straight into the layers' storage (see
/// [`Network::read_state`]): besides the network it holds the header and one piece at a
/// time, never the state. On an error after the checks, `net`'s contents are unspecified.
pub fn load_from<R: Read + Seek>(
    reader: R,
    path: &Path,
    net: &mut Network,
    identity: &Identity,
    require: Require,
) -> Result<Position> {
    read_checkpoint(reader, net, identity, require)
        .map_err(|e| anyhow!("{}: {}", path.display(), printable(&format!("{e:#}"))))
}

/// The settings a checkpoint was written with (`setting.NAME` of its metadata, by `NAME`),
/// read from its header alone (its tensors are neither read nor checked).
pub fn settings(path: &Path) -> Result<HashMap<String, String>> {
    let mut file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let (_, _, meta) = read_header(&mut file)
        .map_err(|e| anyhow!("{}: {}", path.display(), printable(&format!("{e:#}"))))?;
    Ok(meta
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("setting.")?.to_string(), v)))
        .collect())
}
