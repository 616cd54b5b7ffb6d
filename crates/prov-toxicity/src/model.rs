//! The toxicity classifier as the `toxicity-train` stage stores it, and scoring with it in
//! plain Rust.
//!
//! Per language, a 2-layer MLP on the [`EmbeddingConfig`] embedding:
//! `logit = fc2.weight · relu(fc1.weight · x + fc1.bias) + fc2.bias`. The checkpoint's
//! weights are a safetensors file with float32 tensors `<language>.fc1.weight` `[hidden, dim]`,
//! `<language>.fc1.bias` `[hidden]`, `<language>.fc2.weight` `[1, hidden]` and
//! `<language>.fc2.bias` `[1]`; its configuration object is a [`ClassifierConfig`].
//!
//! Scoring runs here rather than in libtorch so that it is portable: the sums run in a fixed
//! order, in f32, without fused multiply-add, over the sparse features only, so the same
//! weights give the same scores on every machine and thread count (training, in libtorch, is
//! what depends on the envelope).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::embed::EmbeddingConfig;

/// The name of the classifier architecture in checkpoint configurations.
pub const ARCHITECTURE: &str = "hashed-char-ngram-mlp";

/// The configuration object of a classifier checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// Always [`ARCHITECTURE`].
    pub architecture: String,
    /// The embedding.
    pub embedding: EmbeddingConfig,
    /// Hidden units.
    pub hidden: u32,
    /// Per language: how its classifier was trained and how well it did on held-out data.
    pub languages: BTreeMap<String, Value>,
    /// The training configuration.
    pub training: Value,
}

/// A classifier checkpoint that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The configuration object is not a classifier configuration.
    #[error("classifier configuration: {0}")]
    Config(String),
    /// The weights file is not what the configuration describes.
    #[error("classifier weights: {0}")]
    Weights(String),
}

/// One language's MLP, laid out for sparse inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Mlp {
    hidden: usize,
    /// `fc1.weight` transposed: row `i` holds the weights of input feature `i`.
    w1_by_feature: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: f32,
}

impl Mlp {
    /// Builds it from `fc1.weight` `[hidden, dim]`, `fc1.bias`, `fc2.weight` `[1, hidden]`, `fc2.bias`.
    pub fn new(dim: usize, hidden: usize, w1: &[f32], b1: &[f32], w2: &[f32], b2: f32) -> Result<Self, ModelError> {
        if w1.len() != dim * hidden || b1.len() != hidden || w2.len() != hidden {
            return Err(ModelError::Weights(format!(
                "sizes {}, {}, {} do not fit dim {dim} and hidden {hidden}",
                w1.len(),
                b1.len(),
                w2.len()
            )));
        }
        let mut w1_by_feature = vec![0.0f32; dim * hidden];
        for j in 0..hidden {
            for i in 0..dim {
                w1_by_feature[i * hidden + j] = w1[j * dim + i];
            }
        }
        Ok(Self { hidden, w1_by_feature, b1: b1.to_vec(), w2: w2.to_vec(), b2 })
    }

    /// The logit for one embedded text (higher: more toxic).
    pub fn logit(&self, x: &[(u32, f32)]) -> f32 {
        let mut h = self.b1.clone();
        for &(i, v) in x {
            let row = &self.w1_by_feature[i as usize * self.hidden..(i as usize + 1) * self.hidden];
            for (acc, w) in h.iter_mut().zip(row) {
                *acc += w * v;
            }
        }
        let mut out = self.b2;
        for (w, a) in self.w2.iter().zip(&h) {
            out += w * a.max(0.0);
        }
        out
    }
}

/// A trained classifier: the embedding and one MLP per language.
#[derive(Debug, Clone)]
pub struct Classifier {
    /// The configuration it was trained with.
    pub config: ClassifierConfig,
    models: BTreeMap<String, Mlp>,
}

impl Classifier {
    /// Reads a classifier from its configuration object and safetensors weights.
    pub fn from_parts(config: &[u8], weights: &[u8]) -> Result<Self, ModelError> {
        let config: ClassifierConfig = serde_json::from_slice(config).map_err(|e| ModelError::Config(e.to_string()))?;
        if config.architecture != ARCHITECTURE {
            return Err(ModelError::Config(format!(
                "architecture `{}`, expected `{ARCHITECTURE}`",
                config.architecture
            )));
        }
        if let Some(p) = config.embedding.problem() {
            return Err(ModelError::Config(p));
        }
        let tensors = safetensors::SafeTensors::deserialize(weights).map_err(|e| ModelError::Weights(e.to_string()))?;
        let (dim, hidden) = (config.embedding.dim as usize, config.hidden as usize);
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, ModelError> {
            let t = tensors.tensor(name).map_err(|e| ModelError::Weights(format!("`{name}`: {e}")))?;
            if t.dtype() != safetensors::Dtype::F32 || t.shape() != shape {
                return Err(ModelError::Weights(format!(
                    "`{name}` is {:?} {:?}, expected F32 {shape:?}",
                    t.dtype(),
                    t.shape()
                )));
            }
            Ok(t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
        };
        let mut models = BTreeMap::new();
        for lang in config.languages.keys() {
            let w1 = get(&format!("{lang}.fc1.weight"), &[hidden, dim])?;
            let b1 = get(&format!("{lang}.fc1.bias"), &[hidden])?;
            let w2 = get(&format!("{lang}.fc2.weight"), &[1, hidden])?;
            let b2 = get(&format!("{lang}.fc2.bias"), &[1])?;
            models.insert(lang.clone(), Mlp::new(dim, hidden, &w1, &b1, &w2, b2[0])?);
        }
        Ok(Self { config, models })
    }

    /// The languages it has a model for.
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// The model for a language, if there is one.
    pub fn model(&self, language: &str) -> Option<&Mlp> {
        self.models.get(language)
    }

    /// Scores a document with a language's model: the maximum logit over its chunks, or
    /// `None` when it has no chunk with text.
    pub fn score(&self, model: &Mlp, text: &str, chunk_chars: usize) -> Option<f32> {
        crate::embed::chunks(text, chunk_chars)
            .iter()
            .map(|c| model.logit(&self.config.embedding.embed(c)))
            .reduce(f32::max)
    }
}

/// The classifier language a document's language tag maps to: its primary subtag, lower-cased
/// (`de-1901` and `de` both use the `de` model).
pub fn classifier_language(tag: &str) -> String {
    prov_dataset::primary_language(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_inference_equals_the_dense_formula() {
        let (dim, hidden) = (4, 2);
        let w1 = [0.5, -1.0, 0.0, 2.0, 1.0, 1.0, 1.0, 1.0];
        let mlp = Mlp::new(dim, hidden, &w1, &[0.1, -0.2], &[1.5, -0.5], 0.25).unwrap();
        let x = [(0u32, 1.0f32), (3, 0.5)];
        // h = relu([0.5 + 1.0 + 0.1, 1.0 + 0.5 - 0.2]) = [1.6, 1.3]; logit = 2.4 - 0.65 + 0.25.
        assert!((mlp.logit(&x) - 2.0).abs() < 1e-6, "{}", mlp.logit(&x));
        assert!(Mlp::new(dim, hidden, &w1[..7], &[0.0; 2], &[0.0; 2], 0.0).is_err());
    }

    #[test]
    fn language_tags_map_to_their_primary_subtag() {
        assert_eq!(classifier_language("de-1901"), "de");
        assert_eq!(classifier_language("pt_BR"), "pt");
        assert_eq!(classifier_language("EN"), "en");
    }

    #[test]
    fn a_wrong_checkpoint_is_an_error_not_a_panic() {
        let cfg = serde_json::json!({
            "architecture": ARCHITECTURE,
            "embedding": {"dim": 16, "ngram_min": 1, "ngram_max": 2},
            "hidden": 2,
            "languages": {"en": {}},
            "training": {},
        });
        let bytes = serde_json::to_vec(&cfg).unwrap();
        let e = Classifier::from_parts(&bytes, b"not safetensors").unwrap_err();
        assert!(matches!(e, ModelError::Weights(_)), "{e}");
        let e = Classifier::from_parts(b"{}", b"").unwrap_err();
        assert!(matches!(e, ModelError::Config(_)), "{e}");
    }
}
