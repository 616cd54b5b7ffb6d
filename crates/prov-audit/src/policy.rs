//! Audit policies: the YAML file that lists the claims `prov audit` evaluates.
//!
//! ```yaml
//! schema: 1
//! name: apertus
//! claims:
//!   - kind: robots
//!   - kind: pii
//!   - kind: toxicity
//!     removed_share: 0.05
//!     tolerance: 0.01
//! ```
//!
//! Unknown fields are refused, and every error names the file, line, column and field, as
//! recipe errors do ([`RecipeError`]).

use std::path::Path;

use prov_manifest::RecipeError;
use prov_store::Digest;
use serde::{Deserialize, Serialize};

/// Reads the public keys the claims name, relative to the policy file's folder.
fn read_keys(
    file: &Path,
    text: &str,
    claims: &[Claim],
) -> Result<std::collections::BTreeMap<String, prov_attest::PublicKey>, RecipeError> {
    let dir = file.parent().unwrap_or_else(|| Path::new(""));
    let mut keys = std::collections::BTreeMap::new();
    for (i, claim) in claims.iter().enumerate() {
        let (field, listed, min) = match claim {
            Claim::Replay { replayers, min_signed_replays } => ("replayers", replayers, *min_signed_replays),
            Claim::License { verdict_signers, .. } => ("verdict_signers", verdict_signers, 0),
            _ => continue,
        };
        let at = |message: String| {
            let mut e = RecipeError::at_field(file, text, &[], message);
            if let Some((line, column)) = locate_claim_field(text, i, field) {
                (e.line, e.column) = (line, column);
                e.source_line = text.lines().nth(line - 1).map(str::to_owned);
            }
            e.field = Some(format!("claims[{i}].{field}"));
            e
        };
        let (replayers, min_signed_replays) = (listed, &min);
        if *min_signed_replays > replayers.len() {
            return Err(at(format!(
                "`min_signed_replays` is {min_signed_replays} but only {} replayers are listed",
                replayers.len()
            )));
        }
        // Within one claim, each party once: the same file twice, or the same key under two
        // names, would count one party as two.
        let mut listed: Vec<(&String, prov_attest::PublicKey)> = Vec::new();
        for path in replayers {
            let key = prov_attest::PublicKey::read(&dir.join(path)).map_err(|e| at(e.to_string()))?;
            if let Some((first, _)) = listed.iter().find(|(p, k)| *p == path || *k == key) {
                return Err(at(format!("`{path}` is the key `{first}` listed already: each party has its own key")));
            }
            listed.push((path, key.clone()));
            keys.insert(path.clone(), key);
        }
    }
    Ok(keys)
}

/// The one policy schema version this build reads.
pub const POLICY_SCHEMA: u32 = 1;

/// An audit policy: a name and the claims to evaluate, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditPolicy {
    /// Always [`POLICY_SCHEMA`].
    pub schema: u32,
    /// The policy's name, shown in reports.
    pub name: String,
    /// The claims, evaluated in this order.
    pub claims: Vec<Claim>,
    /// The public keys the claims name, read when the policy is parsed, by the path written.
    #[serde(skip)]
    pub keys: std::collections::BTreeMap<String, prov_attest::PublicKey>,
}

/// One claim about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Claim {
    /// No kept document is disallowed by the pinned robots.txt snapshot.
    Robots {
        /// The stage to check; default: every `robots` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// User agents that the stage must have asked (its `agents` config must list them).
        #[serde(default)]
        agents: Vec<String>,
        /// The largest share of kept documents that may be kept only by the opt-out default.
        #[serde(default)]
        max_default_share: Option<f64>,
    },
    /// The share of words the robots filter removed, per language group, is a claimed figure
    /// within a tolerance.
    RobotsLoss {
        /// The stage to check; default: every `robots` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The groups, each with its claimed loss.
        groups: Vec<LanguageGroup>,
        /// The largest allowed absolute difference between measured and claimed loss.
        tolerance: f64,
    },
    /// PII redaction covered every document, and a rescan of its output finds none.
    Pii {
        /// The stage to check; default: every `pii` stage of the run.
        #[serde(default)]
        stage: Option<String>,
    },
    /// Per language, the removed toxicity share is the stated one within a tolerance.
    Toxicity {
        /// The stage to check; default: every `toxicity` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The share of scored documents removed per language (`0.05` for a 95% quantile).
        removed_share: f64,
        /// The largest allowed absolute difference from `removed_share`.
        tolerance: f64,
    },
    /// Every kept document's license is allowed, by the stage's verdicts and by a policy.
    License {
        /// The stage to check; default: every `license` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The `prov-license` policy preset the kept licenses must satisfy (`permissive`).
        #[serde(default = "default_license_policy")]
        policy: String,
        /// Public keys (paths relative to the policy file), one of which must have signed each
        /// reviewer verdict that kept documents (`prov license decide --key`).
        #[serde(default)]
        verdict_signers: Vec<String>,
    },
    /// No source re-licenses the documents it holds: the declared license of the source
    /// upstream of a `license` stage is compatible with every license its documents declare.
    CompoundLicense {
        /// The stage to check; default: every `license` stage of the run.
        #[serde(default)]
        stage: Option<String>,
    },
    /// No kept document overlaps the pinned benchmark.
    Decontamination {
        /// The stage to check; default: every `decontaminate` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The benchmark source the stage must have used (its `benchmark` input digest).
        #[serde(default)]
        benchmark: Option<Digest>,
    },
    /// AFM's palettized model (§5.2): a `palettize` stage's checkpoint takes at most `max` bits
    /// per weight over its projection matrices, tables included, and its weights hold no more
    /// distinct values than its palette allows.
    BitsPerWeight {
        /// The stage to check; default: every `palettize` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The claimed bits per weight (the report's 3.7).
        #[serde(default = "report_bits_per_weight")]
        max: f64,
    },
    /// AFM's code licenses: every code document a `code-packages` stage kept is the unchanged
    /// text of a file of a package whose license the policy allows (the packages judged again
    /// from the pinned source).
    CodeLicenses {
        /// The stage to check; default: every `code-packages` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The license policy preset the stage must have used and the packages must pass
        /// (default: `afm-code`, the report's list).
        #[serde(default = "afm_code_policy")]
        policy: String,
    },
    /// AFM's decontamination: documents holding a benchmark n-gram of `min_n` to `max_n` tokens
    /// were removed unless its count over the corpus reached `threshold`; the counts are the
    /// corpus's (recounted), and no kept document holds a rarer one.
    CommonUsageDecontamination {
        /// The stage to check; default: every `ngram-decontaminate` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The benchmark source the stage must have used (its `benchmark` input digest).
        #[serde(default)]
        benchmark: Option<Digest>,
        /// The claimed shortest n-gram (the report's 4).
        #[serde(default = "report_min_n")]
        min_n: u32,
        /// The claimed longest n-gram (the report's 13).
        #[serde(default = "report_max_n")]
        max_n: u32,
        /// The claimed common-usage threshold (the report's 1000); a stage with a higher one
        /// is stricter and holds the claim too.
        #[serde(default = "report_threshold")]
        threshold: u64,
        /// What the counts count: `documents` (the default) or `occurrences`.
        #[serde(default = "report_count")]
        count: String,
    },
    /// EuroLLM's heuristic filter ran on the claimed languages with the claimed thresholds
    /// (the report's by default), and its output holds nothing the rules remove.
    Heuristics {
        /// The stage to check; default: every `heuristics` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The languages (primary subtags) the rules must have applied to.
        #[serde(default = "report_languages")]
        languages: Vec<String>,
        /// The claimed thresholds, as the stage's parameters name them.
        #[serde(default)]
        thresholds: prov_heuristics::Thresholds,
    },
    /// Each phase of a phased `pretrain` stage drew only from the quality tiers claimed for
    /// it: its sources' tokens come from `quality` stages keeping only those tiers.
    TiersByPhase {
        /// The stage to check; default: every `pretrain` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// Per phase, in order, the tiers (`high`, `medium`, `low`) its data may come from.
        phases: Vec<Vec<String>>,
        /// The cut-offs the tiers are claimed at (`[low, high]`); when given, every `quality`
        /// stage a phase draws from must have used them.
        #[serde(default)]
        cutoffs: Option<[f64; 2]>,
    },
    /// Sentence pairs were kept only at or above the classifier and quality thresholds (the
    /// report's Bicleaner and CometKiwi-22 thresholds by default), by the run's pinned scorer.
    PairScore {
        /// The stage to check; default: every `pair-score` stage of the run.
        #[serde(default)]
        stage: Option<String>,
        /// The claimed classifier thresholds per language and `*`.
        #[serde(default = "report_bicleaner")]
        bicleaner: std::collections::BTreeMap<String, f64>,
        /// The claimed quality threshold.
        #[serde(default = "report_cometkiwi")]
        cometkiwi: f64,
    },
    /// Every stage of the run replays bit for bit.
    Replay {
        /// Public keys (paths relative to the policy file) of the parties whose signed replay
        /// attestations (`prov replay --attest`) count as evidence.
        #[serde(default)]
        replayers: Vec<String>,
        /// How many of those parties, each with its own key, must have signed a replay that
        /// reproduced every output; 0 (the default) asks for none but still reports them.
        #[serde(default)]
        min_signed_replays: usize,
    },
}

/// A group of languages and the share of its words that a filter is claimed to remove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageGroup {
    /// The group's name, shown in the report (`english`).
    pub name: String,
    /// Language codes of the group; a document's `language` matches a code when it equals it
    /// or starts with it followed by `-` or `_` (`de` matches `de-1996`). Empty: every
    /// language no other group lists, documents without a language included.
    #[serde(default)]
    pub languages: Vec<String>,
    /// The claimed share of the group's words removed.
    pub claimed: f64,
}

/// The EuroLLM report's Bicleaner thresholds: 0.6 for Portuguese, 0.5 for the rest.
fn report_bicleaner() -> std::collections::BTreeMap<String, f64> {
    std::collections::BTreeMap::from([("pt".to_owned(), 0.6), ("*".to_owned(), 0.5)])
}

/// The EuroLLM report's CometKiwi-22 threshold.
fn report_cometkiwi() -> f64 {
    0.7
}

/// AFM's on-device model's bits per weight (§5.2).
fn report_bits_per_weight() -> f64 {
    3.7
}

/// AFM's list of code licenses (§3.1.3), as `prov-license`'s preset.
fn afm_code_policy() -> String {
    "afm-code".into()
}

/// AFM's n-gram lengths and common-usage threshold (§3.1.1, item 5).
fn report_min_n() -> u32 {
    4
}
fn report_max_n() -> u32 {
    13
}
fn report_threshold() -> u64 {
    1000
}
fn report_count() -> String {
    "documents".into()
}

/// The languages the EuroLLM report applies its heuristic filter to.
fn report_languages() -> Vec<String> {
    ["de", "es", "fr", "it"].map(String::from).to_vec()
}

fn default_license_policy() -> String {
    "permissive".into()
}

impl Claim {
    /// Returns the claim's kind, as written in policies.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Robots { .. } => "robots",
            Self::RobotsLoss { .. } => "robots-loss",
            Self::Pii { .. } => "pii",
            Self::Toxicity { .. } => "toxicity",
            Self::License { .. } => "license",
            Self::CompoundLicense { .. } => "compound-license",
            Self::Decontamination { .. } => "decontamination",
            Self::BitsPerWeight { .. } => "bits-per-weight",
            Self::CodeLicenses { .. } => "code-licenses",
            Self::CommonUsageDecontamination { .. } => "common-usage-decontamination",
            Self::Heuristics { .. } => "heuristics",
            Self::TiersByPhase { .. } => "tiers-by-phase",
            Self::PairScore { .. } => "pair-score",
            Self::Replay { .. } => "replay",
        }
    }
}

impl AuditPolicy {
    /// The keys a claim lists, by the path it lists them under, read when the policy was
    /// parsed.
    pub fn keys_of(&self, listed: &[String]) -> Vec<(String, prov_attest::PublicKey)> {
        listed.iter().filter_map(|p| self.keys.get(p).map(|k| (p.clone(), k.clone()))).collect()
    }

    /// Parses a policy from its text; `file` is used in error messages.
    ///
    /// # Errors
    ///
    /// A [`RecipeError`] naming the file, line, column and field: YAML syntax, an unknown or
    /// missing field, a schema version other than [`POLICY_SCHEMA`], a share outside 0..=1.
    pub fn parse(file: &Path, text: &str) -> Result<Self, RecipeError> {
        let text = prov_manifest::without_bom(text);
        prov_manifest::check_yaml_nesting(file, text)?;
        let mut policy: Self = serde_yaml::from_str(text).map_err(|e| from_yaml_error(file, text, &e))?;
        if policy.schema != POLICY_SCHEMA {
            return Err(RecipeError::at_field(
                file,
                text,
                &["schema"],
                format!(
                    "unsupported policy schema version (v{}, but only v{POLICY_SCHEMA} is supported)",
                    policy.schema
                ),
            ));
        }
        if policy.claims.is_empty() {
            return Err(RecipeError::at_field(file, text, &["claims"], "list at least one claim"));
        }
        policy.keys = read_keys(file, text, &policy.claims)?;
        for (i, claim) in policy.claims.iter().enumerate() {
            check_claim(file, text, i, claim)?;
        }
        Ok(policy)
    }
}

/// Checks what serde cannot of the `i`-th claim: shares between 0 and 1, and that the claim
/// can be about some run at all. A claim that cannot is the policy's mistake (exit 1), not a
/// claim that fails (exit 4).
fn check_claim(file: &Path, text: &str, i: usize, claim: &Claim) -> Result<(), RecipeError> {
    // A claim that cannot be about any run is the policy's mistake (exit 1), not a
    // claim that fails (exit 4).
    let invalid = |name: &str, message: String| {
        let mut e = RecipeError::at_field(file, text, &[], message);
        if let Some((line, column)) = locate_claim_field(text, i, name) {
            (e.line, e.column) = (line, column);
            e.source_line = text.lines().nth(line - 1).map(str::to_owned);
        }
        e.field = Some(format!("claims[{i}].{name}"));
        e
    };
    let share = |name: &str, value: f64| {
        if (0.0..=1.0).contains(&value) {
            return Ok(());
        }
        Err(invalid(name, format!("`{name}` is a share between 0 and 1, not {value}")))
    };
    match claim {
        Claim::Toxicity { removed_share, tolerance, .. } => {
            share("removed_share", *removed_share)?;
            share("tolerance", *tolerance)?;
        }
        Claim::Robots { agents, max_default_share, .. } => {
            if agents.iter().any(|a| a.trim().is_empty()) {
                return Err(invalid("agents", "an agent is empty".into()));
            }
            if let Some(s) = max_default_share {
                share("max_default_share", *s)?;
            }
        }
        Claim::BitsPerWeight { max, .. } if !(max.is_finite() && *max > 0.0) => {
            return Err(invalid("max", format!("`max` is a positive number of bits per weight, not {max}")));
        }
        Claim::RobotsLoss { groups, tolerance, .. } => {
            share("tolerance", *tolerance)?;
            for g in groups {
                share("claimed", g.claimed)?;
            }
            if groups.is_empty() {
                return Err(invalid("groups", "list at least one language group".into()));
            }
            let mut names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            names.sort_unstable();
            if let Some([twice, _]) = names.windows(2).find(|w| w[0] == w[1]) {
                return Err(invalid("groups", format!("two groups are named `{twice}`")));
            }
            if groups.iter().filter(|g| g.languages.is_empty()).count() > 1 {
                let why = "two groups list no languages: only one can take every language the others do not";
                return Err(invalid("groups", why.into()));
            }
        }
        Claim::TiersByPhase { phases, cutoffs, .. } => {
            if phases.is_empty() || phases.iter().any(Vec::is_empty) {
                return Err(invalid("phases", "list the tiers of every phase, at least one each".into()));
            }
            if let Some(t) = phases.iter().flatten().find(|t| !["high", "medium", "low"].contains(&t.as_str())) {
                return Err(invalid("phases", format!("`{t}` is not a tier (`high`, `medium`, `low`)")));
            }
            if let Some([low, high]) = cutoffs
                && !(low.is_finite() && high.is_finite() && low <= high)
            {
                return Err(invalid("cutoffs", format!("`[low, high]` with low at most high, not [{low}, {high}]")));
            }
        }
        Claim::PairScore { bicleaner, cometkiwi, .. } => {
            for (language, threshold) in bicleaner {
                share(&format!("bicleaner.{language}"), *threshold)?;
            }
            share("cometkiwi", *cometkiwi)?;
        }
        _ => {}
    }
    Ok(())
}

/// Returns the line and column of field `name` of the `index`-th claim (a `- ` item).
fn locate_claim_field(text: &str, index: usize, name: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().enumerate().filter(|(_, l)| l.trim_start().starts_with("- ")).nth(index)?.0;
    lines.iter().enumerate().skip(start).take_while(|(i, l)| *i == start || !l.trim_start().starts_with("- ")).find_map(
        |(i, line)| {
            let trimmed = line.trim_start().trim_start_matches("- ");
            trimmed.strip_prefix(name)?.trim_start().starts_with(':').then(|| (i + 1, line.find(name).unwrap_or(0) + 1))
        },
    )
}

/// Turns a `serde_yaml` error into a located [`RecipeError`] (as recipes do). A claim is
/// buffered to read its `kind`, so `serde_yaml` locates an error inside it at the claim list;
/// an unknown field is then located by its name, from there on.
fn from_yaml_error(file: &Path, text: &str, e: &serde_yaml::Error) -> RecipeError {
    let mut err = prov_manifest::yaml_error(file, text, e);
    let Some(name) = err.message.strip_prefix("unknown field `").and_then(|r| r.split('`').next()).map(str::to_owned)
    else {
        return err;
    };
    let from = e.location().map_or(0, |l| l.line().saturating_sub(1));
    let by_name = text.lines().enumerate().skip(from).find_map(|(i, line)| {
        let rest = line.trim_start().trim_start_matches("- ").strip_prefix(name.as_str())?;
        rest.trim_start().starts_with(':').then(|| (i + 1, line.find(name.as_str()).unwrap_or(0) + 1))
    });
    if let Some((line, column)) = by_name {
        (err.line, err.column) = (line, column);
        err.source_line = text.lines().nth(line - 1).map(str::to_owned);
    }
    err.field = Some(match err.field.take() {
        Some(f) => format!("{f}.{name}"),
        None => name,
    });
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "schema: 1\nname: t\nclaims:\n  - kind: robots\n    max_default_share: 0.5\n  - kind: toxicity\n    removed_share: 0.05\n    tolerance: 0.01\n  - kind: replay\n";

    #[test]
    fn replayers_keys_are_read_beside_the_policy_and_errors_are_located() {
        let dir = tempfile::tempdir().unwrap();
        let key = prov_attest::SigningKey::generate(prov_attest::KeyAlgorithm::Ed25519);
        key.write_pair(&dir.path().join("alice")).unwrap();
        let file = dir.path().join("p.yaml");
        let text =
            "schema: 1\nname: r\nclaims:\n  - kind: replay\n    replayers: [alice.pub]\n    min_signed_replays: 1\n";
        let p = AuditPolicy::parse(&file, text).unwrap();
        assert_eq!(p.keys["alice.pub"], key.public());
        let e = AuditPolicy::parse(&file, &text.replace("alice.pub", "bob.pub")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (5, Some("claims[0].replayers")), "{e}");
        assert!(e.message.contains("bob.pub"), "{e}");
        let e = AuditPolicy::parse(&file, &text.replace("min_signed_replays: 1", "min_signed_replays: 2")).unwrap_err();
        assert!(e.message.contains("only 1 replayers are listed"), "{e}");
        for twice in ["[alice.pub, ./alice.pub]", "[alice.pub, alice.pub]"] {
            let e = AuditPolicy::parse(&file, &text.replace("[alice.pub]", twice)).unwrap_err();
            assert!(e.message.contains("listed already"), "{twice}: {e}");
        }
        // One key may sign replays and verdicts both.
        let both = format!("{text}  - kind: license\n    verdict_signers: [alice.pub]\n");
        assert!(AuditPolicy::parse(&file, &both).is_ok());
    }

    #[test]
    fn claims_that_cannot_be_about_any_run_are_policy_errors() {
        let file = std::path::Path::new("audit.yaml");
        for (claim, field, says) in [
            ("{kind: robots, agents: [GPTBot, \"\"]}", "agents", "an agent is empty"),
            ("{kind: robots, agents: [\"  \"], max_default_share: 0.5}", "agents", "an agent is empty"),
            (
                "{kind: robots-loss, tolerance: 0.1, groups: [{name: g, claimed: 0.1}, {name: g, languages: [de], claimed: 0.1}]}",
                "groups",
                "two groups are named `g`",
            ),
            (
                "{kind: robots-loss, tolerance: 0.1, groups: [{name: a, claimed: 0.1}, {name: b, claimed: 0.1}]}",
                "groups",
                "two groups list no languages",
            ),
            ("{kind: tiers-by-phase, phases: []}", "phases", "every phase"),
            ("{kind: tiers-by-phase, phases: [[high], [bogus]]}", "phases", "`bogus` is not a tier"),
            ("{kind: tiers-by-phase, phases: [[high]], cutoffs: [5, 1]}", "cutoffs", "low at most high"),
            ("{kind: pair-score, bicleaner: {pt: 2}}", "bicleaner.pt", "between 0 and 1"),
            ("{kind: pair-score, cometkiwi: -3}", "cometkiwi", "between 0 and 1"),
        ] {
            let text = format!("schema: 1\nname: p\nclaims:\n  - {claim}\n");
            let e = AuditPolicy::parse(file, &text).expect_err(claim);
            assert_eq!(e.field.as_deref(), Some(format!("claims[0].{field}").as_str()), "{claim}: {e}");
            assert!(e.message.contains(says), "{claim}: {e}");
        }
    }

    #[test]
    fn the_shipped_policies_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes/policies");
        let mut n = 0;
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = fs_err::read_to_string(&path).unwrap();
            AuditPolicy::parse(&path, &text).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
        assert!(n >= 2, "{n} policies in {}", dir.display());
    }

    #[test]
    fn a_policy_parses_and_typos_are_located() {
        let p = AuditPolicy::parse(Path::new("p.yaml"), GOOD).unwrap();
        assert_eq!(p.claims.iter().map(Claim::kind).collect::<Vec<_>>(), ["robots", "toxicity", "replay"]);

        let typo = GOOD.replace("tolerance", "tolerence");
        let e = AuditPolicy::parse(Path::new("p.yaml"), &typo).unwrap_err();
        assert_eq!((e.line, e.column), (8, 5), "{e}");
        assert!(e.to_string().starts_with("p.yaml:8:5: claims.tolerence: unknown field `tolerence`"), "{e}");
        assert_eq!(e.hint.as_deref(), Some("did you mean `tolerance`?"));

        let e = AuditPolicy::parse(Path::new("p.yaml"), &GOOD.replace("schema: 1", "schema: 2")).unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:1:1: schema: unsupported policy schema"), "{e}");
        let e = AuditPolicy::parse(Path::new("p.yaml"), &GOOD.replace("0.05", "5")).unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:7:5: claims[1].removed_share: `removed_share` is a share"), "{e}");
        let e = AuditPolicy::parse(Path::new("p.yaml"), &GOOD.replace("kind: replay", "kind: replays")).unwrap_err();
        assert!(e.to_string().contains("unknown variant `replays`"), "{e}");
        // A bound that every number meets is no claim.
        for bad in [".nan", ".inf", "0", "-1"] {
            let text = format!("schema: 1\nname: t\nclaims:\n  - kind: bits-per-weight\n    max: {bad}\n");
            let e = AuditPolicy::parse(Path::new("p.yaml"), &text).unwrap_err();
            assert!(e.to_string().starts_with("p.yaml:5:5: claims[0].max: `max` is a positive number"), "{bad}: {e}");
        }
    }
}
