//! The training config: TOML, every key known (unknown keys are errors naming the key), every
//! value validated before any work starts.

mod legacy;
mod network;
mod sections;
mod sizes;
#[cfg(test)]
mod tests;
mod validate;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

pub use sections::{
    CheckpointConfig, DataConfig, DataFormat, LogConfig, NetworkSection, TrainConfig,
};

/// A whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[data]`: where the examples come from.
    pub data: DataConfig,
    /// `[network]`: the layers.
    #[serde(default)]
    pub network: NetworkSection,
    /// `[train]`: the optimizer, schedule and evaluation; left out, every key takes its
    /// default.
    #[serde(default)]
    pub train: TrainConfig,
    #[serde(default)]
    /// `[log]`: where metrics go.
    pub log: LogConfig,
    #[serde(default)]
    /// `[checkpoint]`: how often and where checkpoints are written.
    pub checkpoint: CheckpointConfig,
    /// One line per old key read under its new name (see `legacy`), for the user to
    /// update the file; [`load`] prints them.
    #[serde(skip)]
    pub notes: Vec<String>,
    /// The config as read (overrides applied, old keys upgraded), before the output size
    /// was filled from the data: what [`Config::with_output_size`] resolves again.
    #[serde(skip)]
    source: Option<toml::Table>,
}

/// Finds a config: the path as given, or a bare name looked up in `configs/`.
pub fn locate(path: &Path) -> PathBuf {
    if path.exists() || path.components().count() > 1 {
        return path.to_path_buf();
    }
    let in_configs = Path::new("configs").join(path);
    if in_configs.exists() {
        in_configs
    } else {
        path.to_path_buf()
    }
}

/// Reads, overrides (`section.key=value`, the value in TOML syntax) and validates a config.
pub fn load(path: &Path, overrides: &[String]) -> Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let config = parse(&text, path, overrides)?;
    for note in &config.notes {
        eprintln!("note: {}: {note}", path.display());
    }
    Ok(config)
}

/// [`load`] of a config's text; `path` names it in errors.
pub fn parse(text: &str, path: &Path, overrides: &[String]) -> Result<Config> {
    let mut value: toml::Table = toml::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), one_line(&e.to_string())))?;
    for item in overrides {
        apply_override(&mut value, item)?;
    }
    let notes = legacy::upgrade(&mut value).with_context(|| format!("{}", path.display()))?;
    let source = value.clone();
    sizes::fill_output_size(&mut value).with_context(|| format!("{}", path.display()))?;
    let mut config: Config = Config::deserialize(value)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), one_line(&e.to_string())))?;
    config.notes = notes;
    config.source = Some(source);
    config
        .validate()
        .with_context(|| format!("{}", path.display()))?;
    Ok(config)
}

impl Config {
    /// This config with an output layer of `size` outputs, every size that follows from
    /// the output layer's (an LSH layer's tables, its shared pool) resolved again for it:
    /// the config of the model a continued run (`--init-from`) starts from.
    pub fn with_output_size(&self, size: usize) -> Result<Config> {
        let mut value = self
            .source
            .clone()
            .context("this config was not read from a file: its sizes cannot be resolved again")?;
        let last = value
            .get_mut("network")
            .and_then(toml::Value::as_table_mut)
            .and_then(|n| n.get_mut("layers"))
            .and_then(toml::Value::as_array_mut)
            .and_then(|layers| layers.last_mut())
            .and_then(toml::Value::as_table_mut)
            .context("the config has no [[network.layers]]")?;
        last.insert("size".into(), toml::Value::Integer(i64::try_from(size)?));
        let mut config = Config::deserialize(value)?;
        config.validate()?;
        config.source = self.source.clone();
        Ok(config)
    }
}

/// A config's text with `overrides` applied, as TOML: what [`parse`] of it without
/// overrides reads as [`parse`] of `text` with them (the data-dependent sizes and the notes
/// of old keys aside, which `parse` adds). A program that changed a config saves this.
pub fn with_overrides(text: &str, path: &Path, overrides: &[String]) -> Result<String> {
    let mut value: toml::Table = toml::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), one_line(&e.to_string())))?;
    for item in overrides {
        apply_override(&mut value, item)?;
    }
    Ok(toml::to_string(&value)?)
}

fn one_line(message: &str) -> String {
    let words = message.split_whitespace().collect::<Vec<_>>().join(" ");
    slide::formats::printable(&words)
}

fn apply_override(table: &mut toml::Table, item: &str) -> Result<()> {
    let Some((key, raw)) = item.split_once('=') else {
        bail!("--set {item}: expected section.key=value");
    };
    // Values are TOML; a bare word that is not valid TOML is taken as a string.
    let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.trim().split('.').collect();
    let mut here = toml::Value::Table(std::mem::take(table));
    let result = set_path(&mut here, &parts, value, item);
    if let toml::Value::Table(t) = here {
        *table = t;
    }
    result
}

/// Sets `parts` (table keys, or indices into arrays such as `network.layers.1.size`) to
/// `value`, creating missing tables.
fn set_path(here: &mut toml::Value, parts: &[&str], value: toml::Value, item: &str) -> Result<()> {
    let (first, rest) = parts.split_first().expect("split yields at least one part");
    let child = match here {
        toml::Value::Table(t) if rest.is_empty() => {
            t.insert(first.to_string(), value);
            return Ok(());
        }
        toml::Value::Table(t) => t
            .entry(first.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new())),
        toml::Value::Array(a) => {
            let index: usize = first.parse().map_err(|_| {
                anyhow::anyhow!("--set {item}: `{first}` is not an index into a list")
            })?;
            let len = a.len();
            let slot = a.get_mut(index).ok_or_else(|| {
                anyhow::anyhow!("--set {item}: index {index} is past the list's {len} entries")
            })?;
            if rest.is_empty() {
                *slot = value;
                return Ok(());
            }
            slot
        }
        _ => bail!("--set {item}: `{first}` is inside a value that is not a section or list"),
    };
    set_path(child, rest, value, item)
}
