//! Unit tests of checkpoints: identity checks, the safetensors layout, BF16 moments, the
//! tensor hash and checksum, and the temporary files.

/// The integration tests' self-removing scratch folder, for the tests below.
#[path = "../../../tests/common/scratch.rs"]
mod scratch;

use super::files::is_own_temporary;
use super::format::TensorHash;
use super::*;
use safetensors::tensor::Dtype;
use scratch::Scratch;
use slide::NetworkConfig;
use slide::config::{FNV_OFFSET, fnv1a};
use slide::{Activation, AdamConfig, LayerConfig, RebuildSchedule};

fn config(lr: f32) -> NetworkConfig {
    let layers = vec![
        LayerConfig::new(4, Activation::Relu),
        LayerConfig::new(3, Activation::Softmax),
    ];
    NetworkConfig {
        adam: AdamConfig {
            lr,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Fixed { every: 5 },
        seed: 3,
        ..NetworkConfig::new(6, layers)
    }
}

/// A checkpoint of a fresh network in a scratch folder (removed when the test passes).
fn saved(test: &str) -> (Scratch, PathBuf, Identity) {
    let dir = Scratch::new("ckpt", test);
    let identity = Identity::of(&config(0.01), 8);
    let net = Network::new(config(0.01)).unwrap();
    let position = Position { epoch: 1, batch: 3 };
    let path = save(&dir, &net, position, &identity, 1).unwrap();
    (dir, path, identity)
}

/// Evaluation needs the same network only; a resume needs every setting and names the
/// ones that differ.
#[test]
fn evaluation_needs_the_network_and_a_resume_every_setting() {
    let (_dir, path, identity) = saved("identity");
    let mut net = Network::new(config(0.01)).unwrap();
    assert!(load(&path, &mut net, &identity, Require::Everything).is_ok());
    let other_lr = Identity::of(&config(0.5), 8);
    assert!(load(&path, &mut net, &other_lr, Require::Network).is_ok());
    let e = load(&path, &mut net, &other_lr, Require::Everything)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("other training settings (adam: checkpoint AdamConfig { lr: 0.01"),
        "{e}"
    );
    let mut wider = config(0.01);
    wider.layers[0].out_dim = 5;
    let mut net = Network::new(wider.clone()).unwrap();
    let e = load(&path, &mut net, &Identity::of(&wider, 8), Require::Network)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("different network (layers.0.out_dim: checkpoint 4, config 5)"),
        "{e}"
    );
}

/// The streamed file is a safetensors file (as the `safetensors` crate reads it) whose
/// tensors are the exported state, and loading it restores that state.
#[test]
fn a_written_checkpoint_is_safetensors_of_the_state() {
    let (_dir, path, identity) = saved("layout");
    let bytes = std::fs::read(&path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let state = Network::new(config(0.01)).unwrap().export_state();
    let weight = file.tensor("layers.1.weight").unwrap();
    assert_eq!(weight.shape(), [3, 4]);
    let floats: Vec<f32> = weight
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(floats, state.layers[1].weights);
    assert_eq!(file.len(), 16);
    let mut net = Network::new(NetworkConfig {
        seed: 4,
        ..config(0.01)
    })
    .unwrap();
    assert_ne!(net.export_state(), state);
    let position = load(&path, &mut net, &identity, Require::Network).unwrap();
    assert_eq!(position, Position { epoch: 1, batch: 3 });
    assert_eq!(net.export_state(), state);
}

/// A layer that keeps its moments in BF16 writes them as safetensors BF16 tensors (half
/// the bytes) and reads them back bit for bit; a network of the same architecture with
/// f32 moments reads the same file (the moments widened exactly).
#[test]
fn bf16_moments_are_written_as_bf16() {
    let mut bf16 = config(0.01);
    bf16.layers[1].moments = slide::Precision::Bf16;
    let mut net = Network::new(bf16.clone()).unwrap();
    let mut state = net.export_state();
    let layer = &mut state.layers[1];
    for (i, (m, v)) in layer.m.iter_mut().zip(&mut layer.v).enumerate() {
        (*m, *v) = (0.01 * i as f32 - 0.05, 1e-4 * (i + 1) as f32);
    }
    net.import_state(&state).unwrap();
    let state = net.export_state();
    assert!(state.layers[1].m.iter().any(|&m| m != 0.0));
    let dir = Scratch::new("ckpt", "bf16");
    let identity = Identity::of(&bf16, 8);
    let position = Position { epoch: 1, batch: 3 };
    let path = save(&dir, &net, position, &identity, 1).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let m = file.tensor("layers.1.adam_m").unwrap();
    assert_eq!(
        (m.dtype(), m.shape(), m.data().len()),
        (Dtype::BF16, &[3, 4][..], 24)
    );
    assert_eq!(file.tensor("layers.0.adam_m").unwrap().dtype(), Dtype::F32);
    let mut back = Network::new(NetworkConfig { seed: 4, ..bf16 }).unwrap();
    load(&path, &mut back, &identity, Require::Everything).unwrap();
    assert_eq!(back.export_state(), state);
    let mut widened = Network::new(NetworkConfig {
        seed: 4,
        ..config(0.01)
    })
    .unwrap();
    let f32_identity = Identity::of(&config(0.01), 8);
    assert_eq!(f32_identity.network, identity.network);
    load(&path, &mut widened, &f32_identity, Require::Network).unwrap();
    assert_eq!(widened.export_state(), state);
}

/// The tensor hash does not depend on how the bytes are split into pieces, and the word
/// hash (format 3) differs from the byte hash (format 2).
#[test]
fn the_tensor_hash_ignores_piece_boundaries() {
    let bytes: Vec<u8> = (0..203u32).map(|i| (i * 37 % 251) as u8).collect();
    let whole = |words| {
        let mut h = TensorHash::new(words);
        h.start("a");
        h.feed(&bytes);
        h.start("b");
        h.feed(&bytes[..13]);
        h.finish()
    };
    for split in [1, 3, 4, 7, 8, 9, 100, 202] {
        let mut h = TensorHash::new(true);
        h.start("a");
        for piece in bytes.chunks(split) {
            h.feed(piece);
        }
        h.start("b");
        h.feed(&bytes[..split.min(13)]);
        h.feed(&bytes[split.min(13)..13]);
        assert_eq!(h.finish(), whole(true), "split {split}");
    }
    let mut bytewise = FNV_OFFSET;
    bytewise = fnv1a(fnv1a(bytewise, b"a"), &bytes);
    bytewise = fnv1a(fnv1a(bytewise, b"b"), &bytes[..13]);
    assert_eq!(whole(false), bytewise);
    assert_ne!(whole(true), bytewise);
}

/// The checksum covers the run's position: an edited epoch is refused as corrupt.
#[test]
fn a_changed_position_fails_the_checksum() {
    let (_dir, path, identity) = saved("position");
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let at = text.find("\"batch\":\"3\"").expect("batch in the header");
    let mut edited = bytes.clone();
    edited[at + 9] = b'4';
    let mut net = Network::new(config(0.01)).unwrap();
    let e = load_from(
        std::io::Cursor::new(edited),
        &path,
        &mut net,
        &identity,
        Require::Network,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("checksum mismatch"), "{e}");
}

/// A written checkpoint is only a temporary file until it is finished: the folder's
/// newest complete checkpoint is still the previous one (what a resume would take), and
/// finishing puts it in place, removes the temporary and keeps the newest `keep_last`.
#[test]
fn a_written_checkpoint_is_in_place_only_once_finished() {
    let (dir, first, identity) = saved("finish");
    let mut net = Network::new(config(0.01)).unwrap();
    let mut data = slide::SparseExamples::new();
    data.push(&[0, 4], &[1.0, 0.5], &[2]);
    net.train_step(&mut slide::Workspace::new(), &data, &[0])
        .unwrap();
    let position = Position { epoch: 1, batch: 4 };
    let written = write(&dir, &net, position, &identity).unwrap();
    let second = written.path().to_path_buf();
    assert_ne!(second, first);
    assert!(!second.exists());
    assert_eq!(list(&dir).unwrap(), std::slice::from_ref(&first));
    let temporaries = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| is_own_temporary(&e.as_ref().unwrap().file_name().to_string_lossy()))
            .count()
    };
    assert_eq!(temporaries(&dir), 1);
    assert_eq!(written.finish(1).unwrap(), second);
    assert_eq!(list(&dir).unwrap(), [second]);
    assert_eq!(temporaries(&dir), 0);
}

#[test]
fn only_the_trainers_own_temporaries_are_stale() {
    assert!(is_own_temporary(
        ".checkpoint-0000000100.safetensors.4242.tmp"
    ));
    for other in [
        "notes.tmp",
        ".checkpoint-.safetensors.1.tmp",
        ".checkpoint-0000000100.safetensors.tmp",
        ".checkpoint-12ab.safetensors.1.tmp",
        "checkpoint-0000000100.safetensors.1.tmp",
        ".checkpoint-0000000100.safetensors.1.tmp.keep",
    ] {
        assert!(!is_own_temporary(other), "{other}");
    }
}
