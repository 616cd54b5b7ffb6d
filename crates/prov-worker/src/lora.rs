//! Running a `lora` stage (its kind and the PEFT format are `prov_train::lora`'s): an adapter
//! trained on `sft`'s rows on top of the frozen base checkpoint and stored as the two files
//! PEFT reads; and reading such an adapter back onto a loaded checkpoint (`prov eval
//! --adapter`).

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun};
use prov_manifest::{
    NamedTensors, OutputRef, OutputType, Record, TreeEntry, TreeRecord, encode_value, get_typed, put_record,
};
use prov_store::{Digest, ObjectKind, Store};
use prov_train::lora::{LoraParams, OWN, PEFT_PREFIX, adapter_config, defaults};
use prov_train::post;
use serde_json::{Value, json};

use crate::checkpoint::LoadedCheckpoint;
use crate::fine_tuning;
use crate::sft::ChatRows;
use crate::trainer::Trainer;

/// The adapter's two files, as PEFT names them.
pub const CONFIG_FILE: &str = "adapter_config.json";
/// The adapter's tensors.
pub const WEIGHTS_FILE: &str = "adapter_model.safetensors";

/// Runs `lora` stages.
pub struct LoraRun;

impl StageRun for LoraRun {
    fn kind(&self) -> &'static str {
        "lora"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let (params, own, _) =
            post::parse_stage_params::<LoraParams>(cx.config, OWN, &defaults()).map_err(StageError::Config)?;
        let (order_seed, init_seed) = (cx.seed("order")?, cx.seed("init")?);
        let base = cx.input("model")?.digest;
        let start = fine_tuning::load_checkpoint(cx, "model")?;
        let data = ChatRows::read(cx, &start, &own.rows(), &params, order_seed)?;
        let mut model_config = start.config.clone();
        model_config.max_position_embeddings = i64::try_from(data.seq_len).expect("a length fits in i64");
        prov_torch::pin_threads(params.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let shape = (i64::from(own.rank), own.alpha());
        let mut trainer = Trainer::lora(&model_config, &params.loop_config(), &start.weights, shape, init_seed)
            .map_err(|message| StageError::Input { input: "model".into(), message })?;
        drop(start);
        let time = i64::try_from(data.seq_len).expect("a length fits in i64");
        for step_rows in data.rows.chunks(params.batch_size as usize) {
            let inputs: Vec<i64> = step_rows.iter().flat_map(|(i, _)| i.iter().copied()).collect();
            let labels: Vec<i64> = step_rows.iter().flat_map(|(_, l)| l.iter().copied()).collect();
            trainer.train_on_labels(&inputs, &labels, time, 0);
        }
        let files = adapter_files(&trainer.weights(), own.rank, own.alpha(), &base);
        let adapter = put_tree(cx.store, &files)?;
        let log = cx.store.put_bytes(ObjectKind::Blob, &trainer.log_bytes())?;
        let steps = trainer.log();
        let mut out = StageOutput::default();
        out.outputs.insert("adapter".into(), OutputRef { output_type: OutputType::Tree, digest: adapter });
        out.outputs.insert("log".into(), OutputRef { output_type: OutputType::File, digest: log });
        let trainable: usize = trainer.weights().0.values().map(|(_, v)| v.len()).sum();
        out.stats = BTreeMap::from([
            ("steps".into(), json!(trainer.step())),
            ("first_loss".into(), json!(steps[0].loss)),
            ("final_loss".into(), json!(steps[steps.len() - 1].loss)),
            ("tokens_trained".into(), json!(steps.iter().map(|l| l.tokens).sum::<u64>())),
            ("rank".into(), json!(own.rank)),
            ("alpha".into(), json!(own.alpha())),
            ("adapter_parameters".into(), json!(trainable)),
        ]);
        out.stats.extend(data.stats);
        Ok(out)
    }
}

/// The adapter's files: its configuration (canonical JSON) and its tensors under PEFT's names
/// (`base_model.model.` before the model's), float32.
pub fn adapter_files(weights: &NamedTensors, rank: u32, alpha: f64, base: &Digest) -> Vec<(&'static str, Vec<u8>)> {
    let renamed = NamedTensors(weights.0.iter().map(|(n, t)| (format!("{PEFT_PREFIX}{n}"), t.clone())).collect());
    vec![
        (CONFIG_FILE, encode_value(&adapter_config(rank, alpha, &base.to_string()))),
        (WEIGHTS_FILE, renamed.to_safetensors_with(&[("format", "pt")])),
    ]
}

/// Stores files as a tree record.
fn put_tree(store: &Store, files: &[(&str, Vec<u8>)]) -> Result<Digest, StageError> {
    let mut entries = Vec::with_capacity(files.len());
    for (name, bytes) in files {
        let digest = store.put_bytes(ObjectKind::Blob, bytes)?;
        let path = name.parse().expect("the adapter's file names are valid paths");
        entries.push(TreeEntry { path, digest, size: bytes.len() as u64, executable: false });
    }
    entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    Ok(put_record(store, &Record::Tree(TreeRecord { schema: prov_manifest::SCHEMA_VERSION, entries }))?)
}

/// An adapter as stored: its rank, alpha and tensors under the model's names.
pub struct Adapter {
    /// The rank.
    pub rank: i64,
    /// Alpha.
    pub alpha: f64,
    /// `A` and `B` of each projection, by the model's names (`model.layers.0.self_attn.q_proj.lora_A.weight`).
    pub tensors: NamedTensors,
    /// The base it was trained on, as its configuration names it.
    pub base: Option<String>,
}

impl Adapter {
    /// Reads the adapter tree `digest`: PEFT's two files, a LoRA configuration, tensors under
    /// PEFT's prefix.
    pub fn read(store: &Store, digest: &Digest) -> Result<Self, String> {
        let tree = get_typed::<TreeRecord>(store, digest).map_err(|e| format!("adapter `{digest}`: {e}"))?;
        let file = |name: &str| -> Result<Vec<u8>, String> {
            let entry = tree.entries.iter().find(|e| e.path.as_str() == name).ok_or_else(|| {
                format!("adapter `{digest}` has no `{name}`: an adapter is the `adapter` output of a `lora` stage")
            })?;
            store.read(&entry.digest).map_err(|e| e.to_string())
        };
        let config: Value = serde_json::from_slice(&file(CONFIG_FILE)?).map_err(|e| format!("{CONFIG_FILE}: {e}"))?;
        if config.get("peft_type") != Some(&json!("LORA")) {
            return Err(format!("{CONFIG_FILE}: not a LoRA adapter (`peft_type` is {})", config["peft_type"]));
        }
        let rank = config["r"].as_i64().filter(|r| *r > 0).ok_or(format!("{CONFIG_FILE}: no positive `r`"))?;
        let alpha =
            config["lora_alpha"].as_f64().filter(|a| a.is_finite()).ok_or(format!("{CONFIG_FILE}: no `lora_alpha`"))?;
        // Variants this scorer does not compute would be scored silently wrong: refused.
        for (key, plain) in [
            ("use_rslora", json!(false)),
            ("use_dora", json!(false)),
            ("fan_in_fan_out", json!(false)),
            ("bias", json!("none")),
        ] {
            if config.get(key).is_some_and(|v| !v.is_null() && *v != plain) {
                return Err(format!("{CONFIG_FILE}: `{key}` is {}; only {plain} is supported", config[key]));
            }
        }
        let stored =
            NamedTensors::from_safetensors(&file(WEIGHTS_FILE)?).map_err(|e| format!("{WEIGHTS_FILE}: {e}"))?;
        let targets: Vec<&str> = config["target_modules"]
            .as_array()
            .map(|t| t.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut tensors = BTreeMap::new();
        for (name, (shape, values)) in stored.0 {
            let own =
                name.strip_prefix(PEFT_PREFIX).ok_or(format!("{WEIGHTS_FILE}: `{name}` lacks `{PEFT_PREFIX}`"))?;
            // `A` is `[r, in]`, `B` `[out, r]`: the rank is in the stored shapes, checked here
            // before any matrix of that rank is allocated.
            let rank_at = if own.ends_with(".lora_A.weight") { shape.first() } else { shape.get(1) };
            if shape.len() != 2 || rank_at.copied() != usize::try_from(rank).ok() {
                return Err(format!("{WEIGHTS_FILE}: `{name}` has shape {shape:?}, not a rank-{rank} LoRA matrix"));
            }
            let module = own.rsplit('.').nth(2).unwrap_or_default();
            if !targets.contains(&module) {
                return Err(format!(
                    "{WEIGHTS_FILE}: `{name}` is for `{module}`, which `target_modules` does not list"
                ));
            }
            tensors.insert(own.to_owned(), (shape, values));
        }
        let base = config["base_model_name_or_path"].as_str().map(str::to_owned);
        Ok(Self { rank, alpha, tensors: NamedTensors(tensors), base })
    }
}

impl LoadedCheckpoint {
    /// Attaches `adapter` to the model: every projection gets its `A` and `B`, which must be
    /// exactly the adapter's tensors, with their shapes.
    pub fn attach_adapter(&mut self, adapter: &Adapter) -> Result<(), String> {
        let mut created = self.model.attach_lora(&self.vs.root(), adapter.rank, adapter.alpha);
        created.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&String> = created.iter().map(|(n, _)| n).collect();
        if names != adapter.tensors.0.keys().collect::<Vec<_>>() {
            return Err(format!(
                "the adapter holds {:?}, a rank-{} adapter of this model has {names:?}",
                adapter.tensors.0.keys().collect::<Vec<_>>(),
                adapter.rank
            ));
        }
        tch::no_grad(|| {
            for (name, t) in &mut created {
                crate::copy_stored(t, name, &adapter.tensors.0[name.as_str()])?;
            }
            Ok(())
        })
    }
}
