//! The library behind `slide-train`: config loading and validation, data loading, the
//! training loop, evaluation and prediction of checkpoints, checkpoints, the synthetic-data generator and plots. The binary is a thin
//! command line over it; the fuzz targets and tests call the same loaders the binary does.

pub mod checkpoint;
pub mod config;
pub mod data;
pub mod evaluate;
pub mod failure;
pub mod generate;
pub mod plot;
pub mod predict;
pub mod train;
pub mod world;
