//! `slide._slide`: the Rust half of the Python package (`python/slide/__init__.py` is the
//! other). It wraps the core and the trainer's library, not the CLI: training runs the
//! loop `slide-train` runs, on arrays handed over through the buffer protocol (each copied
//! once), with the GIL released; models save and load as `slide-train` checkpoints.

mod arrays;
mod model;
mod support;
mod training;

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The shipped configs, by the names `slide-train --config` looks up in `configs/`.
const CONFIGS: [(&str, &str); 5] = [
    ("xmc.toml", include_str!("../../configs/xmc.toml")),
    (
        "amazon670k.toml",
        include_str!("../../configs/amazon670k.toml"),
    ),
    (
        "amazon670k-synthetic.toml",
        include_str!("../../configs/amazon670k-synthetic.toml"),
    ),
    (
        "delicious200k.toml",
        include_str!("../../configs/delicious200k.toml"),
    ),
    (
        "quickstart.toml",
        include_str!("../../configs/quickstart.toml"),
    ),
];

/// A shipped config's text by name (`xmc.toml`), or `None`.
#[pyfunction]
fn shipped_config(name: &str) -> Option<&'static str> {
    CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// The names of the shipped configs.
#[pyfunction]
fn shipped_configs() -> Vec<&'static str> {
    CONFIGS.iter().map(|(n, _)| *n).collect()
}

/// Reads an XMC text file (`N D L` header, then `labels feature:value ...` lines, gzip or
/// not) with the CLI's reader and its errors: the features' row starts, ids and values and
/// the labels' row starts and ids as little-endian byte strings (uint64, uint32, float32,
/// uint64, uint32), with the feature and label counts.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn read_xmc<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(usize, usize, Vec<Bound<'py, PyBytes>>)> {
    let (data, shape) = py
        .detach(|| slide::formats::xmc::read_xmc(&path))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let bytes = |parts: Vec<u8>| PyBytes::new(py, &parts);
    let u64s = |v: &[usize]| v.iter().flat_map(|&x| (x as u64).to_le_bytes()).collect();
    let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let parts = vec![
        bytes(u64s(&data.offsets)),
        bytes(u32s(&data.indices)),
        bytes(f32s(&data.values)),
        bytes(u64s(&data.label_offsets)),
        bytes(u32s(&data.labels)),
    ];
    Ok((shape.features, shape.labels, parts))
}

/// The kernel set in use and the CPU's features, as `slide-train` logs them.
#[pyfunction]
fn kernels() -> String {
    slide::describe_kernels()
}

/// The Python module.
#[pymodule]
fn _slide(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<model::Model>()?;
    module.add_function(wrap_pyfunction!(read_xmc, module)?)?;
    module.add_function(wrap_pyfunction!(shipped_config, module)?)?;
    module.add_function(wrap_pyfunction!(shipped_configs, module)?)?;
    module.add_function(wrap_pyfunction!(kernels, module)?)?;
    Ok(())
}
