//! Before a run: the data loaded, the memory estimate checked, the network built.

use std::path::Path;
use std::time::Instant;

use std::sync::Arc;

use anyhow::anyhow;
use slide::Network;
use slide::comm::Communicator;

use crate::checkpoint;
use crate::config::Config;
use crate::data::{self, Loaded};
use crate::failure::Failure;

/// Bytes a run holds beside its model and data, at most: the program and its thread
/// stacks, the per-batch workspaces, and a checkpoint's reading or writing (a 4 MiB write
/// buffer and 1 MiB pieces; one hash table's arrays while reading). Measured peak resident
/// memory exceeds model and data by 12-40 MB (`trainer/tests/cli.rs` checks a run against it).
const RUN_OVERHEAD: u64 = 96 << 20;

/// Bytes one rank of `ranks` (one process: 1) running `network` on data of `data_bytes`
/// needs at its peak: its part of the model (see
/// [`slide::NetworkConfig::estimated_bytes_per_rank`]; checkpoints stream it and hold no
/// copy), the data, and [`RUN_OVERHEAD`]. Returns `(model, peak)`.
fn estimate_bytes(network: &slide::NetworkConfig, data_bytes: u64, ranks: usize) -> (u64, u64) {
    let model = network.estimated_bytes_per_rank(ranks).model();
    (model, model + data_bytes + RUN_OVERHEAD)
}

fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

/// Data, network and checkpoint identity for a config, everything checked.
pub(crate) struct Prepared {
    pub(crate) loaded: Loaded,
    pub(crate) net: Network,
    pub(crate) identity: checkpoint::Identity,
}

/// The data and the network of `config` with the checkpoint at `path` (or the newest in
/// the folder `path`) loaded into it (its network must match; its training settings need
/// not): what `eval` and `predict` score. On the ranks of an MPI job each rank loads its
/// own from the run's checkpoint folder `path`.
pub(crate) fn restored(
    config: &Config,
    path: &Path,
    log: Log,
) -> Result<(Loaded, Network), Failure> {
    let comm = crate::world::connect().map_err(Failure::Input)?;
    let (rank, ranks) = (comm.rank(), comm.size());
    let path = super::ranks::newest_in(&super::ranks::ranks_checkpoints(path, rank, ranks)?)?;
    let Prepared {
        loaded,
        mut net,
        identity,
    } = prepare(config, true, log, comm)?;
    checkpoint::load(&path, &mut net, &identity, checkpoint::Require::Network)
        .map_err(Failure::Input)?;
    Ok((loaded, net))
}

/// Where [`prepare`] says which kernels run and what it loaded.
pub(crate) enum Log {
    Stdout,
    Stderr,
    /// Say nothing.
    Quiet,
}

/// Loads the config's data, checks the memory estimate and builds the network, its output layer
/// split between the ranks of `comm` (the estimate is one rank's; only the first rank
/// logs); `restoring` leaves its LSH tables empty for a checkpoint (which carries them) to
/// fill.
pub(crate) fn prepare(
    config: &Config,
    restoring: bool,
    log: Log,
    comm: Arc<dyn Communicator>,
) -> Result<Prepared, Failure> {
    let started = Instant::now();
    let loaded = data::load(&config.data).map_err(Failure::Input)?;
    prepare_loaded(config, (loaded, started), restoring, log, comm)
}

/// [`prepare`] with the data already loaded (since `started`).
pub(crate) fn prepare_loaded(
    config: &Config,
    (loaded, started): (Loaded, Instant),
    restoring: bool,
    log: Log,
    comm: Arc<dyn Communicator>,
) -> Result<Prepared, Failure> {
    let input = Failure::Input;
    let (features, labels) = (loaded.features, loaded.labels);
    let last = config.network.layers.last().expect("validated").out_dim;
    if last != labels {
        return Err(input(anyhow!(
            "the last layer has {last} neurons but the data has {labels} labels"
        )));
    }
    let network_config = config.network(features, loaded.train.examples().len());
    let data_bytes = loaded.train.memory_bytes() + loaded.test.memory_bytes();
    let ranks = comm.size();
    let (model, peak) = estimate_bytes(&network_config, data_bytes, ranks);
    let limit = config.train.memory_limit_mb * 1_000_000;
    if limit > 0 && peak > limit {
        return Err(input(anyhow!(
            "the run needs about {} MB (model {} MB, data {} MB) but train.memory_limit_mb is {}",
            peak / 1_000_000,
            model / 1_000_000,
            data_bytes / 1_000_000,
            config.train.memory_limit_mb
        )));
    }
    if let Some(available) = available_bytes()
        && peak > available
    {
        return Err(input(anyhow!(
            "the run needs about {:.1} GB (model {:.1} GB, data {:.1} GB) but only {:.1} GB of memory is available",
            peak as f64 / 1e9,
            model as f64 / 1e9,
            data_bytes as f64 / 1e9,
            available as f64 / 1e9
        )));
    }
    let per_rank = if ranks > 1 {
        format!(" per rank of {ranks} (each holds 1/{ranks} of the output layer)")
    } else {
        String::new()
    };
    let announce = format!(
        "kernels: {}\ndata: {} train / {} test samples, {features} features, {labels} labels (loaded in {:.1} s); model needs about {:.0} MB, the run at most {:.0} MB{per_rank}",
        slide::describe_kernels(),
        loaded.train.examples().len(),
        loaded.test.examples().len(),
        started.elapsed().as_secs_f64(),
        model as f64 / 1e6,
        peak as f64 / 1e6
    );
    // `predict` keeps standard output for its answers; of an MPI job's ranks the first
    // speaks for all.
    match log {
        _ if comm.rank() > 0 => {}
        Log::Quiet => {}
        Log::Stdout => println!("{announce}"),
        Log::Stderr => eprintln!("{announce}"),
    }
    // What a checkpoint must match: the network to be evaluated, every setting to be resumed.
    let identity = checkpoint::Identity::of(
        &network_config,
        config.train.batch(loaded.train.examples().len()),
    )
    .of_rank(comm.rank(), ranks);
    let net = if restoring {
        Network::sharded_with_empty_tables(network_config, comm)
    } else {
        Network::sharded(network_config, comm)
    }
    .map_err(|e| input(e.into()))?;
    Ok(Prepared {
        loaded,
        net,
        identity,
    })
}
