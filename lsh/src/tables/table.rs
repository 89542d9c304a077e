//! One table: `2^range_pow` bounded buckets whose ids sit in segments of one store, with
//! inserts, compaction and the exact-size fill of a rebuild (see the
//! [`tables`](crate::tables) module documentation for the layout and the policies).

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use super::codes::TableCodes;
use super::policy::{BucketPolicy, reservoir_slot};
use crate::family::mix64;

/// One table: a header per bucket and the store their ids sit in.
#[derive(Debug, Clone)]
pub(super) struct Table {
    pub(super) buckets: Vec<Bucket>,
    pub(super) store: Vec<u32>,
    /// Second store that compaction copies into, kept to avoid reallocating.
    pub(super) spare: Vec<u32>,
    /// Store slots no bucket uses any more.
    pub(super) garbage: usize,
    /// The reservoir policy's generator (see [`table_rng`]).
    pub(super) rng: Xoshiro256PlusPlus,
}

/// A bucket's header: its ids are `store[start..start + len]`, inside a segment of
/// `segment` slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Bucket {
    pub(super) start: u32,
    /// Ids offered to this bucket since the last clear (saturating).
    pub(super) seen: u32,
    pub(super) len: u16,
    pub(super) segment: u16,
}

impl Table {
    pub(super) fn new(num_buckets: usize, rng: Xoshiro256PlusPlus) -> Self {
        Table {
            buckets: vec![Bucket::default(); num_buckets],
            store: Vec::new(),
            spare: Vec::new(),
            garbage: 0,
            rng,
        }
    }

    pub(super) fn bucket(&self, code: u32) -> &[u32] {
        let b = self.buckets[code as usize];
        &self.store[b.start as usize..b.start as usize + b.len as usize]
    }

    pub(super) fn insert(&mut self, code: u32, id: u32, capacity: u16, policy: BucketPolicy) {
        let b = self.buckets[code as usize];
        if b.len < capacity {
            let mut b = b;
            if b.len == b.segment {
                let segment = b.segment.saturating_mul(2).max(2).min(capacity);
                if self.store.len() + segment as usize > u32::MAX as usize {
                    self.compact();
                }
                let start = self.store.len();
                self.store
                    .extend_from_within(b.start as usize..b.start as usize + b.len as usize);
                self.store.resize(start + segment as usize, 0);
                self.garbage += b.segment as usize;
                b.start = start as u32;
                b.segment = segment;
            }
            self.store[b.start as usize + b.len as usize] = id;
            b.len += 1;
            b.seen = b.seen.saturating_add(1);
            self.buckets[code as usize] = b;
            return;
        }
        let slot = match policy {
            BucketPolicy::Fifo => Some(b.seen as usize % capacity as usize),
            BucketPolicy::Reservoir => reservoir_slot(&mut self.rng, b.seen, capacity),
        };
        if let Some(slot) = slot {
            self.store[b.start as usize + slot] = id;
        }
        self.buckets[code as usize].seen = b.seen.saturating_add(1);
    }

    /// Single inserts can abandon segments; reclaim them once they are half the store.
    pub(super) fn compact_if_wasteful(&mut self) {
        if self.garbage > 1 << 12 && self.garbage * 2 > self.store.len() {
            self.compact();
        }
    }

    /// Copies every bucket's ids into an exactly sized segment of the spare store, in bucket
    /// order, and swaps the stores. Keeps each full bucket's slot order, which FIFO relies on.
    fn compact(&mut self) {
        self.spare.clear();
        for b in &mut self.buckets {
            let start = self.spare.len();
            self.spare.extend_from_slice(
                &self.store[b.start as usize..b.start as usize + b.len as usize],
            );
            b.start = start as u32;
            b.segment = b.len;
        }
        std::mem::swap(&mut self.store, &mut self.spare);
        self.garbage = 0;
    }

    /// Fills an empty table from the codes of ids `0, 1, 2, ...` in that order: counts the
    /// load of each bucket, gives each bucket an exactly sized segment, then replays the
    /// inserts through [`insert`](Self::insert), which never needs to move a segment.
    ///
    /// The replay always uses reservoir sampling, whatever the tables' policy: every id
    /// arrives at once, so "the newest ids" would only mean "the highest ids", and a FIFO
    /// replay in id order would let full buckets keep their last `capacity` ids, making
    /// the lower ids of every crowded bucket unreachable until the next rebuild. Reservoir
    /// sampling keeps a uniform sample of the ids offered to each bucket.
    pub(super) fn build(&mut self, codes: TableCodes<'_>, capacity: u16) {
        debug_assert!(self.store.is_empty());
        codes.for_each(|_, code| {
            let b = &mut self.buckets[code as usize];
            b.seen = b.seen.saturating_add(1);
        });
        let mut next = 0u32;
        for b in &mut self.buckets {
            let len = b.seen.min(u32::from(capacity)) as u16;
            *b = Bucket {
                start: next,
                seen: 0,
                len: 0,
                segment: len,
            };
            next += u32::from(len);
        }
        self.store.resize(next as usize, 0);
        // `insert` with the reservoir policy, for segments that never need to grow: the
        // same stores and the same random draws, without the growth checks.
        let (buckets, store, rng) = (&mut self.buckets, &mut self.store, &mut self.rng);
        codes.for_each(|id, code| {
            let b = &mut buckets[code as usize];
            if b.len < b.segment {
                store[(b.start + u32::from(b.len)) as usize] = id;
                b.len += 1;
            } else if let Some(j) = reservoir_slot(rng, b.seen, capacity) {
                store[b.start as usize + j] = id;
            }
            b.seen = b.seen.saturating_add(1);
        });
    }

    pub(super) fn clear(&mut self, rng: Xoshiro256PlusPlus) {
        self.buckets.fill(Bucket::default());
        self.store.clear();
        self.garbage = 0;
        self.rng = rng;
    }
}

/// The reservoir generator of table `table` after `generation` clears of tables seeded
/// with `seed`.
pub(super) fn table_rng(seed: u64, table: usize, generation: u64) -> Xoshiro256PlusPlus {
    let stream = mix64(seed ^ mix64((table as u64) << 32 ^ generation ^ 0x0074_6162_6c65_7300));
    Xoshiro256PlusPlus::seed_from_u64(stream)
}
