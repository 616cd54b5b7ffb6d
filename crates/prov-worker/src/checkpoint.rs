//! Checkpoints: writing a trainer's state as a checkpoint record's objects
//! ([`CheckpointWriter`], for every training stage), and using a stored checkpoint on its own:
//! loading it with every tensor checked against the digest its record lists, per-token
//! log-probabilities, reproducible sampling, and the Hugging Face folder (`config.json`, `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`)
//! that transformers' `ApertusForCausalLM` loads as it is.

use std::collections::BTreeMap;

use prov_dataset::tokens::SplitMix64;
use prov_exec::StageError;
use prov_manifest::{CheckpointRecord, Finite, SCHEMA_VERSION, encode_value};
use prov_store::{Digest, ObjectKind, Store};
use prov_torch::NamedTensors;
use serde_json::{Value, json};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use prov_train::checkpoint::{CheckpointError, check_tensors, read_record};
use prov_train::model_config::{Architecture, ModelConfig, XIELU_BETA, XIELU_EPS, model_config_from_hf};

use crate::model::{Decoder, KvCache};
use crate::trainer::Trainer;

/// A checkpoint's model, ready to evaluate.
pub struct LoadedCheckpoint {
    /// The record.
    pub record: CheckpointRecord,
    /// The model's shape.
    pub config: ModelConfig,
    /// The stored `config.json`.
    pub hf_config: Value,
    /// The weights as stored.
    pub weights: NamedTensors,
    /// The model (its parameters live in `vs`).
    pub model: Decoder,
    pub(crate) vs: VarStore,
}

/// Loads the language model checkpoint `digest` ([`load_any`]); a reward model (a checkpoint
/// with `reward_heads`) is refused: its heads are not a language model's output layer, so it
/// cannot be sampled, scored, fine-tuned, distilled from or exported as one.
pub fn load(store: &Store, digest: &Digest) -> Result<LoadedCheckpoint, CheckpointError> {
    let loaded = load_any(store, digest)?;
    if loaded.model.is_reward_model() {
        return Err(CheckpointError::Config {
            digest: loaded.record.config,
            message: "it is a reward model (`reward_heads`), not a language model: its score and grade heads are not \
                      an output layer over the vocabulary, so it is used only where a stage takes a reward model"
                .into(),
        });
    }
    Ok(loaded)
}

/// Loads checkpoint `digest`, a language model or a reward model: its config, its weights
/// checked tensor by tensor against the record's digests, and a model holding them (with the
/// heads its `config.json` declares).
pub fn load_any(store: &Store, digest: &Digest) -> Result<LoadedCheckpoint, CheckpointError> {
    let record = read_record(store, digest)?;
    let config_err = |message: String| CheckpointError::Config { digest: record.config, message };
    let hf_config: Value =
        serde_json::from_slice(&store.read(&record.config)?).map_err(|e| config_err(format!("not JSON: {e}")))?;
    let config = model_config_from_hf(&hf_config).map_err(config_err)?;
    let weights_err = |message: String| CheckpointError::Weights { digest: record.weights, message };
    let weights = NamedTensors::from_safetensors(&store.read(&record.weights)?).map_err(weights_err)?;
    check_tensors(&record, &weights)?;
    config.check_fits(weights.0.values().map(|(_, v)| v.len() as u128).sum()).map_err(weights_err)?;
    let heads = prov_train::reward_model::RewardHeads::from_hf_config(&hf_config).map_err(config_err)?;
    let vs = VarStore::new(prov_torch::device());
    let mut model = Decoder::new(&vs.root(), &config);
    if let Some(heads) = &heads {
        model.attach_reward_heads(&vs.root(), heads);
    }
    let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&String> = variables.iter().map(|(n, _)| n).collect();
    if names != weights.0.keys().collect::<Vec<_>>() {
        return Err(weights_err(format!(
            "its tensors {:?} are not the model's {names:?}",
            weights.0.keys().collect::<Vec<_>>()
        )));
    }
    tch::no_grad(|| {
        for (name, t) in &mut variables {
            crate::copy_stored(t, name, &weights.0[name.as_str()])?;
        }
        Ok::<(), String>(())
    })
    .map_err(weights_err)?;
    Ok(LoadedCheckpoint { record, config, hf_config, weights, model, vs })
}

impl LoadedCheckpoint {
    /// The logits `[time, vocab]` for one sequence of ids, in float32.
    pub fn logits(&self, ids: &[i64]) -> Tensor {
        let input = Tensor::from_slice(ids).view([1, -1]).to_device(self.vs.device());
        tch::no_grad(|| self.model.forward(&input)).squeeze_dim(0).to_kind(Kind::Float).to_device(Device::Cpu)
    }

    /// `log p(ids[t+1] | ids[..=t])` for each `t`, from float32 log-softmax.
    pub fn log_probs(&self, ids: &[i64]) -> Vec<f64> {
        if ids.len() < 2 {
            return Vec::new();
        }
        let logp = self.logits(&ids[..ids.len() - 1]).log_softmax(-1, Kind::Float);
        let next = Tensor::from_slice(&ids[1..]).view([-1, 1]);
        let picked = logp.gather(1, &next, false).view([-1]);
        prov_torch::f32_values(&picked).into_iter().map(f64::from).collect()
    }

    /// Continues `prompt` by up to `max_new` tokens, stopping after `stop` if given. Each token
    /// is drawn from the softmax of the logits divided by `temperature` (computed in f64 from
    /// the float32 logits), by inverting its cumulative distribution at a uniform number from
    /// `SplitMix64` seeded with `seed`; temperature 0 takes the most likely token (lowest id on
    /// ties). The same checkpoint, prompt, seed and envelope give the same tokens.
    pub fn sample(&self, prompt: &[i64], max_new: usize, temperature: f64, seed: u64, stop: Option<i64>) -> Vec<i64> {
        self.sample_batch(prompt, &[seed], max_new, temperature, stop).remove(0)
    }

    /// Continues one `prompt` in `seeds.len()` ways at once, as one batch: row `r` draws its
    /// tokens with [`LoadedCheckpoint::sample`]'s rule from its own `SplitMix64` stream seeded
    /// with `seeds[r]`, and stops after `stop` or `max_new` tokens. A row that has stopped keeps
    /// its place in the batch (so the others compute as before) and draws nothing more. The
    /// same checkpoint, prompt, seeds and envelope give the same tokens.
    ///
    /// The prompt is computed once and each new token is one cached step
    /// ([`crate::model::Decoder::forward_cached`]). A row never sees more than the model's
    /// `max_position_embeddings` tokens: once it would, each step recomputes the last that
    /// many tokens without the cache.
    pub fn sample_batch(
        &self,
        prompt: &[i64],
        seeds: &[u64],
        max_new: usize,
        temperature: f64,
        stop: Option<i64>,
    ) -> Vec<Vec<i64>> {
        let window = self.config.max_position_embeddings as usize;
        generate(&self.model, self.vs.device(), window, prompt, seeds, max_new, temperature, stop)
    }
}

/// [`LoadedCheckpoint::sample_batch`] on `model`, whose rows see at most `window` tokens.
#[allow(clippy::too_many_arguments)]
pub(crate) fn generate(
    model: &Decoder,
    device: Device,
    window: usize,
    prompt: &[i64],
    seeds: &[u64],
    max_new: usize,
    temperature: f64,
    stop: Option<i64>,
) -> Vec<Vec<i64>> {
    let n = seeds.len();
    let mut rngs: Vec<SplitMix64> = seeds.iter().map(|&s| SplitMix64(s)).collect();
    let mut rows: Vec<Vec<i64>> = vec![prompt.to_vec(); n];
    let mut done = vec![false; n];
    let rows_i64 = i64::try_from(n).expect("a batch size fits in i64");
    let mut cache = KvCache::default();
    for _ in 0..max_new {
        if done.iter().all(|&d| d) {
            break;
        }
        let len = rows[0].len();
        // The tokens the cache does not hold yet: the whole (windowed) rows at first or
        // past the window, else the last token of each.
        let fresh = if cache.is_empty() || len > window {
            cache = KvCache::default();
            len - len.saturating_sub(window)
        } else {
            1
        };
        let flat: Vec<i64> = rows.iter().flat_map(|r| r[len - fresh..].iter().copied()).collect();
        let input = Tensor::from_slice(&flat).view([rows_i64, -1]).to_device(device);
        let logits = tch::no_grad(|| model.forward_cached(&input, &mut cache));
        let last = logits.select(1, -1).to_kind(Kind::Float).to_device(Device::Cpu);
        for (r, row) in rows.iter_mut().enumerate() {
            if done[r] {
                // Padding that keeps the batch rectangular; cut off below.
                row.push(stop.unwrap_or(0));
                continue;
            }
            let values = prov_torch::f32_values(&last.get(i64::try_from(r).expect("a row index fits in i64")));
            let next = pick(&values, temperature, rngs[r].next_f64());
            row.push(next);
            done[r] = Some(next) == stop;
        }
    }
    rows.into_iter()
        .map(|row| {
            let mut new = row[prompt.len()..].to_vec();
            if let Some(end) = stop.and_then(|s| new.iter().position(|&t| t == s)) {
                new.truncate(end + 1);
            }
            new
        })
        .collect()
}

/// The token a uniform `u` in `[0, 1)` selects from `logits / temperature`.
fn pick(logits: &[f32], temperature: f64, u: f64) -> i64 {
    let id = |i: usize| i64::try_from(i).expect("a vocabulary index fits in i64");
    let argmax = || {
        let mut best = 0;
        for (i, &v) in logits.iter().enumerate() {
            if v > logits[best] {
                best = i;
            }
        }
        id(best)
    };
    if temperature <= 0.0 {
        return argmax();
    }
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let weights: Vec<f64> = logits.iter().map(|&v| ((f64::from(v) - max) / temperature).exp()).collect();
    let total: f64 = weights.iter().sum();
    let target = u * total;
    let mut acc = 0.0;
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        if target < acc {
            return id(i);
        }
    }
    argmax()
}

/// The files of a Hugging Face model folder for checkpoint `digest`, by file name.
///
/// `model.safetensors` holds the weights under their stored names plus, for the Apertus
/// architecture, each layer's xIELU buffers (`beta`, `eps`, fixed constants that transformers
/// keeps as persistent buffers), with the metadata `format: pt` that transformers requires. `tokenizer_config.json` names
/// the fast tokenizer class and the special tokens, read from `tokenizer.json`, and holds the
/// chat template when the tokenizer has the chat tokens.
pub fn hf_folder(store: &Store, digest: &Digest) -> Result<BTreeMap<&'static str, Vec<u8>>, CheckpointError> {
    let loaded = load(store, digest)?;
    let tokenizer_digest = loaded.record.tokenizer.ok_or(CheckpointError::NoTokenizer(*digest))?;
    let tokenizer = store.read(&tokenizer_digest)?;
    // The folder promises `from_pretrained`: a tokenizer that is not a `tokenizer.json` (an
    // object with its `model`) would be written under that name and fail there.
    let parsed: Value = serde_json::from_slice(&tokenizer)
        .map_err(|e| CheckpointError::NotATokenizer { digest: tokenizer_digest, message: format!("not JSON: {e}") })?;
    if !parsed.get("model").is_some_and(Value::is_object) {
        return Err(CheckpointError::NotATokenizer {
            digest: tokenizer_digest,
            message: "no `model` object, which every tokenizer.json has".into(),
        });
    }
    let mut tensors = loaded.weights.clone();
    let layers = if loaded.config.architecture == Architecture::Apertus { loaded.config.num_hidden_layers } else { 0 };
    for layer in 0..layers {
        for (buffer, value) in [("beta", XIELU_BETA), ("eps", XIELU_EPS)] {
            tensors.0.insert(format!("model.layers.{layer}.mlp.act_fn.{buffer}"), (Vec::new(), vec![value as f32]));
        }
    }
    let added = added_tokens(&tokenizer);
    let special = special_tokens(&added, &loaded.hf_config);
    let mut tokenizer_config = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": loaded.config.max_position_embeddings,
        "bos_token": special.get("bos_token_id"),
        "eos_token": special.get("eos_token_id"),
        "pad_token": special.get("pad_token_id"),
        "add_bos_token": false,
        "add_eos_token": false,
    });
    // A tokenizer with the chat tokens (`tokenizer` stage version 2) gets the chat template,
    // so that `apply_chat_template` renders what `prov` trains on.
    let has = |token: &str| added.iter().any(|t| t.get("content").and_then(Value::as_str) == Some(token));
    if prov_tokenizer::chat::CHAT_TOKENS.iter().all(|(_, token)| has(token)) {
        tokenizer_config["chat_template"] = json!(prov_tokenizer::chat::HF_CHAT_TEMPLATE);
    }
    let pretty = |v: &Value| {
        let mut s = serde_json::to_string_pretty(v).expect("JSON values encode");
        s.push('\n');
        s.into_bytes()
    };
    Ok(BTreeMap::from([
        ("config.json", pretty(&loaded.hf_config)),
        ("model.safetensors", tensors.to_safetensors_with(&[("format", "pt")])),
        ("tokenizer.json", tokenizer),
        ("tokenizer_config.json", pretty(&tokenizer_config)),
    ]))
}

/// `tokenizer.json`'s `added_tokens` (none when it cannot be read).
fn added_tokens(tokenizer: &[u8]) -> Vec<Value> {
    let parsed: Value = serde_json::from_slice(tokenizer).unwrap_or(Value::Null);
    parsed.get("added_tokens").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The contents of the special tokens the config names by id, from `tokenizer.json`'s
/// `added_tokens`, keyed by the config's field (`bos_token_id`, ...).
fn special_tokens(added: &[Value], config: &Value) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    for field in ["bos_token_id", "eos_token_id", "pad_token_id"] {
        let Some(id) = config.get(field).and_then(Value::as_u64) else { continue };
        if let Some(content) = added
            .iter()
            .find(|t| t.get("id").and_then(Value::as_u64) == Some(id))
            .and_then(|t| t.get("content").and_then(Value::as_str))
        {
            out.insert(field, content.to_owned());
        }
    }
    out
}

/// Writes a trainer's state as a checkpoint record's objects.
pub(crate) struct CheckpointWriter<'a> {
    pub(crate) store: &'a Store,
    /// The stored `config.json`.
    pub(crate) config: Digest,
    pub(crate) tokenizer: Digest,
    /// The random state a resumed run needs, as JSON.
    pub(crate) rng: Value,
}

impl CheckpointWriter<'_> {
    /// Stores the weights, optimizer state, RNG state and log; returns the record naming them.
    pub(crate) fn record(&self, trainer: &Trainer, batch_size: u64) -> Result<CheckpointRecord, StageError> {
        // A diverged run is not a result: no checkpoint, and so no output, holds weights
        // trained through a non-finite loss or gradient.
        if let Some(bad) = trainer.log().iter().find(|l| !(l.loss.is_finite() && l.grad_norm.is_finite())) {
            return Err(StageError::Config(
                prov_exec::ConfigError::at(
                    &["lr"],
                    format!(
                        "training diverged: at step {} the loss is {} and the gradient norm {}",
                        bad.step, bad.loss, bad.grad_norm
                    ),
                )
                .with_hint("lower `lr`, or clip harder (`clip`); nothing of this run was recorded"),
            ));
        }
        let store = self.store;
        let weights = trainer.weights();
        let config_text = String::from_utf8(store.read(&self.config)?).expect("canonical JSON is UTF-8");
        let weights_digest = store.put_bytes(ObjectKind::Blob, &weights.to_safetensors(&config_text))?;
        let optimizer_digest = store.put_bytes(ObjectKind::Blob, &trainer.optimizer_state().to_safetensors("{}"))?;
        let rng_digest = store.put_bytes(ObjectKind::Blob, &encode_value(&self.rng))?;
        let log_digest = store.put_bytes(ObjectKind::Blob, &trainer.log_bytes())?;
        let tensors = weights
            .0
            .iter()
            .map(|(name, (_, values))| (name.clone(), Digest::of(&NamedTensors::le_bytes(values))))
            .collect();
        let last = trainer.log().last().expect("a checkpoint follows a step");
        Ok(CheckpointRecord {
            schema: SCHEMA_VERSION,
            step: trainer.step(),
            config: self.config,
            weights: weights_digest,
            tensors,
            optimizer: optimizer_digest,
            rng: rng_digest,
            data_position: trainer.step() * batch_size,
            loss: Finite::new(last.loss),
            log: Some(log_digest),
            tokenizer: Some(self.tokenizer),
            palette: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_torch::TorchTensors as _;

    #[test]
    fn cached_generation_follows_the_windowed_full_forward() {
        let config =
            ModelConfig { intermediate_size: 48, rope_theta: 10_000.0, init_std: 0.5, ..ModelConfig::small(40, 12) };
        tch::manual_seed(11);
        let vs = VarStore::new(Device::Cpu);
        let model = Decoder::new(&vs.root(), &config);
        let prompt = [3_i64, 17, 5, 29, 8];
        // 20 new tokens: the rows outgrow the window of 12 after 7.
        let cached = generate(&model, Device::Cpu, 12, &prompt, &[1, 2], 20, 0.0, None);
        let mut ids = prompt.to_vec();
        for _ in 0..20 {
            let seen = &ids[ids.len().saturating_sub(12)..];
            let input = Tensor::from_slice(seen).view([1, -1]);
            let logits = tch::no_grad(|| model.forward(&input)).select(1, -1).squeeze_dim(0);
            ids.push(pick(&prov_torch::f32_values(&logits), 0.0, 0.0));
        }
        assert_eq!(cached[0], ids[prompt.len()..], "greedy decoding with the cache");
        assert_eq!(cached[1], cached[0], "temperature 0 ignores the seed");
        // Sampled rows differ by seed and repeat for the same seed; a stop token ends a row.
        let sampled = generate(&model, Device::Cpu, 12, &prompt, &[1, 2], 20, 1.0, None);
        assert_ne!(sampled[0], sampled[1]);
        assert_eq!(generate(&model, Device::Cpu, 12, &prompt, &[2], 20, 1.0, None)[0], sampled[1]);
        let stop = sampled[0][3];
        let stopped = generate(&model, Device::Cpu, 12, &prompt, &[1], 20, 1.0, Some(stop));
        let first = sampled[0].iter().position(|&t| t == stop).unwrap();
        assert_eq!(stopped[0], sampled[0][..=first]);
    }

    /// `parameters_at_least` is a lower bound, and a close one, on the parameters of every
    /// architecture's model: what the guard against a config larger than its weights reads.
    #[test]
    fn the_parameter_lower_bound_holds_for_every_architecture() {
        for architecture in [Architecture::Apertus, Architecture::Llama, Architecture::Afm] {
            for layers in [1, 3] {
                let config = ModelConfig { architecture, num_hidden_layers: layers, ..ModelConfig::small(50, 16) };
                let vs = VarStore::new(Device::Cpu);
                let _model = Decoder::new(&vs.root(), &config);
                let held: u128 = vs.variables().values().map(|t| t.numel() as u128).sum();
                let bound = config.parameters_at_least();
                assert!(bound <= held && bound * 2 >= held, "{architecture:?}, {layers} layers: {bound} of {held}");
                assert!(config.check_fits(held).is_ok() && config.check_fits(bound - 1).is_err());
            }
        }
    }

    /// Stores a checkpoint record of `config` with `weights` and a tokenizer of `tokenizer`'s
    /// bytes, every object what the record lists; returns the record's digest.
    fn stored(store: &Store, config: &ModelConfig, weights: &NamedTensors, tokenizer: &[u8]) -> Digest {
        let hf = prov_train::model_config::hf_config(config, &BTreeMap::new());
        let put = |bytes: &[u8]| store.put_bytes(ObjectKind::Blob, bytes).unwrap();
        let tensors =
            weights.0.iter().map(|(name, (_, values))| (name.clone(), Digest::of(&NamedTensors::le_bytes(values))));
        let record = CheckpointRecord {
            schema: SCHEMA_VERSION,
            step: 1,
            config: put(&encode_value(&hf)),
            weights: put(&weights.to_safetensors("{}")),
            tensors: tensors.collect(),
            optimizer: put(b"o"),
            rng: put(b"r"),
            data_position: 0,
            loss: Finite::new(1.0),
            log: None,
            tokenizer: Some(put(tokenizer)),
            palette: None,
        };
        prov_manifest::put_record(store, &prov_manifest::Record::Checkpoint(record)).unwrap()
    }

    /// A checkpoint whose `config.json` claims 2^40 words beside no weights at all (every
    /// file hashing to its record's digest) is refused before a model is allocated: libtorch
    /// was asked for 140 TB and the worker died (an adversarial review's checkpoint).
    #[test]
    fn a_checkpoint_whose_config_outgrows_its_weights_is_refused_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let config = ModelConfig { vocab_size: 1 << 40, ..ModelConfig::small(50, 16) };
        let digest = stored(&store, &config, &NamedTensors(BTreeMap::new()), b"{}");
        let Err(e) = load_any(&store, &digest) else { panic!("loaded") };
        assert!(e.to_string().contains("at least 35184372101280 parameters"), "{e}");
        assert!(e.to_string().contains("its weights hold 0 values"), "{e}");
    }

    /// The Hugging Face folder promises `from_pretrained`: a checkpoint whose tokenizer is
    /// not a `tokenizer.json` is refused rather than written under that name.
    #[test]
    fn a_tokenizer_that_is_not_a_tokenizer_json_is_not_exported() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let config = ModelConfig::small(50, 16);
        let vs = VarStore::new(Device::Cpu);
        let _model = Decoder::new(&vs.root(), &config);
        let weights = NamedTensors::from_tensors(vs.variables().iter().map(|(n, t)| (n.clone(), t)));
        let json = br#"{"model": {"type": "BPE"}, "added_tokens": []}"#;
        assert!(hf_folder(&store, &stored(&store, &config, &weights, json)).is_ok());
        for (bytes, said) in [(&b"\x00binary"[..], "not JSON"), (b"{\"vocab\": {}}", "no `model` object")] {
            let Err(e) = hf_folder(&store, &stored(&store, &config, &weights, bytes)) else { panic!("exported") };
            assert!(matches!(e, CheckpointError::NotATokenizer { .. }) && e.to_string().contains(said), "{e}");
        }
    }

    #[test]
    fn picking_follows_the_distribution() {
        let logits = [0.0f32, (3.0f64).ln() as f32];
        // p = (0.25, 0.75): u below 0.25 picks 0.
        assert_eq!(pick(&logits, 1.0, 0.2), 0);
        assert_eq!(pick(&logits, 1.0, 0.3), 1);
        assert_eq!(pick(&logits, 0.0, 0.0), 1);
        assert_eq!(pick(&[1.0, 1.0], 0.0, 0.9), 0, "ties go to the lowest id");
    }
}
