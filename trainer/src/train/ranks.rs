//! Where the ranks of a run keep their checkpoints, and which checkpoint a `--resume` or
//! `--checkpoint` path names: the one file, or the newest complete one in a folder (with
//! several ranks, in the rank's own folder).

use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::checkpoint;
use crate::failure::Failure;

/// The folder of rank `rank` of `ranks` inside a run's checkpoint folder.
pub(crate) fn rank_folder(rank: usize, ranks: usize) -> String {
    format!("rank-{rank}-of-{ranks}")
}

/// Where rank `rank` of `ranks` reads its checkpoint, given `--resume path` or
/// `--checkpoint path`: with several ranks its own folder inside `path`; a folder that
/// holds another number of ranks' checkpoints is refused, naming how many.
pub(crate) fn ranks_checkpoints(
    path: &Path,
    rank: usize,
    ranks: usize,
) -> Result<PathBuf, Failure> {
    let written = |dir: &Path| -> Option<usize> {
        std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.strip_prefix("rank-")?
                .split_once("-of-")?
                .1
                .parse()
                .ok()
        })
    };
    let mine = path.join(rank_folder(rank, ranks));
    if ranks > 1 && mine.is_dir() {
        return Ok(mine);
    }
    match written(path) {
        Some(other) if other != ranks => Err(Failure::Input(anyhow!(
            "{}: holds the checkpoints of a run on {other} ranks; this run has {ranks}: resume it with `mpirun -n {other}` (a build with --features mpi)",
            path.display()
        ))),
        _ if ranks > 1 => Err(Failure::Input(anyhow!(
            "{}: a run on {ranks} ranks reads its checkpoints from the run's checkpoint folder, which holds {}",
            path.display(),
            rank_folder(rank, ranks)
        ))),
        _ => Ok(path.to_path_buf()),
    }
}

/// `path`, or the newest complete checkpoint in it when it is a folder.
pub(crate) fn newest_in(path: &Path) -> Result<std::path::PathBuf, Failure> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    checkpoint::list(path)
        .map_err(Failure::Input)?
        .pop()
        .ok_or_else(|| Failure::Input(anyhow!("{}: holds no checkpoint", path.display())))
}
