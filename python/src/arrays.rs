//! NumPy arrays (any object with the buffer protocol) into the core's examples, each array
//! copied once, straight into its final type, and checked as the CLI's readers check a
//! file: every error names the matrix, the row and the problem.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use slide::SparseExamples;

/// An input matrix as the Python layer hands it over: `(indptr, indices, data, columns)`.
pub type Inputs<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    usize,
);

/// A label matrix as the Python layer hands it over: `(indptr, indices, columns)`.
pub type Labels<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, usize);

/// Validation data: the inputs' `(indptr, indices, data)` and the labels' `(indptr,
/// indices)`, their column counts the training data's.
pub type Validation<'py> = (
    (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>),
    (Bound<'py, PyAny>, Bound<'py, PyAny>),
);

impl<'py> Csr<'py> {
    /// The input matrix `x`.
    pub fn inputs(x: Inputs<'py>) -> Self {
        Csr {
            indptr: x.0,
            indices: x.1,
            data: Some(x.2),
            columns: x.3,
        }
    }

    /// The label matrix `y`.
    pub fn labels(y: Labels<'py>) -> Self {
        Csr {
            indptr: y.0,
            indices: y.1,
            data: None,
            columns: y.2,
        }
    }
}

/// A compressed sparse row matrix as the Python layer hands it over: `indptr`, `indices`
/// and (for inputs) `data`, with its column count.
pub struct Csr<'py> {
    /// Row starts, `rows + 1` of them (int32 or int64).
    pub indptr: Bound<'py, PyAny>,
    /// Column ids (int32 or int64).
    pub indices: Bound<'py, PyAny>,
    /// Values (float32 or float64); `None` for a label matrix.
    pub data: Option<Bound<'py, PyAny>>,
    /// Columns: the input dimension or the label count.
    pub columns: usize,
}

/// A contiguous one-dimensional buffer's items, each converted by `convert` as it is
/// copied: the array's one copy. (`as_slice` is deprecated as unsound because another
/// thread could write the buffer while it is read; the GIL is held from the start of the
/// read to its end, so no Python code runs meanwhile.)
#[allow(deprecated)]
fn each<T: pyo3::buffer::Element + Copy, U>(
    name: &str,
    buffer: &PyBuffer<T>,
    py: Python<'_>,
    convert: impl Fn(T) -> U,
) -> PyResult<Vec<U>> {
    match buffer.as_slice(py) {
        Some(cells) if buffer.dimensions() == 1 => {
            Ok(cells.iter().map(|c| convert(c.get())).collect())
        }
        _ => Err(PyValueError::new_err(format!(
            "{name}: expected a contiguous one-dimensional array"
        ))),
    }
}

/// The values of a one-dimensional buffer of integers, widened to `i64`.
fn integers(name: &str, array: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let py = array.py();
    if let Ok(buffer) = PyBuffer::<i64>::get(array) {
        return each(name, &buffer, py, |v| v);
    }
    if let Ok(buffer) = PyBuffer::<i32>::get(array) {
        return each(name, &buffer, py, i64::from);
    }
    if let Ok(buffer) = PyBuffer::<u32>::get(array) {
        return each(name, &buffer, py, i64::from);
    }
    Err(PyValueError::new_err(format!(
        "{name}: expected a contiguous int32 or int64 array"
    )))
}

/// The values of a one-dimensional buffer of floats, as `f32` (float64 rounded once).
fn floats(name: &str, array: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    let py = array.py();
    if let Ok(buffer) = PyBuffer::<f32>::get(array) {
        return each(name, &buffer, py, |v| v);
    }
    if let Ok(buffer) = PyBuffer::<f64>::get(array) {
        return each(name, &buffer, py, |v| v as f32);
    }
    Err(PyValueError::new_err(format!(
        "{name}: expected a contiguous float32 or float64 array"
    )))
}

/// Row starts checked: first 0, never decreasing, last the number of entries.
fn offsets(name: &str, indptr: Vec<i64>, entries: usize) -> PyResult<Vec<usize>> {
    let bad = |why: String| PyValueError::new_err(format!("{name}: {why}"));
    if indptr.first() != Some(&0) {
        return Err(bad("indptr must start at 0".into()));
    }
    if let Some(row) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(bad(format!("indptr decreases at row {row}")));
    }
    let last = *indptr.last().expect("checked non-empty");
    if last != entries as i64 {
        return Err(bad(format!(
            "indptr ends at {last} but there are {entries} entries"
        )));
    }
    Ok(indptr.into_iter().map(|v| v as usize).collect())
}

/// Column ids checked against `columns`, as `u32`, with the row each error is in.
fn columns(
    name: &str,
    what: &str,
    ids: Vec<i64>,
    starts: &[usize],
    columns: usize,
) -> PyResult<Vec<u32>> {
    match ids
        .iter()
        .position(|&id| id < 0 || id as u64 >= columns as u64)
    {
        Some(at) => {
            let row = starts.partition_point(|&s| s <= at) - 1;
            Err(PyValueError::new_err(format!(
                "{name} row {row}: {what} {} is out of range: {what}s are below {columns}",
                ids[at]
            )))
        }
        None => Ok(ids.into_iter().map(|v| v as u32).collect()),
    }
}

/// Examples of the inputs `x` and the labels `y` (`None`: unlabelled, for prediction),
/// each checked: the same number of rows, features and labels in range, every value
/// finite.
pub fn examples(x: &Csr<'_>, y: Option<&Csr<'_>>) -> PyResult<SparseExamples> {
    let values = floats("X.data", x.data.as_ref().expect("inputs have values"))?;
    let offsets_x = offsets("X", integers("X.indptr", &x.indptr)?, values.len())?;
    let indices = columns(
        "X",
        "feature",
        integers("X.indices", &x.indices)?,
        &offsets_x,
        x.columns,
    )?;
    if indices.len() != values.len() {
        return Err(PyValueError::new_err(format!(
            "X: {} indices but {} values",
            indices.len(),
            values.len()
        )));
    }
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        let row = offsets_x.partition_point(|&s| s <= at) - 1;
        return Err(PyValueError::new_err(format!(
            "X row {row}: value {} of feature {} is not finite",
            values[at], indices[at]
        )));
    }
    let rows = offsets_x.len() - 1;
    let (label_offsets, labels) = match y {
        Some(y) => {
            let ids = integers("Y.indices", &y.indices)?;
            let starts = offsets("Y", integers("Y.indptr", &y.indptr)?, ids.len())?;
            if starts.len() - 1 != rows {
                return Err(PyValueError::new_err(format!(
                    "X has {rows} rows but Y has {}",
                    starts.len() - 1
                )));
            }
            let labels = columns("Y", "label", ids, &starts, y.columns)?;
            (starts, labels)
        }
        None => (vec![0; rows + 1], Vec::new()),
    };
    Ok(SparseExamples {
        offsets: offsets_x,
        indices,
        values,
        label_offsets,
        labels,
    })
}
