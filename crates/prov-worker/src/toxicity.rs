//! Training the toxicity classifier with libtorch: the `toxicity-train` stage.
//!
//! As in the Apertus report, one 2-layer MLP per language on document embeddings, trained on
//! labelled data balanced 50/50 with 10% held out, for 6 epochs, keeping the epoch with the
//! best validation loss. The embedding is `prov_toxicity::embed`'s hashed character n-grams and the
//! weights are stored in the layout `prov_toxicity::model` reads: the `toxicity` filter
//! scores with them in plain Rust, so only this stage depends on libtorch and its envelope.
//!
//! Every choice that could vary is pinned by the stage's seed:
//! - balancing keeps, of each class, the examples with the smallest keyed hash
//!   ([`prov_dataset::sample_key`]) under the language's `balance` seed;
//! - the held-out tenth is the smallest keys under the `holdout` seed;
//! - each epoch visits the training examples in key order under that epoch's seed;
//! - libtorch's CPU generator is seeded with the language's `init` seed before the layers are
//!   created (their initialisation is its only use).
//!
//! The optimizer is Adam without weight decay, written out here (rather than tch's) so that
//! its state at the kept epoch can be stored with the checkpoint.

use std::collections::BTreeMap;

use prov_dataset::sample_key;
use prov_dataset::{Document, read_shard};
use prov_exec::{StageContext, StageError, StageOutput, StageRun, parse_params};
use prov_manifest::{
    CheckpointRecord, DatasetRecord, OutputRef, OutputType, Record, SCHEMA_VERSION, derive_seed, encode_value,
    put_record,
};
use prov_store::{Digest, ObjectKind};
use prov_torch::{NamedTensors, TorchTensors as _};
use prov_toxicity::TrainConfig;
use prov_toxicity::model::{ARCHITECTURE, ClassifierConfig, classifier_language};
use serde_json::{Value, json};
use tch::nn::{self, Module};
use tch::{Device, Kind, Reduction, Tensor};

const ADAM_BETAS: (f64, f64) = (0.9, 0.999);
const ADAM_EPS: f64 = 1e-8;

/// One labelled example.
#[derive(Debug, Clone)]
struct Example {
    id: String,
    features: Vec<(u32, f32)>,
    toxic: bool,
}

/// Reads the label of a document: `Ok(None)` when it is neither positive nor negative.
fn label(doc: &Document, config: &TrainConfig) -> Result<bool, String> {
    let meta: Value = doc
        .metadata
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .ok_or_else(|| format!("document `{}` has no metadata field `{}`", doc.id, config.label_field))?;
    let value = meta
        .get(&config.label_field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("document `{}` has no string field `{}`", doc.id, config.label_field))?;
    if config.positive.iter().any(|p| p == value) {
        Ok(true)
    } else if config.negative.iter().any(|n| n == value) {
        Ok(false)
    } else {
        Err(format!(
            "document `{}` has label `{value}`, neither positive ({}) nor negative ({})",
            doc.id,
            config.positive.join(", "),
            config.negative.join(", ")
        ))
    }
}

/// Orders examples by their keyed hash under `seed` (ties, impossible in practice, by id).
fn keyed_order(examples: &mut [Example], seed: u64) {
    examples.sort_by_cached_key(|e| (sample_key(seed, &e.id), e.id.clone()));
}

/// The balanced training and validation sets of one language.
fn split(mut examples: Vec<Example>, config: &TrainConfig, seed: u64) -> (Vec<Example>, Vec<Example>) {
    let (mut toxic, mut clean): (Vec<Example>, Vec<Example>) = examples.drain(..).partition(|e| e.toxic);
    let n = toxic.len().min(clean.len());
    keyed_order(&mut toxic, derive_seed(seed, "balance", "toxic"));
    keyed_order(&mut clean, derive_seed(seed, "balance", "clean"));
    toxic.truncate(n);
    clean.truncate(n);
    let mut all: Vec<Example> = toxic.into_iter().chain(clean).collect();
    keyed_order(&mut all, derive_seed(seed, "holdout", ""));
    let held = ((all.len() as f64) * config.holdout).ceil() as usize;
    let train = all.split_off(held.min(all.len()));
    (train, all)
}

/// A dense `[rows, dim]` batch and its `[rows, 1]` labels.
fn batch(examples: &[&Example], dim: usize) -> (Tensor, Tensor) {
    let mut x = vec![0f32; examples.len() * dim];
    for (r, e) in examples.iter().enumerate() {
        for &(i, v) in &e.features {
            x[r * dim + i as usize] = v;
        }
    }
    let y: Vec<f32> = examples.iter().map(|e| if e.toxic { 1.0 } else { 0.0 }).collect();
    let rows = i64::try_from(examples.len()).expect("a batch fits in i64");
    let cols = i64::try_from(dim).expect("dim is at most 2^24");
    (Tensor::from_slice(&x).view([rows, cols]), Tensor::from_slice(&y).view([rows, 1]))
}

/// Adam's state for one parameter.
struct Moments {
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
}

/// What training one language produced.
struct Trained {
    weights: NamedTensors,
    optimizer: NamedTensors,
    report: Value,
    steps: u64,
    examples_seen: u64,
}

/// Trains one language's MLP and returns its weights at the best validation loss.
fn train_language(
    lang: &str,
    train: &[Example],
    validation: &[Example],
    config: &TrainConfig,
    seed: u64,
) -> Result<Trained, String> {
    let dim = config.embedding.dim as usize;
    let hidden = i64::from(config.hidden);
    // libtorch takes an i64 seed: the derived seed's bits, reinterpreted.
    tch::manual_seed(i64::from_le_bytes(derive_seed(seed, "init", "").to_le_bytes()));
    let vs = nn::VarStore::new(Device::Cpu);
    let model = nn::seq()
        .add(nn::linear(vs.root() / "fc1", i64::from(config.embedding.dim), hidden, nn::LinearConfig::default()))
        .add_fn(Tensor::relu)
        .add(nn::linear(vs.root() / "fc2", hidden, 1, nn::LinearConfig::default()));
    // tch keeps variables in a HashMap: fix their order by name once.
    let mut params: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let mut moments: Vec<Moments> =
        params.iter().map(|(_, p)| Moments { exp_avg: p.zeros_like(), exp_avg_sq: p.zeros_like() }).collect();

    let val_refs: Vec<&Example> = validation.iter().collect();
    let (val_x, val_y) = batch(&val_refs, dim);
    let (b1, b2) = ADAM_BETAS;
    let mut step: i32 = 0;
    let mut best: Option<(f64, usize, NamedTensors, NamedTensors, u64, u64)> = None;
    let mut epochs = Vec::new();
    let mut examples_seen: u64 = 0;
    for epoch in 0..config.epochs as usize {
        let mut order: Vec<Example> = train.to_vec();
        keyed_order(&mut order, derive_seed(seed, "epoch", &epoch.to_string()));
        let mut loss_sum = 0f64;
        let mut batches = 0u64;
        for chunk in order.chunks(config.batch_size as usize) {
            let refs: Vec<&Example> = chunk.iter().collect();
            let (x, y) = batch(&refs, dim);
            for (_, p) in &params {
                let mut g = p.grad();
                if g.defined() {
                    let _ = g.zero_();
                }
            }
            let loss = model.forward(&x).binary_cross_entropy_with_logits::<Tensor>(&y, None, None, Reduction::Mean);
            loss.backward();
            step += 1;
            tch::no_grad(|| {
                let bias1 = 1.0 - b1.powi(step);
                let bias2 = 1.0 - b2.powi(step);
                for ((_, p), m) in params.iter().zip(moments.iter_mut()) {
                    let g = p.grad();
                    m.exp_avg = &m.exp_avg * b1 + &g * (1.0 - b1);
                    m.exp_avg_sq = &m.exp_avg_sq * b2 + (&g * &g) * (1.0 - b2);
                    let update = (&m.exp_avg / bias1) / ((&m.exp_avg_sq / bias2).sqrt() + ADAM_EPS);
                    let _ = p.shallow_clone().g_sub_(&(update * config.learning_rate));
                }
            });
            loss_sum += loss.double_value(&[]);
            batches += 1;
            examples_seen += chunk.len() as u64;
        }
        let (val_loss, val_accuracy) = tch::no_grad(|| {
            let logits = model.forward(&val_x);
            let loss = logits.binary_cross_entropy_with_logits::<Tensor>(&val_y, None, None, Reduction::Mean);
            let correct = logits.gt(0.0).to_kind(Kind::Float).eq_tensor(&val_y).to_kind(Kind::Float).mean(Kind::Float);
            (loss.double_value(&[]), correct.double_value(&[]))
        });
        if !val_loss.is_finite() || loss_sum.is_nan() {
            return Err(format!("language `{lang}`: the loss is not finite at epoch {}", epoch + 1));
        }
        epochs.push(json!({
            "epoch": epoch + 1,
            "train_loss": loss_sum / batches.max(1) as f64,
            "validation_loss": val_loss,
            "validation_accuracy": val_accuracy,
        }));
        if best.as_ref().is_none_or(|b| val_loss < b.0) {
            let weights = NamedTensors::from_tensors(params.iter().map(|(n, p)| (format!("{lang}.{n}"), p)));
            let optimizer = NamedTensors::from_tensors(params.iter().zip(&moments).flat_map(|((n, _), m)| {
                [(format!("{lang}.{n}.exp_avg"), &m.exp_avg), (format!("{lang}.{n}.exp_avg_sq"), &m.exp_avg_sq)]
            }));
            best = Some((val_loss, epoch + 1, weights, optimizer, u64::try_from(step).unwrap_or(0), examples_seen));
        }
    }
    let (val_loss, best_epoch, weights, optimizer, steps, examples_seen) =
        best.ok_or_else(|| format!("language `{lang}`: no epoch ran (epochs = 0)"))?;
    let report = json!({
        "training_examples": train.len(),
        "validation_examples": validation.len(),
        "best_epoch": best_epoch,
        "validation_loss": val_loss,
        "epochs": epochs,
    });
    Ok(Trained { weights, optimizer, report, steps, examples_seen })
}

/// Runs `toxicity-train` stages.
pub struct ToxicityTrainRun;

impl StageRun for ToxicityTrainRun {
    fn kind(&self) -> &'static str {
        "toxicity-train"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: TrainConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let seed = cx.seed("toxicity")?;
        let bad = |message: String| StageError::Input { input: "examples".into(), message };
        let ds = cx.input_record::<DatasetRecord>("examples")?;
        let mut by_language: BTreeMap<String, Vec<Example>> = BTreeMap::new();
        for shard in &ds.shards {
            for doc in read_shard(cx.store, &shard.digest)? {
                let toxic = label(&doc, &config).map_err(bad)?;
                let lang = classifier_language(doc.language.as_deref().unwrap_or("und"));
                let features = config.embedding.embed(&doc.text);
                by_language.entry(lang).or_default().push(Example { id: doc.id, features, toxic });
            }
        }
        prov_torch::pin_threads(config.threads as usize);

        let mut weights = NamedTensors::default();
        let mut optimizer = NamedTensors::default();
        let mut languages = BTreeMap::new();
        let mut skipped = BTreeMap::new();
        let (mut steps, mut total_seen) = (0u64, 0u64);
        for (lang, examples) in by_language {
            let toxic = examples.iter().filter(|e| e.toxic).count();
            let clean = examples.len() - toxic;
            if toxic.min(clean) < config.min_per_class as usize {
                skipped.insert(lang, json!({ "toxic": toxic, "not_toxic": clean }));
                continue;
            }
            let lang_seed = derive_seed(seed, "toxicity-train", &lang);
            let (train, validation) = split(examples, &config, lang_seed);
            let trained = train_language(&lang, &train, &validation, &config, lang_seed).map_err(bad)?;
            weights.0.extend(trained.weights.0);
            optimizer.0.extend(trained.optimizer.0);
            steps += trained.steps;
            total_seen += trained.examples_seen;
            let mut report = trained.report;
            report["examples"] = json!({ "toxic": toxic, "not_toxic": clean });
            languages.insert(lang, report);
        }
        if languages.is_empty() {
            return Err(bad(format!(
                "no language has {} examples of each class; found {}",
                config.min_per_class,
                Value::Object(skipped.into_iter().collect())
            )));
        }

        let classifier = ClassifierConfig {
            architecture: ARCHITECTURE.into(),
            embedding: config.embedding,
            hidden: config.hidden,
            languages: languages.clone(),
            training: serde_json::to_value(&config).expect("a config encodes"),
        };
        let classifier_json = serde_json::to_value(&classifier).expect("a config encodes");
        let config_digest = cx.store.put_bytes(ObjectKind::Blob, &encode_value(&classifier_json))?;
        let classifier_text = String::from_utf8(encode_value(&classifier_json)).expect("canonical JSON is UTF-8");
        let weights_digest = cx.store.put_bytes(ObjectKind::Blob, &weights.to_safetensors(&classifier_text))?;
        let adam = json!({ "algorithm": "adam", "betas": [ADAM_BETAS.0, ADAM_BETAS.1], "eps": ADAM_EPS });
        let optimizer_digest = cx.store.put_bytes(ObjectKind::Blob, &optimizer.to_safetensors(&adam.to_string()))?;
        let rng = json!({
            "seed": seed,
            "derivation": "per language: derive_seed(seed, \"toxicity-train\", language); balance, holdout, epoch orders and libtorch's initialisation seed derive from it",
        });
        let rng_digest = cx.store.put_bytes(ObjectKind::Blob, &encode_value(&rng))?;
        let tensors = weights
            .0
            .iter()
            .map(|(name, (_, values))| (name.clone(), Digest::of(&NamedTensors::le_bytes(values))))
            .collect();
        let record = Record::Checkpoint(CheckpointRecord {
            schema: SCHEMA_VERSION,
            step: steps,
            config: config_digest,
            weights: weights_digest,
            tensors,
            optimizer: optimizer_digest,
            rng: rng_digest,
            data_position: total_seen,
            loss: None,
            log: None,
            tokenizer: None,
            palette: None,
        });
        let digest = put_record(cx.store, &record)?;
        let mut out = StageOutput::default();
        out.outputs.insert("model".into(), OutputRef { output_type: OutputType::Checkpoint, digest });
        out.stats.insert("languages".into(), Value::Object(languages.into_iter().collect()));
        out.stats.insert("skipped_languages".into(), Value::Object(skipped.into_iter().collect()));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(id: &str, toxic: bool) -> Example {
        Example { id: id.into(), features: vec![], toxic }
    }

    #[test]
    fn split_balances_classes_and_holds_out_a_tenth() {
        let config: TrainConfig = parse_params(&json!({})).unwrap();
        let mut examples: Vec<Example> = (0..70).map(|i| example(&format!("t{i}"), true)).collect();
        examples.extend((0..30).map(|i| example(&format!("c{i}"), false)));
        let (train, val) = split(examples.clone(), &config, 7);
        assert_eq!(train.len() + val.len(), 60);
        assert_eq!(val.len(), 6);
        assert_eq!(train.iter().chain(&val).filter(|e| e.toxic).count(), 30);
        // The same seed gives the same split whatever the input order.
        examples.reverse();
        let (train2, val2) = split(examples, &config, 7);
        let ids = |v: &[Example]| v.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&train), ids(&train2));
        assert_eq!(ids(&val), ids(&val2));
    }

    /// Trains on a toy task and checks that the stored layout, read back by the filter's
    /// plain-Rust scorer, gives libtorch's logits.
    #[test]
    fn the_filter_scores_stored_weights_as_libtorch_does() {
        let config: TrainConfig = parse_params(
            &json!({ "embedding": { "dim": 256, "ngram_min": 1, "ngram_max": 3 }, "hidden": 8, "epochs": 3 }),
        )
        .unwrap();
        let texts = ["I hate you all", "you are vermin", "what a lovely day", "thank you, friend"];
        let examples: Vec<Example> = (0..40)
            .map(|i| {
                let text = format!("{} {i}", texts[i % 4]);
                Example { id: format!("e{i}"), features: config.embedding.embed(&text), toxic: i % 4 < 2 }
            })
            .collect();
        let (train, val) = split(examples.clone(), &config, 1);
        let trained = train_language("en", &train, &val, &config, 1).unwrap();
        let values = |n: &str| trained.weights.0[&format!("en.{n}")].1.clone();
        let mlp = prov_toxicity::model::Mlp::new(
            256,
            8,
            &values("fc1.weight"),
            &values("fc1.bias"),
            &values("fc2.weight"),
            values("fc2.bias")[0],
        )
        .unwrap();
        let tensor = |n: &str| {
            let (shape, values) = &trained.weights.0[&format!("en.{n}")];
            let dims: Vec<i64> = shape.iter().map(|&d| i64::try_from(d).unwrap()).collect();
            Tensor::from_slice(values).view(dims.as_slice())
        };
        for example in &examples {
            let (x, _) = batch(&[example], 256);
            let torch = x
                .matmul(&tensor("fc1.weight").tr())
                .g_add(&tensor("fc1.bias"))
                .relu()
                .matmul(&tensor("fc2.weight").tr())
                .g_add(&tensor("fc2.bias"));
            let (libtorch, plain) = (torch.double_value(&[0, 0]), f64::from(mlp.logit(&example.features)));
            assert!((libtorch - plain).abs() < 1e-5, "{}: libtorch {libtorch}, plain Rust {plain}", example.id);
        }
        let report = &trained.report;
        assert!(report["best_epoch"].as_u64().unwrap() >= 1, "{report}");
    }

    #[test]
    fn labels_outside_both_lists_are_errors() {
        let config: TrainConfig = parse_params(&json!({})).unwrap();
        let mut doc = Document::new("d1", "x");
        doc.metadata = Some(r#"{"label":"maybe"}"#.into());
        assert!(label(&doc, &config).unwrap_err().contains("label `maybe`"));
        doc.metadata = None;
        assert!(label(&doc, &config).unwrap_err().contains("no metadata field `label`"));
        doc.metadata = Some(r#"{"label":"hateful"}"#.into());
        assert!(label(&doc, &config).unwrap());
    }
}
