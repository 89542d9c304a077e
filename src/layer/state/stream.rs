//! A layer's state streamed as named tensors of little-endian bytes: the tensors' names,
//! types and shapes, each written to a sink piece by piece and read back from a
//! [`StateSource`] into the layer's own storage.

use slide_lsh::TablesArray;

use super::{Elem, StateSource, StateTensor};
use crate::error::{SlideError, config_error};
use crate::kernels::bf16;
use crate::kernels::{Values, ValuesMut};
use crate::layer::config::{M, V, WEIGHTS};
use crate::layer::{Precision, SparseLayer};

impl SparseLayer {
    /// The arrays of the layer's state as [`write_state_tensor`](Self::write_state_tensor)
    /// writes them (the weights' moments in the layer's [`Precision`]), by the names
    /// checkpoints give them (`weight`, `adam_m`, `adam_v`,
    /// `row_steps`, `bias`, `bias_adam_m`, `bias_adam_v`, `bias_steps`, and where in use
    /// `shared_negatives`, `query_center`, `tables.buckets`, `tables.store`,
    /// `tables.store_offsets`), sorted by name.
    pub fn state_tensors(&self) -> Vec<StateTensor> {
        let (rows, row_len, n) = (self.rows(), self.row_len(), self.out_dim);
        let t = |name: &str, elem, shape: Vec<usize>| StateTensor {
            name: name.to_string(),
            elem,
            shape,
        };
        // Weights and moments as the layer keeps them: BF16 ones are written as they are.
        let elem = |precision| match precision {
            Precision::F32 => Elem::F32,
            Precision::Bf16 => Elem::Bf16,
        };
        let moments = elem(self.moments);
        let mut out = vec![
            t("weight", elem(self.weights), vec![rows, row_len]),
            t("adam_m", moments, vec![rows, row_len]),
            t("adam_v", moments, vec![rows, row_len]),
            t("row_steps", Elem::U32, vec![rows]),
            t("bias", Elem::F32, vec![n]),
            t("bias_adam_m", Elem::F32, vec![n]),
            t("bias_adam_v", Elem::F32, vec![n]),
            t("bias_steps", Elem::U32, vec![n]),
        ];
        if let Some(lsh) = &self.lsh {
            if !lsh.shared.is_empty() {
                out.push(t("shared_negatives", Elem::U32, vec![lsh.shared.len()]));
            }
            if !lsh.center.is_empty() {
                out.push(t("query_center", Elem::F32, vec![lsh.center.len()]));
            }
            for (array, name, elem) in TABLES {
                out.push(t(name, elem, vec![lsh.tables.state_len(array)]));
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Passes tensor `name` (one of [`state_tensors`](Self::state_tensors)) to `sink` as
    /// little-endian bytes, in pieces of at most about 512 KiB, without copying the state:
    /// a checkpoint writer holds one piece, not the layer, on top of the network.
    pub fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let (row_len, storage) = (self.row_len(), self.block_layout());
        // A part of every row, in its own precision.
        let part = |which: usize, sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>| {
            let mut out = Pieces::new(sink);
            for block in self.params.chunks_exact(self.block()) {
                match storage.part(block, which).first(row_len) {
                    Values::F32(x) => out.put(x, f32::to_le_bytes)?,
                    Values::Bf16(x) => out.put(x, u16::to_le_bytes)?,
                }
            }
            out.finish()
        };
        let lsh = self.lsh.as_ref();
        let f32s: fn(f32) -> [u8; 4] = f32::to_le_bytes;
        let u32s: fn(u32) -> [u8; 4] = u32::to_le_bytes;
        match name {
            "weight" => part(WEIGHTS, sink),
            "adam_m" => part(M, sink),
            "adam_v" => part(V, sink),
            "bias" => write_rows(std::iter::once(&self.bias[..]), f32s, sink),
            "bias_adam_m" => write_rows(std::iter::once(&self.bias_m[..]), f32s, sink),
            "bias_adam_v" => write_rows(std::iter::once(&self.bias_v[..]), f32s, sink),
            "query_center" if lsh.is_some_and(|l| !l.center.is_empty()) => write_rows(
                std::iter::once(lsh.map_or(&[][..], |l| &l.center)),
                f32s,
                sink,
            ),
            "row_steps" => write_rows(std::iter::once(&self.row_steps[..]), u32s, sink),
            "bias_steps" => write_rows(std::iter::once(&self.bias_steps[..]), u32s, sink),
            "shared_negatives" if lsh.is_some_and(|l| !l.shared.is_empty()) => write_rows(
                std::iter::once(lsh.map_or(&[][..], |l| &l.shared)),
                u32s,
                sink,
            ),
            _ => match (lsh, TABLES.iter().find(|t| t.1 == name)) {
                (Some(lsh), Some(&(array, _, _))) => lsh.tables.write_state(array, sink),
                _ => Err(config_error(self.what(), format!("has no state tensor `{name}`")).into()),
            },
        }
    }

    /// Replaces the layer's trainable state with the tensors `source` holds under the names
    /// of [`state_tensors`](Self::state_tensors), read piece by piece into the layer's own
    /// storage (a checkpoint reader holds one piece, or one hash table, on top of the
    /// network). `generation` is the tables' (see [`slide_lsh::TablesState`]), required
    /// for sampled layers.
    ///
    /// Checks every tensor's type and shape before reading any, and the tables, shared
    /// negatives and query center as they are read. An error can come after part of the
    /// state was replaced: the layer's contents are then unspecified (read again or build a
    /// new layer); its tables are left empty.
    pub fn read_state<S: StateSource + ?Sized>(
        &mut self,
        generation: Option<u64>,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        let (shared_len, center_len, lens) = self.check_source(generation, source)?;
        if let Some(lsh) = self.lsh.as_mut() {
            lsh.changed.mark_all();
        }
        self.read_weights_and_moments(source)?;
        read_u32s(source, "row_steps", &mut self.row_steps)?;
        read_f32s(source, "bias", &mut self.bias)?;
        read_f32s(source, "bias_adam_m", &mut self.bias_m)?;
        read_f32s(source, "bias_adam_v", &mut self.bias_v)?;
        read_u32s(source, "bias_steps", &mut self.bias_steps)?;
        let what = self.what();
        let fail = |reason: String| S::Error::from(config_error(what.clone(), reason));
        let Some(lsh) = self.lsh.as_mut() else {
            return Ok(());
        };
        let mut shared = vec![0u32; shared_len];
        read_u32s(source, "shared_negatives", &mut shared)?;
        let mut center = vec![0f32; center_len];
        read_f32s(source, "query_center", &mut center)?;
        if shared.iter().any(|&id| id as usize >= self.out_dim) {
            return Err(fail(
                "shared negatives or query center do not fit the layer".into(),
            ));
        }
        lsh.shared = shared;
        lsh.center = center;
        let result = lsh.tables.read_state(
            generation.unwrap_or(0),
            lens,
            &mut |array, first, out| -> std::result::Result<(), Read<S::Error>> {
                source
                    .read(tables_name(array), first * array.elem_bytes(), out)
                    .map_err(Read::Source)
            },
        );
        lsh.stats = lsh.tables.stats();
        // Out of the layer while the pool's rows (if any) are copied from the new weights.
        if let Some(mut lsh) = self.lsh.take() {
            self.copy_pool_rows(&mut lsh);
            self.lsh = Some(lsh);
        }
        result.map_err(|e| match e {
            Read::Source(e) => e,
            Read::Tables(e) => S::Error::from(SlideError::from(e)),
        })
    }

    /// The checks of [`read_state`](Self::read_state) before it reads anything: the
    /// lengths of the shared negatives, the query center and the tables' arrays (in
    /// `TablesArray::ALL` order) that `source` holds.
    fn check_source<S: StateSource + ?Sized>(
        &self,
        generation: Option<u64>,
        source: &S,
    ) -> std::result::Result<(usize, usize, [usize; 3]), S::Error> {
        let what = self.what();
        let fail = |reason: String| S::Error::from(config_error(what.clone(), reason));
        let sampled = self.lsh.is_some();
        let has_tables = source.tensor("tables.store").is_some();
        if sampled != has_tables || sampled != generation.is_some() {
            return Err(fail("LSH sampling differs between state and layer".into()));
        }
        let expected = self.state_tensors();
        for t in &expected {
            if matches!(t.name.as_str(), "shared_negatives" | "query_center")
                || t.name.starts_with("tables.")
            {
                continue;
            }
            // Weights and moments read in either precision, whatever the layer keeps.
            let either = matches!(t.name.as_str(), "weight" | "adam_m" | "adam_v");
            match source.tensor(&t.name) {
                Some((elem, shape)) if elem == t.elem && shape == t.shape => {}
                Some((Elem::F32 | Elem::Bf16, shape)) if either && shape == t.shape => {}
                Some((elem, shape)) => {
                    return Err(fail(format!(
                        "`{}` is {elem:?} {shape:?}, the layer's {:?} {:?}",
                        t.name, t.elem, t.shape
                    )));
                }
                None => return Err(fail(format!("`{}` is missing", t.name))),
            }
        }
        let optional =
            |source: &S, name: &str, elem: Elem| -> std::result::Result<usize, S::Error> {
                match source.tensor(name) {
                    None => Ok(0),
                    Some((e, shape)) if e == elem && shape.len() == 1 => Ok(shape[0]),
                    Some((e, shape)) => Err(fail(format!("`{name}` is {e:?} {shape:?}"))),
                }
            };
        let shared_len = optional(source, "shared_negatives", Elem::U32)?;
        let center_len = optional(source, "query_center", Elem::F32)?;
        if shared_len > self.out_dim || !(center_len == 0 || center_len == self.in_dim) {
            return Err(fail(
                "shared negatives or query center do not fit the layer".into(),
            ));
        }
        // In `TablesArray::ALL` order, as the tables take them.
        let mut lens = [0usize; 3];
        if sampled {
            for (len, (_, name, elem)) in lens.iter_mut().zip(TABLES) {
                *len = optional(source, name, elem)?;
            }
        }
        Ok((shared_len, center_len, lens))
    }

    /// The weights and moments of [`read_state`](Self::read_state), read in either
    /// precision.
    fn read_weights_and_moments<S: StateSource + ?Sized>(
        &mut self,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        // Weights and moments, a block of rows at a time, into the padded rows.
        let (rows, row_len, storage, block) = (
            self.rows(),
            self.row_len(),
            self.block_layout(),
            self.block(),
        );
        let rows_per_piece = (PIECE / (4 * row_len.max(1))).max(1);
        let mut bytes = vec![0u8; rows_per_piece.min(rows) * row_len * 4];
        let mut values = vec![0.0f32; row_len];
        for (name, which) in [("weight", WEIGHTS), ("adam_m", M), ("adam_v", V)] {
            let elem = source.tensor(name).map_or(Elem::F32, |(elem, _)| elem);
            let size = elem.bytes();
            for first in (0..rows).step_by(rows_per_piece) {
                let count = rows_per_piece.min(rows - first);
                let piece = &mut bytes[..count * row_len * size];
                source.read(name, first * row_len * size, piece)?;
                let blocks = &mut self.params[first * block..(first + count) * block];
                for (block, row) in blocks
                    .chunks_exact_mut(block)
                    .zip(piece.chunks_exact(row_len * size))
                {
                    match (elem, storage.part_mut(block, which)) {
                        // BF16 into BF16: the values as they are.
                        (Elem::Bf16, ValuesMut::Bf16(halves)) => {
                            for (h, b) in halves.iter_mut().zip(row.chunks_exact(2)) {
                                *h = u16::from_le_bytes([b[0], b[1]]);
                            }
                        }
                        (_, mut part) => {
                            for (x, b) in values.iter_mut().zip(row.chunks_exact(size)) {
                                *x = match elem {
                                    Elem::Bf16 => bf16::to_f32(u16::from_le_bytes([b[0], b[1]])),
                                    _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                                };
                            }
                            part.first(row_len).store_nearest(&values);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn what(&self) -> String {
        format!("layer {} -> {} state", self.in_dim, self.out_dim)
    }
}

/// Passes the values of `rows`, one after another, to `sink` as little-endian bytes, in
/// pieces of at most 512 KiB: how a part of a network (a layer, a head) writes a tensor of
/// its state.
pub fn write_rows<'a, T: Copy + 'a, E>(
    rows: impl Iterator<Item = &'a [T]>,
    le: fn(T) -> [u8; 4],
    sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let mut out = Pieces::new(sink);
    for row in rows {
        out.put(row, le)?;
    }
    out.finish()
}

/// Collects values as little-endian bytes and hands them to a sink in pieces of at most
/// [`PIECE`] bytes.
struct Pieces<'s, E> {
    sink: &'s mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    buf: Vec<u8>,
    at: usize,
}

impl<'s, E> Pieces<'s, E> {
    fn new(sink: &'s mut dyn FnMut(&[u8]) -> std::result::Result<(), E>) -> Self {
        Pieces {
            sink,
            buf: vec![0u8; PIECE],
            at: 0,
        }
    }

    fn put<T: Copy, const N: usize>(
        &mut self,
        values: &[T],
        le: fn(T) -> [u8; N],
    ) -> std::result::Result<(), E> {
        for part in values.chunks(PIECE / N) {
            if self.at + part.len() * N > PIECE {
                (self.sink)(&self.buf[..self.at])?;
                self.at = 0;
            }
            let bytes = &mut self.buf[self.at..self.at + part.len() * N];
            for (b, &v) in bytes.chunks_exact_mut(N).zip(part) {
                b.copy_from_slice(&le(v));
            }
            self.at += part.len() * N;
        }
        Ok(())
    }

    fn finish(self) -> std::result::Result<(), E> {
        if self.at > 0 {
            (self.sink)(&self.buf[..self.at])?;
        }
        Ok(())
    }
}

/// Bytes handed to a sink at a time, and read from a source at a time.
const PIECE: usize = 1 << 19;

/// The tables' arrays as state tensors: checkpoint name and element type.
const TABLES: [(TablesArray, &str, Elem); 3] = [
    (TablesArray::Buckets, "tables.buckets", Elem::U32),
    (TablesArray::Store, "tables.store", Elem::U32),
    (TablesArray::StoreOffsets, "tables.store_offsets", Elem::U64),
];

/// The checkpoint name of one of the tables' arrays.
fn tables_name(array: TablesArray) -> &'static str {
    TABLES
        .iter()
        .find(|t| t.0 == array)
        .map_or("tables", |t| t.1)
}

/// An error of a [`StateSource`] or of the tables' checks, while reading tables.
enum Read<E> {
    Source(E),
    Tables(slide_lsh::LshError),
}

impl<E> From<slide_lsh::LshError> for Read<E> {
    fn from(e: slide_lsh::LshError) -> Self {
        Read::Tables(e)
    }
}

/// Reads tensor `name` of 4-byte values into `out`, a piece at a time.
fn read_values<S: StateSource + ?Sized, T>(
    source: &mut S,
    name: &str,
    out: &mut [T],
    from_le: fn([u8; 4]) -> T,
) -> std::result::Result<(), S::Error> {
    let mut bytes = vec![0u8; (out.len() * 4).min(PIECE)];
    for (i, chunk) in out.chunks_mut(PIECE / 4).enumerate() {
        let piece = &mut bytes[..chunk.len() * 4];
        source.read(name, i * PIECE, piece)?;
        for (v, b) in chunk.iter_mut().zip(piece.chunks_exact(4)) {
            *v = from_le([b[0], b[1], b[2], b[3]]);
        }
    }
    Ok(())
}

/// Fills `out` with tensor `name` of `source`, u32 values, read in pieces: how a part of a
/// network reads a tensor of its state.
pub fn read_u32s<S: StateSource + ?Sized>(
    source: &mut S,
    name: &str,
    out: &mut [u32],
) -> std::result::Result<(), S::Error> {
    read_values(source, name, out, u32::from_le_bytes)
}

/// Fills `out` with tensor `name` of `source`, f32 values, read in pieces.
pub fn read_f32s<S: StateSource + ?Sized>(
    source: &mut S,
    name: &str,
    out: &mut [f32],
) -> std::result::Result<(), S::Error> {
    read_values(source, name, out, f32::from_le_bytes)
}
