//! `prov explain`: answers "why" for one input. Each kind of question is a subcommand of
//! [`ExplainCommand`]: a robots.txt decision, PII matches, a license string, the labels
//! Goldfish drops, the heuristic filter's rules on a text, a text's perplexity and bucket, a
//! text's language and quality tier, a sentence pair's repair and scores, the benchmark
//! n-grams a text holds, and the documents in the batch of a training step.

mod batch;
mod code;
mod decontaminate;
mod goldfish;
mod heuristics;
mod langid;
mod license;
mod parallel;
mod perplexity;
mod pii;
mod quality;

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use prov_robots::{Basis, BodyKind, Decision, KeyReading, RobotsTxt, product_token};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// The most a model or scorer file named on the command line may hold: 4 GiB. Only a
/// regular file is read, so `/dev/zero` or a FIFO is refused before this.
const MAX_MODEL_FILE_BYTES: u64 = 4 << 30;

/// Explain one decision: why a URL is allowed, a string redacted, a license accepted
///
/// Each subcommand answers for one kind of input and names the rule that decided, with its
/// line, so that a removal in a ledger can be traced to its cause.
#[derive(Debug, clap::Args)]
pub(crate) struct ExplainArgs {
    #[command(subcommand)]
    command: ExplainCommand,
}

/// The kinds of question `prov explain` answers.
#[derive(Debug, clap::Subcommand)]
enum ExplainCommand {
    Robots(RobotsArgs),
    Pii(pii::PiiArgs),
    License(license::LicenseArgs),
    Goldfish(goldfish::GoldfishArgs),
    Heuristics(heuristics::HeuristicsArgs),
    Perplexity(perplexity::PerplexityArgs),
    Langid(langid::LangidArgs),
    Quality(quality::QualityArgs),
    Bifixer(parallel::BifixerArgs),
    PairScore(parallel::PairScoreArgs),
    NgramDecontaminate(decontaminate::NgramDecontaminateArgs),
    CodePackages(code::CodePackagesArgs),
    Batch(batch::BatchArgs),
}

/// Say which robots.txt rule allows or disallows a URL for a crawler
///
/// Parses the robots.txt as RFC 9309 says (groups, longest match, `Allow` wins ties, `*` and
/// `$`, percent-encoding) and prints the decision, the deciding rule with its line number and
/// the user-agent of its group, or "no matching rule: allowed". The crawler's product token is
/// its user-agent up to the first `/` (`CCBot/2.0` is `CCBot`). `/robots.txt` itself is always
/// allowed.
///
/// With `--batch`, reads JSON lines `{"robots": PATH, "agent": UA, "url": URL}` from stdin and
/// writes one JSON line per input, in input order: `{"line", "robots", "agent", "url",
/// "allowed", "rule": {"line", "directive", "pattern"} | null, "agent_group", "basis",
/// "path"}` (with `--json`, each wrapped as a `robots` message). A malformed input line is an
/// error naming its line number.
#[derive(Debug, clap::Args)]
struct RobotsArgs {
    /// The robots.txt file
    #[arg(long, value_name = "FILE", required_unless_present = "batch")]
    robots: Option<PathBuf>,
    /// The crawler's user-agent or product token (`GPTBot`, `CCBot/2.0`, `*`)
    #[arg(long, value_name = "UA", required_unless_present = "batch")]
    agent: Option<String>,
    /// The URL, or its path and query (`https://example.com/a?b`, `/a?b`)
    #[arg(long, value_name = "URL", required_unless_present = "batch")]
    url: Option<String>,
    /// Read JSON lines `{"robots": PATH, "agent": UA, "url": URL}` from stdin instead
    #[arg(long, conflicts_with_all = ["robots", "agent", "url"])]
    batch: bool,
    /// How keys are read: `rfc9309` (default), or `google-typos` (also `User Agent:`,
    /// `Disalow:` and the other misspellings Google's parser reads), as the robots stage's
    /// `keys` option
    #[arg(long, value_name = "READING", default_value = "rfc9309", value_parser = parse_keys)]
    keys: KeyReading,
}

fn parse_keys(text: &str) -> Result<KeyReading, String> {
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| format!("`{text}` is not a key reading: `rfc9309` or `google-typos`"))
}

/// All of stdin, which must be UTF-8: the text the `heuristics`, `perplexity`, `langid`,
/// `quality` and `pii` subcommands explain.
fn stdin_text() -> Result<String, CommandError> {
    let mut input = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut input)
        .map_err(|e| CommandError::input(format!("reading stdin: {e}")))?;
    String::from_utf8(input).map_err(|e| {
        CommandError::input(format!("stdin is not valid UTF-8 (at byte {})", e.utf8_error().valid_up_to()))
    })
}

pub(crate) fn cmd_explain(ui: &mut Ui, cx: &CommandContext, args: &ExplainArgs) -> Result<(), CommandError> {
    match &args.command {
        ExplainCommand::Robots(a) => cmd_explain_robots(ui, cx, a),
        ExplainCommand::Pii(a) => pii::cmd_explain_pii(ui, a),
        ExplainCommand::License(a) => license::cmd_explain_license(ui, a),
        ExplainCommand::Goldfish(a) => goldfish::cmd_explain_goldfish(ui, a),
        ExplainCommand::Heuristics(a) => heuristics::cmd_explain_heuristics(ui, a),
        ExplainCommand::Perplexity(a) => perplexity::cmd_explain_perplexity(ui, a),
        ExplainCommand::Langid(a) => langid::cmd_explain_langid(ui, a),
        ExplainCommand::Quality(a) => quality::cmd_explain_quality(ui, a),
        ExplainCommand::Bifixer(a) => parallel::cmd_explain_bifixer(ui, a),
        ExplainCommand::PairScore(a) => parallel::cmd_explain_pair_score(ui, a),
        ExplainCommand::NgramDecontaminate(a) => decontaminate::cmd_explain_ngram_decontaminate(ui, cx, a),
        ExplainCommand::CodePackages(a) => code::cmd_explain_code_packages(ui, cx, a),
        ExplainCommand::Batch(a) => batch::cmd_explain_batch(ui, cx, a),
    }
}

fn cmd_explain_robots(ui: &mut Ui, cx: &CommandContext, args: &RobotsArgs) -> Result<(), CommandError> {
    if args.batch {
        return explain_robots_batch(ui, cx, args.keys);
    }
    let (Some(file), Some(agent), Some(url)) = (&args.robots, &args.agent, &args.url) else {
        return Err(CommandError::input("give `--robots`, `--agent` and `--url`, or `--batch`"));
    };
    let robots = load_robots(&cx.cwd.join(file), args.keys)?;
    let decision = robots.check(agent, url);
    let stats = robots.stats();
    if robots.looks_unparseable() {
        let body = match stats.body {
            BodyKind::Html => "an HTML body",
            BodyKind::Binary => "a binary body",
            BodyKind::Text => "no group",
        };
        ui.warn(format!(
            "`{}` does not look like a robots.txt ({body}, {} of {} lines ignored): the robots stage keeps every \
             document of such a host (reason `robots:unparseable`); below is what a plain RFC 9309 reading finds",
            file.display(),
            stats.ignored_lines(),
            stats.lines
        ));
    } else if stats.ignored_lines() > 0 {
        ui.warn(format!(
            "{} lines of `{}` were ignored (no `:`, or a rule before any user-agent)",
            stats.ignored_lines(),
            file.display()
        ));
    }
    let misspelled = robots.misspelled_key_lines();
    if !misspelled.is_empty() {
        let lines: Vec<String> = misspelled.iter().map(ToString::to_string).collect();
        let how = match args.keys {
            KeyReading::Rfc9309 => "ignored them, as RFC 9309 says; `--keys google-typos` reads them",
            KeyReading::GoogleTypos => "read them, as Google's parser does (`--keys google-typos`)",
        };
        ui.warn(format!(
            "`{}` misspells a key on line(s) {} (`User Agent`, `Disalow`, …): this reading {how}",
            file.display(),
            lines.join(", ")
        ));
    }
    let mut data = decision_json(&decision);
    if let Value::Object(m) = &mut data {
        m.insert("unparseable".into(), Value::Bool(robots.looks_unparseable()));
        m.insert("ignored_lines".into(), Value::from(stats.ignored_lines()));
        m.insert("misspelled_key_lines".into(), json!(misspelled));
        m.insert("keys".into(), json!(args.keys));
    }
    ui.json("robots", data)?;
    for line in human(&decision, agent) {
        ui.line(line)?;
    }
    Ok(())
}

/// One line of `--batch` input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchInput {
    robots: PathBuf,
    agent: String,
    url: String,
}

fn explain_robots_batch(ui: &mut Ui, cx: &CommandContext, keys: KeyReading) -> Result<(), CommandError> {
    let mut cache: BTreeMap<PathBuf, RobotsTxt> = BTreeMap::new();
    let mut stdin = std::io::stdin().lock();
    let mut buf = Vec::new();
    let mut number = 0usize;
    loop {
        buf.clear();
        if stdin.read_until(b'\n', &mut buf).map_err(|e| CommandError::input(format!("reading stdin: {e}")))? == 0 {
            return Ok(());
        }
        number += 1;
        let Ok(line) = std::str::from_utf8(&buf) else {
            return Err(CommandError::input(format!("stdin line {number}: not valid UTF-8")));
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let input: BatchInput = serde_json::from_str(line).map_err(|e| {
            let text = e.to_string();
            let reason = text.rsplit_once(" at line ").map_or(text.as_str(), |(reason, _)| reason);
            CommandError::input(format!("stdin line {number}: {reason}"))
                .with_hint(r#"each line is a JSON object {"robots": PATH, "agent": UA, "url": URL}"#)
        })?;
        let path = cx.cwd.join(&input.robots);
        if !cache.contains_key(&path) {
            let robots = load_robots(&path, keys)
                .map_err(|e| CommandError::input(format!("stdin line {number}: {}", e.message)))?;
            cache.insert(path.clone(), robots);
        }
        let robots = cache.get(&path).expect("inserted above");
        let decision = robots.check(&input.agent, &input.url);
        let mut data = json!({
            "line": number,
            "robots": input.robots.to_string_lossy(),
            "agent": input.agent,
            "url": input.url,
        });
        if let (Value::Object(m), Value::Object(d)) = (&mut data, decision_json(&decision)) {
            m.extend(d);
        }
        if ui.is_json() {
            ui.json("robots", data)?;
        } else {
            ui.line(data.to_string())?;
        }
    }
}

/// Reads and parses a robots.txt file (parsing never fails; reading may).
fn load_robots(path: &Path, keys: KeyReading) -> Result<RobotsTxt, CommandError> {
    let bytes = prov_store::read_named_file(path, prov_robots::MAX_BODY as u64, "the robots.txt")
        .map_err(|e| CommandError::input(format!("reading robots.txt: {e}")))?;
    Ok(RobotsTxt::parse_with(&bytes, keys))
}

/// Returns the JSON form of a decision, shared by single and batch output.
fn decision_json(d: &Decision) -> Value {
    json!({
        "allowed": d.allowed,
        "rule": d.rule.as_ref().map(|r| json!({"line": r.line, "directive": r.directive, "pattern": r.pattern})),
        "agent_group": d.group_agent,
        "basis": d.basis,
        "path": d.path,
    })
}

/// Returns the human-readable lines of a decision.
fn human(d: &Decision, agent: &str) -> Vec<String> {
    let verdict = if d.allowed { "allowed" } else { "disallowed" };
    let mut lines = match (&d.basis, &d.rule) {
        (Basis::Rule, Some(r)) => {
            vec![format!("{verdict} by line {}: {}: {}", r.line, r.directive, r.pattern)]
        }
        (Basis::RobotsTxt, _) => vec!["allowed: /robots.txt is always allowed (RFC 9309 section 2.2.2)".to_owned()],
        _ => vec![format!("no matching rule: {verdict}")],
    };
    match (&d.group_agent, d.basis) {
        (Some(g), _) => lines.push(format!("group: user-agent {g}")),
        (None, Basis::NoGroup) => {
            lines.push(format!("group: none (no group names `{}` and there is no `*` group)", product_token(agent)));
        }
        (None, _) => {}
    }
    lines.push(format!("path: {}", d.path));
    lines
}
