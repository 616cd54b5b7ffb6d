//! Palettized checkpoints (the AFM report, §5.2): the weights of the layers' projection
//! matrices replaced by k-means lookup tables shared by groups of rows, 2 or 4 bits per layer
//! to reach a target bits per weight, the embeddings by 8-bit integers with a scale per row
//! ([`palette`], on one-dimensional k-means: [`kmeans`]), and the `palettize` stage that
//! writes the result as a checkpoint naming its palette description ([`stage`]).
//!
//! It owns the quantization scheme and its bookkeeping (what each tensor became, the bits per
//! weight). Evaluating a palettized checkpoint, training an accuracy-recovery adapter on it
//! and exporting it are the worker's, as for any checkpoint.

pub mod kmeans;
pub mod palette;
pub mod stage;

pub use palette::{FORMAT, Palette, PaletteConfig, PaletteError, Palettized, Scheme, palettize, palettize_model};
pub use stage::PalettizeStage;

/// Registers the `palettize` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(PalettizeStage));
}
