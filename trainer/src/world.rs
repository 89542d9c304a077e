//! The ranks a run trains on: one process, or with the `mpi` feature the processes of an
//! MPI job (`mpirun -n 4 slide-train --config ...`), which split the output layer between
//! them ([`slide::Network::sharded`]).

use std::sync::Arc;

use slide::comm::{Communicator, Local};

/// The communicator of this process: the MPI job's world with the `mpi` feature (a process
/// started without `mpirun` is a job of one rank), [`Local`] otherwise.
pub fn connect() -> anyhow::Result<Arc<dyn Communicator>> {
    #[cfg(feature = "mpi")]
    {
        let world = mpi_world::Mpi::start()?;
        if world.size() > 1 {
            return Ok(Arc::new(world));
        }
    }
    Ok(Arc::new(Local))
}

#[cfg(feature = "mpi")]
mod mpi_world {
    //! MPI's world communicator, driven by one thread of its own: the thread that
    //! initialises MPI makes every MPI call (MPI's "funneled" threading), while the
    //! training passes, on any thread, hand it their buffers through a channel. A
    //! collective costs a channel round trip (microseconds) beside the transfer.

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::thread::JoinHandle;

    use anyhow::{Context, anyhow};
    use mpi::collective::SystemOperation;
    use mpi::traits::{Communicator as _, CommunicatorCollectives};
    use slide::SlideError;
    use slide::comm::Communicator;

    /// What the MPI thread is asked to do with this rank's values.
    enum Request {
        /// Every rank's values, concatenated in rank order.
        Gather(Vec<f32>),
        /// The element-wise sum over the ranks (see [`Mpi::all_reduce_sum`]).
        Sum(Vec<f32>),
    }

    /// The channels to the MPI thread: requests there, their results back.
    type Link = (Sender<Request>, Receiver<Vec<f32>>);

    /// The world of an MPI job. Dropping it ends the MPI thread, which finalises MPI.
    #[derive(Debug)]
    pub(super) struct Mpi {
        rank: usize,
        size: usize,
        /// Buffers to gather, and the gathered answers (one collective at a time).
        link: Mutex<Option<Link>>,
        thread: Option<JoinHandle<()>>,
        sent: AtomicU64,
    }

    impl Mpi {
        /// Initialises MPI on a thread of its own and asks it for the world's rank and size.
        pub(super) fn start() -> anyhow::Result<Mpi> {
            let (to_mpi, requests) = channel::<Request>();
            let (answer, from_mpi) = channel::<Vec<f32>>();
            let (ready, started) = channel::<Option<(usize, usize)>>();
            let thread = std::thread::Builder::new()
                .name("mpi".into())
                .spawn(move || {
                    let Some(universe) = mpi::initialize() else {
                        let _ = ready.send(None);
                        return;
                    };
                    let world = universe.world();
                    let size = world.size() as usize;
                    let _ = ready.send(Some((world.rank() as usize, size)));
                    while let Ok(request) = requests.recv() {
                        let result = match request {
                            Request::Gather(send) => {
                                let mut gathered = vec![0.0f32; send.len() * size];
                                world.all_gather_into(&send[..], &mut gathered[..]);
                                gathered
                            }
                            Request::Sum(mut values) => {
                                // Each rank sums one block (reduce-scatter), then every
                                // rank gathers the blocks: every rank ends with the same
                                // bits, each block summed once, and a rank sends about
                                // 2 (P - 1) / P of the values instead of P - 1 times them.
                                let n = values.len();
                                let block = n.div_ceil(size);
                                values.resize(block * size, 0.0);
                                let mut mine = vec![0.0f32; block];
                                world.reduce_scatter_block_into(
                                    &values[..],
                                    &mut mine[..],
                                    SystemOperation::sum(),
                                );
                                world.all_gather_into(&mine[..], &mut values[..]);
                                values.truncate(n);
                                values
                            }
                        };
                        if answer.send(result).is_err() {
                            break;
                        }
                    }
                    // `universe` is dropped here, on the thread that initialised MPI:
                    // MPI is finalised.
                })
                .context("cannot start the MPI thread")?;
            let (rank, size) = started
                .recv()
                .ok()
                .flatten()
                .ok_or_else(|| anyhow!("MPI could not be initialised"))?;
            Ok(Mpi {
                rank,
                size,
                link: Mutex::new(Some((to_mpi, from_mpi))),
                thread: Some(thread),
                sent: AtomicU64::new(0),
            })
        }
    }

    impl Communicator for Mpi {
        fn rank(&self) -> usize {
            self.rank
        }

        fn size(&self) -> usize {
            self.size
        }

        fn all_gather(&self, send: &[f32], out: &mut Vec<f32>) -> slide::Result<()> {
            *out = self.ask(Request::Gather(send.to_vec()))?;
            let peers = (self.size - 1) as u64;
            self.sent
                .fetch_add(peers * (send.len() * 4) as u64, Ordering::Relaxed);
            Ok(())
        }

        /// A reduce-scatter of blocks of `values`, then an all-gather of the summed blocks:
        /// the same bits on every rank (each block is summed on one rank), and what a rank
        /// sends does not grow with the number of ranks: `(P - 1)` blocks of `1/P` of the
        /// values in each step.
        fn all_reduce_sum(&self, values: &mut [f32], _scratch: &mut Vec<f32>) -> slide::Result<()> {
            if self.size == 1 {
                return Ok(());
            }
            let summed = self.ask(Request::Sum(values.to_vec()))?;
            values.copy_from_slice(&summed);
            let block = values.len().div_ceil(self.size);
            let sent = 2 * (self.size - 1) * block * 4;
            self.sent.fetch_add(sent as u64, Ordering::Relaxed);
            Ok(())
        }

        fn bytes_sent(&self) -> u64 {
            self.sent.load(Ordering::Relaxed)
        }
    }

    impl Mpi {
        /// Hands `request` to the MPI thread and waits for its result.
        fn ask(&self, request: Request) -> slide::Result<Vec<f32>> {
            let lost = || SlideError::Communication("the MPI thread has stopped".into());
            let link = self.link.lock().map_err(|_| lost())?;
            let (to_mpi, from_mpi) = link.as_ref().ok_or_else(lost)?;
            to_mpi.send(request).map_err(|_| lost())?;
            from_mpi.recv().map_err(|_| lost())
        }
    }

    impl Drop for Mpi {
        fn drop(&mut self) {
            // Closing the channel ends the thread's loop; it then finalises MPI.
            if let Ok(mut link) = self.link.lock() {
                link.take();
            }
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
