//! Readers for the data formats slide trains on. Every rejection names the file and the line
//! (text formats) or byte offset (binary formats) and says what is wrong; nothing panics on
//! bad input, and sizes claimed by headers are checked against the file before anything that
//! large is allocated.
//!
//! * [`xmc`]: the Extreme Classification Repository text format (`N D L` header, then
//!   `l1,l2 f:v f:v` lines) and its header-less LIBSVM multi-label form.
//! * [`idx`]: MNIST-style IDX files, raw or gzip-compressed.

pub mod idx;
pub mod xmc;

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a data file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FormatError {
    /// The file could not be opened or read.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said (`io::ErrorKind`).
        kind: io::ErrorKind,
        /// The error's text.
        message: String,
    },
    /// A text file has a malformed line.
    #[error("{}:{line}: {problem}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// A binary file is malformed at a byte offset.
    #[error("{}: at byte {offset}: {problem}", path.display())]
    Bytes {
        /// The file.
        path: PathBuf,
        /// Offset into the (decompressed) data.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
}

/// `text` with control characters (line breaks, terminal escapes) written as Rust escapes,
/// so that an error quoting a file's bytes stays one printable line.
pub fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

pub(crate) fn io_error(path: &Path, e: &io::Error) -> FormatError {
    let message = if e.kind() == io::ErrorKind::IsADirectory {
        "is a directory, not a file".to_string()
    } else {
        e.to_string()
    };
    FormatError::Io {
        path: path.to_path_buf(),
        kind: e.kind(),
        message,
    }
}

/// Opens `path` for reading, refusing directories with a clear message (on Linux, opening
/// a directory succeeds and only reading it fails).
pub(crate) fn open(path: &Path) -> Result<(std::fs::File, u64), FormatError> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, &e))?;
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if meta.is_dir() {
        return Err(FormatError::Io {
            path: path.to_path_buf(),
            kind: io::ErrorKind::IsADirectory,
            message: "is a directory, not a file".into(),
        });
    }
    Ok((file, meta.len()))
}
