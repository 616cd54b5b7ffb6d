//! The decoder's shape ([`ModelConfig`]) and its transformers configuration, both ways: the
//! `config.json` a checkpoint stores ([`hf_config`]) and the shape read back from one
//! ([`model_config_from_hf`]). The model itself is computed by libtorch in the worker.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The architecture's name in checkpoint configurations.
pub const ARCHITECTURE: &str = "ApertusForCausalLM";

/// xIELU's fixed `beta` and `eps` (the released activation's constants).
pub const XIELU_BETA: f64 = 0.5;
/// See [`XIELU_BETA`].
pub const XIELU_EPS: f64 = -1e-6;
/// The value both of xIELU's slopes start at.
pub const XIELU_ALPHA_INIT: f64 = 0.8;

/// The shape and initialisation of a decoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Tokens in the vocabulary.
    pub vocab_size: i64,
    /// Width of the residual stream.
    pub hidden_size: i64,
    /// Width of the MLP's hidden layer.
    pub intermediate_size: i64,
    /// Decoder layers.
    pub num_hidden_layers: i64,
    /// Query heads.
    pub num_attention_heads: i64,
    /// Key and value heads (grouped-query attention); divides `num_attention_heads`.
    pub num_key_value_heads: i64,
    /// RoPE's base.
    pub rope_theta: f64,
    /// The epsilon of every RMSNorm.
    pub rms_norm_eps: f64,
    /// Standard deviation of the normal initialisation of every matrix.
    pub init_std: f64,
    /// The longest sequence the model is trained or evaluated on.
    pub max_position_embeddings: i64,
}

impl ModelConfig {
    /// A small model for tests and examples: width 32, MLP 64, 2 layers, 4 query and 2
    /// key-value heads, RoPE base 5e5, RMSNorm epsilon 1e-5, initial standard deviation 0.02.
    pub fn small(vocab_size: i64, max_position_embeddings: i64) -> Self {
        Self {
            vocab_size,
            hidden_size: 32,
            intermediate_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            rope_theta: 500_000.0,
            rms_norm_eps: 1e-5,
            init_std: 0.02,
            max_position_embeddings,
        }
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> i64 {
        self.hidden_size / self.num_attention_heads
    }

    /// Checks the shape's constraints; the message names the field.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        for (field, v) in positive {
            if v < 1 {
                return Err((field, format!("must be at least 1, got {v}")));
            }
        }
        if self.hidden_size % self.num_attention_heads != 0 {
            return Err((
                "num_attention_heads",
                format!("{} heads do not divide hidden_size {}", self.num_attention_heads, self.hidden_size),
            ));
        }
        if self.head_dim() % 2 != 0 {
            return Err(("num_attention_heads", format!("the head width {} must be even for RoPE", self.head_dim())));
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return Err((
                "num_key_value_heads",
                format!(
                    "{} key-value heads do not divide {} heads",
                    self.num_key_value_heads, self.num_attention_heads
                ),
            ));
        }
        let positive_float =
            [("rope_theta", self.rope_theta), ("rms_norm_eps", self.rms_norm_eps), ("init_std", self.init_std)];
        for (field, v) in positive_float {
            if !(v.is_finite() && v > 0.0) {
                return Err((field, format!("must be a positive number, got {v}")));
            }
        }
        Ok(())
    }
}

/// The checkpoint's `config.json`: transformers' `ApertusConfig` fields for this model
/// (transformers 5's layout: RoPE under `rope_parameters`).
pub fn hf_config(c: &ModelConfig, special: &BTreeMap<&str, u32>) -> Value {
    json!({
        "architectures": [ARCHITECTURE],
        "model_type": "apertus",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "hidden_act": "xielu",
        "max_position_embeddings": c.max_position_embeddings,
        "initializer_range": c.init_std,
        "rms_norm_eps": c.rms_norm_eps,
        "rope_parameters": { "rope_type": "default", "rope_theta": c.rope_theta },
        "tie_word_embeddings": false,
        "attention_bias": false,
        "attention_dropout": 0.0,
        "bos_token_id": special.get("bos"),
        "eos_token_id": special.get("eos"),
        "pad_token_id": special.get("pad"),
        "dtype": "float32",
    })
}

/// The model shape a transformers `ApertusConfig` describes.
pub fn model_config_from_hf(v: &Value) -> Result<ModelConfig, String> {
    let int =
        |key: &str| v.get(key).and_then(Value::as_i64).ok_or_else(|| format!("`{key}` is missing or not an integer"));
    let num = |key: &str, at: &Value| {
        at.get(key).and_then(Value::as_f64).ok_or_else(|| format!("`{key}` is missing or not a number"))
    };
    if v.get("model_type").and_then(Value::as_str) != Some("apertus") {
        return Err("`model_type` is not `apertus`".into());
    }
    let rope = v.get("rope_parameters").ok_or("`rope_parameters` is missing")?;
    let config = ModelConfig {
        vocab_size: int("vocab_size")?,
        hidden_size: int("hidden_size")?,
        intermediate_size: int("intermediate_size")?,
        num_hidden_layers: int("num_hidden_layers")?,
        num_attention_heads: int("num_attention_heads")?,
        num_key_value_heads: int("num_key_value_heads")?,
        rope_theta: num("rope_theta", rope)?,
        rms_norm_eps: num("rms_norm_eps", v)?,
        init_std: num("initializer_range", v)?,
        max_position_embeddings: int("max_position_embeddings")?,
    };
    config.check().map_err(|(field, m)| format!("`{field}` {m}"))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_configs_read_back() {
        let c = ModelConfig::small(100, 16);
        let hf = hf_config(&c, &BTreeMap::from([("bos", 0), ("eos", 1), ("pad", 2)]));
        assert_eq!(model_config_from_hf(&hf).unwrap(), c);
        let mut bad = hf.clone();
        bad["model_type"] = json!("llama");
        assert!(model_config_from_hf(&bad).unwrap_err().contains("model_type"));
        let mut bad = hf;
        bad["num_attention_heads"] = json!(5);
        assert!(model_config_from_hf(&bad).unwrap_err().contains("num_attention_heads"));
    }
}
