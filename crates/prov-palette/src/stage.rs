//! `palettize`: a checkpoint's weights palettized ([`crate::palette`]) into a new checkpoint
//! that names its palette description, with the bits per weight in the statistics.
//!
//! Input `model`, a checkpoint (its tensors checked against its record first). Output `model`,
//! a checkpoint with the source's `config.json`, tokenizer, step and data position, the
//! dequantized weights, an empty optimizer state (it starts no training run of its own), and
//! `palette`: the [`Palette`] as canonical JSON. Seed `init` seeds the k-means
//! initialisations. Nothing here uses libtorch: the arithmetic is Rust's `f64`, and the result
//! is the same on every machine.

use std::collections::BTreeMap;

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{
    CheckpointRecord, Determinism, NamedTensors, OutputRef, OutputType, Record, SCHEMA_VERSION, encode_value,
    put_record,
};
use prov_store::{Digest, ObjectKind};
use prov_train::checkpoint::{check_tensors, read_record};
use serde_json::{Value, json};

use crate::palette::{FORMAT, Palette, PaletteConfig, Palettized, Scheme, Tensor, bits_per_weight, palettize_model};

/// Palettizes checkpoints.
pub struct PalettizeStage;

impl Stage for PalettizeStage {
    fn kind(&self) -> &'static str {
        "palettize"
    }
    fn version(&self) -> u32 {
        // 2: one correct rounding to half precision (1 rounded twice on x86).
        2
    }
    fn summary(&self) -> &'static str {
        "quantizes a checkpoint as AFM's on-device model is (k-means lookup tables per 16 rows at 2 or 4 bits per \
         layer to a target bits per weight, 8-bit embeddings), into a checkpoint that records its palette"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: PaletteConfig = parse_params(params)?;
        if !(config.target_bits_per_weight.is_finite() && config.target_bits_per_weight > 0.0) {
            return Err(ConfigError::at(&["target_bits_per_weight"], "must be a positive number")
                .with_hint("the report's on-device model averages 3.7"));
        }
        if config.group_rows == 0 {
            return Err(ConfigError::at(&["group_rows"], "must be at least 1"));
        }
        for (field, bits) in [("high_bits", config.high_bits), ("low_bits", config.low_bits)] {
            if !(1..=8).contains(&bits) {
                return Err(ConfigError::at(&[field], format!("must be 1 to 8 bits, got {bits}")));
            }
        }
        if config.low_bits > config.high_bits {
            return Err(ConfigError::at(&["low_bits"], "must not exceed `high_bits`"));
        }
        if config.max_iterations == 0 || config.restarts == 0 {
            let field = if config.max_iterations == 0 { "max_iterations" } else { "restarts" };
            return Err(ConfigError::at(&[field], "must be at least 1"));
        }
        Ok(serde_json::to_value(config).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("model", vec![OutputType::Checkpoint])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::Checkpoint)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["init"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: PaletteConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let seed = cx.seed("init")?;
        let source = cx.input("model")?.digest;
        let bad = |message: String| StageError::Input { input: "model".into(), message };
        let record = read_record(cx.store, &source).map_err(|e| bad(e.to_string()))?;
        let weights = NamedTensors::from_safetensors(&cx.store.read(&record.weights)?).map_err(bad)?;
        check_tensors(&record, &weights).map_err(|e| bad(e.to_string()))?;
        let tensors: Vec<Tensor<'_>> = weights
            .0
            .iter()
            .map(|(name, (shape, values))| Tensor { name, rows: shape.first().copied().unwrap_or(1).max(1), values })
            .collect();
        let Palettized { values, layers, schemes } =
            palettize_model(&tensors, prov_train::model_config::is_linear_projection, &config, seed).map_err(|e| {
                match e {
                    crate::PaletteError::TargetTooLow { .. } => {
                        StageError::Config(ConfigError::at(&["target_bits_per_weight"], e.to_string()))
                    }
                    other => bad(other.to_string()),
                }
            })?;
        let sizes: BTreeMap<String, (u64, u64)> =
            tensors.iter().map(|t| (t.name.to_owned(), (t.values.len() as u64, t.rows as u64))).collect();
        let projection_bpw = bits_per_weight(&schemes, &sizes, |_, s| matches!(s, Scheme::Palette { .. }));
        let palette = Palette {
            format: FORMAT.into(),
            version: 1,
            source: source.to_string(),
            config,
            seed,
            layers,
            bits_per_weight: projection_bpw,
            model_bits_per_weight: bits_per_weight(&schemes, &sizes, |_, _| true),
            tensors: schemes,
        };
        let quantized = NamedTensors(
            weights.0.iter().map(|(name, (shape, _))| (name.clone(), (shape.clone(), values[name].clone()))).collect(),
        );
        let config_text = String::from_utf8(cx.store.read(&record.config)?).map_err(|e| bad(e.to_string()))?;
        let weights_digest = cx.store.put_bytes(ObjectKind::Blob, &quantized.to_safetensors(&config_text))?;
        let palette_value = serde_json::to_value(&palette).expect("finite numbers encode");
        let palette_digest = cx.store.put_bytes(ObjectKind::Blob, &encode_value(&palette_value))?;
        let empty = cx.store.put_bytes(ObjectKind::Blob, &NamedTensors::default().to_safetensors("{}"))?;
        let rng = cx.store.put_bytes(ObjectKind::Blob, &encode_value(&json!({ "palette_seed": seed })))?;
        let tensor_digests =
            quantized.0.iter().map(|(name, (_, v))| (name.clone(), Digest::of(&NamedTensors::le_bytes(v)))).collect();
        let checkpoint = CheckpointRecord {
            schema: SCHEMA_VERSION,
            step: record.step,
            config: record.config,
            weights: weights_digest,
            tensors: tensor_digests,
            optimizer: empty,
            rng,
            data_position: record.data_position,
            loss: None,
            log: None,
            tokenizer: record.tokenizer,
            palette: Some(palette_digest),
        };
        let digest = put_record(cx.store, &Record::Checkpoint(checkpoint))?;
        let mut out = StageOutput::default();
        out.outputs.insert("model".into(), OutputRef { output_type: OutputType::Checkpoint, digest });
        let squared_error: f64 = palette
            .tensors
            .values()
            .map(|s| match s {
                Scheme::Palette { squared_error, .. } | Scheme::Linear8 { squared_error } => *squared_error,
                Scheme::Float => 0.0,
            })
            .sum();
        out.stats = BTreeMap::from([
            ("bits_per_weight".into(), json!(palette.bits_per_weight)),
            ("model_bits_per_weight".into(), json!(palette.model_bits_per_weight)),
            ("layers".into(), json!(palette.layers)),
            ("squared_error".into(), json!(squared_error)),
            ("palette".into(), json!(palette_digest.to_string())),
        ]);
        Ok(out)
    }
}
