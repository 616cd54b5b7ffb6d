//! The stage kinds: `sentence-pairs` makes sentence pairs from parallel documents, and
//! `bifixer` repairs them as Bifixer does and marks each with Bifixer's pair hash, which a
//! `dedup` stage with `key: {metadata: bifixer_hash}` then deduplicates on (Bifixer itself
//! only marks; its users deduplicate on the hash, as EuroLLM's report says it did).
//!
//! `bifixer` rules:
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `bifixer:unchanged` | kept | neither side changed |
//! | `bifixer:repaired` | modified | a side changed (evidence: `source_changed`, `target_changed`) |
//! | `bifixer:empty` | removed | a side was empty (evidence: `side`) |
//! | `bifixer:empty-after-repair` | removed | a side was empty or only whitespace after repair (evidence: `side`) |
//!
//! Kept pairs carry the hash in their metadata (`bifixer_hash`) and in the evidence (`hash`).

use std::collections::BTreeMap;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, shard_documents, write_dataset};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::bifixer::{Options, Outcome, fix_pair};
use crate::pairs::Pair;
use crate::rules::Rules;

/// The metadata key of Bifixer's hash on a kept pair.
pub const HASH_KEY: &str = "bifixer_hash";

/// Pairs per shard of a `sentence-pairs` output.
const PAIRS_PER_SHARD: usize = 4096;

/// The resolved configuration of a `sentence-pairs` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentencePairsConfig {
    /// Translation code (the middle part of a `<prefix>-<translation>-<unit>` id) → the
    /// language tag its side carries. At least two.
    pub languages: BTreeMap<String, String>,
    /// The translation every pair's source side comes from; one of `languages`.
    pub source: String,
}

/// Makes sentence pairs from parallel documents: the source translation's document of a unit
/// beside each other selected translation's, paragraph by paragraph (lines that are not blank),
/// when the two have as many paragraphs; a unit whose counts differ gives no pairs and is
/// counted as `misaligned`.
pub struct SentencePairsStage;

/// One unit's documents: translation → (document id, paragraphs).
type Unit = BTreeMap<String, (String, Vec<String>)>;

impl SentencePairsStage {
    fn collect(
        cx: &StageContext<'_>,
        config: &SentencePairsConfig,
    ) -> Result<BTreeMap<(String, String), Unit>, StageError> {
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let mut units: BTreeMap<(String, String), Unit> = BTreeMap::new();
        for shard in &ds.shards {
            for doc in shard_documents(cx.store, &shard.digest)? {
                let doc = doc?;
                let Some(p) = prov_prep::parse_parallel_id(&doc.id) else { continue };
                if !config.languages.contains_key(p.translation) {
                    continue;
                }
                let paragraphs: Vec<String> =
                    doc.text.split('\n').filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
                let unit = units.entry((p.prefix.to_owned(), p.unit.to_owned())).or_default();
                if unit.insert(p.translation.to_owned(), (doc.id.clone(), paragraphs)).is_some() {
                    return Err(StageError::Input {
                        input: "docs".into(),
                        message: format!("document id `{}` appears twice; ids must name documents", doc.id),
                    });
                }
            }
        }
        Ok(units)
    }
}

impl Stage for SentencePairsStage {
    fn kind(&self) -> &'static str {
        "sentence-pairs"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "make sentence pairs from parallel documents (`<prefix>-<translation>-<unit>` ids), paragraph by paragraph, \
         source beside each other translation"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: SentencePairsConfig = parse_params(params)?;
        if c.languages.len() < 2 {
            return Err(ConfigError::at(&["languages"], "a pair needs at least two translations")
                .with_hint("for example `languages: {eng: en, fra: fr}` with `source: eng`"));
        }
        for (code, tag) in &c.languages {
            if code.is_empty() || code.contains('-') || tag.trim().is_empty() {
                return Err(ConfigError::at(
                    &["languages", code],
                    "a translation code is not empty and has no `-`, and its language tag is not empty",
                ));
            }
        }
        if !c.languages.contains_key(&c.source) {
            return Err(ConfigError::at(&["source"], format!("`{}` is not one of `languages`", c.source)));
        }
        Ok(serde_json::to_value(c).expect("strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("dataset".into(), OutputType::Dataset)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: SentencePairsConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let units = Self::collect(cx, &config)?;
        let mut counts: BTreeMap<String, BTreeMap<&str, u64>> = BTreeMap::new();
        let (mut shards, mut writer, mut in_shard) = (Vec::new(), ShardWriter::new(cx.store)?, 0usize);
        for ((prefix, unit), docs) in &units {
            let Some((source_id, source)) = docs.get(&config.source) else { continue };
            for (translation, (target_id, target)) in docs.iter().filter(|(t, _)| **t != config.source) {
                let tally = counts.entry(format!("{}-{}", config.source, translation)).or_default();
                if source.len() != target.len() {
                    *tally.entry("misaligned").or_default() += 1;
                    continue;
                }
                *tally.entry("units").or_default() += 1;
                for (n, (s, t)) in source.iter().zip(target).enumerate() {
                    let metadata = json!({ "source_doc": source_id, "target_doc": target_id, "paragraph": n });
                    let pair = Pair {
                        source: s.clone(),
                        source_language: config.languages[&config.source].clone(),
                        target: t.clone(),
                        target_language: config.languages[translation].clone(),
                        metadata: metadata.as_object().expect("an object").clone(),
                    };
                    let id = format!("{prefix}-{unit}.{n}-{}-{translation}", config.source);
                    writer.push(pair.into_document(&Document::new(id, "")))?;
                    *tally.entry("pairs").or_default() += 1;
                    in_shard += 1;
                    if in_shard == PAIRS_PER_SHARD {
                        shards.push(std::mem::replace(&mut writer, ShardWriter::new(cx.store)?).finish()?);
                        in_shard = 0;
                    }
                }
            }
        }
        let total: u64 = counts.values().filter_map(|c| c.get("pairs")).sum();
        if total == 0 {
            return Err(StageError::Config(
                ConfigError::at(
                    &["languages"],
                    "no unit of `docs` has the source and another selected translation with as many paragraphs",
                )
                .with_hint("check the translation codes against the ids (`<prefix>-<translation>-<unit>`)"),
            ));
        }
        if in_shard > 0 {
            shards.push(writer.finish()?);
        }
        let (digest, _) = write_dataset(cx.store, shards)?;
        let mut out = StageOutput::default();
        out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest });
        out.stats.insert("pairs".into(), json!(total));
        out.stats.insert("by_language_pair".into(), json!(counts));
        Ok(out)
    }
}

/// The resolved configuration of a `bifixer` stage: Bifixer's switches, each the opposite of
/// its `--ignore_*` flag, all on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(clippy::struct_excessive_bools)] // one switch per Bifixer flag
pub struct BifixerConfig {
    /// ftfy and the character table.
    #[serde(default = "yes")]
    pub characters: bool,
    /// HTML tags removed.
    #[serde(default = "yes")]
    pub html: bool,
    /// Punctuation and spaces normalised.
    #[serde(default = "yes")]
    pub normalization: bool,
    /// Orthographic corrections.
    #[serde(default = "yes")]
    pub orthography: bool,
    /// Detokenisation (with orthography only).
    #[serde(default = "yes")]
    pub detokenization: bool,
    /// Pairs with an empty side removed.
    #[serde(default = "yes")]
    pub drop_empty: bool,
    /// Sides over 5,000 characters left unrepaired.
    #[serde(default = "yes")]
    pub skip_long: bool,
}

fn yes() -> bool {
    true
}

impl BifixerConfig {
    /// The engine's switches.
    #[must_use]
    pub fn options(self) -> Options {
        Options {
            characters: self.characters,
            html: self.html,
            normalization: self.normalization,
            orthography: self.orthography,
            detokenization: self.detokenization,
            drop_empty: self.drop_empty,
            skip_long: self.skip_long,
        }
    }
}

/// What `bifixer` decides for one pair: the ledger decision, rule and evidence, and the
/// repaired pair when it is kept. `prov explain bifixer` reports the same.
#[must_use]
pub fn assess(
    pair: &Pair,
    src: &crate::rules::LanguageRules,
    trg: &crate::rules::LanguageRules,
    options: Options,
) -> (LedgerDecision, &'static str, Value, Option<Pair>) {
    match fix_pair(&pair.source, &pair.target, src, trg, options) {
        Outcome::EmptyInput(side) => (LedgerDecision::Removed, "bifixer:empty", json!({ "side": side.name() }), None),
        Outcome::EmptyAfterRepair(side) => {
            (LedgerDecision::Removed, "bifixer:empty-after-repair", json!({ "side": side.name() }), None)
        }
        Outcome::Kept { source, target, hash } => {
            let (source_changed, target_changed) = (source != pair.source, target != pair.target);
            let evidence = json!({ "hash": hash, "source_changed": source_changed, "target_changed": target_changed });
            let mut repaired = Pair { source, target, ..pair.clone() };
            repaired.metadata.insert(HASH_KEY.into(), Value::String(hash));
            if source_changed || target_changed {
                (LedgerDecision::Modified, "bifixer:repaired", evidence, Some(repaired))
            } else {
                (LedgerDecision::Kept, "bifixer:unchanged", evidence, Some(repaired))
            }
        }
    }
}

/// The ledger row of one pair, and the repaired document when it is kept.
fn decide(
    doc: &Document,
    rules: &Rules,
    options: Options,
    counts: &mut BTreeMap<String, u64>,
) -> Result<(LedgerRow, Option<Document>), StageError> {
    let pair = Pair::of(doc).map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
    let missing = |e: crate::rules::RulesError| StageError::Input {
        input: "rules".into(),
        message: format!("{e} (pair `{}`)", doc.id),
    };
    let (src, trg) = (
        rules.language(&pair.source_language).map_err(missing)?,
        rules.language(&pair.target_language).map_err(missing)?,
    );
    let (decision, rule, evidence, kept) = assess(&pair, src, trg, options);
    *counts.entry(rule.to_owned()).or_default() += 1;
    Ok((
        LedgerRow::of_document(doc, decision, rule, prov_dataset::evidence(evidence)),
        kept.map(|p| p.into_document(doc)),
    ))
}

/// Repairs sentence pairs as Bifixer does and marks each with Bifixer's hash, with a ledger.
pub struct BifixerStage;

/// Bifixer options Provenant does not carry, and why.
const NOT_CARRIED: [(&str, &str); 2] = [
    (
        "segmentation",
        "Bifixer's segmentation needs NLTK's Punkt models, which no package registry serves; pairs are kept whole, as with Bifixer's --ignore_segmentation",
    ),
    (
        "aggressive_dedup",
        "Bifixer's aggressive hash needs Unidecode's transliteration tables, which Provenant does not carry; deduplicate exact pairs with `dedup` on `bifixer_hash`",
    ),
];

impl Stage for BifixerStage {
    fn kind(&self) -> &'static str {
        "bifixer"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "repair sentence pairs as Bifixer 0.8.12 does (ftfy, character, punctuation and orthography tables from the \
         pinned package) and mark each with Bifixer's pair hash, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        for (key, why) in NOT_CARRIED {
            if params.get(key).is_some() {
                return Err(ConfigError::at(&[key], format!("`{key}` is not offered")).with_hint(why));
            }
        }
        let c: BifixerConfig = parse_params(params)?;
        Ok(serde_json::to_value(c).expect("booleans encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("docs", vec![OutputType::Dataset]),
            ("rules", vec![OutputType::Source, OutputType::File]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: BifixerConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let rules = Rules::parse(&cx.read_file_input("rules")?)
            .map_err(|e| StageError::Input { input: "rules".into(), message: e.to_string() })?;
        prov_filter::map_shards(cx, tasks, |s| {
            let mut out = ShardWriter::new(cx.store)?;
            let (mut rows, mut counts) = (Vec::new(), BTreeMap::new());
            for doc in shard_documents(cx.store, &s.digest)? {
                let (row, kept) = decide(&doc?, &rules, config.options(), &mut counts)?;
                rows.push(row);
                if let Some(doc) = kept {
                    out.push(doc)?;
                }
            }
            prov_filter::filtered_shard(cx, out.finish()?, rows, json!(counts))
        })
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let mut total: BTreeMap<String, u64> = BTreeMap::new();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let counts: BTreeMap<String, u64> =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            for (rule, n) in counts {
                *total.entry(rule).or_default() += n;
            }
            Ok(())
        })?;
        out.stats.insert("rules".into(), json!(total));
        Ok(out)
    }
}

/// The resolved configuration of a `pair-examples` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairExamplesConfig {
    /// Language (primary subtag) → the name the prompt uses. Pairs with a side in another
    /// language are left out (counted as `ignored`).
    pub languages: BTreeMap<String, String>,
    /// The user message: `{source}`, `{target}` and `{text}` are replaced, as in
    /// `translation-pairs`.
    #[serde(default = "default_template")]
    pub template: String,
    /// Also ask for each pair the other way round.
    #[serde(default = "yes")]
    pub both_directions: bool,
}

fn default_template() -> String {
    prov_prep::DEFAULT_TEMPLATE.to_owned()
}

/// One example: translate `text` (side `from`) into `to`.
fn example(
    id: &str,
    (from, from_lang, from_doc, text): (&str, &str, &str, &str),
    (to, to_lang, to_doc, answer): (&str, &str, &str, &str),
    template: &prov_prep::Template,
) -> prov_prep::TranslationExample {
    use prov_tokenizer::chat::{Message, Role};
    let side = |doc: &str, code: &str, name: &str| prov_prep::TranslationSide {
        doc: doc.to_owned(),
        translation: code.to_owned(),
        language: name.to_owned(),
    };
    prov_prep::TranslationExample {
        id: format!("{id}:{from}>{to}"),
        source: side(from_doc, from, from_lang),
        target: side(to_doc, to, to_lang),
        messages: vec![
            Message::new(Role::User, template.render(from_lang, to_lang, text)),
            Message::new(Role::Assistant, answer.to_owned()),
        ],
    }
}

/// Turns sentence pairs into translation examples for supervised fine-tuning, in the format
/// `translation-pairs` writes: EuroLLM fine-tunes on translation, from its filtered parallel
/// data.
pub struct PairExamplesStage;

impl Stage for PairExamplesStage {
    fn kind(&self) -> &'static str {
        "pair-examples"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "turn sentence pairs into translation examples for SFT (the translation-pairs format), each way round"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: PairExamplesConfig = parse_params(params)?;
        if c.languages.is_empty() {
            return Err(ConfigError::at(&["languages"], "names no language")
                .with_hint("for example `languages: {en: English, fr: French}`"));
        }
        prov_prep::Template::parse(&c.template)?;
        Ok(serde_json::to_value(c).expect("strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("train".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: PairExamplesConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let template = prov_prep::Template::parse(&config.template).map_err(StageError::Config)?;
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let (mut examples, mut ignored) = (Vec::new(), 0u64);
        for shard in &ds.shards {
            for doc in shard_documents(cx.store, &shard.digest)? {
                let doc = doc?;
                let pair =
                    Pair::of(&doc).map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
                let (s, t) = (
                    prov_dataset::primary_language(&pair.source_language),
                    prov_dataset::primary_language(&pair.target_language),
                );
                let (Some(s_name), Some(t_name)) = (config.languages.get(&s), config.languages.get(&t)) else {
                    ignored += 1;
                    continue;
                };
                let meta = |k: &str| pair.metadata.get(k).and_then(Value::as_str).unwrap_or(&doc.id).to_owned();
                let (s_doc, t_doc) = (meta("source_doc"), meta("target_doc"));
                let source = (s.as_str(), s_name.as_str(), s_doc.as_str(), pair.source.as_str());
                let target = (t.as_str(), t_name.as_str(), t_doc.as_str(), pair.target.as_str());
                examples.push(example(&doc.id, source, target, &template));
                if config.both_directions {
                    examples.push(example(&doc.id, target, source, &template));
                }
            }
        }
        if examples.is_empty() {
            return Err(StageError::Config(ConfigError::at(
                &["languages"],
                format!("no pair of `docs` has both sides in {:?}", config.languages.keys().collect::<Vec<_>>()),
            )));
        }
        let digest = cx.store.put_bytes(prov_store::ObjectKind::Blob, &prov_prep::write_examples(&examples))?;
        let mut out = StageOutput::default();
        out.outputs.insert("train".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.insert("examples".into(), json!(examples.len()));
        out.stats.insert("ignored".into(), json!(ignored));
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::rules::Rules;

    /// Rules with an empty character table and the punctuation Bifixer uses for English.
    fn rules() -> Rules {
        Rules::parse(
            br#"{"format":"bifixer-rules 1","bifixer":"0","languages":{"en":{"cjk":false,"characters":[],"punctuation":[[" ,",","]],"orthography":[["teh","the"]],"detokenisation":[]}}}"#,
        )
        .unwrap()
    }

    fn pair(source: &str, target: &str) -> Pair {
        Pair {
            source: source.into(),
            source_language: "en".into(),
            target: target.into(),
            target_language: "en".into(),
            metadata: serde_json::Map::new(),
        }
    }

    #[test]
    fn each_rule_fires_as_the_table_says() {
        let rules = rules();
        let en = rules.language("en").unwrap();
        let decide = |s: &str, t: &str| {
            let (decision, rule, evidence, kept) = assess(&pair(s, t), en, en, Options::default());
            (decision, rule, evidence, kept.map(|p| p.metadata[HASH_KEY].clone()))
        };
        let (d, r, e, hash) = decide("Hello world", "Hello world");
        assert_eq!((d, r), (LedgerDecision::Kept, "bifixer:unchanged"));
        assert_eq!(e["hash"], hash.unwrap(), "the hash in the evidence is the one in the metadata");
        let (d, r, e, _) = decide("Teh cat , sat", "ok");
        assert_eq!((d, r), (LedgerDecision::Modified, "bifixer:repaired"));
        assert_eq!((e["source_changed"].as_bool(), e["target_changed"].as_bool()), (Some(true), Some(false)));
        let (d, r, e, kept) = decide("", "x");
        assert_eq!((d, r, e["side"].as_str(), kept), (LedgerDecision::Removed, "bifixer:empty", Some("source"), None));
        let (d, r, e, _) = decide("x", "<br>");
        assert_eq!((d, r, e["side"].as_str()), (LedgerDecision::Removed, "bifixer:empty-after-repair", Some("target")));
    }

    #[test]
    fn options_bifixer_lacks_are_refused_by_name() {
        for key in ["segmentation", "aggressive_dedup"] {
            let e = BifixerStage.resolve_config(&json!({ key: true })).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
        assert_eq!(
            BifixerStage.resolve_config(&json!({})).unwrap(),
            json!({"characters": true, "html": true, "normalization": true, "orthography": true, "detokenization": true, "drop_empty": true, "skip_long": true})
        );
    }
}
