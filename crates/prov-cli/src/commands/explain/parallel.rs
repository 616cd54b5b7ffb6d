//! `prov explain bifixer` and `prov explain pair-score`: one sentence pair from stdin through
//! the `bifixer` stage's repair, step by step, or through the `pair-score` stage's scorer,
//! feature by feature; each says the rule its stage would write.

use std::collections::BTreeMap;
use std::path::PathBuf;

use prov_parallel::bifixer::{Options, is_very_long, side_steps};
use prov_parallel::pairs::Pair;
use prov_parallel::rules::Rules;
use prov_parallel::score_stage::{ScoreConfig, assess as assess_score};
use prov_parallel::scorer::{FEATURES, Model, features};
use prov_parallel::stage::assess as assess_bifixer;
use serde_json::{Value, json};

use crate::error::CommandError;
use crate::ui::Ui;

/// The pair on stdin: `SOURCE TAB TARGET`, one final newline dropped.
fn stdin_pair(source_language: &str, target_language: &str) -> Result<Pair, CommandError> {
    let text = super::stdin_text()?;
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let Some((source, target)) = line.split_once('\t').filter(|(_, t)| !t.contains('\t')) else {
        return Err(CommandError::input("stdin must be one pair: the source side, a tab, the target side"));
    };
    Ok(Pair {
        source: source.to_owned(),
        source_language: source_language.to_owned(),
        target: target.to_owned(),
        target_language: target_language.to_owned(),
        metadata: serde_json::Map::new(),
    })
}

/// Repair a sentence pair from stdin as the bifixer stage does and show each step
///
/// Reads one pair from stdin, `SOURCE TAB TARGET` (a final newline is dropped), and a rules
/// file that `scripts/bifixer-rules.py` wrote. Prints each side after each of Bifixer's steps
/// that runs (`characters` or `strip`, `html`, `normalization`, `orthography`), then the rule
/// the `bifixer` stage writes (`bifixer:unchanged`, `bifixer:repaired`, `bifixer:empty`,
/// `bifixer:empty-after-repair`), its decision and the pair hash. `--ignore STEP` switches a
/// step off as Bifixer's `--ignore_STEP` flags do. With `--json`, one `bifixer` message:
/// `{"source": {"language", "steps": [{"step", "text"}]}, "target": {...}, "rule",
/// "decision", "evidence"}`, the rule, decision and evidence as in the ledger.
#[derive(Debug, clap::Args)]
pub(super) struct BifixerArgs {
    /// The rules file
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
    /// The source side's language
    #[arg(long, value_name = "TAG")]
    source_language: String,
    /// The target side's language
    #[arg(long, value_name = "TAG")]
    target_language: String,
    /// Steps switched off: characters, html, normalization, orthography, detokenization,
    /// empty, long
    #[arg(long, value_name = "STEP", value_delimiter = ',')]
    ignore: Vec<String>,
}

fn options(ignore: &[String]) -> Result<Options, CommandError> {
    let mut o = Options::default();
    for step in ignore {
        let switch = match step.as_str() {
            "characters" => &mut o.characters,
            "html" => &mut o.html,
            "normalization" => &mut o.normalization,
            "orthography" => &mut o.orthography,
            "detokenization" => &mut o.detokenization,
            "empty" => &mut o.drop_empty,
            "long" => &mut o.skip_long,
            other => {
                return Err(CommandError::input(format!("`--ignore {other}`: no such step")).with_hint(
                    "the steps are characters, html, normalization, orthography, detokenization, empty, long",
                ));
            }
        };
        *switch = false;
    }
    Ok(o)
}

pub(super) fn cmd_explain_bifixer(ui: &mut Ui, args: &BifixerArgs) -> Result<(), CommandError> {
    let options = options(&args.ignore)?;
    let bytes = prov_store::read_named_file(args.rules.as_ref(), super::MAX_MODEL_FILE_BYTES, "the rules")
        .map_err(|e| CommandError::input(format!("reading the rules: {e}")))?;
    let rules = Rules::parse(&bytes).map_err(|e| {
        CommandError::input(format!("{}: {e}", args.rules.display()))
            .with_hint("write one with scripts/bifixer-rules.py")
    })?;
    let language = |tag: &str| {
        rules
            .language(tag)
            .map_err(|e| CommandError::input(e.to_string()).with_hint("write the rules again with that language"))
    };
    let (src, trg) = (language(&args.source_language)?, language(&args.target_language)?);
    let pair = stdin_pair(&args.source_language, &args.target_language)?;
    let very_long = is_very_long(&pair.source, &pair.target, options);
    let sides = [
        ("source", &pair.source_language, side_steps(&pair.source, src, options, very_long)),
        ("target", &pair.target_language, side_steps(&pair.target, trg, options, very_long)),
    ];
    let (decision, rule, evidence, _) = assess_bifixer(&pair, src, trg, options);
    if ui.is_json() {
        let side = |(_, language, steps): &(&str, &String, Vec<(&str, String)>)| {
            let steps: Vec<Value> = steps.iter().map(|(s, t)| json!({ "step": s, "text": t })).collect();
            json!({ "language": language, "steps": steps })
        };
        let message = json!({
            "source": side(&sides[0]), "target": side(&sides[1]),
            "rule": rule, "decision": decision.as_str(), "evidence": evidence,
        });
        ui.json("bifixer", message)?;
        return Ok(());
    }
    for (name, language, steps) in &sides {
        ui.line(format!("{name} ({language}):"))?;
        for (step, text) in steps {
            ui.line(format!("  {step}: {text:?}"))?;
        }
    }
    let hash = evidence.get("hash").and_then(Value::as_str).map(|h| format!(", hash {h}")).unwrap_or_default();
    ui.line(format!("{rule}: {}{hash}", decision.as_str()))?;
    Ok(())
}

/// Score a sentence pair from stdin with a pair scorer and say which pair-score rule decides
///
/// Reads one pair from stdin, `SOURCE TAB TARGET` (a final newline is dropped), and a scorer
/// that a `pair-score-train` stage wrote (its `model` output). Prints each feature's value and
/// its part in the classifier's and the quality estimate's sums (weight times value; the parts
/// and the intercepts add up to the two sums), the classifier's probability and the clipped
/// quality estimate, then the rule the `pair-score` stage writes (`pair-score:kept`,
/// `pair-score:bicleaner`, `pair-score:cometkiwi`) for the thresholds given, the report's by
/// default. With `--json`, one `pair-score` message: `{"features": [{"name", "value",
/// "classifier_part", "quality_part"}], "classifier_intercept", "quality_intercept", "rule",
/// "decision", "evidence"}`.
#[derive(Debug, clap::Args)]
pub(super) struct PairScoreArgs {
    /// The scorer file
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    /// The source side's language
    #[arg(long, value_name = "TAG")]
    source_language: String,
    /// The target side's language
    #[arg(long, value_name = "TAG")]
    target_language: String,
    /// The stage's `bicleaner_threshold`, as LANG=T pairs with `*` for the rest
    #[arg(long, value_name = "LANG=T", value_delimiter = ',', default_value = "pt=0.6,*=0.5")]
    bicleaner_threshold: Vec<String>,
    /// The stage's `cometkiwi_threshold`
    #[arg(long, value_name = "Q", default_value_t = 0.7)]
    cometkiwi_threshold: f64,
}

fn thresholds(pairs: &[String]) -> Result<BTreeMap<String, f64>, CommandError> {
    let mut out = BTreeMap::new();
    for p in pairs {
        let parsed = p.split_once('=').and_then(|(l, t)| t.parse::<f64>().ok().map(|t| (l.to_owned(), t)));
        let Some((language, t)) = parsed.filter(|(_, t)| (0.0..=1.0).contains(t)) else {
            return Err(CommandError::input(format!(
                "`--bicleaner-threshold {p}`: expected LANG=T with T from 0 to 1"
            )));
        };
        out.insert(language, t);
    }
    if !out.contains_key("*") {
        return Err(CommandError::input("`--bicleaner-threshold` has no `*=T` for the other languages"));
    }
    Ok(out)
}

pub(super) fn cmd_explain_pair_score(ui: &mut Ui, args: &PairScoreArgs) -> Result<(), CommandError> {
    if !(0.0..=1.0).contains(&args.cometkiwi_threshold) {
        return Err(CommandError::input(format!(
            "`--cometkiwi-threshold` must be from 0 to 1, got {}",
            args.cometkiwi_threshold
        )));
    }
    let config = ScoreConfig {
        bicleaner_threshold: thresholds(&args.bicleaner_threshold)?,
        cometkiwi_threshold: args.cometkiwi_threshold,
    };
    let bytes = prov_store::read_named_file(args.model.as_ref(), super::MAX_MODEL_FILE_BYTES, "the scorer")
        .map_err(|e| CommandError::input(format!("reading the scorer: {e}")))?;
    let model = Model::parse(&bytes).map_err(|e| {
        CommandError::input(format!("{}: {e}", args.model.display()))
            .with_hint("give the `model` output of a pair-score-train stage")
    })?;
    let pair_model = model.pair(&args.source_language, &args.target_language).ok_or_else(|| {
        let known: Vec<&String> = model.pairs.keys().collect();
        CommandError::input(format!(
            "the scorer has no model for {} to {}; it has {known:?}",
            args.source_language, args.target_language
        ))
    })?;
    let pair = stdin_pair(&args.source_language, &args.target_language)?;
    let x = features(&pair.source, &pair.target, &pair_model.dictionary);
    let (decision, rule, evidence) = assess_score(pair_model, &pair, &config);
    let rows: Vec<(&str, f64, f64, f64)> = FEATURES
        .iter()
        .zip(&x)
        .zip(pair_model.classifier.weights.iter().zip(&pair_model.quality.weights))
        .map(|((name, v), (wc, wq))| (*name, *v, wc * v, wq * v))
        .collect();
    if ui.is_json() {
        let list: Vec<Value> = rows
            .iter()
            .map(|(n, v, c, q)| json!({ "name": n, "value": v, "classifier_part": c, "quality_part": q }))
            .collect();
        ui.json(
            "pair-score",
            json!({
                "features": list,
                "classifier_intercept": pair_model.classifier.intercept,
                "quality_intercept": pair_model.quality.intercept,
                "rule": rule, "decision": decision.as_str(), "evidence": evidence,
            }),
        )?;
        return Ok(());
    }
    ui.line(format!("{:<31} {:>10} {:>16} {:>13}", "feature", "value", "classifier part", "quality part"))?;
    for (name, v, c, q) in &rows {
        ui.line(format!("{name:<31} {v:>10.4} {c:>16.4} {q:>13.4}"))?;
    }
    ui.line(format!(
        "{:<31} {:>10} {:>16.4} {:>13.4}",
        "intercept", "", pair_model.classifier.intercept, pair_model.quality.intercept
    ))?;
    ui.line(format!(
        "{rule}: {}: classifier {:.4} (threshold {}), quality {:.4} (threshold {})",
        decision.as_str(),
        evidence["classifier"].as_f64().unwrap_or(f64::NAN),
        evidence["bicleaner_threshold"],
        evidence["quality"].as_f64().unwrap_or(f64::NAN),
        evidence["cometkiwi_threshold"],
    ))?;
    Ok(())
}
