//! Data readers: real files, and a table of malformed inputs with the exact error each gives.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::scratch::Scratch;

use slide::Examples;
use slide::formats::FormatError;
use slide::formats::idx::{read_idx, read_images};
use slide::formats::xmc::{XmcShape, read_libsvm, read_xmc};

/// A fresh directory under the system temp dir, unique to this test and process, removed
/// when the test passes.
fn scratch_dir(test: &str) -> Scratch {
    Scratch::new("formats", test)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn xmc_reads_labels_features_crlf_and_empty_label_fields() {
    let dir = scratch_dir("xmc-ok");
    let path = write(
        &dir,
        "ok.txt",
        b"4 6 5\r\n0,2 4:1 0:0.5\r\n 1:0.25\r\n3 5:2.0\n4 \n",
    );
    let (data, shape) = read_xmc(&path).unwrap();
    assert_eq!(
        shape,
        XmcShape {
            points: 4,
            features: 6,
            labels: 5
        }
    );
    assert_eq!(data.len(), 4);
    assert_eq!(data.labels(0), &[0, 2]);
    assert_eq!(
        data.input(0),
        slide::lsh::Vector::Sparse {
            indices: &[0, 4],
            values: &[0.5, 1.0]
        }
    );
    assert_eq!(data.labels(1), &[] as &[u32]);
    assert_eq!(
        data.input(1),
        slide::lsh::Vector::Sparse {
            indices: &[1],
            values: &[0.25]
        }
    );
    assert_eq!(data.labels(2), &[3]);
    assert_eq!(data.labels(3), &[4]);
    assert_eq!(
        data.input(3),
        slide::lsh::Vector::Sparse {
            indices: &[],
            values: &[]
        }
    );

    let libsvm = write(&dir, "ok.svm", b"1 0:1.5\n\n0,3 2:1 1:2\n");
    let data = read_libsvm(&libsvm, 3, 4).unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data.labels(1), &[0, 3]);
    assert_eq!(
        data.input(1),
        slide::lsh::Vector::Sparse {
            indices: &[1, 2],
            values: &[2.0, 1.0]
        }
    );
}

/// Each malformed file and the exact message it produces (`{path}:{line}: {problem}`).
#[test]
fn malformed_xmc_files_are_rejected_with_file_line_and_problem() {
    let dir = scratch_dir("xmc-bad");
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "empty",
            b"",
            "1: empty file: expected a header `points features labels`",
        ),
        (
            "short-header",
            b"2 5\n",
            "1: header must be `points features labels`, found 2 fields",
        ),
        (
            "text-header",
            b"two 5 3\n0 1:1\n",
            "1: header points `two` is not a non-negative integer",
        ),
        (
            "zero-features",
            b"1 0 3\n0\n",
            "1: features must be between 1 and 4294967295, got 0",
        ),
        (
            "huge-dim",
            b"1 1099511627776 3\n0 1:1\n",
            "1: features must be between 1 and 4294967295, got 1099511627776",
        ),
        (
            "huge-points",
            b"1000000000000 5 3\n0 1:1\n",
            "1: header claims 1000000000000 points but the file has only 24 bytes",
        ),
        (
            "too-few",
            b"3 5 3\n0 1:1\n1 2:1\n",
            "4: file ends after 2 sample lines, the header declares 3",
        ),
        (
            "too-many",
            b"1 5 3\n0 1:1\n1 2:1\n",
            "3: more sample lines than the 1 the header declares",
        ),
        (
            "feature-range",
            b"1 5 3\n0 5:1\n",
            "2: feature 5 is out of range: features are below 5",
        ),
        (
            "label-range",
            b"1 5 3\n0,3 1:1\n",
            "2: label 3 is out of range: labels are below 3",
        ),
        (
            "negative-feature",
            b"1 5 3\n0 -1:1\n",
            "2: feature id `-1` is not a non-negative integer",
        ),
        (
            "negative-label",
            b"1 5 3\n-2 1:1\n",
            "2: label `-2` is not a non-negative integer",
        ),
        (
            "text-value",
            b"1 5 3\n0 1:abc\n",
            "2: value `abc` of feature 1 is not a number",
        ),
        (
            "nan",
            b"1 5 3\n0 1:NaN\n",
            "2: value of feature 1 is not finite (NaN)",
        ),
        (
            "inf",
            b"1 5 3\n0 1:inf\n",
            "2: value of feature 1 is not finite (inf)",
        ),
        (
            "duplicate-feature",
            b"1 5 3\n0 1:1 3:1 1:2\n",
            "2: feature 1 appears twice",
        ),
        (
            "duplicate-label",
            b"1 5 3\n2,0,2 1:1\n",
            "2: label 2 appears twice",
        ),
        (
            "no-colon",
            b"1 5 3\n0 1:1 7\n",
            "2: `7` is not a feature:value pair",
        ),
        (
            "not-utf8",
            b"1 5 3\n0 1:\xff\xfe\n",
            "2: is not valid UTF-8 text",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = write(&dir, name, bytes);
        let error = read_xmc(&path).expect_err(name);
        assert!(
            matches!(error, FormatError::Line { .. }),
            "{name}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("{}:{expected}", path.display()),
            "{name}"
        );
    }
}

#[test]
fn missing_files_directories_and_unreadable_files_are_io_errors() {
    let dir = scratch_dir("io");
    let missing = dir.join("nope.txt");
    let e = read_xmc(&missing).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Io {
                kind: std::io::ErrorKind::NotFound,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with(&format!("{}: ", missing.display()))
    );
    let e = read_xmc(&dir).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: is a directory, not a file", dir.display())
    );
    let e = read_idx(&dir, 3).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: is a directory, not a file", dir.display())
    );
    // Permission bits do not stop root; only check unreadable files when not running as root.
    let locked = write(&dir, "locked.txt", b"1 2 2\n0 1:1\n");
    let mut perms = std::fs::metadata(&locked).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o000);
    std::fs::set_permissions(&locked, perms).unwrap();
    if std::fs::read(&locked).is_err() {
        let e = read_xmc(&locked).unwrap_err();
        assert!(
            matches!(
                e,
                FormatError::Io {
                    kind: std::io::ErrorKind::PermissionDenied,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        bytes.extend(d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn idx_reads_raw_and_gzipped_files() {
    let dir = scratch_dir("idx-ok");
    let images = idx(&[2, 2, 3], &[0, 255, 51, 0, 0, 0, 1, 2, 3, 4, 5, 6]);
    let labels = idx(&[2], &[7, 1]);
    let raw = (write(&dir, "x.idx", &images), write(&dir, "y.idx", &labels));
    let gz = (
        write(&dir, "x.idx.gz", &gzip(&images)),
        write(&dir, "y.idx.gz", &gzip(&labels)),
    );
    for (x, y) in [raw, gz] {
        let data = read_images(&x, &y, 10).unwrap();
        assert_eq!(data.dim, 6);
        assert_eq!(data.classes, vec![7, 1]);
        assert_eq!(&data.inputs[..3], &[0.0, 1.0, 0.2]);
    }
}

#[test]
fn malformed_idx_files_are_rejected_with_offsets() {
    let dir = scratch_dir("idx-bad");
    let good_labels = write(&dir, "labels", &idx(&[2], &[1, 2]));
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        ("short", vec![0], "at byte 0: file is shorter than an IDX header".into()),
        ("magic", vec![1, 2, 8, 3, 0, 0, 0, 0], "at byte 0: bad magic 01 02: not an IDX file".into()),
        ("type", vec![0, 0, 0x0d, 3], "at byte 2: data type 0x0d is not unsigned bytes (0x08)".into()),
        ("ndims", idx(&[2, 2], &[0; 4]), "at byte 3: 2 dimensions, expected 3".into()),
        ("header-cut", vec![0, 0, 8, 3, 0, 0], "at byte 4: file ends inside the header".into()),
        ("truncated", idx(&[2, 2, 2], &[1; 7]), "at byte 23: sizes [2, 2, 2] need 24 bytes, the file has 23".into()),
        ("trailing", idx(&[1, 2, 2], &[1; 5]), "at byte 20: trailing bytes after the data".into()),
        (
            "huge",
            idx(&[100_000, 100_000, 100_000], &[]),
            "at byte 4: sizes [100000, 100000, 100000] claim 1000000000000000 bytes, more than the 4 GiB accepted".into(),
        ),
    ];
    for (name, bytes, expected) in &cases {
        let path = write(&dir, name, bytes);
        let e = read_idx(&path, 3).expect_err(name);
        assert_eq!(
            e.to_string(),
            format!("{}: {expected}", path.display()),
            "{name}"
        );
    }
    // A gzip file whose content is cut short, and one whose compressed bytes are corrupt.
    let full = gzip(&idx(&[2, 2, 2], &[9; 8]));
    let cut = write(&dir, "cut.gz", &gzip(&idx(&[2, 2, 2], &[9; 5])));
    let e = read_idx(&cut, 3).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: at byte 21: file ends after 5 of the 8 data bytes its sizes [2, 2, 2] need",
            cut.display()
        )
    );
    let mut corrupt_bytes = full.clone();
    let middle = corrupt_bytes.len() / 2;
    corrupt_bytes[middle] ^= 0xff;
    corrupt_bytes.truncate(corrupt_bytes.len() - 4);
    let corrupt = write(&dir, "corrupt.gz", &corrupt_bytes);
    assert!(read_idx(&corrupt, 3).is_err());
    // Images and labels that disagree.
    let three = write(&dir, "three", &idx(&[3, 1, 1], &[1, 2, 3]));
    let e = read_images(&three, &good_labels, 10).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: at byte 4: 2 labels for the 3 images of {}",
            good_labels.display(),
            three.display()
        )
    );
    let two = write(&dir, "two", &idx(&[2, 1, 1], &[1, 2]));
    let e = read_images(&two, &good_labels, 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: at byte 9: label 2 of sample 1 is not below 2",
            good_labels.display()
        )
    );
}

/// The MNIST files shipped in `datasets/mnist` (byte-identical to the originals once
/// uncompressed; see `SHA256SUMS-uncompressed` there).
#[test]
fn shipped_mnist_reads_with_the_known_counts_and_first_labels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mnist");
    let train = read_images(
        &root.join("train-images-idx3-ubyte.gz"),
        &root.join("train-labels-idx1-ubyte.gz"),
        10,
    )
    .unwrap();
    let test = read_images(
        &root.join("t10k-images-idx3-ubyte.gz"),
        &root.join("t10k-labels-idx1-ubyte.gz"),
        10,
    )
    .unwrap();
    assert_eq!((train.len(), train.dim), (60_000, 784));
    assert_eq!((test.len(), test.dim), (10_000, 784));
    assert_eq!(&train.classes[..8], &[5, 0, 4, 1, 9, 2, 1, 3]);
    assert_eq!(&test.classes[..8], &[7, 2, 1, 0, 4, 1, 4, 9]);
    let mean: f32 = train.inputs.iter().sum::<f32>() / train.inputs.len() as f32;
    assert!((mean - 0.1307).abs() < 1e-3, "mean pixel {mean}");
}

/// Bytes quoted in an error (here a terminal escape and a bell inside a value)
/// come out escaped: the message stays one printable line.
#[test]
fn quoted_control_characters_are_escaped() {
    let dir = scratch_dir("escape");
    let path = write(&dir, "escape.txt", b"1 4 2\n0 1:\x1b[31m\x07x\n");
    let message = read_xmc(&path).unwrap_err().to_string();
    assert!(!message.chars().any(char::is_control), "{message:?}");
    assert!(message.contains("`\\u{1b}[31m\\u{7}x`"), "{message}");
    assert!(
        message.starts_with(&format!("{}:2: ", path.display())),
        "{message}"
    );
}
