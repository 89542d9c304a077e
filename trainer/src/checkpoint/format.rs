//! The safetensors layout of a checkpoint: the tensors streamed out of the layers, the
//! checksum over them and the metadata, and the checked read back into a network.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};

use anyhow::{Context, Result, anyhow, bail};
use safetensors::tensor::{Dtype, Metadata, TensorInfo};
use slide::config::{FNV_OFFSET, FNV_PRIME, fnv1a};
use slide::{Elem, Network, StateScalars, StateSource, StateTensor};

use super::identity::{FORMAT_NAME, FORMAT_VERSION, Identity, PREVIOUS_VERSION, Position, Require};

/// The running checksum of a checkpoint's tensors, in name order: FNV-1a over each
/// tensor's name, then over its bytes as little-endian 64-bit words (a last partial word
/// byte by byte). Format 2 hashed the bytes one at a time, which took about as long as
/// writing the file.
pub(super) struct TensorHash {
    hash: u64,
    words: bool,
    tail: [u8; 8],
    tail_len: usize,
}

impl TensorHash {
    pub(super) fn new(words: bool) -> Self {
        TensorHash {
            hash: FNV_OFFSET,
            words,
            tail: [0; 8],
            tail_len: 0,
        }
    }

    /// Starts the next tensor.
    pub(super) fn start(&mut self, name: &str) {
        self.end();
        self.hash = fnv1a(self.hash, name.as_bytes());
    }

    /// More bytes of the current tensor.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) {
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

    pub(super) fn finish(mut self) -> u64 {
        self.end();
        self.hash
    }
}

/// The checksum of a checkpoint: its tensors (`tensors`, the [`TensorHash`] after them),
/// then every metadata entry but the checksum itself (position, identity, table
/// generations), sorted by key.
pub(super) fn checksum(tensors: u64, metadata: &HashMap<String, String>) -> String {
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
pub(super) const PENDING_CHECKSUM: &str = "0000000000000000";

pub(super) fn dtype(elem: Elem) -> Dtype {
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
pub(super) fn write_tensors(
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

/// The settings that differ between a checkpoint's metadata and `identity`, as
/// `name: checkpoint X, config Y` (at most 3 named); with `extra`, also those only the
/// checkpoint names (e.g. the ranks of a sharded run).
fn differences(meta: &HashMap<String, String>, identity: &Identity, extra: bool) -> String {
    let missing = "(none)".to_string();
    let mut found: Vec<String> = identity
        .settings
        .iter()
        .filter_map(|(key, value)| {
            let saved = meta.get(&format!("setting.{key}")).unwrap_or(&missing);
            (saved != value).then(|| format!("{key}: checkpoint {saved}, config {value}"))
        })
        .collect();
    let mut extra: Vec<String> = meta
        .iter()
        .filter(|_| extra)
        .filter_map(|(key, saved)| {
            let key = key.strip_prefix("setting.")?;
            let known = identity.settings.iter().any(|(k, _)| k == key);
            (!known).then(|| format!("{key}: checkpoint {saved}, config {missing}"))
        })
        .collect();
    extra.sort();
    found.extend(extra);
    let more = found.len().saturating_sub(3);
    found.truncate(3);
    if more > 0 {
        found.push(format!("and {more} more"));
    }
    found.join("; ")
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

/// A checkpoint's safetensors header, its length in bytes and its metadata, checked against
/// the file's length (the tensors are not read).
pub(super) fn read_header<R: Read + Seek>(
    reader: &mut R,
) -> Result<(Metadata, u64, HashMap<String, String>)> {
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
    Ok((header, header_len, meta))
}

pub(super) fn read_checkpoint<R: Read + Seek>(
    mut reader: R,
    net: &mut Network,
    identity: &Identity,
    require: Require,
) -> Result<Position> {
    let (header, header_len, meta) = read_header(&mut reader)?;
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
            differences(&meta, identity, true)
        );
    }
    if require == Require::Everything {
        let differ = differences(&meta, identity, false);
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
        // Written since continued runs (`--init-from`); 0 in older checkpoints.
        earlier_steps: match meta.contains_key("earlier_steps") {
            true => number("earlier_steps")?,
            false => 0,
        },
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
