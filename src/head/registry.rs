//! The registry of heads: one line per head kind, its config's name (`kind = "..."` in a
//! config file's `[[network.heads]]`), its settings type and its head type. Everything that
//! dispatches over the kinds ([`HeadConfig`], [`AnyHead`]) is generated from these lines, so
//! adding a head adds one line here and removing one removes its line (a head behind a cargo
//! feature puts the feature's `cfg` on its line).

use slide_lsh::Vector;

use super::interface::{Head, HeadBatch, HeadRate, HeadScratch, HeadSettings, HeadShape};
use crate::data::Examples;
use crate::error::{Result, SlideError};
use crate::layer::{StateSource, StateTensor};

macro_rules! registry {
    ($($(#[$cfg:meta])* $variant:ident($settings:ty, $head:ty) = $kind:literal;)*) => {
        /// A head's settings, by kind. With the `serde` feature a config file's
        /// `[[network.heads]]` entry reads as one: `kind` names the head, its other keys
        /// are the head's settings.
        #[derive(Debug, Clone, PartialEq)]
        #[cfg_attr(
            feature = "serde",
            derive(serde::Deserialize, serde::Serialize),
            serde(tag = "kind")
        )]
        pub enum HeadConfig {
            $(
                $(#[$cfg])*
                #[doc = concat!("`kind = \"", $kind, "\"`.")]
                #[cfg_attr(feature = "serde", serde(rename = $kind))]
                $variant($settings),
            )*
        }

        /// A built head, by kind.
        #[derive(Debug, Clone)]
        pub enum AnyHead {
            $(
                $(#[$cfg])*
                #[doc = concat!("The head of `kind = \"", $kind, "\"`.")]
                $variant($head),
            )*
        }

        impl HeadConfig {
            /// The kind's name, as a config file spells it.
            pub fn kind(&self) -> &'static str {
                match self { $( $(#[$cfg])* HeadConfig::$variant(_) => $kind, )* }
            }

            /// Checks the settings.
            pub fn validate(&self) -> Result<()> {
                match self { $( $(#[$cfg])* HeadConfig::$variant(c) => c.validate(), )* }
            }

            /// The settings as `(name, value)` pairs (see [`HeadSettings::describe`]).
            pub fn describe(&self, out: &mut Vec<(String, String)>) {
                match self { $( $(#[$cfg])* HeadConfig::$variant(c) => c.describe(out), )* }
            }

            /// Whether the described setting `name` is part of the architecture.
            pub fn architecture(&self, name: &str) -> bool {
                match self {
                    $( $(#[$cfg])* HeadConfig::$variant(_) => <$settings>::architecture(name), )*
                }
            }

            /// Heap bytes the head built for `shape` holds.
            pub fn estimated_bytes(&self, shape: HeadShape) -> u64 {
                match self {
                    $( $(#[$cfg])* HeadConfig::$variant(c) => c.estimated_bytes(shape), )*
                }
            }

            /// The head for a network of `shape`, untrained.
            pub fn build(&self, shape: HeadShape) -> Result<AnyHead> {
                match self {
                    $( $(#[$cfg])* HeadConfig::$variant(c) => c.build(shape).map(AnyHead::$variant), )*
                }
            }
        }

        impl Head for AnyHead {
            fn prepare(&mut self, train: &dyn Examples) {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.prepare(train), )* }
            }
            fn shortlist(&self) -> usize {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.shortlist(), )* }
            }
            fn candidates(
                &self,
                input: Vector<'_>,
                skip: &[u32],
                scratch: &mut Vec<(u32, u32)>,
                out: &mut Vec<u32>,
            ) {
                match self {
                    $( $(#[$cfg])* AnyHead::$variant(h) => h.candidates(input, skip, scratch, out), )*
                }
            }
            fn rescore(&self, input: Vector<'_>, candidates: &mut [(f32, u32)]) {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.rescore(input, candidates), )* }
            }
            fn learns(&self) -> bool {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.learns(), )* }
            }
            fn alone_epochs(&self) -> usize {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.alone_epochs(), )* }
            }
            fn train(
                &mut self,
                batch: &HeadBatch<'_>,
                scratch: &mut HeadScratch,
                rate: HeadRate,
            ) -> f64 {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.train(batch, scratch, rate), )* }
            }
            fn is_finite(&self) -> bool {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.is_finite(), )* }
            }
            fn memory_bytes(&self) -> usize {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.memory_bytes(), )* }
            }
            fn state_tensors(&self) -> Vec<StateTensor> {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.state_tensors(), )* }
            }
            fn carries(&self, trained: &StateTensor) -> bool {
                match self { $( $(#[$cfg])* AnyHead::$variant(h) => h.carries(trained), )* }
            }
            fn write_state_tensor<E: From<SlideError>>(
                &self,
                name: &str,
                sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
            ) -> std::result::Result<(), E> {
                match self {
                    $( $(#[$cfg])* AnyHead::$variant(h) => h.write_state_tensor(name, sink), )*
                }
            }
            fn read_state<S: StateSource + ?Sized>(
                &mut self,
                step: u64,
                outputs: usize,
                source: &mut S,
            ) -> std::result::Result<(), S::Error> {
                match self {
                    $( $(#[$cfg])* AnyHead::$variant(h) => h.read_state(step, outputs, source), )*
                }
            }
        }
    };
}

registry! {
    #[cfg(feature = "label-linear-head")]
    LabelLinear(super::label_linear::LabelLinearConfig, super::label_linear::LabelLinearHead) = "label-linear";
    RareLabels(super::rare_labels::RareLabelsConfig, super::rare_labels::RareLabels) = "rare-labels";
    Propensity(super::propensity::PropensityConfig, super::propensity::PropensityHead) = "propensity";
}
