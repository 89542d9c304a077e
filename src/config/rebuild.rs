//! When LSH tables are rebuilt: [`RebuildSchedule`], its defaults, checks and keys.

use crate::error::{Result, config_error};

/// When LSH tables are rebuilt from the moving weights.
///
/// With the `serde` feature it reads a config file's `[train]` keys `rebuild_every` (steps
/// before the first rebuild, default 50) and `rebuild_growth` (each period's factor over
/// the previous one, default 1: a fixed period).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(from = "RebuildKeys", into = "RebuildKeys")
)]
pub enum RebuildSchedule {
    /// After every `every` steps.
    Fixed {
        /// Steps between rebuilds (at least 1).
        every: u64,
    },
    /// The SLIDE paper's schedule: the first rebuild after `first` steps, each following
    /// period `growth` times the previous one (the weights move less as training settles).
    Exponential {
        /// Steps before the first rebuild (at least 1).
        first: u64,
        /// Period growth factor (at least 1).
        growth: f64,
    },
}

impl Default for RebuildSchedule {
    /// A rebuild every 50 steps.
    fn default() -> Self {
        RebuildSchedule::Fixed { every: 50 }
    }
}

/// The keys a config file spells a [`RebuildSchedule`] with.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(default)]
struct RebuildKeys {
    rebuild_every: u64,
    rebuild_growth: f64,
}

#[cfg(feature = "serde")]
impl Default for RebuildKeys {
    fn default() -> Self {
        RebuildSchedule::default().into()
    }
}

#[cfg(feature = "serde")]
impl From<RebuildKeys> for RebuildSchedule {
    /// A growth of exactly 1 is a fixed period; any other is checked by
    /// [`RebuildSchedule::validate`].
    fn from(keys: RebuildKeys) -> Self {
        if keys.rebuild_growth == 1.0 {
            RebuildSchedule::Fixed {
                every: keys.rebuild_every,
            }
        } else {
            RebuildSchedule::Exponential {
                first: keys.rebuild_every,
                growth: keys.rebuild_growth,
            }
        }
    }
}

#[cfg(feature = "serde")]
impl From<RebuildSchedule> for RebuildKeys {
    fn from(schedule: RebuildSchedule) -> Self {
        match schedule {
            RebuildSchedule::Fixed { every } => RebuildKeys {
                rebuild_every: every,
                rebuild_growth: 1.0,
            },
            RebuildSchedule::Exponential { first, growth } => RebuildKeys {
                rebuild_every: first,
                rebuild_growth: growth,
            },
        }
    }
}

impl RebuildSchedule {
    /// Checks that periods are at least one step and growth is finite and at least 1.
    pub fn validate(&self) -> Result<()> {
        match *self {
            RebuildSchedule::Fixed { every: 0 } | RebuildSchedule::Exponential { first: 0, .. } => {
                Err(config_error(
                    "rebuild_every",
                    "the period must be at least 1 step",
                ))
            }
            RebuildSchedule::Exponential { growth, .. }
                if !(growth.is_finite() && growth >= 1.0) =>
            {
                Err(config_error(
                    "rebuild_growth",
                    "must be a finite number >= 1",
                ))
            }
            _ => Ok(()),
        }
    }

    /// The first period, in steps.
    pub(crate) fn first_period(&self) -> u64 {
        match *self {
            RebuildSchedule::Fixed { every } => every,
            RebuildSchedule::Exponential { first, .. } => first,
        }
    }
}
