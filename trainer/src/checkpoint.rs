//! Checkpoints: the network's tensors in safetensors format (readable from Python with
//! `safetensors.numpy.load_file`), the run's position and identity in its metadata, a
//! checksum over all tensor bytes, written atomically (temporary file in the same folder,
//! fsync, rename, fsync of the folder). [`save`] does it all; [`write`] and
//! [`Unsynced::finish`] split it, so that the trainer syncs and renames a checkpoint while
//! it trains on.
//!
//! Tensors per layer `i`: `layers.i.weight`, `.adam_m`, `.adam_v` (`[rows, row_len]` f32;
//! rows are neurons for neuron-major layers, inputs for input-major ones), `.row_steps`
//! (u32), `.bias`, `.bias_adam_m`, `.bias_adam_v` (f32), `.bias_steps` (u32), and for LSH
//! layers `.tables.buckets`, `.tables.store` (u32), `.tables.store_offsets` (u64), and
//! where in use `.shared_negatives` (u32; with `shared_pool`, the pool) and `.query_center`
//! (f32).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use safetensors::tensor::{Dtype, Metadata, TensorInfo};
use slide::config::{FNV_OFFSET, FNV_PRIME, fnv1a};
use slide::formats::printable;
use slide::{Elem, Network, NetworkConfig, StateScalars, StateSource, StateTensor};

/// The format written by this version. Version 2 (which hashed tensor bytes one at a time)
/// is still read; any other is refused.
pub const FORMAT_VERSION: &str = "3";
const PREVIOUS_VERSION: &str = "2";
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

/// The running checksum of a checkpoint's tensors, in name order: FNV-1a over each
/// tensor's name, then over its bytes as little-endian 64-bit words (a last partial word
/// byte by byte). Format 2 hashed the bytes one at a time, which took about as long as
/// writing the file.
struct TensorHash {
    hash: u64,
    words: bool,
    tail: [u8; 8],
    tail_len: usize,
}

impl TensorHash {
    fn new(words: bool) -> Self {
        TensorHash {
            hash: FNV_OFFSET,
            words,
            tail: [0; 8],
            tail_len: 0,
        }
    }

    /// Starts the next tensor.
    fn start(&mut self, name: &str) {
        self.end();
        self.hash = fnv1a(self.hash, name.as_bytes());
    }

    /// More bytes of the current tensor.
    fn feed(&mut self, mut bytes: &[u8]) {
        if !self.words {
            self.hash = fnv1a(self.hash, bytes);
            return;
        }
        if self.tail_len > 0 {
            let take = (8 - self.tail_len).min(bytes.len());
            self.tail[self.tail_len..self.tail_len + take].copy_from_slice(&bytes[..take]);
            self.tail_len += take;
            bytes = &bytes[take..];
            if self.tail_len < 8 {
                return;
            }
            self.word(self.tail);
            self.tail_len = 0;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(w.try_into().expect("8 bytes"));
        }
        let rest = words.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_len = rest.len();
    }

    fn word(&mut self, w: [u8; 8]) {
        self.hash = (self.hash ^ u64::from_le_bytes(w)).wrapping_mul(FNV_PRIME);
    }

    /// Ends the current tensor (its partial word, byte by byte).
    fn end(&mut self) {
        self.hash = fnv1a(self.hash, &self.tail[..self.tail_len]);
        self.tail_len = 0;
    }

    fn finish(mut self) -> u64 {
        self.end();
        self.hash
    }
}

/// The checksum of a checkpoint: its tensors (`tensors`, the [`TensorHash`] after them),
/// then every metadata entry but the checksum itself (position, identity, table
/// generations), sorted by key.
fn checksum(tensors: u64, metadata: &HashMap<String, String>) -> String {
    let mut hash = tensors;
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

/// The checksum's place in a header until the tensors are written and hashed: as wide as
/// a real one, so the header's length does not change when it is filled in.
const PENDING_CHECKSUM: &str = "0000000000000000";

fn dtype(elem: Elem) -> Dtype {
    match elem {
        Elem::F32 => Dtype::F32,
        Elem::U32 => Dtype::U32,
        Elem::U64 => Dtype::U64,
        Elem::Bf16 => Dtype::BF16,
    }
}

/// What the converting thread hands the writing thread.
enum Piece {
    /// The next tensor starts.
    Tensor(String),
    /// More bytes of it.
    Bytes(Vec<u8>),
}

/// Buffers in flight between the two threads of [`write_tensors`].
const PIECES_IN_FLIGHT: usize = 4;

/// Writes `tensors` of `net` to `file` in order and returns the file and their
/// [`TensorHash`]. This thread converts the layers' storage into pieces of at most 512 KiB;
/// a second one hashes and writes them, so the conversion overlaps the writing (the
/// training threads are idle meanwhile). Four pieces are in flight at most.
fn write_tensors(
    net: &Network,
    tensors: &[StateTensor],
    mut file: std::fs::File,
    writing: &(dyn Fn() -> String + Sync),
) -> Result<(std::fs::File, u64)> {
    let (full, full_rx) = std::sync::mpsc::sync_channel::<Piece>(PIECES_IN_FLIGHT);
    let (empty, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    for _ in 0..PIECES_IN_FLIGHT {
        empty.send(Vec::new()).expect("the receiver is alive");
    }
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> Result<(std::fs::File, u64)> {
            let mut hash = TensorHash::new(true);
            for piece in full_rx {
                match piece {
                    Piece::Tensor(name) => hash.start(&name),
                    Piece::Bytes(bytes) => {
                        hash.feed(&bytes);
                        file.write_all(&bytes).with_context(writing)?;
                        // The converter may have stopped; then nobody needs the buffer.
                        let _ = empty.send(bytes);
                    }
                }
            }
            Ok((file, hash.finish()))
        });
        // A send or receive fails only once the writer has stopped, with its own error.
        let stopped = || anyhow!("the checkpoint writer stopped");
        let converted = tensors.iter().try_for_each(|t| -> Result<()> {
            full.send(Piece::Tensor(t.name.clone()))
                .map_err(|_| stopped())?;
            net.write_state_tensor(&t.name, &mut |piece: &[u8]| -> Result<()> {
                let mut bytes = empty_rx.recv().map_err(|_| stopped())?;
                bytes.clear();
                bytes.extend_from_slice(piece);
                full.send(Piece::Bytes(bytes)).map_err(|_| stopped())
            })
        });
        drop(full);
        let written = writer
            .join()
            .map_err(|_| anyhow!("the checkpoint writer panicked"))?;
        match (converted, written) {
            (_, Err(e)) | (Err(e), Ok(_)) => Err(e),
            (Ok(()), Ok(done)) => Ok(done),
        }
    })
}

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
/// [`write`] returns and [`Unsynced::finish`] completes. The trainer finishes it on another
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

/// A checkpoint file's tensors as a [`StateSource`].
struct FileSource<R> {
    reader: R,
    /// Where the data starts.
    data_start: u64,
    header: Metadata,
}

impl<R: Read + Seek> FileSource<R> {
    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.header
            .info(name)
            .ok_or_else(|| anyhow!("tensor `{name}` is missing"))
    }

    /// Feeds tensor `name`'s bytes to `each`, 1 MiB at a time.
    fn each_piece(&mut self, name: &str, each: &mut dyn FnMut(&[u8])) -> Result<()> {
        let (start, end) = self.info(name)?.data_offsets;
        let mut buf = vec![0u8; (end - start).min(1 << 20)];
        let mut at = start;
        while at < end {
            let piece = &mut buf[..(end - at).min(1 << 20)];
            self.read(name, at - start, piece)?;
            each(piece);
            at += piece.len();
        }
        Ok(())
    }
}

impl<R: Read + Seek> StateSource for FileSource<R> {
    type Error = anyhow::Error;

    fn tensor(&self, name: &str) -> Option<(Elem, Vec<usize>)> {
        let info = self.header.info(name)?;
        let elem = match info.dtype {
            Dtype::F32 => Elem::F32,
            Dtype::U32 => Elem::U32,
            Dtype::U64 => Elem::U64,
            Dtype::BF16 => Elem::Bf16,
            _ => return None,
        };
        Some((elem, info.shape.clone()))
    }

    fn read(&mut self, name: &str, offset: usize, out: &mut [u8]) -> Result<()> {
        let (start, end) = self.info(name)?.data_offsets;
        if offset + out.len() > end - start {
            bail!("tensor `{name}` is shorter than its shape");
        }
        self.reader
            .seek(SeekFrom::Start(self.data_start + (start + offset) as u64))
            .and_then(|_| self.reader.read_exact(out))
            .with_context(|| format!("cannot read tensor `{name}`"))
    }
}

fn read_checkpoint<R: Read + Seek>(
    mut reader: R,
    net: &mut Network,
    identity: &Identity,
    require: Require,
) -> Result<Position> {
    let not_readable =
        |problem: String| anyhow!("not a readable safetensors checkpoint ({problem})");
    let file_len = reader.seek(SeekFrom::End(0)).context("cannot read")?;
    let mut len = [0u8; 8];
    reader
        .seek(SeekFrom::Start(0))
        .and_then(|_| reader.read_exact(&mut len))
        .map_err(|e| not_readable(e.to_string()))?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_HEADER || 8 + header_len > file_len {
        bail!(not_readable(format!("header of {header_len} bytes")));
    }
    let mut text = vec![0u8; header_len as usize];
    reader
        .read_exact(&mut text)
        .map_err(|e| not_readable(e.to_string()))?;
    let text = std::str::from_utf8(&text).map_err(|e| not_readable(e.to_string()))?;
    let header: Metadata = serde_json::from_str(text).map_err(|e| not_readable(e.to_string()))?;
    if 8 + header_len + header.data_len() as u64 != file_len {
        bail!(not_readable(format!(
            "{} bytes of tensors, {} in the file",
            header.data_len(),
            file_len - 8 - header_len
        )));
    }
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |key: &str| {
        meta.get(key)
            .cloned()
            .ok_or_else(|| anyhow!("metadata `{key}` is missing"))
    };
    if get("format")? != FORMAT_NAME {
        bail!("not a slide checkpoint");
    }
    let version = get("version")?;
    if version != FORMAT_VERSION && version != PREVIOUS_VERSION {
        bail!(
            "checkpoint format version {version}; this slide-train reads versions {PREVIOUS_VERSION} and {FORMAT_VERSION}"
        );
    }
    let mut names: Vec<String> = header.tensors().into_keys().collect();
    names.sort();
    let mut source = FileSource {
        reader,
        data_start: 8 + header_len,
        header,
    };
    let mut hash = TensorHash::new(version == FORMAT_VERSION);
    for name in &names {
        hash.start(name);
        source.each_piece(name, &mut |piece| hash.feed(piece))?;
    }
    if checksum(hash.finish(), &meta) != get("checksum")? {
        bail!("checksum mismatch: the file is corrupt");
    }
    if get("network")? != format!("{:016x}", identity.network) {
        bail!(
            "was written for a different network ({})",
            differences(&meta, identity)
        );
    }
    if require == Require::Everything {
        let differ = differences(&meta, identity);
        if !differ.is_empty() {
            bail!(
                "was written with other training settings ({differ}); resume with the same settings"
            );
        }
    }
    if let Some(name) = names.iter().find(|n| source.tensor(n).is_none()) {
        bail!(
            "tensor `{name}` is {:?}; checkpoints hold F32, U32 and U64",
            source.info(name)?.dtype
        );
    }
    let number = |key: &str| -> Result<u64> {
        get(key)?
            .parse::<u64>()
            .map_err(|_| anyhow!("metadata `{key}` is not a number"))
    };
    let generations = (0..net.layers().len())
        .map(|i| {
            let key = format!("layers.{i}.tables.generation");
            meta.contains_key(&key).then(|| number(&key)).transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    let scalars = StateScalars {
        step: number("step")?,
        next_rebuild: number("next_rebuild")?,
        rebuild_period: f64::from_bits(number("rebuild_period_bits")?),
        generations,
    };
    let position = Position {
        epoch: number("epoch")? as usize,
        batch: number("batch")? as usize,
    };
    net.read_state(&scalars, &mut source)?;
    Ok(position)
}

/// The largest header read (safetensors' own limit).
const MAX_HEADER: u64 = 100_000_000;

/// The integration tests' self-removing scratch folder, for the tests below.
#[cfg(test)]
#[path = "../../tests/common/scratch.rs"]
mod scratch;

#[cfg(test)]
mod tests {
    use super::*;
    use scratch::Scratch;
    use slide::{Activation, AdamConfig, Init, LayerConfig, RebuildSchedule, WeightLayout};

    fn config(lr: f32) -> NetworkConfig {
        let layer = |out_dim, activation| LayerConfig {
            out_dim,
            activation,
            layout: WeightLayout::NeuronMajor,
            init: Init::Glorot,
            lsh: None,
            moments: Default::default(),
            weights: Default::default(),
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

    /// A checkpoint of a fresh network in a scratch folder (removed when the test passes).
    fn saved(test: &str) -> (Scratch, PathBuf, Identity) {
        let dir = Scratch::new("ckpt", test);
        let identity = Identity::of(&config(0.01), 8);
        let net = Network::new(config(0.01)).unwrap();
        let position = Position { epoch: 1, batch: 3 };
        let path = save(&dir, &net, position, &identity, 1).unwrap();
        (dir, path, identity)
    }

    /// Evaluation needs the same network only; a resume needs every setting and names the
    /// ones that differ.
    #[test]
    fn evaluation_needs_the_network_and_a_resume_every_setting() {
        let (_dir, path, identity) = saved("identity");
        let mut net = Network::new(config(0.01)).unwrap();
        assert!(load(&path, &mut net, &identity, Require::Everything).is_ok());
        let other_lr = Identity::of(&config(0.5), 8);
        assert!(load(&path, &mut net, &other_lr, Require::Network).is_ok());
        let e = load(&path, &mut net, &other_lr, Require::Everything)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("other training settings (adam: checkpoint AdamConfig { lr: 0.01"),
            "{e}"
        );
        let mut wider = config(0.01);
        wider.layers[0].out_dim = 5;
        let mut net = Network::new(wider.clone()).unwrap();
        let e = load(&path, &mut net, &Identity::of(&wider, 8), Require::Network)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("different network (layers.0.out_dim: checkpoint 4, config 5)"),
            "{e}"
        );
    }

    /// The streamed file is a safetensors file (as the `safetensors` crate reads it) whose
    /// tensors are the exported state, and loading it restores that state.
    #[test]
    fn a_written_checkpoint_is_safetensors_of_the_state() {
        let (_dir, path, identity) = saved("layout");
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let state = Network::new(config(0.01)).unwrap().export_state();
        let weight = file.tensor("layers.1.weight").unwrap();
        assert_eq!(weight.shape(), [3, 4]);
        let floats: Vec<f32> = weight
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(floats, state.layers[1].weights);
        assert_eq!(file.len(), 16);
        let mut net = Network::new(NetworkConfig {
            seed: 4,
            ..config(0.01)
        })
        .unwrap();
        assert_ne!(net.export_state(), state);
        let position = load(&path, &mut net, &identity, Require::Network).unwrap();
        assert_eq!(position, Position { epoch: 1, batch: 3 });
        assert_eq!(net.export_state(), state);
    }

    /// A layer that keeps its moments in BF16 writes them as safetensors BF16 tensors (half
    /// the bytes) and reads them back bit for bit; a network of the same architecture with
    /// f32 moments reads the same file (the moments widened exactly).
    #[test]
    fn bf16_moments_are_written_as_bf16() {
        let mut bf16 = config(0.01);
        bf16.layers[1].moments = slide::Precision::Bf16;
        let mut net = Network::new(bf16.clone()).unwrap();
        let mut state = net.export_state();
        let layer = &mut state.layers[1];
        for (i, (m, v)) in layer.m.iter_mut().zip(&mut layer.v).enumerate() {
            (*m, *v) = (0.01 * i as f32 - 0.05, 1e-4 * (i + 1) as f32);
        }
        net.import_state(&state).unwrap();
        let state = net.export_state();
        assert!(state.layers[1].m.iter().any(|&m| m != 0.0));
        let dir = Scratch::new("ckpt", "bf16");
        let identity = Identity::of(&bf16, 8);
        let position = Position { epoch: 1, batch: 3 };
        let path = save(&dir, &net, position, &identity, 1).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let m = file.tensor("layers.1.adam_m").unwrap();
        assert_eq!(
            (m.dtype(), m.shape(), m.data().len()),
            (Dtype::BF16, &[3, 4][..], 24)
        );
        assert_eq!(file.tensor("layers.0.adam_m").unwrap().dtype(), Dtype::F32);
        let mut back = Network::new(NetworkConfig { seed: 4, ..bf16 }).unwrap();
        load(&path, &mut back, &identity, Require::Everything).unwrap();
        assert_eq!(back.export_state(), state);
        let mut widened = Network::new(NetworkConfig {
            seed: 4,
            ..config(0.01)
        })
        .unwrap();
        let f32_identity = Identity::of(&config(0.01), 8);
        assert_eq!(f32_identity.network, identity.network);
        load(&path, &mut widened, &f32_identity, Require::Network).unwrap();
        assert_eq!(widened.export_state(), state);
    }

    /// The tensor hash does not depend on how the bytes are split into pieces, and the word
    /// hash (format 3) differs from the byte hash (format 2).
    #[test]
    fn the_tensor_hash_ignores_piece_boundaries() {
        let bytes: Vec<u8> = (0..203u32).map(|i| (i * 37 % 251) as u8).collect();
        let whole = |words| {
            let mut h = TensorHash::new(words);
            h.start("a");
            h.feed(&bytes);
            h.start("b");
            h.feed(&bytes[..13]);
            h.finish()
        };
        for split in [1, 3, 4, 7, 8, 9, 100, 202] {
            let mut h = TensorHash::new(true);
            h.start("a");
            for piece in bytes.chunks(split) {
                h.feed(piece);
            }
            h.start("b");
            h.feed(&bytes[..split.min(13)]);
            h.feed(&bytes[split.min(13)..13]);
            assert_eq!(h.finish(), whole(true), "split {split}");
        }
        let mut bytewise = FNV_OFFSET;
        bytewise = fnv1a(fnv1a(bytewise, b"a"), &bytes);
        bytewise = fnv1a(fnv1a(bytewise, b"b"), &bytes[..13]);
        assert_eq!(whole(false), bytewise);
        assert_ne!(whole(true), bytewise);
    }

    /// The checksum covers the run's position: an edited epoch is refused as corrupt.
    #[test]
    fn a_changed_position_fails_the_checksum() {
        let (_dir, path, identity) = saved("position");
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let at = text.find("\"batch\":\"3\"").expect("batch in the header");
        let mut edited = bytes.clone();
        edited[at + 9] = b'4';
        let mut net = Network::new(config(0.01)).unwrap();
        let e = load_from(
            std::io::Cursor::new(edited),
            &path,
            &mut net,
            &identity,
            Require::Network,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    /// A written checkpoint is only a temporary file until it is finished: the folder's
    /// newest complete checkpoint is still the previous one (what a resume would take), and
    /// finishing puts it in place, removes the temporary and keeps the newest `keep_last`.
    #[test]
    fn a_written_checkpoint_is_in_place_only_once_finished() {
        let (dir, first, identity) = saved("finish");
        let mut net = Network::new(config(0.01)).unwrap();
        let mut data = slide::SparseExamples::new();
        data.push(&[0, 4], &[1.0, 0.5], &[2]);
        net.train_step(&mut slide::Workspace::new(), &data, &[0])
            .unwrap();
        let position = Position { epoch: 1, batch: 4 };
        let written = write(&dir, &net, position, &identity).unwrap();
        let second = written.path().to_path_buf();
        assert_ne!(second, first);
        assert!(!second.exists());
        assert_eq!(list(&dir).unwrap(), std::slice::from_ref(&first));
        let temporaries = |dir: &Path| {
            std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| is_own_temporary(&e.as_ref().unwrap().file_name().to_string_lossy()))
                .count()
        };
        assert_eq!(temporaries(&dir), 1);
        assert_eq!(written.finish(1).unwrap(), second);
        assert_eq!(list(&dir).unwrap(), [second]);
        assert_eq!(temporaries(&dir), 0);
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
