//! The per-sample pipeline of a [`Network`](crate::network::Network): each sample of a batch
//! runs its forward pass (selection, then the active neurons of each layer), the loss and its
//! backward pass on one of rayon's threads, drawing its random numbers from a stream of its
//! own; then a training step updates every layer with sparse Adam and rebuilds tables on
//! schedule.
//!
//! The dependencies run one way: `train` runs batches through `batch`, which runs each sample
//! through `pass`.

mod batch;
mod pass;
mod train;

pub(crate) use pass::{Reach, logit_of};
