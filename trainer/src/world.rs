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
    use mpi::traits::{Communicator as _, CommunicatorCollectives};
    use slide::SlideError;
    use slide::comm::Communicator;

    /// The channels to the MPI thread: this rank's part of an all-gather there, the
    /// gathered values back.
    type Link = (Sender<Vec<f32>>, Receiver<Vec<f32>>);

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
            let (to_mpi, requests) = channel::<Vec<f32>>();
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
                    // Each request is this rank's part of an all-gather.
                    while let Ok(send) = requests.recv() {
                        let mut gathered = vec![0.0f32; send.len() * size];
                        world.all_gather_into(&send[..], &mut gathered[..]);
                        if answer.send(gathered).is_err() {
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
            let lost = || SlideError::Communication("the MPI thread has stopped".into());
            let link = self.link.lock().map_err(|_| lost())?;
            let (to_mpi, from_mpi) = link.as_ref().ok_or_else(lost)?;
            to_mpi.send(send.to_vec()).map_err(|_| lost())?;
            *out = from_mpi.recv().map_err(|_| lost())?;
            let peers = (self.size - 1) as u64;
            self.sent
                .fetch_add(peers * (send.len() * 4) as u64, Ordering::Relaxed);
            Ok(())
        }

        fn bytes_sent(&self) -> u64 {
            self.sent.load(Ordering::Relaxed)
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
