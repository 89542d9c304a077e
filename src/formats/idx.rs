//! IDX files (MNIST, Fashion-MNIST), raw or gzip-compressed (detected by the gzip magic).
//!
//! An IDX file is `0x00 0x00 <type> <ndims>`, then `ndims` big-endian `u32` sizes, then the
//! data. slide reads unsigned-byte files (type `0x08`): images of 3 dimensions
//! (count, rows, columns) and labels of 1 (count).

use std::io::{BufReader, Read};
use std::path::Path;

use flate2::read::GzDecoder;

use super::{FormatError, io_error, open};
use crate::data::DenseExamples;

/// Largest data part accepted, 4 GiB: anything claiming more is refused before allocating.
const MAX_BYTES: u64 = 1 << 32;

/// An unsigned-byte IDX array: its sizes and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    /// Sizes, outermost first.
    pub dims: Vec<usize>,
    /// `product(dims)` bytes.
    pub data: Vec<u8>,
}

/// Reads an unsigned-byte IDX file with `ndims` dimensions.
pub fn read_idx(path: &Path, ndims: usize) -> Result<IdxArray, FormatError> {
    let (file, file_bytes) = open(path)?;
    read_idx_from(BufReader::new(file), file_bytes, path, ndims)
}

/// How a file's problems are reported: at a byte offset, naming the file.
struct Errors<'a> {
    path: &'a Path,
    gzipped: bool,
}

impl Errors<'_> {
    fn bad(&self, offset: u64, problem: String) -> FormatError {
        FormatError::Bytes {
            path: self.path.to_path_buf(),
            offset,
            problem: super::printable(&problem),
        }
    }

    /// A read that failed at `offset`: a short header, corrupt gzip data or an I/O error.
    fn read(&self, offset: u64, e: std::io::Error) -> FormatError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            self.bad(offset, "file ends inside the header".into())
        } else if self.gzipped {
            self.bad(offset, format!("gzip data is corrupt: {e}"))
        } else {
            io_error(self.path, &e)
        }
    }
}

/// The header after the 2 magic bytes already read: type, dimension count, then each
/// dimension's size. Returns the sizes and their product (the data bytes).
fn read_header(
    reader: &mut dyn Read,
    ndims: usize,
    errors: &Errors<'_>,
) -> Result<(Vec<usize>, u64), FormatError> {
    let mut header = [0u8; 4];
    reader
        .read_exact(&mut header)
        .map_err(|e| errors.read(0, e))?;
    if header[0] != 0 || header[1] != 0 {
        return Err(errors.bad(
            0,
            format!(
                "bad magic {:02x} {:02x}: not an IDX file",
                header[0], header[1]
            ),
        ));
    }
    if header[2] != 0x08 {
        return Err(errors.bad(
            2,
            format!("data type 0x{:02x} is not unsigned bytes (0x08)", header[2]),
        ));
    }
    if header[3] as usize != ndims {
        return Err(errors.bad(3, format!("{} dimensions, expected {ndims}", header[3])));
    }
    let mut dims = Vec::with_capacity(ndims);
    let mut total: u64 = 1;
    for i in 0..ndims {
        let mut size = [0u8; 4];
        let offset = 4 + 4 * i as u64;
        reader
            .read_exact(&mut size)
            .map_err(|e| errors.read(offset, e))?;
        let size = u32::from_be_bytes(size);
        total = total.saturating_mul(u64::from(size));
        dims.push(size as usize);
    }
    Ok((dims, total))
}

/// [`read_idx`] of `file_bytes` bytes from `raw`; `path` names the source in errors.
pub fn read_idx_from(
    mut raw: impl Read,
    file_bytes: u64,
    path: &Path,
    ndims: usize,
) -> Result<IdxArray, FormatError> {
    let mut magic = [0u8; 2];
    raw.read_exact(&mut magic).map_err(|_| {
        Errors {
            path,
            gzipped: false,
        }
        .bad(0, "file is shorter than an IDX header".into())
    })?;
    let gzipped = magic == [0x1f, 0x8b];
    let errors = Errors { path, gzipped };
    let bad = |offset: u64, problem: String| errors.bad(offset, problem);
    let read_err = |offset: u64, e: std::io::Error| errors.read(offset, e);
    let mut reader: Box<dyn Read> = if gzipped {
        Box::new(GzDecoder::new(std::io::Cursor::new(magic).chain(raw)))
    } else {
        Box::new(std::io::Cursor::new(magic).chain(raw))
    };
    let (dims, total) = read_header(&mut reader, ndims, &errors)?;
    let data_start = 4 + 4 * ndims as u64;
    if total > MAX_BYTES {
        return Err(bad(
            4,
            format!("sizes {dims:?} claim {total} bytes, more than the 4 GiB accepted"),
        ));
    }
    if !gzipped && data_start + total > file_bytes {
        return Err(bad(
            file_bytes,
            format!(
                "sizes {dims:?} need {} bytes, the file has {file_bytes}",
                data_start + total
            ),
        ));
    }
    // Read at most `total` bytes, growing the buffer only as data arrives (a gzip header can
    // claim sizes its content does not have): reserve all of it only when the file is raw,
    // where its length was just checked, and 1 MiB otherwise. (Reserving 64 MiB up front
    // for any gzip input made the fuzzer run 1,000 inputs/s.)
    let reserve = if gzipped { total.min(1 << 20) } else { total };
    let mut data = Vec::with_capacity(reserve as usize);
    (&mut reader)
        .take(total)
        .read_to_end(&mut data)
        .map_err(|e| read_err(data_start, e))?;
    if (data.len() as u64) < total {
        return Err(bad(
            data_start + data.len() as u64,
            format!(
                "file ends after {} of the {total} data bytes its sizes {dims:?} need",
                data.len()
            ),
        ));
    }
    let mut extra = [0u8; 1];
    match reader.read(&mut extra) {
        Ok(0) => {}
        Ok(_) => {
            return Err(bad(
                data_start + total,
                "trailing bytes after the data".into(),
            ));
        }
        Err(e) => return Err(read_err(data_start + total, e)),
    }
    Ok(IdxArray { dims, data })
}

/// Reads an images file (3 dimensions) and its labels file (1 dimension) into dense samples
/// with pixel values scaled to `[0, 1]`. Counts must match; labels must be below `classes`.
pub fn read_images(
    images: &Path,
    labels: &Path,
    classes: u32,
) -> Result<DenseExamples, FormatError> {
    let x = read_idx(images, 3)?;
    let y = read_idx(labels, 1)?;
    if x.dims[0] != y.dims[0] {
        return Err(FormatError::Bytes {
            path: labels.to_path_buf(),
            offset: 4,
            problem: format!(
                "{} labels for the {} images of {}",
                y.dims[0],
                x.dims[0],
                images.display()
            ),
        });
    }
    if let Some(i) = y.data.iter().position(|&c| u32::from(c) >= classes) {
        return Err(FormatError::Bytes {
            path: labels.to_path_buf(),
            offset: 8 + i as u64,
            problem: format!("label {} of sample {i} is not below {classes}", y.data[i]),
        });
    }
    Ok(DenseExamples {
        dim: x.dims[1] * x.dims[2],
        inputs: x.data.iter().map(|&p| f32::from(p) / 255.0).collect(),
        classes: y.data.iter().map(|&c| u32::from(c)).collect(),
    })
}
