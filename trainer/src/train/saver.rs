//! Checkpoints during a run: each written atomically, its sync and rename finished beside
//! the next steps (or at once when it must be durable), the time they cost counted.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;
use slide::Network;

use crate::checkpoint::{self, Identity, Position};
use crate::failure::Failure;

/// A checkpoint being synced and renamed on its own thread (see
/// [`checkpoint::Unsynced::finish`]); dropping it waits for the thread, so that no way out
/// of the training loop leaves a checkpoint half finished.
struct Syncing(Option<std::thread::JoinHandle<anyhow::Result<PathBuf>>>);

impl Syncing {
    /// Waits for the checkpoint in flight, if any; its error, if it failed.
    fn wait(&mut self) -> anyhow::Result<()> {
        match self.0.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| anyhow!("the thread finishing a checkpoint panicked"))?
                .map(drop),
            None => Ok(()),
        }
    }
}

impl Drop for Syncing {
    fn drop(&mut self) {
        if let Err(e) = self.wait() {
            eprintln!("warning: {e:#}");
        }
    }
}

/// Writes a run's checkpoints into one folder.
pub(super) struct Saver<'a> {
    dir: PathBuf,
    identity: &'a Identity,
    keep_last: usize,
    /// The latest checkpoint's sync and rename, running beside training (joined before the
    /// next checkpoint is written, at the end, and when the saver is dropped).
    syncing: Syncing,
    /// Checkpoints written and the seconds training waited for them.
    pub(super) count: usize,
    pub(super) seconds: f64,
}

impl<'a> Saver<'a> {
    /// A saver into `dir` (created when the first checkpoint is written; temporaries a
    /// killed run left there are removed now), keeping the newest `keep_last`.
    pub(super) fn new(dir: PathBuf, identity: &'a Identity, keep_last: usize) -> Self {
        checkpoint::remove_stale_temporaries(&dir);
        Saver {
            dir,
            identity,
            keep_last,
            syncing: Syncing(None),
            count: 0,
            seconds: 0.0,
        }
    }

    /// The folder the checkpoints go to.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes a checkpoint of `net` at `epoch`, `batch`; `durable`: waits until it is
    /// synced and in place (the run's last, or one a message names) instead of finishing it
    /// beside the next steps. Refuses a network whose parameters are not finite: it would
    /// replace a good checkpoint with one that cannot be trained on.
    pub(super) fn save(
        &mut self,
        net: &Network,
        epoch: usize,
        batch: usize,
        durable: bool,
    ) -> Result<PathBuf, Failure> {
        if !net.is_finite() {
            return Err(Failure::Training(anyhow!(
                "step {}: parameters are no longer finite; training diverged (lower train.lr?); the last good checkpoint is the newest in {}",
                net.step(),
                self.dir.display()
            )));
        }
        let started = Instant::now();
        self.syncing.wait().map_err(Failure::Training)?;
        let written = checkpoint::write(&self.dir, net, Position { epoch, batch }, self.identity)
            .map_err(Failure::Training)?;
        let path = written.path().to_path_buf();
        let keep_last = self.keep_last;
        if durable {
            written.finish(keep_last).map_err(Failure::Training)?;
        } else {
            self.syncing.0 = Some(std::thread::spawn(move || written.finish(keep_last)));
        }
        self.count += 1;
        self.seconds += started.elapsed().as_secs_f64();
        Ok(path)
    }

    /// Waits until the checkpoint in flight, if any, is in place (counted as checkpoint
    /// time).
    pub(super) fn wait(&mut self) -> Result<(), Failure> {
        let started = Instant::now();
        self.syncing.wait().map_err(Failure::Training)?;
        self.seconds += started.elapsed().as_secs_f64();
        Ok(())
    }
}
