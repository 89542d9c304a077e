//! A scratch directory that cleans up after itself, for integration tests of the core and
//! the trainer (`tests/common/mod.rs` declares it; the trainer's tests include this file by
//! path).
#![allow(dead_code)]

use std::path::PathBuf;

/// A fresh directory under the system temp dir, unique to a test and this process, removed
/// when dropped unless the test is failing (its files are then left to look at).
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates `slide-{kind}-{pid}-{test}` (emptied first if a previous run left it).
    pub fn new(kind: &str, test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("slide-{kind}-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
