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

/// The state of a head that saves two u32 vectors, `parts` as `(name, values)` (none
/// before the head has them): their tensors.
pub(super) fn u32_tensors(parts: Option<[(&str, &[u32]); 2]>) -> Vec<StateTensor> {
    parts
        .into_iter()
        .flatten()
        .map(|(name, values)| StateTensor {
            name: name.to_string(),
            elem: Elem::U32,
            shape: vec![values.len()],
        })
        .collect()
}

/// Writes tensor `name`, one of `parts` (see [`u32_tensors`]), to `sink`; `head` names the
/// head in the error for a tensor it does not have.
pub(super) fn write_u32_tensor<E: From<crate::error::SlideError>>(
    head: &str,
    parts: Option<[(&str, &[u32]); 2]>,
    name: &str,
    sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let Some((_, values)) = parts.into_iter().flatten().find(|(n, _)| *n == name) else {
        let reason = format!("has no tensor `{name}`");
        return Err(crate::error::config_error(head, reason).into());
    };
    crate::layer::write_rows(std::iter::once(values), u32::to_le_bytes, sink)
}

/// Reads the two u32 tensors `names` of a head of kind `kind` from `source`: `None` where
/// the state has neither and training had not begun (`step` 0), an error naming `kind`
/// where it lacks them after (the predictions depend on them).
pub(super) fn read_u32_tensors<S: crate::layer::StateSource + ?Sized>(
    source: &mut S,
    step: u64,
    kind: &str,
    names: [&str; 2],
) -> std::result::Result<Option<[Vec<u32>; 2]>, S::Error> {
    let [a, b] = names;
    let (Some((Elem::U32, a_shape)), Some((Elem::U32, b_shape))) =
        (source.tensor(a), source.tensor(b))
    else {
        if step > 0 {
            return Err(S::Error::from(crate::error::config_error(
                "network state",
                format!(
                    "needs the {kind} head's {a} and {b} (u32): it was saved without that \
                     head; remove the {kind} head to read it"
                ),
            )));
        }
        return Ok(None);
    };
    let mut parts = [
        vec![0u32; a_shape.iter().product()],
        vec![0u32; b_shape.iter().product()],
    ];
    crate::layer::read_u32s(source, a, &mut parts[0])?;
    crate::layer::read_u32s(source, b, &mut parts[1])?;
    Ok(Some(parts))
}
