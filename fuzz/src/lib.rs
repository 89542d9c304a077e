//! What the fuzz targets share: the one-call checks each target runs on an input, and the
//! small network the checkpoint target loads into. Every check returns normally for any
//! input; an error is a fine answer if its message names the file (and, for data files,
//! the line or byte offset). A panic, abort, runaway allocation or anonymous error is a
//! finding.

use std::path::Path;

use slide::formats::{idx, xmc};
use slide::{Examples, Network, NetworkConfig};
use slide_trainer::checkpoint;
use slide_trainer::config;

/// A small network with an LSH layer, as a TOML config (its data paths are never read).
pub const TINY_CONFIG: &str = r#"
[data]
format = "libsvm"
train = "train.txt"
test = "test.txt"
features = 20
labels = 12

[[network.layers]]
size = 8
activation = "relu"
layout = "input-major"

[[network.layers]]
size = 12
activation = "softmax"
[network.layers.lsh]
family = { dwta = { bin_size = 8 } }
k = 2
l = 3
range_pow = 4
strategy = "top-k"
budget = 4
min_active = 4

[train]
epochs = 1
batch_size = 4
lr = 0.01
seed = 7
"#;

/// The network config of [`TINY_CONFIG`].
pub fn tiny_network() -> NetworkConfig {
    config::parse(TINY_CONFIG, Path::new("tiny.toml"), &[])
        .expect("the tiny config is valid")
        .network(20, 100)
}

/// Reads `data` as an XMC file; when it parses, touches every sample.
pub fn check_xmc(data: &[u8]) {
    match xmc::read_xmc_from(data, data.len() as u64, Path::new("fuzz.txt")) {
        Ok((examples, shape)) => {
            assert_eq!(examples.len(), shape.points);
            walk(&examples, shape.features, shape.labels);
        }
        Err(e) => names_the_place(&e.to_string(), "fuzz.txt:"),
    }
}

/// Reads `data` as a LIBSVM file with 50 features and 20 labels.
pub fn check_libsvm(data: &[u8]) {
    match xmc::read_libsvm_from(data, data.len() as u64, Path::new("fuzz.txt"), 50, 20) {
        Ok(examples) => walk(&examples, 50, 20),
        Err(e) => names_the_place(&e.to_string(), "fuzz.txt:"),
    }
}

fn walk(examples: &dyn Examples, features: usize, labels: usize) {
    for i in 0..examples.len() {
        examples
            .input(i)
            .validate(features)
            .expect("the reader checked the features");
        assert!(examples.labels(i).iter().all(|&y| (y as usize) < labels));
    }
}

/// Reads `data` as IDX with 1 and with 3 dimensions (raw or gzip, as the bytes say).
pub fn check_idx(data: &[u8]) {
    for ndims in [1, 3] {
        match idx::read_idx_from(data, data.len() as u64, Path::new("fuzz.idx"), ndims) {
            Ok(array) => {
                assert_eq!(array.dims.len(), ndims);
                assert_eq!(array.dims.iter().product::<usize>(), array.data.len());
            }
            Err(e) => names_the_place(&e.to_string(), "fuzz.idx: at byte "),
        }
    }
}

/// Parses `data` as a config (UTF-8 only, as the loader reads text) and, when it is valid,
/// derives the network config and the memory estimate the trainer prints.
pub fn check_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config::parse(text, Path::new("fuzz.toml"), &[]) {
        Ok(config) => {
            let _ = config.network(1000, 1000);
        }
        Err(e) => names_the_place(&format!("{e:#}"), "fuzz.toml"),
    }
}

/// Loads `data` as a checkpoint into [`TINY_CONFIG`]'s network.
pub fn check_checkpoint(data: &[u8], network: &NetworkConfig) {
    let identity = checkpoint::Identity::of(network, 4);
    let mut net = Network::new(network.clone()).expect("the tiny network builds");
    if let Err(e) = checkpoint::load_from(
        std::io::Cursor::new(data),
        Path::new("fuzz.safetensors"),
        &mut net,
        &identity,
        checkpoint::Require::Everything,
    ) {
        names_the_place(&format!("{e:#}"), "fuzz.safetensors: ");
    }
}

/// An error message must start with (data files, checkpoints) or contain (configs) where
/// the problem is, and be one line.
fn names_the_place(message: &str, place: &str) {
    assert!(
        message.starts_with(place) || (place.ends_with(".toml") && message.contains(place)),
        "error does not name `{place}`: {message}"
    );
    assert!(
        !message.chars().any(char::is_control),
        "error is not one printable line: {message:?}"
    );
}
