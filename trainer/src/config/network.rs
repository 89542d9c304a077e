//! The translation of a validated config into the core's types: [`Config::network`] with
//! each layer's [`LayerConfig`] and [`LshConfig`].

use anyhow::{Result, bail};
use slide::lsh::{LshParams, Sampling, Strategy};
use slide::{AdamConfig, LayerConfig, LshConfig, NetworkConfig, RebuildSchedule};

use super::{Config, LayerSection, LshSection, StrategyName};

impl LshSection {
    /// `K`, `L`, `range_pow` and the bucket capacity for a layer of `width` neurons: as
    /// given, or tuned from the budget when `k`, `l` and `range_pow` are all left out.
    pub fn resolve(&self, width: usize) -> Result<(LshParams, usize)> {
        match (self.k, self.l, self.range_pow) {
            (Some(k), Some(l), Some(range_pow)) => Ok((
                LshParams { k, l, range_pow },
                // The core's default (128), not a copy of it.
                self.bucket_capacity
                    .unwrap_or(LshConfig::default().bucket_capacity),
            )),
            (None, None, None) => {
                let Some(budget) = self.budget else {
                    bail!("k, l and range_pow are tuned from budget, which is missing");
                };
                let bits = self.family.bits_per_code()?;
                let tuned = slide::lsh::tune_for_budget(width, budget, bits)?;
                Ok((
                    tuned.params,
                    self.bucket_capacity.unwrap_or(tuned.bucket_capacity),
                ))
            }
            _ => bail!("give all of k, l and range_pow, or none of them (tuned from budget)"),
        }
    }
}

impl Config {
    /// The core network config for `input_dim` inputs and a training set of
    /// `train_samples` (which turns a warm-up given in epochs into steps:
    /// [`NetworkConfig::with_epoch_length`]). The last layer's size must be the number of
    /// labels; the core validates the rest.
    pub fn network(&self, input_dim: usize, train_samples: usize) -> NetworkConfig {
        let t = &self.train;
        NetworkConfig {
            input_dim,
            layers: self.network.layers.iter().map(layer_config).collect(),
            adam: AdamConfig {
                lr: t.lr,
                beta1: t.beta1,
                beta2: t.beta2,
                eps: t.eps,
                bias_correction: t.bias_correction,
            },
            rebuild: if t.rebuild_growth > 1.0 {
                RebuildSchedule::Exponential {
                    first: t.rebuild_every,
                    growth: t.rebuild_growth,
                }
            } else {
                RebuildSchedule::Fixed {
                    every: t.rebuild_every,
                }
            },
            seed: t.seed,
        }
        .with_epoch_length(t.steps_per_epoch(train_samples))
    }
}

/// [`LshSection::resolve`] of a validated config.
fn resolved(lsh: &LshSection, width: usize) -> (LshParams, usize) {
    lsh.resolve(width)
        .expect("Config::validate resolved every layer")
}

/// `layer` as the core's config (a warm-up in epochs stays in epochs).
pub(super) fn layer_config(layer: &LayerSection) -> LayerConfig {
    LayerConfig {
        out_dim: layer.size,
        activation: layer.activation,
        layout: layer.layout,
        init: layer.init,
        lsh: layer.lsh.as_ref().map(|lsh| {
            let (params, bucket_capacity) = resolved(lsh, layer.size);
            LshConfig {
                family: lsh.family,
                params,
                bucket_capacity,
                policy: lsh.policy,
                sampling: Sampling {
                    strategy: match lsh.strategy {
                        StrategyName::Vanilla => Strategy::Vanilla,
                        StrategyName::TopK => Strategy::TopK {
                            k: lsh.budget.unwrap_or(1),
                        },
                        StrategyName::Threshold => Strategy::Threshold {
                            min_hits: lsh.min_hits.unwrap_or(1),
                        },
                    },
                    budget: lsh.budget,
                    min_active: lsh.min_active,
                    random_extra: lsh.random_extra,
                },
                picks: lsh.picks,
                log_q: lsh.log_q,
                shared_negatives: lsh.shared_negatives,
                shared_shift: lsh.shared_shift,
                shared_pool: lsh.shared_pool,
                center_queries: lsh.center_queries,
                warmup: lsh.warmup,
                shared_refresh: lsh.shared_refresh,
            }
        }),
        moments: layer.moments,
        weights: layer.weights,
    }
}
