//! The tables' contents as three plain arrays, for checkpoints: copied out
//! ([`HashTables::export_state`]) or streamed without a copy ([`HashTables::write_state`],
//! [`HashTables::read_state`]), which is what keeps a checkpoint of 50 tables over 670,091
//! ids from holding a second copy of them in memory.

use super::hash_tables::HashTables;
use super::table::{Bucket, table_rng};
use crate::error::{LshError, invalid};

/// Everything [`HashTables`] hold, in plain arrays, for checkpoints: restoring it gives
/// tables that answer every query exactly as the saved ones did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablesState {
    /// How many times the tables were cleared (it seeds the reservoir choices of the next
    /// rebuild).
    pub generation: u64,
    /// Per table, per bucket: `[start, seen, len, segment]`, `L * 2^range_pow * 4` values.
    pub buckets: Vec<u32>,
    /// The tables' id stores, concatenated.
    pub store: Vec<u32>,
    /// Where each table's store starts in `store` (`L + 1` values).
    pub store_offsets: Vec<u64>,
}

/// One array of a [`TablesState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TablesArray {
    /// [`TablesState::buckets`], `u32`.
    Buckets,
    /// [`TablesState::store`], `u32`.
    Store,
    /// [`TablesState::store_offsets`], `u64`.
    StoreOffsets,
}

impl TablesArray {
    /// The three arrays.
    pub const ALL: [TablesArray; 3] = [
        TablesArray::Buckets,
        TablesArray::Store,
        TablesArray::StoreOffsets,
    ];

    /// Bytes per element.
    pub fn elem_bytes(self) -> usize {
        match self {
            TablesArray::StoreOffsets => 8,
            TablesArray::Buckets | TablesArray::Store => 4,
        }
    }
}

/// What [`HashTables::read_state`] reads through: `read(array, first, out)` fills `out`
/// with the little-endian bytes of `array`'s elements from element `first` on.
pub type ReadArray<'a, E> = dyn FnMut(TablesArray, usize, &mut [u8]) -> Result<(), E> + 'a;

/// Elements converted per call of a [`HashTables::write_state`] sink.
const CHUNK: usize = 1 << 16;

/// `count` values as little-endian bytes in `out`.
fn u32s_le(count: usize, values: impl Iterator<Item = u32>, out: &mut Vec<u8>) {
    out.clear();
    out.resize(count * 4, 0);
    for (bytes, v) in out.chunks_exact_mut(4).zip(values) {
        bytes.copy_from_slice(&v.to_le_bytes());
    }
}

impl Bucket {
    /// The bucket as [`TablesState::buckets`] holds it: `[start, seen, len, segment]`.
    fn fields(&self) -> [u32; 4] {
        [
            self.start,
            self.seen,
            u32::from(self.len),
            u32::from(self.segment),
        ]
    }
}

fn from_u32s_le(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

impl HashTables {
    /// How many times the tables were cleared (see [`TablesState::generation`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Elements of `array` in the tables' state.
    pub fn state_len(&self, array: TablesArray) -> usize {
        match array {
            TablesArray::Buckets => (self.tables.len() * 4) << self.config.range_pow,
            TablesArray::Store => self.tables.iter().map(|t| t.store.len()).sum(),
            TablesArray::StoreOffsets => self.tables.len() + 1,
        }
    }

    /// A copy of the tables' contents (see [`TablesState`]).
    pub fn export_state(&self) -> TablesState {
        let mut state = TablesState {
            generation: self.generation,
            buckets: Vec::with_capacity(self.state_len(TablesArray::Buckets)),
            store: Vec::with_capacity(self.state_len(TablesArray::Store)),
            store_offsets: vec![0],
        };
        for table in &self.tables {
            for b in &table.buckets {
                state.buckets.extend(b.fields());
            }
            state.store.extend_from_slice(&table.store);
            state.store_offsets.push(state.store.len() as u64);
        }
        state
    }

    /// Passes `array` of the tables' state to `sink` as little-endian bytes, in pieces of at
    /// most 512 KiB, in the order [`export_state`](Self::export_state) holds it, without
    /// copying the tables. Stops at the first error of `sink`.
    pub fn write_state<E>(
        &self,
        array: TablesArray,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut buf = Vec::with_capacity(CHUNK * 8);
        match array {
            TablesArray::Buckets => {
                for table in &self.tables {
                    for chunk in table.buckets.chunks(CHUNK / 4) {
                        u32s_le(
                            chunk.len() * 4,
                            chunk.iter().flat_map(Bucket::fields),
                            &mut buf,
                        );
                        sink(&buf)?;
                    }
                }
            }
            TablesArray::Store => {
                for table in &self.tables {
                    for chunk in table.store.chunks(CHUNK) {
                        u32s_le(chunk.len(), chunk.iter().copied(), &mut buf);
                        sink(&buf)?;
                    }
                }
            }
            TablesArray::StoreOffsets => {
                let mut at = 0u64;
                buf.extend_from_slice(&at.to_le_bytes());
                for table in &self.tables {
                    at += table.store.len() as u64;
                    buf.extend_from_slice(&at.to_le_bytes());
                }
                sink(&buf)?;
            }
        }
        Ok(())
    }

    /// Replaces the contents with `state`, after checking that it fits these tables (see
    /// [`read_state`](Self::read_state), which it goes through).
    pub fn import_state(&mut self, state: &TablesState) -> Result<(), LshError> {
        let lens = [
            state.buckets.len(),
            state.store.len(),
            state.store_offsets.len(),
        ];
        self.read_state(state.generation, lens, &mut |array, first, out| {
            let count = out.len() / array.elem_bytes();
            let range = first..first + count;
            let bytes: Vec<u8> = match array {
                TablesArray::Buckets => state.buckets[range]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                TablesArray::Store => state.store[range]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                TablesArray::StoreOffsets => state.store_offsets[range]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            };
            out.copy_from_slice(&bytes);
            Ok(())
        })
    }

    /// Replaces the contents with a state read through `read(array, first, out)`, which fills
    /// `out` with the little-endian bytes of `array`'s elements from element `first` on;
    /// `lens` are the lengths of the source's buckets, store and store-offsets arrays. Reads
    /// one table at a time, so besides the tables it holds one table's arrays at most.
    ///
    /// Checks that the state fits these tables: array sizes, consistent store offsets,
    /// every bucket inside its store and within capacity, every id below `num_ids`. On an
    /// error (of the check or of `read`) the tables are left empty, as after
    /// [`clear`](Self::clear). The reservoir generator restarts from `generation`'s seed,
    /// so a later rebuild makes the same choices as the saved tables' would have.
    pub fn read_state<E: From<LshError>>(
        &mut self,
        generation: u64,
        lens: [usize; 3],
        read: &mut ReadArray<'_, E>,
    ) -> Result<(), E> {
        // The restored tables did not come from the kept codes.
        self.codes_kept = false;
        self.rehashed_ids = 0;
        let result = self.read_tables(generation, lens, read);
        if result.is_err() {
            self.clear();
        }
        result
    }

    fn read_tables<E: From<LshError>>(
        &mut self,
        generation: u64,
        [buckets_len, store_len, offsets_len]: [usize; 3],
        read: &mut ReadArray<'_, E>,
    ) -> Result<(), E> {
        let (l, buckets) = (self.config.l, 1usize << self.config.range_pow);
        let bad = |reason: &'static str| E::from(invalid("tables state", "", reason));
        if buckets_len != l * buckets * 4 || offsets_len != l + 1 {
            return Err(bad("array sizes do not match L and range_pow"));
        }
        let mut bytes = vec![0u8; (l + 1) * 8];
        read(TablesArray::StoreOffsets, 0, &mut bytes)?;
        let offsets: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if offsets[0] != 0
            || offsets.windows(2).any(|w| w[0] > w[1])
            || offsets[l] != store_len as u64
        {
            return Err(bad("store offsets are inconsistent"));
        }
        let capacity = self.config.bucket_capacity as u32;
        let num_ids = self.config.num_ids;
        let mut fields = vec![0u8; buckets * 16];
        for t in 0..l {
            let (from, to) = (offsets[t] as usize, offsets[t + 1] as usize);
            bytes.resize((to - from) * 4, 0);
            read(TablesArray::Store, from, &mut bytes)?;
            let store: Vec<u32> = from_u32s_le(&bytes).collect();
            if let Some(&id) = store.iter().find(|&&id| id as usize >= num_ids) {
                return Err(LshError::IdOutOfRange { id, num_ids }.into());
            }
            read(TablesArray::Buckets, t * buckets * 4, &mut fields)?;
            let values: Vec<u32> = from_u32s_le(&fields).collect();
            let mut table_buckets = Vec::with_capacity(buckets);
            for f in values.chunks_exact(4) {
                let [start, seen, len, segment] = [f[0], f[1], f[2], f[3]];
                if len > segment
                    || segment > capacity
                    || u64::from(start) + u64::from(segment) > store.len() as u64
                {
                    return Err(bad(
                        "a bucket lies outside its store or exceeds the capacity",
                    ));
                }
                table_buckets.push(Bucket {
                    start,
                    seen,
                    len: len as u16,
                    segment: segment as u16,
                });
            }
            let used: usize = table_buckets.iter().map(|b| b.segment as usize).sum();
            let table = &mut self.tables[t];
            table.garbage = store.len() - used.min(store.len());
            table.buckets = table_buckets;
            table.store = store;
            table.rng = table_rng(self.config.seed, t, generation);
        }
        self.generation = generation;
        Ok(())
    }
}
