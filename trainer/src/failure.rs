//! Why a command stopped early, and so its exit status.

/// Why a run stopped early: bad input (exit 2) or a failure while training (exit 1).
#[derive(Debug)]
pub enum Failure {
    /// Bad input: command line, config, data or checkpoint (exit code 2).
    Input(anyhow::Error),
    /// Training failed, e.g. the loss diverged (exit code 1).
    Training(anyhow::Error),
    /// A signal (SIGINT, SIGTERM) stopped the run at a step boundary after a checkpoint was
    /// written; the message says where (exit code 128 + the signal's number).
    Interrupted {
        /// The signal's number.
        signal: i32,
        /// Where the run stopped and how to resume it.
        message: String,
    },
}
