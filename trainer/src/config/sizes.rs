//! Sizes from the data: a config may leave the output layer's `size` out, and it is then
//! the data's label count (`data.labels`, else the header of the XMC training file, else
//! the IDX format's 10 classes), so one recipe runs unchanged on any label set.

use std::path::Path;

use anyhow::{Result, bail};
use toml::{Table, Value};

/// Writes the label count into the last `[[network.layers]]` table when it has no `size`.
pub(super) fn fill_output_size(config: &mut Table) -> Result<()> {
    let missing = output_layers(config).and_then(|layers| {
        let last = layers.len().checked_sub(1)?;
        let table = layers[last].as_table()?;
        (!table.contains_key("size")).then_some(last)
    });
    let Some(last) = missing else {
        return Ok(());
    };
    let place = format!("network.layers[{last}].size");
    let labels = label_count(config.get("data").and_then(Value::as_table), &place)?;
    let size = i64::try_from(labels)?;
    if let Some(table) = output_layers(config).and_then(|l| l[last].as_table_mut()) {
        table.insert("size".into(), Value::Integer(size));
    }
    Ok(())
}

fn output_layers(config: &mut Table) -> Option<&mut Vec<Value>> {
    config
        .get_mut("network")
        .and_then(Value::as_table_mut)
        .and_then(|network| network.get_mut("layers"))
        .and_then(Value::as_array_mut)
}

/// The label count the data declares, for `place` (the key being filled, named in errors).
fn label_count(data: Option<&Table>, place: &str) -> Result<usize> {
    let get = |key: &str| data.and_then(|d| d.get(key));
    if let Some(labels) = get("labels") {
        return match labels.as_integer().map(usize::try_from) {
            Some(Ok(n)) => Ok(n),
            _ => bail!("data.labels must be a non-negative integer, got {labels}"),
        };
    }
    match get("format").and_then(Value::as_str) {
        Some("xmc") => {
            let Some(train) = get("train").and_then(Value::as_str) else {
                bail!(
                    "{place} is left out, so it comes from data.train's header: data.train is needed"
                );
            };
            match slide::formats::xmc::read_xmc_header(Path::new(train)) {
                Ok(shape) => Ok(shape.labels),
                Err(e) => bail!("{place} is left out, so it comes from data.train's header: {e}"),
            }
        }
        Some("idx") => Ok(10),
        _ => bail!("{place} is left out: give it, or data.labels"),
    }
}
