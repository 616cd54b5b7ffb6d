//! Pretraining with libtorch, replayable step by step: the Apertus-style decoder
//! ([`model`]).
//!
//! Every tensor that reaches hashed bytes goes through `prov_torch::NamedTensors`, in name
//! order; every random draw comes from a generator seeded from the stage's seed.

pub mod model;
