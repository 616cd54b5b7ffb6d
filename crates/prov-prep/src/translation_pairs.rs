//! `translation-pairs`: instruction data for supervised fine-tuning, built from parallel text
//! already in the pipeline (the UDHR translations of the main job), as `EuroLLM`'s
//! translation-centred SFT data is: "translate this article from English into French", with
//! the French article as the reference answer.
//!
//! Inputs: `docs`, a dataset (the compliant corpus), and `held_out`, a dataset or a source (a
//! JSON Lines or Parquet file, or a directory of them, read as `decontaminate` reads its
//! `benchmark`). Outputs: `train` (the examples of `docs`) and `eval` (those of `held_out`),
//! each a JSON Lines file of [`TranslationExample`]s, one canonical JSON object per line.
//!
//! # Parallel documents
//!
//! A document id has the shape `<prefix>-<translation>-<unit>`, split at its last two `-`
//! ([`parse_parallel_id`]): `udhr-eng-05` is translation `eng` of unit `05` of `udhr`, and
//! `eval-udhr-deu_1996-30` is translation `deu_1996` of unit `30` of `eval-udhr`. Documents
//! are parallel when they agree on prefix and unit. A document is ignored (counted in
//! `<output>_ignored`) when its id does not have that shape, when its translation is not a key
//! of `languages`, or when its text is empty.
//!
//! # Examples
//!
//! For every (unit, prefix) present in at least two selected translations, every ordered pair
//! of them (source ≠ target) yields one example: the user message is `template` with
//! `{source}` and `{target}` replaced by the two language names and `{text}` by the source
//! document's text, in one pass (a text that contains `{target}` keeps it); the assistant
//! message is the target document's text, exactly. Examples are sorted by unit, then prefix,
//! then source code, then target code (each as a string, in byte order), so the bytes depend
//! neither on the shards nor on the thread count. The maps are `BTreeMap`s; nothing iterates
//! a hash map.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use prov_dataset::{Document, read_documents_as, shard_documents};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputRef, OutputType, Record, encode_value, get_record};
use prov_store::ObjectKind;
use prov_tokenizer::chat::{Message, Role};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The default prompt template.
pub const DEFAULT_TEMPLATE: &str = "Translate from {source} into {target}:\n{text}";

/// The placeholders a template must contain, each at least once.
const PLACEHOLDERS: [&str; 3] = ["source", "target", "text"];

/// The resolved configuration of a `translation-pairs` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationPairsConfig {
    /// The selected translations: translation code (the middle part of an id) → the language
    /// name used in the prompt. At least two.
    pub languages: BTreeMap<String, String>,
    /// The user message: `{source}`, `{target}` and `{text}` are replaced.
    #[serde(default = "default_template")]
    pub template: String,
}

fn default_template() -> String {
    DEFAULT_TEMPLATE.to_owned()
}

impl TranslationPairsConfig {
    /// Checks the configuration: at least two languages, codes without `-`, names not empty,
    /// and a template with each placeholder and no unknown one.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] at the field at fault.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.languages.len() < 2 {
            return Err(ConfigError::at(
                &["languages"],
                format!("`languages` selects {} translation(s); a pair needs at least 2", self.languages.len()),
            )
            .with_hint("for example `languages: {eng: English, fra: French}`"));
        }
        for (code, name) in &self.languages {
            if code.is_empty() || code.contains('-') {
                return Err(ConfigError::at(&["languages", code], format!("translation code `{code}` is empty or contains `-`"))
                    .with_hint("an id `<prefix>-<translation>-<unit>` is split at its last two `-`, so a translation code never contains one"));
            }
            if name.trim().is_empty() {
                return Err(ConfigError::at(&["languages", code], format!("the language name of `{code}` is empty")));
            }
        }
        Template::parse(&self.template).map(|_| ())
    }
}

/// A parsed prompt template: literal text and placeholders. `pair-examples` (crate
/// `prov-parallel`) renders its prompts with it too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Piece>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Source,
    Target,
    Text,
}

impl Template {
    /// Parses `{source}`, `{target}` and `{text}`; any other `{name}` (ASCII letters, digits and
    /// `_`) is refused as an unknown placeholder, other braces are literal text.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] at `template` for an unknown or missing placeholder.
    pub fn parse(template: &str) -> Result<Self, ConfigError> {
        let mut pieces = Vec::new();
        let mut seen = [false; 3];
        let mut literal = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            literal.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let name = after.find('}').map(|close| &after[..close]);
            match name {
                Some(name) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                    let Some(i) = PLACEHOLDERS.iter().position(|p| *p == name) else {
                        return Err(ConfigError::at(&["template"], format!("unknown placeholder `{{{name}}}`"))
                            .with_hint("the placeholders are `{source}`, `{target}` and `{text}`"));
                    };
                    seen[i] = true;
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    }
                    pieces.push([Piece::Source, Piece::Target, Piece::Text][i].clone());
                    rest = &after[name.len() + 1..];
                }
                _ => {
                    literal.push('{');
                    rest = after;
                }
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        if let Some(i) = seen.iter().position(|s| !s) {
            return Err(ConfigError::at(&["template"], format!("the template has no `{{{}}}`", PLACEHOLDERS[i]))
                .with_hint(format!("the default is `{}`", DEFAULT_TEMPLATE.replace('\n', "\\n"))));
        }
        Ok(Self(pieces))
    }

    /// The template with the language names and the text put in, in one pass (a text that
    /// contains `{target}` keeps it).
    #[must_use]
    pub fn render(&self, source: &str, target: &str, text: &str) -> String {
        let mut out = String::new();
        for p in &self.0 {
            out.push_str(match p {
                Piece::Literal(l) => l,
                Piece::Source => source,
                Piece::Target => target,
                Piece::Text => text,
            });
        }
        out
    }
}

/// A document id of the shape `<prefix>-<translation>-<unit>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParallelId<'a> {
    /// Everything before the second-to-last `-` (`eval-udhr`).
    pub prefix: &'a str,
    /// Between the last two `-` (`deu_1996`).
    pub translation: &'a str,
    /// After the last `-` (`30`).
    pub unit: &'a str,
}

/// Splits an id at its last two `-`; `None` unless all three parts are non-empty.
///
/// ```
/// let id = prov_prep::parse_parallel_id("eval-udhr-deu_1996-30").unwrap();
/// assert_eq!((id.prefix, id.translation, id.unit), ("eval-udhr", "deu_1996", "30"));
/// assert!(prov_prep::parse_parallel_id("udhr-05").is_none());
/// ```
pub fn parse_parallel_id(id: &str) -> Option<ParallelId<'_>> {
    let mut parts = id.rsplitn(3, '-');
    let unit = parts.next()?;
    let translation = parts.next()?;
    let prefix = parts.next()?;
    (!prefix.is_empty() && !translation.is_empty() && !unit.is_empty()).then_some(ParallelId {
        prefix,
        translation,
        unit,
    })
}

/// One side of a translation example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationSide {
    /// The document id.
    pub doc: String,
    /// The translation code (the id's middle part).
    pub translation: String,
    /// The language name from the stage's `languages`.
    pub language: String,
}

/// One line of a `translation-pairs` output: a user message asking for a translation and the
/// reference translation as the assistant message.
///
/// ```text
/// {"id":"udhr-05:eng>fra","messages":[{"content":"Translate from English into French:\n…","role":"user"},{"content":"…","role":"assistant"}],"source":{"doc":"udhr-eng-05","language":"English","translation":"eng"},"target":{"doc":"udhr-fra-05","language":"French","translation":"fra"}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationExample {
    /// `<prefix>-<unit>:<source code>><target code>`.
    pub id: String,
    /// The document translated from.
    pub source: TranslationSide,
    /// The document translated into.
    pub target: TranslationSide,
    /// Exactly two: `user` (the rendered template), then `assistant` (the target's text).
    pub messages: Vec<Message>,
}

/// A line of examples that does not read, with the line (from 1) and the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}{}: {message}", field.as_ref().map(|f| format!(", field `{f}`")).unwrap_or_default())]
pub struct ExamplesError {
    /// The line, from 1.
    pub line: usize,
    /// The field path (`messages.1.role`), when one is at fault.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// Encodes examples as JSON Lines: one canonical JSON object per line, each line ending in
/// `\n`, in the order given.
pub fn write_examples(examples: &[TranslationExample]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in examples {
        out.extend(encode_value(&serde_json::to_value(e).expect("strings encode")));
        out.push(b'\n');
    }
    out
}

/// Reads a `translation-pairs` output. Every line (each ending in `\n`) is one example; unknown
/// fields, empty lines and messages other than one `user` then one `assistant` are refused.
///
/// # Errors
///
/// An [`ExamplesError`] naming the line and, where one is at fault, the field.
pub fn read_examples(bytes: &[u8]) -> Result<Vec<TranslationExample>, ExamplesError> {
    let mut out = Vec::new();
    let body = match bytes.strip_suffix(b"\n") {
        Some(b) => b,
        None if bytes.is_empty() => return Ok(out),
        None => {
            let line = bytes.split(|b| *b == b'\n').count();
            return Err(ExamplesError { line, field: None, message: "the last line does not end in `\\n`".into() });
        }
    };
    for (i, raw) in body.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let err = |field: Option<String>, message: String| ExamplesError { line, field, message };
        let text = std::str::from_utf8(raw).map_err(|e| err(None, format!("not UTF-8: {e}")))?;
        if text.trim().is_empty() {
            return Err(err(None, "empty line".into()));
        }
        let example: TranslationExample =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|e| {
                let path = e.path().to_string();
                // serde_json ends its message with its own "at line 1 column N": drop it, the
                // line is ours and the field names the place.
                let (inner, mut message) = (e.inner(), e.inner().to_string());
                let at = format!(" at line {} column {}", inner.line(), inner.column());
                if message.ends_with(&at) {
                    message.truncate(message.len() - at.len());
                }
                err((path != ".").then_some(path), message)
            })?;
        let roles: Vec<Role> = example.messages.iter().map(|m| m.role).collect();
        if roles != [Role::User, Role::Assistant] {
            let found = roles.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ");
            return Err(err(Some("messages".into()), format!("expected `user` then `assistant`, found [{found}]")));
        }
        out.push(example);
    }
    Ok(out)
}

/// What building one output's examples counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PairCounts {
    /// Examples written.
    pub examples: u64,
    /// Documents used by at least one example.
    pub documents: u64,
    /// (prefix, unit) groups with at least two selected translations.
    pub units: u64,
    /// Documents whose id does not parse, whose translation is not selected, or whose text is
    /// empty.
    pub ignored: u64,
    /// Selected documents whose unit has no other selected translation.
    pub unpaired: u64,
}

/// The selected documents of one input, grouped by unit; add documents in any order.
#[derive(Debug)]
pub struct ParallelDocuments {
    languages: BTreeMap<String, String>,
    template: Template,
    /// (unit, prefix) → translation → (document id, text).
    units: BTreeMap<(String, String), BTreeMap<String, (String, String)>>,
    ignored: u64,
    /// Translations present in the input but not selected, with their document counts.
    unselected: BTreeMap<String, u64>,
}

impl ParallelDocuments {
    /// An empty collection for a configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when the configuration does not pass [`TranslationPairsConfig::check`].
    pub fn new(config: &TranslationPairsConfig) -> Result<Self, ConfigError> {
        config.check()?;
        Ok(Self {
            languages: config.languages.clone(),
            template: Template::parse(&config.template)?,
            units: BTreeMap::new(),
            ignored: 0,
            unselected: BTreeMap::new(),
        })
    }

    /// Adds a document: kept when its id parses and its translation is one of `languages`,
    /// counted as ignored otherwise.
    ///
    /// # Errors
    ///
    /// A message naming a selected id added twice.
    pub fn add(&mut self, id: &str, text: &str) -> Result<(), String> {
        let Some(p) = parse_parallel_id(id) else {
            self.ignored += 1;
            return Ok(());
        };
        if !self.languages.contains_key(p.translation) {
            *self.unselected.entry(p.translation.to_owned()).or_default() += 1;
            self.ignored += 1;
            return Ok(());
        }
        if text.is_empty() {
            self.ignored += 1;
            return Ok(());
        }
        let group = self.units.entry((p.unit.to_owned(), p.prefix.to_owned())).or_default();
        if group.insert(p.translation.to_owned(), (id.to_owned(), text.to_owned())).is_some() {
            return Err(format!("document id `{id}` appears twice; ids must name documents"));
        }
        Ok(())
    }

    /// Adds another collection's documents (a later shard's).
    fn merge(&mut self, other: Self) -> Result<(), String> {
        for ((unit, prefix), group) in other.units {
            let mine = self.units.entry((unit, prefix)).or_default();
            for (translation, (id, text)) in group {
                if mine.insert(translation, (id.clone(), text)).is_some() {
                    return Err(format!("document id `{id}` appears twice; ids must name documents"));
                }
            }
        }
        self.ignored += other.ignored;
        for (t, n) in other.unselected {
            *self.unselected.entry(t).or_default() += n;
        }
        Ok(())
    }

    /// The examples, sorted by (unit, prefix, source code, target code), and their counts.
    pub fn examples(&self) -> (Vec<TranslationExample>, PairCounts) {
        let mut counts = PairCounts { ignored: self.ignored, ..PairCounts::default() };
        let mut out = Vec::new();
        for ((unit, prefix), group) in &self.units {
            if group.len() < 2 {
                counts.unpaired += group.len() as u64;
                continue;
            }
            counts.units += 1;
            counts.documents += group.len() as u64;
            for (src, (src_doc, src_text)) in group {
                for (tgt, (tgt_doc, tgt_text)) in group {
                    if src == tgt {
                        continue;
                    }
                    // `add` keeps selected translations only.
                    let (src_lang, tgt_lang) = (&self.languages[src], &self.languages[tgt]);
                    out.push(TranslationExample {
                        id: format!("{prefix}-{unit}:{src}>{tgt}"),
                        source: TranslationSide {
                            doc: src_doc.clone(),
                            translation: src.clone(),
                            language: src_lang.clone(),
                        },
                        target: TranslationSide {
                            doc: tgt_doc.clone(),
                            translation: tgt.clone(),
                            language: tgt_lang.clone(),
                        },
                        messages: vec![
                            Message::new(Role::User, self.template.render(src_lang, tgt_lang, src_text)),
                            Message::new(Role::Assistant, tgt_text.clone()),
                        ],
                    });
                }
            }
        }
        counts.examples = out.len() as u64;
        (out, counts)
    }

    /// Why an input gave no example, as a hint.
    fn empty_hint(&self) -> String {
        let present: Vec<&str> = self
            .units
            .values()
            .flat_map(BTreeMap::keys)
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut hint = if present.is_empty() {
            "none of the selected translations is present".to_owned()
        } else {
            format!("present: {}, but no unit has two of them", present.join(", "))
        };
        if self.unselected.is_empty() {
            hint.push_str("; no other document id has the shape `<prefix>-<translation>-<unit>`");
        } else {
            let mut others: Vec<(&String, &u64)> = self.unselected.iter().collect();
            others.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let _ = write!(hint, "; the input's other translations include ");
            let names: Vec<String> = others.iter().take(8).map(|(t, n)| format!("`{t}` ({n})")).collect();
            hint.push_str(&names.join(", "));
            if others.len() > 8 {
                let _ = write!(hint, " and {} more", others.len() - 8);
            }
        }
        let _ = write!(hint, "; `languages` selects {}", self.selected());
        hint
    }

    /// The selected translation codes, comma-separated.
    fn selected(&self) -> String {
        self.languages.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Reads one input (a dataset, or for `held_out` also a source) into parallel documents.
fn collect(
    cx: &StageContext<'_>,
    input: &str,
    config: &TranslationPairsConfig,
) -> Result<ParallelDocuments, StageError> {
    let bad = |message: String| StageError::Input { input: input.into(), message };
    let given = cx.input(input)?;
    let mut all = ParallelDocuments::new(config)?;
    match get_record(cx.store, &given.digest)? {
        Record::Dataset(ds) => {
            // Shards in parallel, merged in shard order.
            let parts: Vec<ParallelDocuments> = cx.pool.install(|| {
                ds.shards
                    .par_iter()
                    .map(|s| {
                        let mut part = ParallelDocuments::new(config)?;
                        for doc in shard_documents(cx.store, &s.digest)? {
                            let doc = doc?;
                            part.add(&doc.id, &doc.text).map_err(bad)?;
                        }
                        Ok::<_, StageError>(part)
                    })
                    .collect::<Result<_, _>>()
            })?;
            for part in parts {
                all.merge(part).map_err(bad)?;
            }
        }
        Record::Source(_) if input == "held_out" => {
            let files = prov_filter::source_files(cx.store, &given.digest, input, "a held-out source")?;
            for (path, format, display) in files {
                for doc in read_documents_as(&path, format, Path::new(&display))? {
                    let Document { id, text, .. } = doc?;
                    all.add(&id, &text).map_err(|m| bad(format!("`{display}`: {m}")))?;
                }
            }
        }
        _ => {
            let expected = if input == "held_out" { "a dataset or a source record" } else { "a dataset record" };
            return Err(bad(format!("expected {expected}")));
        }
    }
    Ok(all)
}

/// Builds translation examples for supervised fine-tuning from parallel documents.
pub struct TranslationPairsStage;

impl Stage for TranslationPairsStage {
    fn kind(&self) -> &'static str {
        "translation-pairs"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "turn parallel documents (`<prefix>-<translation>-<unit>` ids) into translation examples for SFT: train from `docs`, eval from `held_out`"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: TranslationPairsConfig = parse_params(params)?;
        config.check()?;
        Ok(serde_json::to_value(config).expect("strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("docs", vec![OutputType::Dataset]),
            ("held_out", vec![OutputType::Dataset, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("eval".into(), OutputType::File), ("train".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: TranslationPairsConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let mut out = StageOutput::default();
        for (input, output) in [("docs", "train"), ("held_out", "eval")] {
            let docs = collect(cx, input, &config)?;
            let (examples, counts) = docs.examples();
            if examples.is_empty() {
                return Err(StageError::Config(
                    ConfigError::at(
                        &["languages"],
                        format!(
                            "input `{input}` gives no translation example for output `{output}`: no unit is present in two of the selected translations ({})",
                            docs.selected()
                        ),
                    )
                    .with_hint(docs.empty_hint()),
                ));
            }
            let digest = cx.store.put_bytes(ObjectKind::Blob, &write_examples(&examples))?;
            out.outputs.insert(output.into(), OutputRef { output_type: OutputType::File, digest });
            for (name, n) in [
                ("examples", counts.examples),
                ("documents", counts.documents),
                ("units", counts.units),
                ("ignored", counts.ignored),
                ("unpaired", counts.unpaired),
            ] {
                out.stats.insert(format!("{output}_{name}"), Value::from(n));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_dataset::{ShardWriter, write_dataset};
    use prov_exec::StageInput;
    use prov_manifest::{Content, SourceRecord, put_record};
    use prov_store::{Digest, Store};
    use serde_json::json;

    fn config(languages: &[(&str, &str)]) -> TranslationPairsConfig {
        let params = json!({ "languages": languages.iter().copied().collect::<BTreeMap<_, _>>() });
        serde_json::from_value(TranslationPairsStage.resolve_config(&params).unwrap()).unwrap()
    }

    fn three() -> TranslationPairsConfig {
        config(&[("eng", "English"), ("fra", "French"), ("deu_1996", "German")])
    }

    fn pairs(config: &TranslationPairsConfig, docs: &[(&str, &str)]) -> (Vec<TranslationExample>, PairCounts) {
        let mut p = ParallelDocuments::new(config).unwrap();
        for (id, text) in docs {
            p.add(id, text).unwrap();
        }
        p.examples()
    }

    #[test]
    fn ids_split_at_their_last_two_dashes() {
        let p = parse_parallel_id("udhr-eng-05").unwrap();
        assert_eq!((p.prefix, p.translation, p.unit), ("udhr", "eng", "05"));
        let p = parse_parallel_id("eval-udhr-deu_1996-30").unwrap();
        assert_eq!((p.prefix, p.translation, p.unit), ("eval-udhr", "deu_1996", "30"));
        let p = parse_parallel_id("debian-fortunes-de-brot-000").unwrap();
        assert_eq!((p.prefix, p.translation, p.unit), ("debian-fortunes-de", "brot", "000"));
        for bad in ["udhr", "udhr-05", "-eng-05", "udhr--05", "udhr-eng-", ""] {
            assert_eq!(parse_parallel_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn defaults_are_explicit_and_params_checked() {
        let c =
            TranslationPairsStage.resolve_config(&json!({"languages": {"eng": "English", "fra": "French"}})).unwrap();
        assert_eq!(c, json!({"languages": {"eng": "English", "fra": "French"}, "template": DEFAULT_TEMPLATE}));
        let err = |params: Value| TranslationPairsStage.resolve_config(&params).unwrap_err();
        let e = err(json!({"languages": {"eng": "English"}}));
        assert_eq!(e.path, ["languages"]);
        assert!(e.message.contains("at least 2"), "{e}");
        assert_eq!(err(json!({})).message, "missing field `languages`");
        let e = err(json!({"languages": {"eng": "English", "fra": "French"}, "templte": "x"}));
        assert_eq!((e.path, e.hint.as_deref()), (vec!["templte".to_owned()], Some("did you mean `template`?")));
        let e = err(json!({"languages": {"eng": "English", "fr-FR": "French"}}));
        assert_eq!(e.path, ["languages", "fr-FR"]);
        let e = err(json!({"languages": {"eng": "English", "fra": " "}}));
        assert_eq!(e.path, ["languages", "fra"]);
    }

    #[test]
    fn templates_need_each_placeholder_and_no_unknown_one() {
        let with = |t: &str| {
            TranslationPairsStage
                .resolve_config(&json!({"languages": {"eng": "English", "fra": "French"}, "template": t}))
        };
        for (t, missing) in
            [("{source} {target}", "{text}"), ("{source}: {text}", "{target}"), ("{target}\n{text}", "{source}")]
        {
            let e = with(t).unwrap_err();
            assert_eq!(e.path, ["template"]);
            assert_eq!(e.message, format!("the template has no `{missing}`"));
            assert!(e.hint.unwrap().contains("the default is"));
        }
        let e = with("{src} to {target}: {text} {source}").unwrap_err();
        assert_eq!((e.path, e.message.as_str()), (vec!["template".to_owned()], "unknown placeholder `{src}`"));
        // Other braces are text; placeholders may repeat.
        let t = Template::parse("{ {source}→{target} } {} {text} {{source}}").unwrap();
        assert_eq!(t.render("A", "B", "x {target} y"), "{ A→B } {} x {target} y {A}");
    }

    #[test]
    fn every_ordered_pair_of_a_unit_in_unit_then_code_order() {
        let docs = [
            ("udhr-fra-01", "Article 1 fr"),
            ("udhr-eng-01", "Article 1 en"),
            ("udhr-deu_1996-00", "Präambel"),
            ("udhr-eng-00", "Preamble"),
            ("udhr-fra-00", "Préambule"),
            ("udhr-spa-00", "Preámbulo"),
            ("udhr-eng-02", "Article 2 alone"),
            ("not parallel", "x"),
            ("udhr-ita-03", "solo"),
            ("udhr-fra-04", ""),
        ];
        let (ex, counts) = pairs(&three(), &docs);
        let ids: Vec<&str> = ex.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "udhr-00:deu_1996>eng",
                "udhr-00:deu_1996>fra",
                "udhr-00:eng>deu_1996",
                "udhr-00:eng>fra",
                "udhr-00:fra>deu_1996",
                "udhr-00:fra>eng",
                "udhr-01:eng>fra",
                "udhr-01:fra>eng",
            ]
        );
        assert_eq!(counts, PairCounts { examples: 8, documents: 5, units: 2, ignored: 4, unpaired: 1 });
        let e = &ex[3];
        assert_eq!(
            e.source,
            TranslationSide { doc: "udhr-eng-00".into(), translation: "eng".into(), language: "English".into() }
        );
        assert_eq!(
            e.target,
            TranslationSide { doc: "udhr-fra-00".into(), translation: "fra".into(), language: "French".into() }
        );
        assert_eq!(
            e.messages,
            [
                Message::new(Role::User, "Translate from English into French:\nPreamble"),
                Message::new(Role::Assistant, "Préambule")
            ]
        );
        // Input order does not matter.
        let mut reversed = docs;
        reversed.reverse();
        assert_eq!(pairs(&three(), &reversed).0, ex);
    }

    #[test]
    fn prefixes_do_not_mix_and_a_repeated_id_is_refused() {
        let docs = [("a-eng-1", "a1"), ("b-fra-1", "b1"), ("b-eng-1", "b2")];
        let (ex, counts) = pairs(&three(), &docs);
        assert_eq!(ex.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["b-1:eng>fra", "b-1:fra>eng"]);
        assert_eq!((counts.unpaired, counts.units), (1, 1));
        let mut p = ParallelDocuments::new(&three()).unwrap();
        p.add("a-eng-1", "x").unwrap();
        assert_eq!(p.add("a-eng-1", "y").unwrap_err(), "document id `a-eng-1` appears twice; ids must name documents");
    }

    #[test]
    fn examples_round_trip_as_canonical_json_lines() {
        let (ex, _) = pairs(&three(), &[("udhr-eng-05", "No one \"shall\"\nbe"), ("udhr-fra-05", "Nul ne sera")]);
        let bytes = write_examples(&ex);
        let first = std::str::from_utf8(&bytes).unwrap().lines().next().unwrap().to_owned();
        assert_eq!(
            first,
            r#"{"id":"udhr-05:eng>fra","messages":[{"content":"Translate from English into French:\nNo one \"shall\"\nbe","role":"user"},{"content":"Nul ne sera","role":"assistant"}],"source":{"doc":"udhr-eng-05","language":"English","translation":"eng"},"target":{"doc":"udhr-fra-05","language":"French","translation":"fra"}}"#
        );
        assert_eq!(read_examples(&bytes).unwrap(), ex);
        assert_eq!(read_examples(b"").unwrap(), []);
    }

    #[test]
    fn bad_example_lines_name_the_line_and_field() {
        let (ex, _) = pairs(&three(), &[("u-eng-1", "a"), ("u-fra-1", "b")]);
        let good = String::from_utf8(write_examples(&ex)).unwrap();
        let line1 = good.lines().next().unwrap();
        let err = |text: &str| read_examples(text.as_bytes()).unwrap_err();
        let e = err(&format!("{line1}\n{}\n", line1.replace("\"role\":\"assistant\"", "\"role\":\"robot\"")));
        assert_eq!((e.line, e.field.as_deref()), (2, Some("messages[1].role")));
        assert_eq!(
            e.to_string(),
            "line 2, field `messages[1].role`: unknown variant `robot`, expected one of `system`, `developer`, `user`, `assistant`"
        );
        let e = err(&format!("{}\n", line1.replace("\"doc\":", "\"document\":")));
        assert_eq!((e.line, e.field.as_deref()), (1, Some("source.document")));
        let e = err(&format!("{}\n", line1.replace(r#""role":"user""#, r#""role":"assistant""#)));
        assert_eq!(
            e.to_string(),
            "line 1, field `messages`: expected `user` then `assistant`, found [assistant, assistant]"
        );
        assert_eq!(err(&format!("{line1}\n\n")).to_string(), "line 2: empty line");
        assert_eq!(err(line1).to_string(), "line 1: the last line does not end in `\\n`");
        assert_eq!(err("{\"id\":\"x\"}\n").to_string(), "line 1: missing field `source`");
        assert_eq!(err("{\"id\":1}\n").to_string(), "line 1, field `id`: invalid type: integer `1`, expected a string");
    }

    /// Stores documents as a dataset of two shards.
    fn dataset(store: &Store, docs: &[(&str, &str)]) -> Digest {
        let mut shards = Vec::new();
        for half in docs.chunks(docs.len().div_ceil(2).max(1)) {
            let mut w = ShardWriter::new(store).unwrap();
            for (id, text) in half {
                w.push(Document::new(*id, *text)).unwrap();
            }
            shards.push(w.finish().unwrap());
        }
        write_dataset(store, shards).unwrap().0
    }

    /// Stores documents as a JSON Lines file source.
    fn source(store: &Store, docs: &[(&str, &str)]) -> Digest {
        let mut bytes = Vec::new();
        for (id, text) in docs {
            bytes.extend(serde_json::to_vec(&json!({"id": id, "text": text})).unwrap());
            bytes.push(b'\n');
        }
        let digest = store.put_bytes(ObjectKind::Blob, &bytes).unwrap();
        let record = SourceRecord {
            schema: 1,
            name: "udhr-eval".parse().unwrap(),
            origin: "data/eval.jsonl".into(),
            content: Content::File { digest, size: bytes.len() as u64 },
            license: Some("MIT".into()),
            retrieved: None,
        };
        put_record(store, &Record::Source(record)).unwrap()
    }

    fn run(store: &Store, config: &Value, docs: StageInput, held_out: StageInput) -> Result<StageOutput, StageError> {
        let inputs = BTreeMap::from([("docs".to_owned(), docs), ("held_out".to_owned(), held_out)]);
        let bench = prov_exec::testing::TestBench::new(2);
        TranslationPairsStage.run(&bench.context(store, Path::new("."), "sft-data", config, &inputs))
    }

    #[test]
    fn the_stage_writes_train_and_eval_files_and_refuses_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let config = TranslationPairsStage
            .resolve_config(&json!({"languages": {"eng": "English", "fra": "French", "deu_1996": "German"}}))
            .unwrap();
        let train = [("udhr-eng-00", "Preamble"), ("udhr-fra-00", "Préambule"), ("udhr-eng-01", "A1"), ("x-1", "?")];
        let eval = [("eval-udhr-eng-30", "A30"), ("eval-udhr-deu_1996-30", "Artikel 30"), ("eval-udhr-ces-30", "Č")];
        let docs = StageInput { output_type: OutputType::Dataset, digest: dataset(&store, &train) };
        let file = StageInput { output_type: OutputType::Source, digest: source(&store, &eval) };
        let as_dataset = StageInput { output_type: OutputType::Dataset, digest: dataset(&store, &eval) };
        let out = run(&store, &config, docs, file).unwrap();
        assert_eq!(out, run(&store, &config, docs, as_dataset).unwrap(), "a source and a dataset give the same bytes");
        let read = |name: &str| read_examples(&store.read(&out.outputs[name].digest).unwrap()).unwrap();
        let ids = |name: &str| read(name).into_iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids("train"), ["udhr-00:eng>fra", "udhr-00:fra>eng"]);
        assert_eq!(ids("eval"), ["eval-udhr-30:deu_1996>eng", "eval-udhr-30:eng>deu_1996"]);
        assert_eq!(read("eval")[1].messages[1].content, "Artikel 30");
        let stats = serde_json::to_value(&out.stats).unwrap();
        assert_eq!(
            stats,
            json!({
                "train_examples": 2, "train_documents": 2, "train_units": 1, "train_ignored": 1, "train_unpaired": 1,
                "eval_examples": 2, "eval_documents": 2, "eval_units": 1, "eval_ignored": 1, "eval_unpaired": 0,
            })
        );

        // No selected translation in the held-out input: an error naming it, with a hint.
        let only_ces =
            StageInput { output_type: OutputType::Source, digest: source(&store, &[("eval-udhr-ces-30", "Č")]) };
        let Err(StageError::Config(e)) = run(&store, &config, docs, only_ces) else {
            panic!("an empty eval is refused")
        };
        assert_eq!(e.path, ["languages"]);
        assert_eq!(
            e.message,
            "input `held_out` gives no translation example for output `eval`: no unit is present in two of the selected translations (deu_1996, eng, fra)"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "none of the selected translations is present; the input's other translations include `ces` (1); `languages` selects deu_1996, eng, fra"
            )
        );
        // Translations present, but never two in one unit: the train input is named.
        let apart = StageInput {
            output_type: OutputType::Dataset,
            digest: dataset(&store, &[("udhr-eng-00", "a"), ("udhr-fra-01", "b"), ("notes", "c")]),
        };
        let Err(StageError::Config(e)) = run(&store, &config, apart, file) else { panic!("an empty train is refused") };
        assert!(e.message.starts_with("input `docs` gives no translation example for output `train`"), "{e}");
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "present: eng, fra, but no unit has two of them; no other document id has the shape `<prefix>-<translation>-<unit>`; `languages` selects deu_1996, eng, fra"
            )
        );
    }

    /// The main job's documents: the UDHR corpus and the held-out article 30 in 10 translations.
    #[test]
    fn the_main_jobs_udhr_gives_600_train_and_20_eval_examples() {
        let root = prov_testkit::repo_root().join("recipes/data/mini-apertus");
        let Some(corpus) = prov_testkit::require(root.join("corpus/udhr.jsonl"), "run `scripts/setup`") else { return };
        let Some(eval) = prov_testkit::require(root.join("eval.jsonl"), "run `scripts/setup`") else { return };
        let config =
            config(&[("eng", "English"), ("fra", "French"), ("spa", "Spanish"), ("ita", "Italian"), ("nld", "Dutch")]);
        let read = |path: &Path| -> Vec<Document> {
            prov_dataset::read_documents(path).unwrap().map(Result::unwrap).collect()
        };
        // The decontaminate stage of the main job removes the corpus's copies of the held-out article.
        let mut benchmark = prov_dedup::BenchmarkIndex::new(&prov_dedup::DecontaminateConfig {
            ngram: 8,
            min_overlap: 5,
            max_coverage: 0.5,
        });
        let held_out = read(&eval);
        for d in &held_out {
            benchmark.add(&d.id, &d.text).unwrap();
        }
        let corpus = read(&corpus);
        let mut train = ParallelDocuments::new(&config).unwrap();
        let mut removed = 0;
        for d in &corpus {
            let selected = parse_parallel_id(&d.id).is_some_and(|p| config.languages.contains_key(p.translation));
            if selected && benchmark.scan(&d.text).is_some_and(|c| c.contaminated_examples > 0) {
                removed += 1;
                continue;
            }
            train.add(&d.id, &d.text).unwrap();
        }
        assert_eq!(removed, 5, "article 30 in each of the 5 translations");
        let (examples, counts) = train.examples();
        assert_eq!(
            counts,
            PairCounts { examples: 600, documents: 150, units: 30, ignored: corpus.len() as u64 - 155, unpaired: 0 }
        );
        assert_eq!(examples.first().unwrap().id, "udhr-00:eng>fra");
        assert_eq!(examples.last().unwrap().id, "udhr-29:spa>nld");
        let text = |id: &str| &corpus.iter().find(|d| d.id == id).unwrap().text;
        let e = examples.iter().find(|e| e.id == "udhr-05:eng>fra").unwrap();
        assert_eq!(e.messages[0].content, format!("Translate from English into French:\n{}", text("udhr-eng-05")));
        assert_eq!(&e.messages[1].content, text("udhr-fra-05"));
        assert!(text("udhr-eng-05").starts_with("Article 5\n"));
        assert_eq!(read_examples(&write_examples(&examples)).unwrap(), examples);

        let mut eval = ParallelDocuments::new(&config).unwrap();
        for d in &held_out {
            eval.add(&d.id, &d.text).unwrap();
        }
        let (examples, counts) = eval.examples();
        assert_eq!(counts, PairCounts { examples: 20, documents: 5, units: 1, ignored: 5, unpaired: 0 });
        assert!(examples.iter().all(|e| e.id.starts_with("eval-udhr-30:")));
        let e = examples.iter().find(|e| e.id == "eval-udhr-30:nld>ita").unwrap();
        let held = |id: &str| &held_out.iter().find(|d| d.id == id).unwrap().text;
        assert_eq!(&e.messages[1].content, held("eval-udhr-ita-30"));
        assert_eq!(e.messages[0].content, format!("Translate from Dutch into Italian:\n{}", held("eval-udhr-nld-30")));
    }
}
