//! The dense autodiff baseline: the same network as a slide [`Network`] (layer sizes,
//! activations, weights copied from it, softmax cross-entropy with soft targets `1/|y|` (or
//! each label's softmax against the non-labels, for `SoftmaxLoss::Decoupled`) or, for a
//! sigmoid output, one-vs-all binary cross-entropy; Adam with the same
//! hyper-parameters), every neuron computed, gradients by reverse-mode automatic
//! differentiation in burn (pure-Rust `flex` CPU backend).
//!
//! Sparse inputs go in as an embedding bag: the first weight matrix's rows of each sample's
//! features are gathered, scaled by the values and summed per sample. Optional masks
//! restrict the loss to given active sets (hidden activations of inactive neurons are
//! zeroed; inactive outputs are left out of the softmax or the binary losses; a sigmoid
//! output's logits are returned unmasked and masked in the loss), which is the loss slide
//! optimises when LSH picks the neurons.

use burn::tensor::{Bool, Device, IndexingUpdateOp, Int, Tensor, TensorData, activation};
use slide::lsh::Vector;
use slide::{Activation, AdamConfig, Examples, Network, SoftmaxLoss};

/// One layer's parameters as burn tensors: `w` is `[in, out]`, `b` is `[1, out]`.
struct Layer {
    w: Tensor<2>,
    b: Tensor<2>,
    activation: Activation,
    moments: [Tensor<2>; 4],
}

/// A dense copy of a slide network, trained with autodiff gradients.
pub struct Baseline {
    device: Device,
    layers: Vec<Layer>,
    adam: AdamConfig,
    step: i32,
    /// The output's softmax loss is decoupled (each label against the non-labels alone).
    decoupled: bool,
}

/// Gradients of the batch-mean loss: per layer, the weights as `[in][out]` row-major and
/// the biases.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradients {
    /// Per layer, `in * out` values: the gradient of the weight from input `i` to neuron
    /// `j` at `i * out + j`.
    pub weights: Vec<Vec<f32>>,
    /// Per layer, `out` values.
    pub biases: Vec<Vec<f32>>,
    /// The batch-mean loss.
    pub loss: f64,
}

/// Active neurons per layer per sample (`masks[layer][sample]`), as slide reports them.
pub type Masks = [Vec<Vec<u32>>];

fn to_vec(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 tensor")
}

impl Baseline {
    /// Copies `net`'s weights and biases (Adam moments start at zero, as a new optimizer's).
    /// Parameters and moments live outside autodiff; each step tracks fresh leaves.
    pub fn from_network(net: &Network) -> Self {
        let device = Device::flex();
        let layers = net
            .layers()
            .iter()
            .map(|layer| {
                let (n_in, n_out) = (layer.in_dim(), layer.out_dim());
                let mut w = vec![0.0f32; n_in * n_out];
                for j in 0..n_out {
                    for i in 0..n_in {
                        w[i * n_out + j] = layer.weight(j, i);
                    }
                }
                let b: Vec<f32> = (0..n_out).map(|j| layer.bias(j)).collect();
                let zeros = |shape: [usize; 2]| Tensor::<2>::zeros(shape, &device);
                Layer {
                    w: Tensor::from_data(TensorData::new(w, [n_in, n_out]), &device),
                    b: Tensor::from_data(TensorData::new(b, [1, n_out]), &device),
                    activation: layer.activation(),
                    moments: [
                        zeros([n_in, n_out]),
                        zeros([n_in, n_out]),
                        zeros([1, n_out]),
                        zeros([1, n_out]),
                    ],
                }
            })
            .collect();
        Baseline {
            device,
            layers,
            adam: net.config().adam,
            step: 0,
            decoupled: net
                .config()
                .layers
                .last()
                .is_some_and(|l| l.softmax_loss == SoftmaxLoss::Decoupled),
        }
    }

    /// Layer `l`'s weights as `[in][out]` row-major, and its biases.
    pub fn parameters(&self, l: usize) -> (Vec<f32>, Vec<f32>) {
        let layer = &self.layers[l];
        (to_vec(layer.w.clone()), to_vec(layer.b.clone()))
    }

    /// Every layer's weights and biases (handles to the same tensors).
    fn parameter_tensors(&self) -> Vec<(Tensor<2>, Tensor<2>)> {
        self.layers
            .iter()
            .map(|l| (l.w.clone(), l.b.clone()))
            .collect()
    }

    /// The output logits of `batch` of `data` (`[batch, outputs]`; inactive outputs at
    /// -1e30 when masked) with the per-layer weights and biases `params` (the layers' own, or
    /// tracked copies of them).
    fn logits(
        &self,
        params: &[(Tensor<2>, Tensor<2>)],
        data: &dyn Examples,
        batch: &[usize],
        masks: Option<&Masks>,
    ) -> Tensor<2> {
        let device = &self.device;
        let n = batch.len();
        let last = self.layers.len() - 1;
        let mut h: Option<Tensor<2>> = None;
        for (l, (layer, (w, b))) in self.layers.iter().zip(params).enumerate() {
            let [n_in, n_out] = w.dims();
            let z = match h.take() {
                Some(x) => x.matmul(w.clone()),
                None => first_layer(data, batch, w, n_in, n_out, device),
            } + b.clone();
            let mask = masks.map(|m| mask(&m[l], n, n_out, device));
            h = Some(match layer.activation {
                Activation::Sigmoid => {
                    assert_eq!(l, last, "sigmoid is the output layer's");
                    z
                }
                Activation::Softmax => {
                    assert_eq!(l, last, "softmax is the output layer's");
                    match mask {
                        Some(active) => z.mask_fill(active.bool_not(), -1e30),
                        None => z,
                    }
                }
                other => {
                    let a = if other == Activation::Relu {
                        activation::relu(z)
                    } else {
                        z
                    };
                    match mask {
                        Some(active) => a.mask_fill(active.bool_not(), 0.0),
                        None => a,
                    }
                }
            });
        }
        h.expect("at least one layer")
    }

    /// The batch-mean loss of `batch` of `data` as a graph over `params`.
    fn loss(
        &self,
        params: &[(Tensor<2>, Tensor<2>)],
        data: &dyn Examples,
        batch: &[usize],
        masks: Option<&Masks>,
    ) -> Tensor<1> {
        let device = &self.device;
        let n = batch.len();
        let logits = self.logits(params, data, batch, masks);
        let n_out = logits.dims()[1];
        let last = self.layers.len() - 1;
        let one_vs_all = self.layers[last].activation == Activation::Sigmoid;
        let mut targets = vec![0.0f32; n * n_out];
        for (s, &i) in batch.iter().enumerate() {
            let labels = data.labels(i);
            for &y in labels {
                targets[s * n_out + y as usize] = if one_vs_all {
                    1.0
                } else {
                    1.0 / labels.len() as f32
                };
            }
        }
        let targets = Tensor::<2>::from_data(TensorData::new(targets, [n, n_out]), device);
        if one_vs_all {
            // -[y ln sigmoid(z) + (1 - y) ln sigmoid(-z)] on each active output, summed.
            let log_yes = activation::log_sigmoid(logits.clone());
            let log_no = activation::log_sigmoid(logits.neg());
            let each = (log_yes * targets.clone() + log_no * targets.neg().add_scalar(1.0)).neg();
            let each = match masks {
                Some(m) => each.mask_fill(mask(&m[last], n, n_out, device).bool_not(), 0.0),
                None => each,
            };
            return each.sum().mul_scalar(1.0 / n as f64);
        }
        if self.decoupled {
            // -(1/|y|) sum_l ln sigmoid(z_l - lse_n z_n), n over the active non-labels: each
            // label's softmax against them.
            let labels = targets.clone().greater_elem(0.0);
            let negatives = logits.clone().mask_fill(labels, -1e30);
            let top = negatives.clone().max_dim(1);
            let lse = (negatives - top.clone()).exp().sum_dim(1).log() + top;
            return (activation::log_sigmoid(logits - lse) * targets)
                .sum()
                .mul_scalar(-1.0 / n as f64);
        }
        (activation::log_softmax(logits, 1) * targets)
            .sum()
            .mul_scalar(-1.0 / n as f64)
    }

    /// The batch-mean loss and, per layer, the gradients of the weights and biases as
    /// tensors, by reverse-mode autodiff, optionally restricted to the active sets `masks`.
    fn tracked_gradients(
        &self,
        data: &dyn Examples,
        batch: &[usize],
        masks: Option<&Masks>,
    ) -> (f64, Vec<(Tensor<2>, Tensor<2>)>) {
        let tracked: Vec<(Tensor<2>, Tensor<2>)> = self
            .parameter_tensors()
            .into_iter()
            .map(|(w, b)| (w.autodiff().require_grad(), b.autodiff().require_grad()))
            .collect();
        let loss = self.loss(&tracked, data, batch, masks);
        let value = f64::from(loss.clone().into_data().try_to_vec::<f32>().expect("f32")[0]);
        let mut grads = loss.backward();
        let device = &self.device;
        let gradients = tracked
            .iter()
            .map(|(w, b)| {
                let gw = w
                    .grad_remove(&mut grads)
                    .unwrap_or_else(|| Tensor::zeros(w.dims(), device));
                let gb = b
                    .grad_remove(&mut grads)
                    .unwrap_or_else(|| Tensor::zeros(b.dims(), device));
                (gw, gb)
            })
            .collect();
        (value, gradients)
    }

    /// Gradients of the batch-mean loss by reverse-mode autodiff, optionally restricted to
    /// the active sets `masks`.
    pub fn gradients(
        &self,
        data: &dyn Examples,
        batch: &[usize],
        masks: Option<&Masks>,
    ) -> Gradients {
        let (loss, tensors) = self.tracked_gradients(data, batch, masks);
        let (weights, biases) = tensors
            .into_iter()
            .map(|(w, b)| (to_vec(w), to_vec(b)))
            .unzip();
        Gradients {
            weights,
            biases,
            loss,
        }
    }

    /// Share of `samples` of `data` whose highest logit is one of their labels (P@1; the
    /// accuracy for single-label data), every neuron computed, in blocks of 1,000.
    pub fn precision_at_1(&self, data: &dyn Examples, samples: &[usize]) -> f64 {
        let params = self.parameter_tensors();
        let mut hits = 0usize;
        for block in samples.chunks(1000) {
            let logits = self.logits(&params, data, block, None);
            let n_out = logits.dims()[1];
            let values = to_vec(logits);
            for (row, &i) in values.chunks(n_out).zip(block) {
                let best = row
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f32::NEG_INFINITY),
                        |b, (j, &z)| if z > b.1 { (j, z) } else { b },
                    );
                hits += usize::from(data.labels(i).contains(&(best.0 as u32)));
            }
        }
        hits as f64 / samples.len().max(1) as f64
    }

    /// Multiply-adds of one training step on `batch` (forward, and the two products of each
    /// layer's backward pass: the input gradient, skipped for the first layer, and the
    /// weight gradient; plus one per weight for the Adam update, as slide counts it),
    /// counted from the shapes: every neuron is computed, every weight updated.
    pub fn multiply_adds(&self, data: &dyn Examples, batch: &[usize]) -> u64 {
        let mut total = 0u64;
        for (l, layer) in self.layers.iter().enumerate() {
            let [n_in, n_out] = layer.w.dims();
            let inputs: u64 = if l == 0 {
                batch.iter().map(|&i| data.input(i).nnz() as u64).sum()
            } else {
                (batch.len() * n_in) as u64
            };
            let passes = if l == 0 { 2 } else { 3 };
            total += passes * inputs * n_out as u64 + (n_in * n_out) as u64;
        }
        total
    }

    /// Neurons of every layer, which dense Adam updates each step (slide's rows of a
    /// neuron-major layer).
    pub fn rows(&self) -> usize {
        self.layers.iter().map(|l| l.w.dims()[1]).sum()
    }

    /// One Adam step on `batch` with every neuron active: `w -= lr * m_hat / (sqrt(v_hat) +
    /// eps)`, as slide's optimizer. Returns the loss before the step.
    pub fn train_step(&mut self, data: &dyn Examples, batch: &[usize]) -> f64 {
        let (loss, gradients) = self.tracked_gradients(data, batch, None);
        self.step += 1;
        let a = self.adam;
        let t = self.step;
        let c1 = 1.0 - f64::from(a.beta1).powi(t);
        let c2 = 1.0 - f64::from(a.beta2).powi(t);
        let update = |p: Tensor<2>, m: Tensor<2>, v: Tensor<2>, grad: Tensor<2>| {
            let m = m.mul_scalar(a.beta1) + grad.clone().mul_scalar(1.0 - a.beta1);
            let v = v.mul_scalar(a.beta2) + (grad.clone() * grad).mul_scalar(1.0 - a.beta2);
            let denom = v.clone().div_scalar(c2).sqrt().add_scalar(a.eps);
            let p = p - m.clone().div_scalar(c1).div(denom).mul_scalar(a.lr);
            (p, m, v)
        };
        // The layers are moved through the update, so that tensors held once can be
        // updated in place.
        self.layers = std::mem::take(&mut self.layers)
            .into_iter()
            .zip(gradients)
            .map(|(layer, (gw, gb))| {
                let [mw, vw, mb, vb] = layer.moments;
                let (w, mw, vw) = update(layer.w, mw, vw, gw);
                let (b, mb, vb) = update(layer.b, mb, vb, gb);
                Layer {
                    w,
                    b,
                    activation: layer.activation,
                    moments: [mw, vw, mb, vb],
                }
            })
            .collect();
        loss
    }
}

/// The first layer's pre-activations without bias: a matrix product for dense inputs, an
/// embedding bag for sparse ones.
fn first_layer(
    data: &dyn Examples,
    batch: &[usize],
    w: &Tensor<2>,
    n_in: usize,
    n_out: usize,
    device: &Device,
) -> Tensor<2> {
    let n = batch.len();
    if let Vector::Dense(_) = data.input(batch[0]) {
        let mut x = Vec::with_capacity(n * n_in);
        for &i in batch {
            match data.input(i) {
                Vector::Dense(v) => x.extend_from_slice(v),
                Vector::Sparse { .. } => panic!("mixed dense and sparse inputs"),
            }
        }
        let x = Tensor::<2>::from_data(TensorData::new(x, [n, n_in]), device);
        return x.matmul(w.clone());
    }
    let (mut features, mut values, mut owners) = (Vec::new(), Vec::new(), Vec::new());
    for (s, &i) in batch.iter().enumerate() {
        input_nonzeros(data.input(i), |f, v| {
            features.push(f as i64);
            values.push(v);
            owners.push(s as i64);
        });
    }
    let nnz = features.len();
    let rows = w.clone().select(
        0,
        Tensor::<1, Int>::from_data(TensorData::new(features, [nnz]), device),
    );
    let scaled = rows * Tensor::<2>::from_data(TensorData::new(values, [nnz, 1]), device);
    Tensor::<2>::zeros([n, n_out], device).select_assign(
        0,
        Tensor::<1, Int>::from_data(TensorData::new(owners, [nnz]), device),
        scaled,
        IndexingUpdateOp::Add,
    )
}

fn input_nonzeros(x: Vector<'_>, mut f: impl FnMut(u32, f32)) {
    match x {
        Vector::Dense(v) => v.iter().enumerate().for_each(|(i, &x)| f(i as u32, x)),
        Vector::Sparse { indices, values } => {
            indices.iter().zip(values).for_each(|(&i, &x)| f(i, x))
        }
    }
}

/// `[n, width]`: true where the neuron is in the sample's active set.
fn mask(active: &[Vec<u32>], n: usize, width: usize, device: &Device) -> Tensor<2, Bool> {
    let mut m = vec![false; n * width];
    for (s, ids) in active.iter().enumerate().take(n) {
        for &j in ids {
            m[s * width + j as usize] = true;
        }
    }
    Tensor::<2, Bool>::from_data(TensorData::new(m, [n, width]), device)
}
