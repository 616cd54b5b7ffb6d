//! The library side of license review: what a policy says about a license in three states
//! ([`Status`]), reviewer verdicts ([`reviewer_verdict`], [`ReviewedVerdicts`]), license
//! policy files ([`parse_policy`]) and what changes between two policies ([`diff`]).
//!
//! # Keys
//!
//! A verdict is about a license, not a spelling: its `spdx` member is the license's
//! [`license_key`], the canonical SPDX expression when the string normalises (`GPL-2+` and
//! `GPL-2.0+` both have the key `GPL-2.0-or-later`) and otherwise the string as declared,
//! trimmed (`public-domain`). A verdict with a `record` member is about that one record (a
//! document, such as one Data Provenance Initiative data set) and only while it declares a
//! license with that key; without one it is about every record that declares the key.
//!
//! # Precedence
//!
//! A record's verdict decides before a license's verdict, which decides before the policy.
//! A reviewer verdict holds whatever the policy: it records the policy version it was
//! decided under, and [`diff`] shows which policy decisions change between two policies.
//!
//! # Verdict files
//!
//! Reviewer verdicts are canonical JSON verdict records (so that `b3sum` of a file is its
//! digest in the store), one per file, at [`verdict_path`]: `licenses/<key>.json` or
//! `records/<id>.json`, with every byte but ASCII letters, digits and `+-._` percent-encoded
//! ([`encode_file_name`]). Files not ending in `.json` are ignored (a README may explain the
//! directory).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use prov_manifest::{Decision, RecipeError, Record, SCHEMA_VERSION, VerdictRecord};
use serde::Deserialize;

use crate::normalize::{Normalized, normalize};
use crate::policy::{AmbiguousRule, Policy, PolicyDecision, PolicyError, PolicyRule, evaluate};

/// The `rule` of a reviewer's verdict.
pub const MANUAL_RULE: &str = "manual";

/// What a policy says about a license, in the three states of the review queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// The policy allows it.
    Allow,
    /// The policy denies a license it knows (not in the allow list).
    Deny,
    /// The policy cannot judge it: the string is unknown, ambiguous, or carries an addition the
    /// policy does not know. Denied until a reviewer decides.
    Review,
}

impl Status {
    /// Returns `allow`, `deny` or `review`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Review => "review",
        }
    }
}

/// Returns the state of a policy decision.
pub fn status(decision: &PolicyDecision) -> Status {
    match (decision.decision, decision.rule) {
        (Decision::Allow, _) => Status::Allow,
        (Decision::Deny, PolicyRule::UnknownLicense | PolicyRule::Ambiguous | PolicyRule::UnknownAddition) => {
            Status::Review
        }
        (Decision::Deny, _) => Status::Deny,
    }
}

/// Returns the key of a license string: its canonical SPDX expression, or the string trimmed
/// when it does not normalise.
pub fn license_key(raw: &str) -> String {
    key_of(raw, &normalize(raw))
}

fn key_of(raw: &str, normalized: &Normalized) -> String {
    match normalized.expression() {
        Some(e) => e.to_string(),
        None => raw.trim().to_owned(),
    }
}

/// Returns `s` with every byte but ASCII letters, digits and `+-._` percent-encoded: an
/// injective map to a valid one-component file name.
pub fn encode_file_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"+-._".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Returns where a reviewer verdict lives in a verdicts directory: `records/<id>.json` for a
/// record's verdict, `licenses/<key>.json` otherwise.
pub fn verdict_path(v: &VerdictRecord) -> String {
    match &v.record {
        Some(id) => format!("records/{}.json", encode_file_name(id)),
        None => format!("licenses/{}.json", encode_file_name(&v.spdx)),
    }
}

/// What a reviewer decided, before it becomes a [`VerdictRecord`].
#[derive(Debug, Clone)]
pub struct Review<'a> {
    /// The license string as the reviewer saw it declared (its [`license_key`] is recorded).
    pub license: &'a str,
    /// The one record decided on, if the verdict is not about every record declaring the license.
    pub record: Option<&'a str>,
    /// Allow or deny.
    pub decision: Decision,
    /// The policy the reviewer worked under (its name and version are recorded).
    pub policy: &'a Policy,
    /// `Name <email>`.
    pub reviewer: &'a str,
    /// Why, in the reviewer's words.
    pub reason: &'a str,
    /// When, RFC 3339 in UTC.
    pub decided_at: &'a str,
}

/// Why a review cannot be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// The reason is empty.
    #[error("a verdict needs a reason")]
    NoReason,
    /// The reviewer is empty.
    #[error("a verdict needs a reviewer")]
    NoReviewer,
    /// The license string is empty.
    #[error("a verdict needs a license")]
    NoLicense,
}

/// Builds a reviewer's verdict about `subject` (the digest of the source or dataset the
/// reviewer examined): rule `manual`, the license's key, the policy's name and version, the
/// policy's own decision in the rationale beside the reviewer's reason.
///
/// # Errors
///
/// An empty reason, reviewer or license.
pub fn reviewer_verdict(subject: prov_store::Digest, review: &Review<'_>) -> Result<VerdictRecord, ReviewError> {
    let reason = review.reason.trim();
    if reason.is_empty() {
        return Err(ReviewError::NoReason);
    }
    if review.reviewer.trim().is_empty() {
        return Err(ReviewError::NoReviewer);
    }
    if review.license.trim().is_empty() {
        return Err(ReviewError::NoLicense);
    }
    let normalized = normalize(review.license);
    let policy = evaluate(review.policy, &normalized);
    let verb = |d: Decision| match d {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
    };
    let rationale = format!(
        "{reason} (policy `{}` {} alone: {} by `{}`: {})",
        review.policy.name(),
        review.policy.version(),
        verb(policy.decision),
        policy.rule,
        policy.reason
    );
    Ok(VerdictRecord {
        schema: SCHEMA_VERSION,
        subject,
        spdx: key_of(review.license, &normalized),
        record: review.record.map(str::to_owned),
        decision: review.decision,
        policy_version: format!("{} {}", review.policy.name(), review.policy.version()),
        rule: MANUAL_RULE.to_owned(),
        reviewer: review.reviewer.trim().to_owned(),
        rationale,
        decided_at: Some(review.decided_at.to_owned()),
    })
}

/// A file of a verdicts directory that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerdictFileError {
    /// The bytes are not a canonical verdict record.
    #[error("verdict file `{path}` is not a verdict record: {reason}")]
    NotAVerdict {
        /// The file's path in the directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// A policy's verdict (reviewer `policy`, or a rule other than `manual`, or no time).
    #[error("verdict file `{path}` is not a reviewer's verdict: {reason}")]
    NotReviewed {
        /// The file's path in the directory.
        path: String,
        /// Which member says so.
        reason: String,
    },
    /// The file is not where its content says it belongs.
    #[error("verdict file `{path}` decides `{about}`, so it must be named `{expected}`")]
    Misnamed {
        /// The file's path in the directory.
        path: String,
        /// What it is about.
        about: String,
        /// Where it belongs.
        expected: String,
    },
}

/// One reviewer verdict with the id the caller knows it by (its digest) and its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed<I> {
    /// The caller's id (a digest).
    pub id: I,
    /// The file's path in the verdicts directory.
    pub path: String,
    /// The verdict.
    pub verdict: VerdictRecord,
    /// The bytes of its signature file (`<path>.sig`), when there is one.
    pub signature: Option<Vec<u8>>,
}

/// Whether a reviewer verdict is signed, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signed {
    /// No signature file.
    Unsigned,
    /// Signed by these of the keys checked, by name.
    By(Vec<String>),
    /// A signature file that is not a valid signature of this verdict by a key checked.
    Invalid(String),
    /// A signature, not checked (no keys given): the key ids it states.
    Unchecked(Vec<String>),
}

impl Signed {
    /// How the queue and the audit say it.
    pub fn describe(&self) -> String {
        match self {
            Self::Unsigned => "unsigned".into(),
            Self::By(names) => format!("signed by {}", names.join(", ")),
            Self::Invalid(why) => format!("badly signed: {why}"),
            Self::Unchecked(ids) => format!("signed by key id {} (not checked: no keys listed)", ids.join(", ")),
        }
    }
}

impl<I> Reviewed<I> {
    /// Checks the verdict's signature against `keys` (name, key).
    pub fn signed(&self, keys: &[(String, prov_attest::PublicKey)]) -> Signed {
        let Some(sig) = &self.signature else { return Signed::Unsigned };
        if keys.is_empty() {
            return match prov_attest::Envelope::parse(sig) {
                Ok(e) => Signed::Unchecked(e.stated_keyids().iter().map(|k| prov_attest::short_keyid(k)).collect()),
                Err(e) => Signed::Invalid(e.to_string()),
            };
        }
        let bytes = Record::Verdict(self.verdict.clone()).to_bytes().expect("a verdict encodes");
        let public: Vec<prov_attest::PublicKey> = keys.iter().map(|(_, k)| k.clone()).collect();
        match prov_attest::check_verdict_signature(&self.path, &bytes, sig, &public) {
            Ok(ids) => {
                Signed::By(keys.iter().filter(|(_, k)| ids.contains(&k.keyid())).map(|(n, _)| n.clone()).collect())
            }
            Err(e) => Signed::Invalid(e.to_string()),
        }
    }
}

/// The reviewer verdicts of a verdicts directory, indexed by license key and by record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewedVerdicts<I> {
    by_license: BTreeMap<String, Reviewed<I>>,
    by_record: BTreeMap<String, Reviewed<I>>,
}

impl<I> Default for ReviewedVerdicts<I> {
    fn default() -> Self {
        Self { by_license: BTreeMap::new(), by_record: BTreeMap::new() }
    }
}

impl<I: Clone> ReviewedVerdicts<I> {
    /// Reads the files of a verdicts directory: `(path, id, bytes)`. Paths not ending in
    /// `.json` are skipped. Since each file's path follows from its content, two verdicts
    /// about the same license or record cannot both be present.
    ///
    /// # Errors
    ///
    /// The first file that is not a canonical reviewer verdict at its [`verdict_path`].
    pub fn from_files<'b>(files: impl IntoIterator<Item = (&'b str, I, &'b [u8])>) -> Result<Self, VerdictFileError> {
        let mut out = Self::default();
        let files: Vec<(&str, I, &[u8])> = files.into_iter().collect();
        let signature_of = |path: &str| {
            let sig = prov_attest::verdict_signature_path(path);
            files.iter().find(|(p, _, _)| *p == sig).map(|(_, _, b)| b.to_vec())
        };
        for (path, id, bytes) in files.iter().cloned() {
            if Path::new(path).extension().is_none_or(|e| e != "json") {
                continue;
            }
            let verdict = match Record::from_bytes(bytes) {
                Ok(Record::Verdict(v)) => v,
                Ok(other) => {
                    return Err(VerdictFileError::NotAVerdict {
                        path: path.to_owned(),
                        reason: format!("it is a {} record", other.kind_name()),
                    });
                }
                Err(e) => return Err(VerdictFileError::NotAVerdict { path: path.to_owned(), reason: e.to_string() }),
            };
            let not_reviewed = |reason: String| VerdictFileError::NotReviewed { path: path.to_owned(), reason };
            if verdict.reviewer == "policy" {
                return Err(not_reviewed("its reviewer is `policy`".into()));
            }
            if verdict.rule != MANUAL_RULE {
                return Err(not_reviewed(format!("its rule is `{}`, not `{MANUAL_RULE}`", verdict.rule)));
            }
            if verdict.decided_at.is_none() {
                return Err(not_reviewed("it has no `decided_at`".into()));
            }
            let expected = verdict_path(&verdict);
            if expected != path {
                let about = verdict.record.clone().unwrap_or_else(|| verdict.spdx.clone());
                return Err(VerdictFileError::Misnamed { path: path.to_owned(), about, expected });
            }
            let entry = Reviewed { id, path: path.to_owned(), verdict, signature: signature_of(path) };
            match entry.verdict.record.clone() {
                Some(r) => out.by_record.insert(r, entry),
                None => out.by_license.insert(entry.verdict.spdx.clone(), entry),
            };
        }
        Ok(out)
    }
}

impl<I> ReviewedVerdicts<I> {
    /// Returns the verdict that decides a record declaring `declared`: the record's own (while
    /// it declares a license with the verdict's key), else the license's, if any.
    pub fn decide(&self, record: Option<&str>, declared: &str) -> Option<&Reviewed<I>> {
        let key = license_key(declared);
        record
            .and_then(|r| self.by_record.get(r))
            .filter(|v| v.verdict.spdx == key)
            .or_else(|| self.by_license.get(&key))
    }

    /// Returns the verdict about a license key itself (not a record's).
    pub fn for_license(&self, key: &str) -> Option<&Reviewed<I>> {
        self.by_license.get(key)
    }

    /// Returns every verdict, licenses first, each group sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = &Reviewed<I>> {
        self.by_license.values().chain(self.by_record.values())
    }

    /// Keeps only the verdicts `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&Reviewed<I>) -> bool) {
        self.by_license.retain(|_, r| keep(r));
        self.by_record.retain(|_, r| keep(r));
    }

    /// Returns the number of verdicts.
    pub fn len(&self) -> usize {
        self.by_license.len() + self.by_record.len()
    }

    /// Returns true when there is no verdict.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The one schema version of license policy files this build reads.
pub const POLICY_FILE_SCHEMA: u32 = 1;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
struct PolicyFile {
    schema: u32,
    name: String,
    version: String,
    #[serde(default)]
    #[allow(dead_code)] // For people only, like a recipe's description.
    description: Option<String>,
    allow: Vec<String>,
    #[serde(default)]
    allow_with: Vec<AllowWith>,
    #[serde(default)]
    ambiguous: AmbiguousFile,
    /// Public keys (paths relative to the policy file) one of which must have signed every
    /// reviewer verdict.
    #[serde(default)]
    signed_verdicts: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowWith {
    license: String,
    addition: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum AmbiguousFile {
    #[default]
    Deny,
    AllowIfEveryCandidateAllowed,
}

/// Parses a license policy file (YAML); `file` names it in errors.
///
/// ```yaml
/// schema: 1
/// name: permissive
/// version: "1"
/// description: free text
/// allow: [MIT, Apache-2.0]
/// allow_with:                      # optional
///   - {license: GPL-2.0-only, addition: Classpath-exception-2.0}
/// ambiguous: deny                  # or allow-if-every-candidate-allowed; default deny
/// signed_verdicts: [keys/ada.pub]  # optional: reviewer verdicts must be signed by one of these
/// ```
///
/// # Errors
///
/// A located [`RecipeError`]: YAML syntax, unknown or missing fields (with "did you mean"), a
/// schema other than [`POLICY_FILE_SCHEMA`], an entry that is not a single license id.
pub fn parse_policy(file: &Path, text: &str) -> Result<Policy, RecipeError> {
    let parsed: PolicyFile = prov_manifest::from_yaml(file, text)?;
    let at = |path: &[&str], field: String, message: String| {
        let mut e = RecipeError::at_field(file, text, path, message);
        e.field = Some(field);
        e
    };
    if parsed.schema != POLICY_FILE_SCHEMA {
        return Err(at(
            &["schema"],
            "schema".into(),
            format!(
                "unsupported license policy schema version (v{}, but only v{POLICY_FILE_SCHEMA} is supported)",
                parsed.schema
            ),
        ));
    }
    if parsed.name.trim().is_empty() || parsed.version.trim().is_empty() {
        let field = if parsed.name.trim().is_empty() { "name" } else { "version" };
        return Err(at(&[field], field.into(), format!("`{field}` is empty: verdicts record it")));
    }
    // The name and version are printed on every line of the queue and in every verdict: one
    // line each, and a file cannot pass for a preset of another allow list.
    for (field, value) in [("name", &parsed.name), ("version", &parsed.version)] {
        if value.chars().any(char::is_control) {
            return Err(at(&[field], field.into(), format!("`{field}` holds a line break or control character")));
        }
    }

    let mut builder = Policy::builder(parsed.name, parsed.version);
    let entry_error = |i: usize, list: &str, e: &PolicyError| {
        at(&[list], format!("{list}[{i}]"), e.to_string())
            .with_hint("list single SPDX ids, such as `MIT` or `CC-BY-4.0`")
    };
    for (i, l) in parsed.allow.iter().enumerate() {
        builder = builder.allow(l).map_err(|e| entry_error(i, "allow", &e))?;
    }
    for (i, w) in parsed.allow_with.iter().enumerate() {
        builder = builder.allow_with(&w.license, &w.addition).map_err(|e| entry_error(i, "allow_with", &e))?;
    }
    let dir = file.parent().unwrap_or_else(|| Path::new(""));
    for (i, k) in parsed.signed_verdicts.iter().enumerate() {
        let key = prov_attest::PublicKey::read(&dir.join(k))
            .map_err(|e| at(&["signed_verdicts"], format!("signed_verdicts[{i}]"), e.to_string()))?;
        builder = builder.verdict_signer(k.clone(), key);
    }
    let policy = builder
        .ambiguous(match parsed.ambiguous {
            AmbiguousFile::Deny => AmbiguousRule::Deny,
            AmbiguousFile::AllowIfEveryCandidateAllowed => AmbiguousRule::AllowIfEveryCandidateAllowed,
        })
        .build();
    // A file may write a preset out (the shipped `permissive.yaml`), not pass another list
    // off under its name: the queue and the verdicts would say `permissive 1` of it.
    if let Some(preset) = Policy::preset(policy.name())
        && preset != policy
    {
        return Err(at(
            &["name"],
            "name".into(),
            format!("`{}` is a preset's name, and this is not that preset", policy.name()),
        )
        .with_hint("name the file's policy otherwise, so that a verdict says which list it was made under"));
    }
    Ok(policy)
}

/// One policy's view of a license in a [`diff`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// Allow, deny or review.
    pub status: Status,
    /// The policy rule that fired.
    pub rule: PolicyRule,
    /// The policy's reason.
    pub reason: String,
}

/// What two policies say about one license string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The license string as given.
    pub license: String,
    /// Its key.
    pub key: String,
    /// Policy A's view.
    pub a: Side,
    /// Policy B's view.
    pub b: Side,
}

impl Comparison {
    /// Returns true when the two policies put the license in different states.
    pub fn flips(&self) -> bool {
        self.a.status != self.b.status
    }
}

/// Evaluates each license string under both policies, in the order given (duplicates by key
/// are dropped).
pub fn diff<'s>(a: &Policy, b: &Policy, licenses: impl IntoIterator<Item = &'s str>) -> Vec<Comparison> {
    let mut seen = std::collections::BTreeSet::new();
    let side = |p: &Policy, n: &Normalized| {
        let d = evaluate(p, n);
        Side { status: status(&d), rule: d.rule, reason: d.reason }
    };
    let mut out = Vec::new();
    for license in licenses {
        let normalized = normalize(license);
        let key = key_of(license, &normalized);
        if !seen.insert(key.clone()) {
            continue;
        }
        out.push(Comparison { license: license.to_owned(), key, a: side(a, &normalized), b: side(b, &normalized) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> prov_store::Digest {
        prov_store::Digest::of(b"dataset")
    }

    fn review<'a>(license: &'a str, record: Option<&'a str>, policy: &'a Policy) -> Review<'a> {
        Review {
            license,
            record,
            decision: Decision::Allow,
            policy,
            reviewer: "Ada Reviewer <ada@example.org>",
            reason: "the package's copyright file dedicates it to the public domain",
            decided_at: "2026-11-22T10:00:00Z",
        }
    }

    #[test]
    fn statuses() {
        let p = Policy::permissive();
        let s = |x: &str| status(&evaluate(&p, &normalize(x)));
        assert_eq!(s("MIT"), Status::Allow);
        assert_eq!(s("GPL-2+"), Status::Deny);
        assert_eq!(s("CC BY-NC 4.0"), Status::Deny);
        assert_eq!(s("public-domain"), Status::Review);
        assert_eq!(s("BSD"), Status::Review);
        assert_eq!(s("MIT WITH AdditionRef-Commons-Clause"), Status::Review);
        assert_eq!(s("LicenseRef-OANC"), Status::Deny);
    }

    #[test]
    fn keys_name_the_license_not_the_spelling() {
        assert_eq!(license_key("GPL-2+"), "GPL-2.0-or-later");
        assert_eq!(license_key("GPL-2.0+"), "GPL-2.0-or-later");
        assert_eq!(license_key("  public-domain "), "public-domain");
        assert_eq!(license_key("CC BY-SA 4.0"), "CC-BY-SA-4.0");
    }

    #[test]
    fn reviewer_verdicts_record_the_policy_beside_the_reason() {
        let p = Policy::permissive();
        let v = reviewer_verdict(digest(), &review("public-domain", None, &p)).unwrap();
        assert_eq!((v.spdx.as_str(), v.rule.as_str(), v.decision), ("public-domain", "manual", Decision::Allow));
        assert_eq!(v.policy_version, "permissive 1");
        assert_eq!(v.decided_at.as_deref(), Some("2026-11-22T10:00:00Z"));
        assert!(
            v.rationale.starts_with("the package's copyright file dedicates it to the public domain (policy `permissive` 1 alone: deny by `unknown-license`: not a license"),
            "{}",
            v.rationale
        );
        assert_eq!(verdict_path(&v), "licenses/public-domain.json");
        let r = reviewer_verdict(digest(), &review("OANC", Some("tsi-robust_nli-li_li"), &p)).unwrap();
        assert_eq!(verdict_path(&r), "records/tsi-robust_nli-li_li.json");
        assert_eq!(r.spdx, "LicenseRef-OANC");

        let mut empty = review("MIT", None, &p);
        empty.reason = "  ";
        assert_eq!(reviewer_verdict(digest(), &empty), Err(ReviewError::NoReason));
        empty.reason = "x";
        empty.reviewer = "";
        assert_eq!(reviewer_verdict(digest(), &empty), Err(ReviewError::NoReviewer));
    }

    fn bytes(v: &VerdictRecord) -> Vec<u8> {
        Record::Verdict(v.clone()).to_bytes().unwrap()
    }

    #[test]
    fn a_verdicts_directory_is_indexed_and_checked() {
        let p = Policy::permissive();
        let by_license = reviewer_verdict(digest(), &review("GPL-2+", None, &p)).unwrap();
        let mut by_record = reviewer_verdict(digest(), &review("GPL-2.0+", Some("doc-7"), &p)).unwrap();
        by_record.decision = Decision::Deny;
        let (a, b) = (bytes(&by_license), bytes(&by_record));
        let files = [
            ("licenses/GPL-2.0-or-later.json", 1, a.as_slice()),
            ("records/doc-7.json", 2, b.as_slice()),
            ("README.md", 3, b"not a verdict".as_slice()),
        ];
        let index = ReviewedVerdicts::from_files(files).unwrap();
        assert_eq!(index.len(), 2);
        // Any spelling of the license; the record's own verdict first, while it declares it.
        assert_eq!(index.decide(None, "GPL-2.0-or-later").map(|r| r.id), Some(1));
        assert_eq!(index.decide(Some("doc-1"), "GPL-2+").map(|r| r.id), Some(1));
        assert_eq!(index.decide(Some("doc-7"), "GPL-2+").map(|r| r.id), Some(2));
        assert_eq!(index.decide(Some("doc-7"), "MIT").map(|r| r.id), None);

        let err = ReviewedVerdicts::from_files([("licenses/x.json", 1, a.as_slice())]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "verdict file `licenses/x.json` decides `GPL-2.0-or-later`, so it must be named `licenses/GPL-2.0-or-later.json`"
        );
        let err = ReviewedVerdicts::from_files([("licenses/a.json", 1, b"{}".as_slice())]).unwrap_err();
        assert!(matches!(err, VerdictFileError::NotAVerdict { .. }), "{err}");
        let mut policy_made = by_license.clone();
        policy_made.reviewer = "policy".into();
        let pb = bytes(&policy_made);
        let err = ReviewedVerdicts::from_files([("licenses/GPL-2.0-or-later.json", 1, pb.as_slice())]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "verdict file `licenses/GPL-2.0-or-later.json` is not a reviewer's verdict: its reviewer is `policy`"
        );
        // A hand edit that leaves non-canonical JSON is refused.
        let mut spaced = a.clone();
        spaced.insert(1, b' ');
        assert!(ReviewedVerdicts::from_files([("licenses/GPL-2.0-or-later.json", 1, spaced.as_slice())]).is_err());
    }

    #[test]
    fn policy_files_parse_with_located_errors() {
        let text = "schema: 1\nname: open\nversion: \"2\"\nallow: [MIT, gpl-3.0]\nallow_with:\n  - {license: GPL-2.0-only, addition: classpath-exception-2.0}\nambiguous: allow-if-every-candidate-allowed\n";
        let p = parse_policy(Path::new("p.yaml"), text).unwrap();
        assert_eq!((p.name(), p.version()), ("open", "2"));
        assert_eq!(p.allowed().collect::<Vec<_>>(), ["GPL-3.0-only", "MIT"]);
        assert_eq!(p.ambiguous_rule(), AmbiguousRule::AllowIfEveryCandidateAllowed);

        let err = parse_policy(Path::new("p.yaml"), "schema: 1\nname: x\nversion: \"1\"\nalow: [MIT]\n").unwrap_err();
        assert_eq!((err.line, err.hint.as_deref()), (4, Some("did you mean `allow`?")));
        let err =
            parse_policy(Path::new("p.yaml"), "schema: 1\nname: x\nversion: \"1\"\nallow:\n  - MIT\n  - MIT OR X\n")
                .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("allow[1]"));
        assert!(err.to_string().starts_with("p.yaml:4:1: allow[1]: invalid license in policy `x`"), "{err}");
        let err = parse_policy(Path::new("p.yaml"), "schema: 2\nname: x\nversion: \"1\"\nallow: []\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml:1:1: schema: unsupported license policy schema version (v2, but only v1 is supported)"
        );
    }

    /// A policy file's name and version are one line each, and a file under a preset's name
    /// must be that preset.
    #[test]
    fn a_policy_file_cannot_pass_for_a_preset_or_break_lines() {
        let file = Path::new("impostor.yaml");
        let e = parse_policy(file, "schema: 1\nname: permissive\nversion: \"1\"\nallow: [GPL-3.0-only]\n").unwrap_err();
        assert!(e.message.contains("is a preset's name, and this is not that preset"), "{e}");
        let e = parse_policy(file, "schema: 1\nname: \"c\\n\"\nversion: \"1\"\nallow: [MIT]\n").unwrap_err();
        assert!(e.message.contains("line break"), "{e}");
        let e = parse_policy(file, "schema: 1\nname: c\nversion: \"1\\n2\"\nallow: [MIT]\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("version"), "{e}");
    }

    /// The shipped license policies parse, and `permissive.yaml` and `afm-code.yaml` are the presets.
    #[test]
    fn the_shipped_policy_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes/license-policies");
        let read = |name: &str| {
            let path = dir.join(name);
            parse_policy(&path, &fs_err::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(read("permissive.yaml"), Policy::permissive());
        assert_eq!(read("afm-code.yaml"), Policy::afm_code());
        let sa = read("share-alike.yaml");
        assert!(Policy::permissive().allowed().all(|id| sa.allowed().any(|x| x == id)));
        assert_eq!(sa.ambiguous_rule(), AmbiguousRule::AllowIfEveryCandidateAllowed);
    }

    #[test]
    fn diff_names_the_rule_on_each_side() {
        let open = Policy::builder("open", "2").allow("MIT").unwrap().allow("GPL-2.0-only").unwrap().build();
        let d = diff(&Policy::permissive(), &open, ["MIT", "GPL-2+", "GPL-2.0-or-later", "CC-BY-4.0", "public-domain"]);
        let got: Vec<(&str, &str, &str, bool)> =
            d.iter().map(|c| (c.key.as_str(), c.a.status.as_str(), c.b.status.as_str(), c.flips())).collect();
        assert_eq!(
            got,
            [
                ("MIT", "allow", "allow", false),
                ("GPL-2.0-or-later", "deny", "allow", true),
                ("CC-BY-4.0", "allow", "deny", true),
                ("public-domain", "review", "review", false),
            ]
        );
        assert_eq!(d[1].b.rule, PolicyRule::AllowListLaterVersion);
        assert_eq!(d[2].b.rule, PolicyRule::NotInAllowList);
    }
}
