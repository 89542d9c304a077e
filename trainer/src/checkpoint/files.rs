//! A checkpoint folder's files: the complete checkpoints in it and the temporaries a
//! killed writer left behind.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Removes the temporary files that writers killed mid-write left in `dir` (never a
/// complete checkpoint: those are only ever created by a rename). Best effort.
pub fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if is_own_temporary(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `name` is a temporary file of [`save`](super::save):
/// `.checkpoint-STEP.safetensors.PID.tmp` with digits for STEP and PID, and nothing else.
pub(super) fn is_own_temporary(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix(".checkpoint-")
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .and_then(|rest| rest.split_once(".safetensors."))
        .is_some_and(|(step, pid)| digits(step) && digits(pid))
}

/// Complete checkpoints in `dir`, oldest first (temporary files are never listed).
pub fn list(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("checkpoint-") && n.ends_with(".safetensors"))
        })
        .collect();
    found.sort();
    Ok(found)
}
