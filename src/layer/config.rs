//! How a layer is described: its non-linearity, weight layout, initialisation, LSH
//! settings, and the modes a pass runs in.

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

use crate::error::Result;

pub(crate) use super::block::{BlockLayout, M, V, WEIGHTS};
pub use super::block::{Precision, SecondMoment};
#[cfg(feature = "serde")]
use super::lsh_config::LshSpec;
pub use super::lsh_config::{DEFAULT_SHARED_REFRESH, LshConfig};
pub use super::picks::Picks;
pub use super::warmup::{Warmup, WarmupLength};

/// A layer's non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Activation {
    /// `max(0, z)`.
    Relu,
    /// `z`.
    Linear,
    /// Softmax over the active neurons; only for the output layer, which it pairs with the
    /// cross-entropy loss (targets `1/|y|` on a sample's labels).
    Softmax,
    /// `1 / (1 + e^-z)` on each active neuron on its own; only for the output layer, which
    /// it pairs with one-vs-all binary cross-entropy: each active output is a yes/no
    /// question (target 1 for a label, 0 otherwise), as label trees' and DeepXML's
    /// classifiers are trained. Outputs left out of the active set get no gradient, so the
    /// negatives the layer's tables, shared pool and random fill pick are the only ones
    /// pushed down.
    Sigmoid,
}

/// How a softmax output layer's loss treats a sample's several labels. In TOML (the `serde`
/// feature): `softmax_loss = "shared"` or `"decoupled"` on the output layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum SoftmaxLoss {
    /// One softmax shared by the sample's labels, with targets `1/|y|` on each:
    /// `-(1/|y|) sum_l ln p_l`. The labels compete for the probability mass, so a label
    /// that already holds more than `1/|y|` of it is pushed down.
    #[default]
    Shared,
    /// Each label its own softmax against the active outputs that are not labels
    /// ("decoupled softmax", Gupta et al., ICLR 2024):
    /// `-(1/|y|) sum_l ln(e^z_l / (e^z_l + sum_n e^z_n))`, `n` over the non-labels. A
    /// sample's labels do not compete with each other; each is pushed above the
    /// negatives. Needs the whole output layer on one rank (no sharding).
    Decoupled,
}

impl Activation {
    /// Whether this activation belongs to the output layer (and pairs with a loss).
    pub fn is_output(self) -> bool {
        matches!(self, Activation::Softmax | Activation::Sigmoid)
    }
}

/// How a layer stores its `out_dim x in_dim` weight matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum WeightLayout {
    #[default]
    /// One row per neuron (`out_dim` rows of `in_dim`): a neuron's forward pass is one dot
    /// product and its update touches one row. Needed for LSH sampling, which hashes rows.
    NeuronMajor,
    /// One row per input (`in_dim` rows of `out_dim`): the forward pass is an axpy per
    /// nonzero input, and an update touches only the rows of the inputs that were nonzero.
    /// The right choice for a layer fed by very sparse, very wide input (the first layer on
    /// extreme-classification data: ~75 nonzeros of 135,909 features, 128 neurons), where
    /// neuron-major storage would read and update whole 135,909-wide rows. Every neuron of
    /// such a layer is active.
    InputMajor,
}

/// How a layer's weights are drawn at construction (biases start at zero). In TOML (the
/// `serde` feature): `init = "glorot"`, `"fan-in"`, `{ uniform = { bound = 0.003 } }`,
/// `{ normal = { std = 1.0 } }` or, on the output layer, `{ centroids = { norm = 3.0,
/// shrink = 3.0 } }`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case", deny_unknown_fields)
)]
pub enum Init {
    #[default]
    /// Glorot (Xavier) uniform: `U(-a, a)`, `a = sqrt(6 / (in_dim + out_dim))`. Tiny for a
    /// very wide layer: 0.003 for a 670K-wide output on 128 inputs.
    Glorot,
    /// PyTorch's `nn.Linear` default: `U(-a, a)`, `a = 1 / sqrt(in_dim)`.
    FanIn,
    /// `U(-bound, bound)`.
    Uniform {
        /// Half-width of the interval.
        bound: f32,
    },
    /// `N(0, std^2)`; `std = 1` is PyTorch's `nn.EmbeddingBag` default, the usual first
    /// layer on sparse extreme-classification input.
    Normal {
        /// Standard deviation.
        std: f32,
    },
    /// The output layer only: each label's row starts at the mean of its training samples'
    /// inputs to the layer (the last hidden layer's unit-length outputs under the initial
    /// weights), less that mean's part along the mean of all samples, scaled to
    /// `norm * n / (n + shrink)` for a label of `n` samples: the network's first ranking is
    /// a nearest-centroid classifier's, and its tables pick by it from the first step.
    /// [`Network::warm_start`](crate::Network::warm_start) sets the rows from the training
    /// data (`slide-train` calls it before a new run's first step); until then, and for a
    /// label without training samples, the rows are Glorot's.
    Centroids {
        /// The row length of a label with many samples (positive).
        norm: f32,
        /// The sample count at which a label's row is half as long (0 or more): a rare
        /// label's centroid is noise and starts short.
        shrink: f32,
    },
}

impl Init {
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        match *self {
            Init::Uniform { bound: x }
            | Init::Normal { std: x }
            | Init::Centroids { norm: x, .. }
                if !(x.is_finite() && x > 0.0) =>
            {
                Err(format!("the init scale must be a positive number, got {x}"))
            }
            Init::Centroids { shrink, .. } if !(shrink.is_finite() && shrink >= 0.0) => Err(
                format!("centroids' shrink must be a number of samples, 0 or more, got {shrink}"),
            ),
            _ => Ok(()),
        }
    }

    pub(crate) fn draw(&self, in_dim: usize, out_dim: usize, rng: &mut Xoshiro256PlusPlus) -> f32 {
        match *self {
            Init::Glorot | Init::Centroids { .. } => {
                let a = (6.0 / (in_dim + out_dim) as f64).sqrt() as f32;
                rng.random_range(-a..a)
            }
            Init::FanIn => {
                let a = (1.0 / in_dim as f64).sqrt() as f32;
                rng.random_range(-a..a)
            }
            Init::Uniform { bound } => rng.random_range(-bound..bound),
            Init::Normal { std } => {
                // Box-Muller on (0, 1] x [0, 1).
                let u1 = 1.0 - rng.random::<f64>();
                let u2 = rng.random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (z * f64::from(std)) as f32
            }
        }
    }
}

/// One layer of a network.
///
/// With the `serde` feature it reads and writes the form of a config file's
/// `[[network.layers]]`: `size` (the `out_dim`), `activation`, and optionally `layout`,
/// `init`, `moments`, `weights`, `second_moment` and an `lsh` table ([`LshConfig`]'s form,
/// whose `k`, `l`, `range_pow` and `bucket_capacity` are tuned from its budget and `size`
/// when left out, once, as the layer is read). Unknown keys are errors naming the key.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(try_from = "LayerSpec")
)]
pub struct LayerConfig {
    /// Number of neurons.
    // Written as the config file names it; read through `LayerSpec`.
    #[cfg_attr(feature = "serde", serde(rename = "size"))]
    pub out_dim: usize,
    /// Non-linearity.
    pub activation: Activation,
    /// Weight storage.
    pub layout: WeightLayout,
    /// How the weights are drawn.
    pub init: Init,
    /// `None`: every neuron is active. `Some`: LSH picks the active neurons per sample.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub lsh: Option<LshConfig>,
    /// How the Adam moments of the weights are stored (the biases' are always f32).
    pub moments: Precision,
    /// How the weights are stored (the biases are always f32); BF16 weights need BF16
    /// moments.
    pub weights: Precision,
    /// Whether Adam keeps the weights' second moment per weight or per row (the biases'
    /// are always per bias).
    pub second_moment: SecondMoment,
    /// How a softmax output's loss treats a sample's labels (only a softmax layer may set
    /// [`SoftmaxLoss::Decoupled`]).
    pub softmax_loss: SoftmaxLoss,
    /// This layer's Adam steps (weights and biases) are the optimizer's learning rate times
    /// this factor (default 1; positive): a wide output layer whose rows each see few
    /// samples may learn faster than the layers below it.
    pub lr_scale: f32,
}

impl LayerConfig {
    /// A layer of `out_dim` neurons with `activation`: neuron-major Glorot-initialised f32
    /// weights, every neuron active. Set what differs:
    ///
    /// ```
    /// use slide::{Activation, Init, LayerConfig, LshConfig};
    /// let output = LayerConfig::new(10, Activation::Softmax).sampled(LshConfig::default());
    /// let hidden = LayerConfig { init: Init::FanIn, ..LayerConfig::new(64, Activation::Relu) };
    /// assert!(output.lsh.is_some() && hidden.lsh.is_none());
    /// ```
    pub fn new(out_dim: usize, activation: Activation) -> Self {
        LayerConfig {
            out_dim,
            activation,
            layout: WeightLayout::NeuronMajor,
            init: Init::Glorot,
            lsh: None,
            moments: Precision::F32,
            weights: Precision::F32,
            second_moment: SecondMoment::Element,
            softmax_loss: SoftmaxLoss::Shared,
            lr_scale: 1.0,
        }
    }

    /// The same layer with LSH picking its active neurons.
    pub fn sampled(self, lsh: LshConfig) -> Self {
        LayerConfig {
            lsh: Some(lsh),
            ..self
        }
    }

    /// Every check of the layer's own settings (the input dimension aside): at least one
    /// neuron, LSH only on neuron-major weights, BF16 weights with BF16 moments, a positive
    /// `lr_scale`, decoupled softmax targets only on a softmax layer, a positive initial
    /// scale and the LSH settings ([`LshConfig::validate`]).
    pub fn validate(&self) -> Result<()> {
        let fail = |reason: &str| Err(crate::error::config_error("layer", reason.to_string()));
        if self.out_dim == 0 {
            return fail("dimensions must be at least 1");
        }
        if self.layout == WeightLayout::InputMajor && self.lsh.is_some() {
            return fail("LSH sampling hashes neuron rows and needs the neuron-major layout");
        }
        if self.weights == Precision::Bf16 && self.moments != Precision::Bf16 {
            return fail("BF16 weights need BF16 moments");
        }
        if !(self.lr_scale.is_finite() && self.lr_scale > 0.0) {
            return fail(&format!("lr_scale must be positive, got {}", self.lr_scale));
        }
        if self.softmax_loss == SoftmaxLoss::Decoupled && self.activation != Activation::Softmax {
            return fail("softmax_loss = \"decoupled\" is for a softmax output layer");
        }
        self.init
            .validate()
            .map_err(|reason| crate::error::config_error("layer", reason))?;
        match &self.lsh {
            Some(lsh) => lsh.validate(self.out_dim),
            None => Ok(()),
        }
    }
}

/// [`LayerConfig`] as a config file writes it (see [`LayerConfig`]), read before the LSH
/// settings are resolved for the width; a `LayerConfig` writes the same form itself.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerSpec {
    size: usize,
    activation: Activation,
    #[serde(default)]
    layout: WeightLayout,
    #[serde(default)]
    init: Init,
    #[serde(default)]
    lsh: Option<LshSpec>,
    #[serde(default)]
    moments: Precision,
    #[serde(default)]
    weights: Precision,
    #[serde(default)]
    second_moment: SecondMoment,
    #[serde(default)]
    softmax_loss: SoftmaxLoss,
    #[serde(default = "one")]
    lr_scale: f32,
}

#[cfg(feature = "serde")]
fn one() -> f32 {
    1.0
}

#[cfg(feature = "serde")]
impl TryFrom<LayerSpec> for LayerConfig {
    type Error = crate::SlideError;
    /// The LSH settings resolved for the layer's width (see `LshSpec::resolve`).
    fn try_from(spec: LayerSpec) -> Result<Self> {
        let LayerSpec {
            size,
            activation,
            layout,
            init,
            lsh,
            moments,
            weights,
            second_moment,
            softmax_loss,
            lr_scale,
        } = spec;
        Ok(LayerConfig {
            out_dim: size,
            activation,
            layout,
            init,
            lsh: lsh.map(|lsh| lsh.resolve(Some(size))).transpose()?,
            moments,
            weights,
            second_moment,
            softmax_loss,
            lr_scale,
        })
    }
}

/// Whether a pass trains or evaluates, and how the output layer picks neurons.
///
/// An evaluation mode reads (with the `serde` feature) and parses from its name in a config
/// file or on a command line: `"exact"`, `"lsh"` or `"dense"`; [`Mode::Train`] has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub enum Mode {
    /// LSH sampling, with the sample's labels forced into the output layer's active set.
    #[cfg_attr(feature = "serde", serde(skip))]
    Train,
    /// Every output neuron computed (exact scores); hidden LSH layers sample as in training,
    /// without forced labels.
    #[cfg_attr(feature = "serde", serde(rename = "exact"))]
    EvalExact,
    /// Every LSH layer samples, the output layer included, without forced labels: fast,
    /// approximate predictions.
    #[cfg_attr(feature = "serde", serde(rename = "lsh"))]
    EvalLsh,
    /// Every neuron of every layer active, as if no layer were sampled.
    #[cfg_attr(feature = "serde", serde(rename = "dense"))]
    EvalDense,
}

impl Mode {
    /// The evaluation modes by name, as a config file or a command line spells them.
    pub const EVAL_NAMES: [(&str, Mode); 3] = [
        ("exact", Mode::EvalExact),
        ("lsh", Mode::EvalLsh),
        ("dense", Mode::EvalDense),
    ];
}

impl std::fmt::Display for Mode {
    /// The mode's name (see [`Mode::EVAL_NAMES`]; `train` for [`Mode::Train`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Mode::EVAL_NAMES
            .iter()
            .find(|(_, mode)| mode == self)
            .map_or("train", |&(name, _)| name);
        f.write_str(name)
    }
}

impl std::str::FromStr for Mode {
    type Err = crate::SlideError;

    /// An evaluation mode by name (see [`Mode::EVAL_NAMES`]).
    fn from_str(name: &str) -> Result<Self> {
        Mode::EVAL_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| {
                crate::error::config_error(
                    "eval mode",
                    format!("`{name}` is not one of exact, lsh, dense"),
                )
            })
    }
}
