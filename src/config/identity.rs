//! What a checkpoint records of a network's config: every setting by name
//! ([`NetworkConfig::describe`]) and the stable hash of those its state depends on
//! ([`NetworkConfig::architecture_hash`]).

use super::NetworkConfig;
use crate::layer::{LshConfig, Precision, SecondMoment, SoftmaxLoss};

/// FNV-1a, 64 bits, continuing from `hash` (start from [`FNV_OFFSET`]): a stable hash for
/// identities and checksums (the same bytes give the same value on every platform and
/// version).
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a's multiplier (64 bits).
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl NetworkConfig {
    /// Every setting as `(name, value)`, in a fixed order: `input_dim`, `seed`, then per
    /// layer `layers.I.out_dim`, `.activation`, `.layout`, `.init`, `.weights` and
    /// `.moments` (if BF16), `.second_moment` (if per row) and, for sampled layers, the LSH
    /// settings as `.lsh.NAME` in the order [`LshConfig`] gives them (`family`, `params`,
    /// ..., each setting added later only when not its default), then `adam` and `rebuild`.
    /// Checkpoints record it, so a resume can name the settings that changed.
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("input_dim".to_string(), self.input_dim.to_string()),
            ("seed".to_string(), self.seed.to_string()),
        ];
        for (i, l) in self.layers.iter().enumerate() {
            let mut put = |key: &str, value: String| out.push((format!("layers.{i}.{key}"), value));
            put("out_dim", l.out_dim.to_string());
            put("activation", format!("{:?}", l.activation));
            put("layout", format!("{:?}", l.layout));
            put("init", format!("{:?}", l.init));
            // Named only when not the default, so checkpoints from before the setting
            // existed still resume.
            if l.weights != Precision::F32 {
                put("weights", format!("{:?}", l.weights));
            }
            if l.moments != Precision::F32 {
                put("moments", format!("{:?}", l.moments));
            }
            if l.second_moment != SecondMoment::Element {
                put("second_moment", format!("{:?}", l.second_moment));
            }
            if l.softmax_loss != SoftmaxLoss::Shared {
                put("softmax_loss", format!("{:?}", l.softmax_loss));
            }
            if l.lr_scale != 1.0 {
                put("lr_scale", l.lr_scale.to_string());
            }
            if let Some(lsh) = &l.lsh {
                lsh.describe(&mut |key, value| put(&format!("lsh.{key}"), value));
            }
        }
        out.push(("adam".to_string(), format!("{:?}", self.adam)));
        out.push(("rebuild".to_string(), format!("{:?}", self.rebuild)));
        // Named only when not the default, so checkpoints from before the setting resume.
        if self.input_power != Self::DEFAULT_INPUT_POWER {
            out.push(("input_power".to_string(), self.input_power.to_string()));
        }
        // Named only when present, so checkpoints from before the heads still resume.
        for head in &self.heads {
            head.describe(&mut out);
        }
        out
    }

    /// A stable hash of what a trained model's state depends on to be read back and
    /// evaluated: input size, seed (the hash functions are drawn from it, not saved), the
    /// input power (named only when not 1), and each layer's size, activation, layout and
    /// LSH settings, and what each head calls its architecture. Not the optimizer, the
    /// rebuild schedule, the initialisation, the precision of weights and moments and the
    /// second moment's form (a layer reads a state file's values in either precision) or
    /// the LSH settings that only shape training (the shared negatives' shift and refresh
    /// period, the exact-picks ablation, the warm-up).
    pub fn architecture_hash(&self) -> u64 {
        // The heads' settings that only shape training.
        let mut heads = Vec::new();
        for head in &self.heads {
            let mut described = Vec::new();
            head.describe(&mut described);
            heads.extend(
                described
                    .into_iter()
                    .filter(|(key, _)| !head.architecture(key)),
            );
        }
        self.describe()
            .iter()
            .filter(|&pair| {
                let key = &pair.0;
                !(key == "adam"
                    || key == "rebuild"
                    || heads.contains(pair)
                    || key.ends_with(".init")
                    || key.ends_with(".moments")
                    || key.ends_with(".second_moment")
                    || key.ends_with(".softmax_loss")
                    || key.ends_with(".lr_scale")
                    || key.ends_with(".weights")
                    || key
                        .split_once(".lsh.")
                        .is_some_and(|(_, lsh_key)| LshConfig::TRAINING_ONLY.contains(&lsh_key)))
            })
            .fold(FNV_OFFSET, |h, (key, value)| {
                fnv1a(fnv1a(fnv1a(h, key.as_bytes()), b"="), value.as_bytes())
            })
    }
}
