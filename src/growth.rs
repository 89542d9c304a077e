//! Continuing a trained network in a new run, with more labels than it was trained on: its
//! layers' weights and optimizer state carried over, the output layer grown by the rows
//! of the new labels (as this network initialised them), its tables rebuilt with them, and
//! the heads' state carried where it does not depend on the training data.

use crate::error::{Result, config_error};
use crate::layer::{LayerState, StateTensor};
use crate::network::Network;
use crate::network_state::NetworkState;

/// What [`Network::continue_from`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continued {
    /// Outputs (labels) of the trained network.
    pub outputs_before: usize,
    /// Outputs of this network: the trained ones, then the new ones.
    pub outputs: usize,
    /// Optimizer steps the trained network had taken (in all its runs).
    pub earlier_steps: u64,
}

impl Network {
    /// Starts a new run of this network from `trained`, the state of a network of the same
    /// architecture (as [`export_state`](Self::export_state) gives it) whose output layer
    /// may have fewer outputs: every layer's weights, biases and Adam moments are
    /// `trained`'s; output `j` below `trained`'s output count is `trained`'s output `j`,
    /// and the outputs past it keep this network's initialisation (no update yet, zero
    /// moments). The LSH tables are rebuilt from the weights (the new rows inserted), the
    /// shared negatives and query centers are `trained`'s. A head's tensors are carried
    /// where the head takes them ([`Head::carries`](crate::head::Head::carries): the
    /// per-label linear head's table, grown with the outputs); the others, built from the
    /// training data (the rare-labels index), are built again from this run's data at its
    /// first step.
    ///
    /// The step count and rebuild schedule start from zero, as in a new run; Adam's bias
    /// correction goes on counting `trained`'s steps
    /// ([`StateScalars::earlier_steps`](crate::StateScalars::earlier_steps)), so the carried
    /// moments are corrected as they were when saved.
    ///
    /// Errors, found before anything is read into this network: another number of layers, a layer other than
    /// the output layer of another shape (more input features than the trained network
    /// read, for the first), an output layer with more outputs in `trained` than here, or
    /// of another input size.
    pub fn continue_from(&mut self, trained: NetworkState) -> Result<Continued> {
        let layers = self.layers().len();
        if trained.layers.len() != layers {
            return Err(mismatch(format!(
                "the trained network has {} layers, this one {layers}",
                trained.layers.len()
            )));
        }
        let last = layers - 1;
        let shape = |l: &LayerState| (l.rows, l.row_len);
        for (i, (old, new)) in trained.layers.iter().zip(self.layers()).enumerate() {
            if i != last && shape(old) != new.stored_shape() {
                return Err(mismatch(layer_difference(
                    i,
                    shape(old),
                    new.stored_shape(),
                    self,
                )));
            }
        }
        let old = &trained.layers[last];
        let (rows, row_len) = self.layers()[last].stored_shape();
        let outputs = self.layers()[last].out_dim();
        let neuron_major = self.config().layers[last].layout == crate::WeightLayout::NeuronMajor;
        if !neuron_major && shape(old) != (rows, row_len) {
            return Err(mismatch(format!(
                "the output layer stores its weights input-major: it cannot grow from {} to {outputs} outputs",
                old.bias.len(),
            )));
        }
        if old.row_len != row_len || old.rows > rows {
            return Err(mismatch(format!(
                "the trained output layer has {} outputs of {} inputs, this one {rows} of {row_len}: a \
                 continued run may add outputs, not remove them",
                old.rows, old.row_len
            )));
        }
        let outputs_before = old.bias.len();
        let earlier_steps = trained.step + trained.earlier_steps;
        let fresh_heads = self.head_tensors();
        let mut state = trained;
        state.layers[last] = grown(&state.layers[last], self.layers()[last].export_state());
        state.step = 0;
        state.next_rebuild = self.schedule.next_rebuild;
        state.rebuild_period = self.schedule.period;
        state.earlier_steps = earlier_steps;
        let mut trained_heads = std::mem::take(&mut state.heads);
        state.heads = fresh_heads
            .into_iter()
            .map(|f| {
                let carried = |t: &crate::head::HeadTensor| {
                    t.name == f.name
                        && self.heads.carries(&StateTensor {
                            name: t.name.clone(),
                            elem: t.elem,
                            shape: t.shape.clone(),
                        })
                };
                match trained_heads.iter().position(carried) {
                    Some(k) => trained_heads.swap_remove(k),
                    None => f,
                }
            })
            .collect();
        self.import_state(&state)?;
        self.rebuild_tables()?;
        Ok(Continued {
            outputs_before,
            outputs,
            earlier_steps,
        })
    }
}

/// `new` (a freshly built output layer) with its first rows and biases replaced by `old`'s,
/// and `old`'s shared negatives and query center; its tables are `new`'s, to be rebuilt.
fn grown(old: &LayerState, mut out: LayerState) -> LayerState {
    let cells = old.rows * old.row_len;
    for (to, from) in [
        (&mut out.weights, &old.weights),
        (&mut out.m, &old.m),
        (&mut out.v, &old.v),
    ] {
        to[..cells].copy_from_slice(&from[..cells]);
    }
    out.row_steps[..old.rows].copy_from_slice(&old.row_steps);
    let biases = old.bias.len();
    for (to, from) in [
        (&mut out.bias, &old.bias),
        (&mut out.bias_m, &old.bias_m),
        (&mut out.bias_v, &old.bias_v),
    ] {
        to[..biases].copy_from_slice(from);
    }
    out.bias_steps[..biases].copy_from_slice(&old.bias_steps);
    out.shared.clone_from(&old.shared);
    out.center.clone_from(&old.center);
    out
}

/// What differs in layer `i` (not the output layer, its stored rows and row length) between
/// the trained state and this network.
fn layer_difference(
    i: usize,
    (old_rows, old_len): (usize, usize),
    (rows, row_len): (usize, usize),
    net: &Network,
) -> String {
    let input_major = net.config().layers[i].layout == crate::WeightLayout::InputMajor;
    let features = |rows: usize, len: usize| if input_major { rows } else { len };
    let (before, now) = (features(old_rows, old_len), features(rows, row_len));
    if i == 0 && before != now {
        return format!(
            "the trained network reads {before} input features, this one {now}: the first \
             layer cannot grow"
        );
    }
    format!(
        "layer {i} stores {old_rows} rows of {old_len} values in the trained network, {rows} \
         of {row_len} in this one"
    )
}

fn mismatch(reason: String) -> crate::SlideError {
    config_error("continued network", reason)
}
