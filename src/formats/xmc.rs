//! The Extreme Classification Repository text format, and LIBSVM multi-label.
//!
//! ```text
//! 3 6 4            <- header: points, features, labels (XMC format only)
//! 0,2 0:0.5 4:1    <- labels (comma-separated, may be empty), then feature:value pairs
//!  1:0.25          <- no labels
//! 3 5:2.0
//! ```
//!
//! Ids are 0-based. Lines may end in CRLF. Feature values must be finite; features must be
//! distinct within a line (they are stored sorted). Data is streamed line by line into a
//! [`SparseExamples`], never holding the text.

use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{FormatError, io_error, open};
use crate::data::{Examples, SparseExamples};

/// Sizes declared by (or expected of) a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XmcShape {
    /// Number of samples.
    pub points: usize,
    /// Feature ids are below this.
    pub features: usize,
    /// Label ids are below this.
    pub labels: usize,
}

/// Reads an XMC-format file (with its `N D L` header). The number of sample lines must be
/// `N`, feature ids below `D`, label ids below `L`.
pub fn read_xmc(path: &Path) -> Result<(SparseExamples, XmcShape), FormatError> {
    let (file, bytes) = open(path)?;
    read_xmc_from(BufReader::new(file), bytes, path)
}

/// The sizes an XMC-format file declares in its header, without reading its samples (a
/// config that leaves the label count out takes it from here).
pub fn read_xmc_header(path: &Path) -> Result<XmcShape, FormatError> {
    let (file, bytes) = open(path)?;
    read_header(&mut BufReader::new(file), bytes, path)
}

/// [`read_xmc`] of `bytes` bytes from `reader`; `path` names the source in errors.
pub fn read_xmc_from(
    mut reader: impl BufRead,
    bytes: u64,
    path: &Path,
) -> Result<(SparseExamples, XmcShape), FormatError> {
    let shape = read_header(&mut reader, bytes, path)?;
    let data = read_lines(path, reader, shape, 2, Some(shape.points))?;
    Ok((data, shape))
}

/// The `N D L` header line of `reader`, checked against the file's `bytes`.
fn read_header(
    reader: &mut impl BufRead,
    bytes: u64,
    path: &Path,
) -> Result<XmcShape, FormatError> {
    let mut line = String::new();
    let err = |line: usize, problem: String| FormatError::Line {
        path: path.to_path_buf(),
        line,
        problem: super::printable(&problem),
    };
    let read = reader
        .read_line(&mut line)
        .map_err(|e| io_error(path, &e))?;
    if read == 0 {
        return Err(err(
            1,
            "empty file: expected a header `points features labels`".into(),
        ));
    }
    let fields: Vec<&str> = line.split_whitespace().collect();
    let parse = |what: &str, s: &str| -> Result<usize, FormatError> {
        s.parse::<usize>().map_err(|_| {
            err(
                1,
                format!("header {what} `{s}` is not a non-negative integer"),
            )
        })
    };
    if fields.len() != 3 {
        return Err(err(
            1,
            format!(
                "header must be `points features labels`, found {} fields",
                fields.len()
            ),
        ));
    }
    let shape = XmcShape {
        points: parse("points", fields[0])?,
        features: parse("features", fields[1])?,
        labels: parse("labels", fields[2])?,
    };
    check_shape(shape, bytes).map_err(|p| err(1, p))?;
    Ok(shape)
}

/// Reads a header-less LIBSVM multi-label file whose ids must be below `features` and
/// `labels`; any number of lines.
pub fn read_libsvm(
    path: &Path,
    features: usize,
    labels: usize,
) -> Result<SparseExamples, FormatError> {
    let (file, bytes) = open(path)?;
    read_libsvm_from(BufReader::new(file), bytes, path, features, labels)
}

/// [`read_libsvm`] of `bytes` bytes from `reader`; `path` names the source in errors.
pub fn read_libsvm_from(
    reader: impl BufRead,
    bytes: u64,
    path: &Path,
    features: usize,
    labels: usize,
) -> Result<SparseExamples, FormatError> {
    let shape = XmcShape {
        points: 0,
        features,
        labels,
    };
    check_shape(shape, bytes).map_err(|problem| FormatError::Line {
        path: path.to_path_buf(),
        line: 0,
        problem: super::printable(&problem),
    })?;
    read_lines(path, reader, shape, 1, None)
}

fn check_shape(shape: XmcShape, file_bytes: u64) -> Result<(), String> {
    if shape.features == 0 || shape.features > u32::MAX as usize {
        return Err(format!(
            "features must be between 1 and {}, got {}",
            u32::MAX,
            shape.features
        ));
    }
    if shape.labels == 0 || shape.labels > u32::MAX as usize {
        return Err(format!(
            "labels must be between 1 and {}, got {}",
            u32::MAX,
            shape.labels
        ));
    }
    // Every point takes at least one line break, so a larger count cannot be true; checking
    // it first means a lying header never makes us reserve memory for it.
    if shape.points as u64 > file_bytes {
        return Err(format!(
            "header claims {} points but the file has only {file_bytes} bytes",
            shape.points
        ));
    }
    Ok(())
}

fn read_lines(
    path: &Path,
    mut reader: impl BufRead,
    shape: XmcShape,
    first_line: usize,
    expected_points: Option<usize>,
) -> Result<SparseExamples, FormatError> {
    let err = |line: usize, problem: String| FormatError::Line {
        path: path.to_path_buf(),
        line,
        problem: super::printable(&problem),
    };
    let mut data = SparseExamples::new();
    if let Some(n) = expected_points {
        data.offsets.reserve(n.min(1 << 20));
        data.label_offsets.reserve(n.min(1 << 20));
    }
    let mut text = String::new();
    let mut pairs: Vec<(u32, f32)> = Vec::new();
    let mut labels: Vec<u32> = Vec::new();
    let mut line_no = first_line - 1;
    loop {
        text.clear();
        let read = reader.read_line(&mut text).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => err(line_no + 1, "is not valid UTF-8 text".into()),
            _ => io_error(path, &e),
        })?;
        if read == 0 {
            break;
        }
        line_no += 1;
        let body = text.trim_end_matches(['\n', '\r']);
        if body.trim().is_empty() && expected_points.is_none() {
            continue;
        }
        if let Some(n) = expected_points
            && data.len() == n
        {
            if body.trim().is_empty() {
                continue;
            }
            return Err(err(
                line_no,
                format!("more sample lines than the {n} the header declares"),
            ));
        }
        parse_line(body, shape, &mut labels, &mut pairs).map_err(|p| err(line_no, p))?;
        data.indices.extend(pairs.iter().map(|p| p.0));
        data.values.extend(pairs.iter().map(|p| p.1));
        data.offsets.push(data.indices.len());
        data.labels.extend_from_slice(&labels);
        data.label_offsets.push(data.labels.len());
    }
    if let Some(n) = expected_points
        && data.len() != n
    {
        return Err(err(
            line_no + 1,
            format!(
                "file ends after {} sample lines, the header declares {n}",
                data.len()
            ),
        ));
    }
    Ok(data)
}

/// Parses one sample line into sorted, distinct feature pairs and its labels.
fn parse_line(
    body: &str,
    shape: XmcShape,
    labels: &mut Vec<u32>,
    pairs: &mut Vec<(u32, f32)>,
) -> Result<(), String> {
    labels.clear();
    pairs.clear();
    let mut tokens = body.split_whitespace().peekable();
    // The label field is the first token unless it is a feature (or the line starts with
    // whitespace: an empty label field).
    let starts_with_labels = !body.starts_with([' ', '\t']);
    if starts_with_labels
        && let Some(first) = tokens.peek()
        && !first.contains(':')
    {
        for label in first.split(',').filter(|s| !s.is_empty()) {
            let id: u32 = label
                .parse()
                .map_err(|_| format!("label `{label}` is not a non-negative integer"))?;
            if id as usize >= shape.labels {
                return Err(format!(
                    "label {id} is out of range: labels are below {}",
                    shape.labels
                ));
            }
            labels.push(id);
        }
        tokens.next();
        let mut sorted = labels.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("label {} appears twice", w[0]));
        }
    }
    for token in tokens {
        let (f, v) = token
            .split_once(':')
            .ok_or_else(|| format!("`{token}` is not a feature:value pair"))?;
        let id: u32 = f
            .parse()
            .map_err(|_| format!("feature id `{f}` is not a non-negative integer"))?;
        if id as usize >= shape.features {
            return Err(format!(
                "feature {id} is out of range: features are below {}",
                shape.features
            ));
        }
        let value: f32 = v
            .parse()
            .map_err(|_| format!("value `{v}` of feature {id} is not a number"))?;
        if !value.is_finite() {
            return Err(format!("value of feature {id} is not finite ({v})"));
        }
        pairs.push((id, value));
    }
    pairs.sort_unstable_by_key(|p| p.0);
    if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("feature {} appears twice", w[0].0));
    }
    Ok(())
}
