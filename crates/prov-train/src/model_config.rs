//! The decoder's shape ([`ModelConfig`]) and its transformers configuration, both ways: the
//! `config.json` a checkpoint stores ([`hf_config`]) and the shape read back from one
//! ([`model_config_from_hf`]). The model itself is computed by libtorch in the worker.
//!
//! Three architectures share the shape ([`Architecture`]): Apertus' (QK-norm, xIELU MLP,
//! untied embeddings, transformers' `ApertusForCausalLM`), EuroLLM's (SwiGLU MLP, no QK-norm,
//! untied embeddings, `LlamaForCausalLM`) and AFM's (SwiGLU MLP, QK-norm, one embedding matrix
//! shared by input and output, `Qwen3ForCausalLM`); all are pre-RMSNorm decoders with RoPE and
//! grouped-query attention.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Which decoder: the MLP, whether queries and keys are normalised, and the transformers
/// class a checkpoint exports to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// The Apertus report's: QK-norm and a non-gated MLP with xIELU (`ApertusForCausalLM`).
    #[default]
    Apertus,
    /// The EuroLLM report's (§2.1): a SwiGLU MLP, `down(silu(gate(x)) * up(x))`, and no
    /// QK-norm (`LlamaForCausalLM`).
    Llama,
    /// The AFM report's (§2): a SwiGLU MLP, query/key normalisation, and the input embedding
    /// shared with the output (`Qwen3ForCausalLM`, which has exactly these).
    Afm,
}

impl Architecture {
    /// Whether it is the default, which configurations do not write (so that the
    /// configurations, and the stage keys, of models from before the option are unchanged).
    pub fn is_apertus(&self) -> bool {
        *self == Self::Apertus
    }

    /// The transformers class a checkpoint exports to.
    pub fn class(self) -> &'static str {
        match self {
            Self::Apertus => "ApertusForCausalLM",
            Self::Llama => "LlamaForCausalLM",
            Self::Afm => "Qwen3ForCausalLM",
        }
    }

    /// transformers' `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            Self::Apertus => "apertus",
            Self::Llama => "llama",
            Self::Afm => "qwen3",
        }
    }

    /// Whether queries and keys are RMS-normalised per head before RoPE.
    pub fn has_qk_norm(self) -> bool {
        matches!(self, Self::Apertus | Self::Afm)
    }

    /// Whether the MLP is SwiGLU (otherwise Apertus' xIELU).
    pub fn is_swiglu(self) -> bool {
        matches!(self, Self::Llama | Self::Afm)
    }

    /// Whether the output layer is the input embedding (no `lm_head.weight` of its own).
    pub fn ties_embeddings(self) -> bool {
        self == Self::Afm
    }
}

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
    /// The decoder's architecture.
    #[serde(default, skip_serializing_if = "Architecture::is_apertus")]
    pub architecture: Architecture,
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
            architecture: Architecture::Apertus,
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

    /// A lower bound on the number of parameters a model of this shape holds: the token
    /// embedding, the final norm, and per layer the query and output projections, two MLP
    /// matrices and two norms. Every architecture has at least these (a SwiGLU MLP has a
    /// third matrix, attention key and value projections, a model without tied embeddings an
    /// output layer). Saturates instead of overflowing.
    pub fn parameters_at_least(&self) -> u128 {
        let n = |v: i64| u128::try_from(v).unwrap_or(0);
        let (hidden, layers) = (n(self.hidden_size), n(self.num_hidden_layers));
        let per_layer = (2 * hidden)
            .saturating_mul(hidden)
            .saturating_add((2 * n(self.intermediate_size)).saturating_mul(hidden).saturating_add(2 * hidden));
        n(self.vocab_size)
            .saturating_mul(hidden)
            .saturating_add(hidden)
            .saturating_add(layers.saturating_mul(per_layer))
    }

    /// Checks that `held` stored weight values (a checkpoint's, already read and verified)
    /// can be this shape's: at least [`ModelConfig::parameters_at_least`]. A model is
    /// allocated from the config before its tensors are matched by name, so a checkpoint
    /// whose config claims 2^40 words or 10^9 layers beside a few weights would otherwise make
    /// libtorch allocate terabytes; with this, what is allocated is at most what was read.
    ///
    /// # Errors
    ///
    /// A message naming both counts.
    pub fn check_fits(&self, held: u128) -> Result<(), String> {
        let needed = self.parameters_at_least();
        if needed > held {
            return Err(format!(
                "its config describes a model of at least {needed} parameters (vocab_size {}, hidden_size {}, \
                 intermediate_size {}, num_hidden_layers {}), but its weights hold {held} values",
                self.vocab_size, self.hidden_size, self.intermediate_size, self.num_hidden_layers
            ));
        }
        Ok(())
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

/// The checkpoint's `config.json`: transformers' `ApertusConfig` or `LlamaConfig` fields for
/// this model (transformers 5's layout: RoPE under `rope_parameters`).
pub fn hf_config(c: &ModelConfig, special: &BTreeMap<&str, u32>) -> Value {
    let mut config = json!({
        "architectures": [c.architecture.class()],
        "model_type": c.architecture.model_type(),
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "hidden_act": if c.architecture.is_swiglu() { "silu" } else { "xielu" },
        "max_position_embeddings": c.max_position_embeddings,
        "initializer_range": c.init_std,
        "rms_norm_eps": c.rms_norm_eps,
        "rope_parameters": { "rope_type": "default", "rope_theta": c.rope_theta },
        "tie_word_embeddings": c.architecture.ties_embeddings(),
        "attention_bias": false,
        "attention_dropout": 0.0,
        "bos_token_id": special.get("bos"),
        "eos_token_id": special.get("eos"),
        "pad_token_id": special.get("pad"),
        "dtype": "float32",
    });
    match c.architecture {
        Architecture::Apertus => {}
        Architecture::Llama => {
            config["mlp_bias"] = json!(false);
            config["head_dim"] = json!(c.head_dim());
        }
        Architecture::Afm => {
            config["head_dim"] = json!(c.head_dim());
            config["use_sliding_window"] = json!(false);
            config["sliding_window"] = Value::Null;
            config["max_window_layers"] = json!(c.num_hidden_layers);
        }
    }
    config
}

/// The model shape a transformers `ApertusConfig` or `LlamaConfig` describes.
pub fn model_config_from_hf(v: &Value) -> Result<ModelConfig, String> {
    let int =
        |key: &str| v.get(key).and_then(Value::as_i64).ok_or_else(|| format!("`{key}` is missing or not an integer"));
    let num = |key: &str, at: &Value| {
        at.get(key).and_then(Value::as_f64).ok_or_else(|| format!("`{key}` is missing or not a number"))
    };
    let architecture = match v.get("model_type").and_then(Value::as_str) {
        Some("apertus") => Architecture::Apertus,
        Some("llama") => Architecture::Llama,
        Some("qwen3") => Architecture::Afm,
        _ => return Err("`model_type` is not `apertus`, `llama` or `qwen3`".into()),
    };
    let string = |key: &str| v.get(key).and_then(Value::as_str);
    let act = if architecture.is_swiglu() { "silu" } else { "xielu" };
    if string("hidden_act") != Some(act) {
        return Err(format!("`hidden_act` is not `{act}`, which `{}` needs", architecture.model_type()));
    }
    let tied = architecture.ties_embeddings();
    if v.get("tie_word_embeddings").and_then(Value::as_bool) != Some(tied) {
        return Err(format!(
            "`tie_word_embeddings` is not {tied}: `{}`'s embeddings are {}",
            architecture.model_type(),
            if tied { "shared" } else { "untied" }
        ));
    }
    let rope = v.get("rope_parameters").ok_or("`rope_parameters` is missing")?;
    let config = ModelConfig {
        architecture,
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
    if architecture != Architecture::Apertus && v.get("head_dim").and_then(Value::as_i64) != Some(config.head_dim()) {
        return Err(format!("`head_dim` is not hidden_size / num_attention_heads = {}", config.head_dim()));
    }
    Ok(config)
}

/// Whether a parameter is a projection matrix of an attention or feed-forward block (the
/// "linear layers" μParam (simple) scales: query, key, value and output projections, the
/// MLP's gate, up and down projections), by its name.
pub fn is_linear_projection(name: &str) -> bool {
    const PROJECTIONS: [&str; 7] = [
        ".self_attn.q_proj.weight",
        ".self_attn.k_proj.weight",
        ".self_attn.v_proj.weight",
        ".self_attn.o_proj.weight",
        ".mlp.gate_proj.weight",
        ".mlp.up_proj.weight",
        ".mlp.down_proj.weight",
    ];
    name.starts_with("model.layers.") && PROJECTIONS.iter().any(|p| name.ends_with(p))
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
        assert!(model_config_from_hf(&bad).unwrap_err().contains("hidden_act"), "a llama with xIELU");
        let mut bad = hf.clone();
        bad["model_type"] = json!("gpt2");
        assert!(model_config_from_hf(&bad).unwrap_err().contains("model_type"));
        let mut bad = hf.clone();
        bad["tie_word_embeddings"] = json!(true);
        assert!(model_config_from_hf(&bad).unwrap_err().contains("tie_word_embeddings"));
        let mut bad = hf;
        bad["num_attention_heads"] = json!(5);
        assert!(model_config_from_hf(&bad).unwrap_err().contains("num_attention_heads"));

        let llama = ModelConfig { architecture: Architecture::Llama, ..c };
        let hf = hf_config(&llama, &BTreeMap::new());
        assert_eq!(
            (hf["architectures"][0].as_str(), hf["hidden_act"].as_str()),
            (Some("LlamaForCausalLM"), Some("silu"))
        );
        assert_eq!(model_config_from_hf(&hf).unwrap(), llama);
        let mut bad = hf;
        bad["head_dim"] = json!(4);
        assert!(model_config_from_hf(&bad).unwrap_err().contains("head_dim"));

        let afm = ModelConfig { architecture: Architecture::Afm, ..llama };
        let hf = hf_config(&afm, &BTreeMap::new());
        assert_eq!(
            (hf["architectures"][0].as_str(), hf["model_type"].as_str(), hf["tie_word_embeddings"].as_bool()),
            (Some("Qwen3ForCausalLM"), Some("qwen3"), Some(true))
        );
        assert_eq!(model_config_from_hf(&hf).unwrap(), afm);
        let mut bad = hf;
        bad["tie_word_embeddings"] = json!(false);
        assert!(model_config_from_hf(&bad).unwrap_err().contains("shared"));
    }

    /// A configuration from before the architecture option serialises as it did: the stage
    /// keys of recorded runs stay what they were.
    #[test]
    fn the_default_architecture_is_not_written() {
        let c = ModelConfig::small(100, 16);
        let v = serde_json::to_value(&c).unwrap();
        assert!(v.get("architecture").is_none(), "{v}");
        let llama = serde_json::to_value(ModelConfig { architecture: Architecture::Llama, ..c }).unwrap();
        assert_eq!(llama["architecture"], "llama");
    }
}
