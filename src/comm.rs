//! How the ranks of a model-parallel run exchange what a batch needs: rank `r` of `P` owns a
//! contiguous slice of the output layer, and per batch the ranks combine each sample's
//! softmax statistics and sum the gradient on the hidden layer (see
//! [`Network::sharded`](crate::Network::sharded)).
//!
//! [`Communicator`] is the small interface the passes call. [`Local`] is the one-rank
//! implementation every single-process network uses, so the sharded code path is the only
//! code path; [`InProcess`] runs several ranks as threads of one process (tests, and trying
//! a sharded model without MPI); an MPI implementation lives in the trainer, behind its
//! `mpi` feature.

use std::fmt::Debug;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use crate::error::{Result, SlideError};

/// The collective operations of a model-parallel run. Every rank calls each operation in
/// the same order with buffers of the same length; each call returns the same values on
/// every rank, so that the replicated layers stay identical.
pub trait Communicator: Debug + Send + Sync {
    /// This process's rank, below [`size`](Self::size).
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn size(&self) -> usize;

    /// Every rank's `send` (the same length on every rank), concatenated in rank order,
    /// into `out` (cleared first).
    fn all_gather(&self, send: &[f32], out: &mut Vec<f32>) -> Result<()>;

    /// The element-wise sum over the ranks of `values`, in place, the same bits on every
    /// rank (an all-reduce may sum in another order on each rank). By default gathered,
    /// then summed in rank order (`scratch` holds the gathered values); an implementation
    /// may sum each block on one rank and gather the blocks instead, which sends less.
    fn all_reduce_sum(&self, values: &mut [f32], scratch: &mut Vec<f32>) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        self.all_gather(values, scratch)?;
        let n = values.len();
        values.copy_from_slice(&scratch[..n]);
        for part in scratch[n..].chunks_exact(n) {
            values.iter_mut().zip(part).for_each(|(v, &p)| *v += p);
        }
        Ok(())
    }

    /// Bytes this rank has sent to the others so far.
    fn bytes_sent(&self) -> u64;
}

/// The outputs rank `rank` of `size` owns of a layer of `outputs`: a contiguous slice, the
/// first `outputs % size` ranks one longer than the rest.
pub fn shard_range(outputs: usize, rank: usize, size: usize) -> Range<usize> {
    let (base, extra) = (outputs / size, outputs % size);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

/// One rank: every collective is the identity and sends nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Local;

impl Communicator for Local {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_gather(&self, send: &[f32], out: &mut Vec<f32>) -> Result<()> {
        out.clear();
        out.extend_from_slice(send);
        Ok(())
    }

    fn bytes_sent(&self) -> u64 {
        0
    }
}

/// Ranks as threads of one process, exchanging through shared memory: what a test needs to
/// run a sharded model without MPI. [`InProcess::group`] makes the ranks; each goes to its
/// own thread.
#[derive(Debug)]
pub struct InProcess {
    rank: usize,
    shared: Arc<Shared>,
    sent: AtomicU64,
}

#[derive(Debug)]
struct Shared {
    size: usize,
    barrier: Barrier,
    slots: Mutex<Vec<Vec<f32>>>,
}

impl InProcess {
    /// `size` connected ranks, rank `r` at position `r`.
    pub fn group(size: usize) -> Vec<InProcess> {
        let shared = Arc::new(Shared {
            size,
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
        });
        (0..size)
            .map(|rank| InProcess {
                rank,
                shared: Arc::clone(&shared),
                sent: AtomicU64::new(0),
            })
            .collect()
    }
}

impl Communicator for InProcess {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn all_gather(&self, send: &[f32], out: &mut Vec<f32>) -> Result<()> {
        let poisoned = || SlideError::Communication("a rank panicked during a collective".into());
        {
            let mut slots = self.shared.slots.lock().map_err(|_| poisoned())?;
            slots[self.rank].clear();
            slots[self.rank].extend_from_slice(send);
        }
        // Every rank has written before any reads, and has read before any writes again.
        self.shared.barrier.wait();
        {
            let slots = self.shared.slots.lock().map_err(|_| poisoned())?;
            if let Some(other) = slots.iter().find(|s| s.len() != send.len()) {
                return Err(SlideError::Communication(format!(
                    "all_gather: rank {} sent {} values, another rank {}",
                    self.rank,
                    send.len(),
                    other.len()
                )));
            }
            out.clear();
            for slot in slots.iter() {
                out.extend_from_slice(slot);
            }
        }
        self.shared.barrier.wait();
        let peers = (self.size() - 1) as u64;
        self.sent
            .fetch_add(peers * (send.len() * 4) as u64, Ordering::Relaxed);
        Ok(())
    }

    fn bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_outputs_once_in_order() {
        for (outputs, size) in [(10, 3), (670_091, 2), (5, 5), (3, 4), (1, 1)] {
            let ranges: Vec<_> = (0..size).map(|r| shard_range(outputs, r, size)).collect();
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges[size - 1].end, outputs);
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
                assert!(pair[0].len() >= pair[1].len() && pair[0].len() <= pair[1].len() + 1);
            }
        }
        assert_eq!(shard_range(670_091, 1, 2), 335_046..670_091);
    }

    /// Three ranks each add `rank + 1` and `10 * rank` to two entries: every rank gets
    /// (6, 30) and counts 2 values x 4 bytes x 2 peers sent per call.
    #[test]
    fn in_process_ranks_sum_and_gather_in_rank_order() {
        let ranks = InProcess::group(3);
        let results: Vec<(Vec<f32>, Vec<f32>, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = ranks
                .iter()
                .map(|comm| {
                    s.spawn(move || {
                        let r = comm.rank() as f32;
                        let mut values = vec![r + 1.0, 10.0 * r];
                        let mut scratch = Vec::new();
                        comm.all_reduce_sum(&mut values, &mut scratch).unwrap();
                        let mut gathered = Vec::new();
                        comm.all_gather(&[r], &mut gathered).unwrap();
                        (values, gathered, comm.bytes_sent())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (values, gathered, sent) in results {
            assert_eq!(values, vec![6.0, 30.0]);
            assert_eq!(gathered, vec![0.0, 1.0, 2.0]);
            assert_eq!(sent, 2 * 4 * 2 + 4 * 2);
        }
    }

    #[test]
    fn a_local_rank_is_the_identity() {
        let mut values = vec![1.5, -2.0];
        Local.all_reduce_sum(&mut values, &mut Vec::new()).unwrap();
        assert_eq!(values, vec![1.5, -2.0]);
        let mut out = vec![9.0];
        Local.all_gather(&[3.0], &mut out).unwrap();
        assert_eq!(out, vec![3.0]);
        assert_eq!(Local.bytes_sent(), 0);
    }
}
