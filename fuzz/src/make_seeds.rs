//! Writes the seed corpus of every fuzz target into `fuzz/corpus/<target>/`: small valid
//! files of each format (with the edge cases the readers accept) and a few malformed ones.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --bin make_seeds` (run from the repo root).

use std::io::Write;
use std::path::Path;

use slide::Network;
use slide_trainer::checkpoint::{self, Position};

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus folder");
    std::fs::write(dir.join(name), bytes).expect("seed written");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("in memory");
    encoder.finish().expect("in memory")
}

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        bytes.extend_from_slice(&d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    bytes
}

fn main() {
    put(
        "xmc",
        "basic.txt",
        b"3 6 4\n0,2 0:0.5 4:1\n 1:0.25\n3 5:2.0\n",
    );
    put(
        "xmc",
        "crlf.txt",
        b"2 10 3\r\n1 0:1 9:0.5\r\n0,1,2 3:1e-3\r\n",
    );
    put("xmc", "empty-labels.txt", b"2 4 2\n 0:1\n1 \n");
    put("xmc", "bad-index.txt", b"1 4 2\n0 4:1\n");
    put("xmc", "huge-header.txt", b"1000000000000 1099511627776 5\n");
    put("xmc", "nan.txt", b"1 4 2\n0 1:nan\n");
    put("libsvm", "basic.txt", b"0,2 0:0.5 4:1\n 1:0.25\n3 5:2.0\n");
    put("libsvm", "crlf.txt", b"1 0:1 49:0.5\r\n0,1,19 3:1e-3\r\n");
    put("libsvm", "duplicate.txt", b"1 3:1 3:2\n");

    let images = idx(
        &[2, 2, 3],
        &[0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255],
    );
    let labels = idx(&[2], &[3, 7]);
    put("idx", "images.idx", &images);
    put("idx", "labels.idx", &labels);
    put("idx", "images.idx.gz", &gzip(&images));
    put("idx", "labels.idx.gz", &gzip(&labels));
    put("idx", "truncated.idx", &images[..images.len() - 3]);
    put(
        "idx",
        "huge.idx",
        &idx(&[u32::MAX, u32::MAX, u32::MAX], &[]),
    );

    put("config", "tiny.toml", slide_fuzz::TINY_CONFIG.as_bytes());
    for entry in std::fs::read_dir("configs").expect("run from the repo root") {
        let path = entry.expect("listing").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path
                .file_name()
                .expect("a file")
                .to_string_lossy()
                .into_owned();
            put("config", &name, &std::fs::read(&path).expect("readable"));
        }
    }

    let network = slide_fuzz::tiny_network();
    let identity = checkpoint::Identity::of(&network, 4);
    let net = Network::new(network).expect("the tiny network builds");
    let dir = std::env::temp_dir().join(format!("slide-seeds-{}", std::process::id()));
    let written = checkpoint::save(
        &dir,
        &net,
        Position { epoch: 1, batch: 0 },
        &identity,
        1,
    )
    .expect("checkpoint written");
    put(
        "checkpoint",
        "tiny.safetensors",
        &std::fs::read(&written).expect("readable"),
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!("seeds written to fuzz/corpus/");
}
