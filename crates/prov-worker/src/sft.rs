//! Running an `sft` stage (its kind and row layout are `prov_train::sft`'s): conversations
//! rendered with the starting checkpoint's chat template, laid into rows epoch after epoch,
//! and trained on the assistant's tokens.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun};
use prov_train::post;
use prov_train::sft::{Conversation, OWN, SftParams, defaults, epoch_rows};
use serde_json::json;

use crate::fine_tuning;
use crate::trainer::Trainer;

/// Runs `sft` stages.
pub struct SftRun;

impl StageRun for SftRun {
    fn kind(&self) -> &'static str {
        "sft"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let (params, own, _) =
            post::parse_stage_params::<SftParams>(cx.config, OWN, &defaults()).map_err(StageError::Config)?;
        let seed = cx.seed("order")?;
        let start = fine_tuning::load_checkpoint(cx, "model")?;
        let data = ChatRows::read(cx, &start, &own, &params, seed)?;
        let (seq_len, training_rows, tokenizer_digest) = (data.seq_len, data.rows, data.tokenizer);
        let batch = params.batch_size as usize;
        let mut model_config = start.config.clone();
        model_config.max_position_embeddings = i64::try_from(seq_len).expect("checked above");
        let mut hf_config = start.hf_config.clone();
        hf_config["max_position_embeddings"] = json!(seq_len);
        prov_torch::pin_threads(params.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let mut trainer = Trainer::from_weights(&model_config, &params.loop_config(), &start.weights)
            .map_err(|message| StageError::Input { input: "model".into(), message })?;
        drop(start);
        let time = i64::try_from(seq_len).expect("checked above");
        for step_rows in training_rows.chunks(batch) {
            let inputs: Vec<i64> = step_rows.iter().flat_map(|(i, _)| i.iter().copied()).collect();
            let labels: Vec<i64> = step_rows.iter().flat_map(|(_, l)| l.iter().copied()).collect();
            trainer.train_on_labels(&inputs, &labels, time, 0);
        }
        let mut out = fine_tuning::finish(
            cx.store,
            &trainer,
            &hf_config,
            tokenizer_digest,
            json!({ "order_seed": seed }),
            params.batch_size,
        )?;
        out.stats.extend(data.stats);
        Ok(out)
    }
}

/// The training rows of a fine-tuning stage on chat examples (`sft`, `lora`): each
/// conversation of input `examples` rendered with the starting checkpoint's chat template, the
/// ones longer than a row left out, laid into `(inputs, labels)` rows epoch after epoch in a
/// seeded order, as many as the steps need.
pub(crate) struct ChatRows {
    /// Tokens a row's inputs hold.
    pub seq_len: usize,
    /// The rows, in training order.
    pub rows: Vec<(Vec<i64>, Vec<i64>)>,
    /// The tokenizer the checkpoint records.
    pub tokenizer: prov_store::Digest,
    /// `examples`, `examples_too_long` and `packing`.
    pub stats: BTreeMap<String, serde_json::Value>,
}

impl ChatRows {
    pub(crate) fn read(
        cx: &StageContext<'_>,
        start: &crate::checkpoint::LoadedCheckpoint,
        own: &SftParams,
        params: &prov_train::post::LoopParams,
        seed: u64,
    ) -> Result<Self, StageError> {
        let (tokenizer_digest, tokenizer, template) = fine_tuning::chat_template(cx.store, "model", start)?;
        let pad = prov_tokenizer::special_ids(&tokenizer)?["pad"];
        let examples = post::read_examples(cx, "examples")?;
        let seq_len = usize::try_from(own.seq_len).expect("a sequence length fits in memory");
        let mut fitting = Vec::new();
        let mut too_long = 0u64;
        for (line, e) in examples.iter().enumerate() {
            let rendered = template.render(&e.messages).map_err(|err| StageError::Input {
                input: "examples".into(),
                message: format!("line {} (`{}`): {err}", line + 1, e.id),
            })?;
            if rendered.ids.len() > seq_len + 1 {
                too_long += 1;
                continue;
            }
            fitting.push(Conversation {
                ids: rendered.ids.iter().map(|&i| i64::from(i)).collect(),
                trained: rendered.trained,
            });
        }
        if fitting.is_empty() {
            return Err(StageError::Input {
                input: "examples".into(),
                message: format!("none of the {} conversations fits in `seq_len` {seq_len} + 1 tokens", examples.len()),
            });
        }
        let needed = params.steps as usize * params.batch_size as usize;
        let rows = epoch_rows(&fitting, needed, seq_len, own.packing, i64::from(pad), seed);
        let stats = BTreeMap::from([
            ("examples".into(), json!(examples.len())),
            ("examples_too_long".into(), json!(too_long)),
            ("packing".into(), json!(own.packing)),
        ]);
        Ok(Self { seq_len, rows, tokenizer: tokenizer_digest, stats })
    }
}
