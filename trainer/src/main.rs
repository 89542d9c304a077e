//! `slide-train`: the command-line trainer.
//!
//! The training loop, configs and checkpoints are not built yet; until they are, the binary
//! says so and exits with status 2 instead of pretending to train.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "slide-train {}: training is not available yet in this build; \
         see the README for what runs today",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}
