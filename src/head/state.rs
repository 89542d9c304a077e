//! Heads' tensors in a plain copy of a network's state ([`NetworkState::heads`]
//! (crate::NetworkState::heads)): whatever a head saves, as named little-endian bytes.

use crate::error::Result;
use crate::layer::{Elem, StateTensor};

/// One tensor of a head's state, as [`Head::write_state_tensor`](super::Head::write_state_tensor)
/// wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadTensor {
    /// Its name in the network's state.
    pub name: String,
    /// Its elements' type.
    pub elem: Elem,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values, little-endian.
    pub bytes: Vec<u8>,
}

impl HeadTensor {
    /// Each of `tensors` with its bytes, which `write(name, sink)` passes to `sink` in
    /// pieces.
    #[allow(clippy::type_complexity)]
    pub fn all(
        tensors: Vec<StateTensor>,
        mut write: impl FnMut(&str, &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()>,
    ) -> Result<Vec<HeadTensor>> {
        tensors
            .into_iter()
            .map(|t| {
                let mut bytes = Vec::new();
                write(&t.name, &mut |piece| {
                    bytes.extend_from_slice(piece);
                    Ok(())
                })?;
                Ok(HeadTensor {
                    name: t.name,
                    elem: t.elem,
                    shape: t.shape,
                    bytes,
                })
            })
            .collect()
    }
}
