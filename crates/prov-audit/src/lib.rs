//! Claims, evidence and proofs about a Provenant run: audits against a policy, and document
//! proofs.
//!
//! This crate owns what an auditor checks without the corpus: a **document proof** shows, from
//! a run's ledger Merkle trees, what each filter stage did with one document (kept, removed or
//! modified, by which rule, on what evidence) and whether it reached the training data, or
//! that it never entered the pipeline at all. It builds proofs from the store and checks them
//! from the proof's bytes alone. It does not run stages, decide policies, or gather the
//! license review queue (`prov-license`'s `queue`). It sits above the stage crates: its claims
//! re-derive what the stages decided with their own code ([`StageRescan`]) beside its
//! independent checks.
//!
//! # Brief overview
//!
//! - [`path`]: RFC 6962 audit paths over [`prov_store::merkle_root`] trees and their check.
//! - [`range`]: [`RangeProof`], which proves the complete set of leaves with one key in a tree
//!   of sorted leaves; with no such leaf, it proves absence.
//! - [`proof`]: the [`DocumentProof`] format and [`verify`], its check.
//! - [`prove()`]: building a proof from a run in the store.
//! - [`policy`]: the audit policy file ([`AuditPolicy`], [`Claim`]) with located errors.
//! - [`claims`]: evaluating claims ([`evaluate`], [`ClaimResult`], [`check_ledger`]); the
//!   `replay` claim judges the store's replay records again, field by field.
//! - [`report`]: the [`Report`] and its text, Markdown and HTML renderings.
//! - [`pii_scan`], [`overlap`]: the independent re-checks (a PII scanner written from the
//!   patterns, an n-gram overlap check); [`StageRescan`]: the stages' own matchers.
//!
//! The proof format is specified in the book (`book/src/formats/proofs.md`).
//!
//! # Example
//!
//! ```
//! use prov_audit::range::{prove_range, verify_range};
//! use prov_store::{Digest, merkle_root};
//!
//! let entries: Vec<String> = ["a", "c"].iter().map(|id| format!(r#"{{"id":"{id}"}}"#)).collect();
//! let root = merkle_root(&entries.iter().map(|e| Digest::of(e.as_bytes())).collect::<Vec<_>>());
//! // "b" lies between two adjacent leaves: a proof of absence.
//! let proof = prove_range(&entries, &["a", "c"], "b");
//! assert_eq!(verify_range(&proof, "id", "b", 2, &root).unwrap(), vec![]);
//! ```

#![deny(missing_docs)]

pub mod claims;
pub mod common_usage;
mod heuristics_scan;
pub mod overlap;
pub mod path;
pub mod pii_scan;
pub mod policy;
pub mod proof;
mod prove;
pub mod range;
pub mod report;
mod stage_rescan;

pub use claims::{
    AuditOptions, ClaimResult, Evidence, Outcome, PiiMatcher, Rescan, RobotsDecider, RunContext, check_ledger,
    evaluate, evaluate_claim,
};
pub use policy::{AuditPolicy, Claim, POLICY_SCHEMA};
pub use proof::{
    DocumentPart, DocumentProof, FoundRow, LedgerProof, PROOF_KIND, PROOF_SCHEMA, Pins, ShardRange, StageFate, Subject,
    Training, UrlIndexProof, Verified, VerifyError, parse_proof, verify,
};
pub use prove::{ProveError, prove};
pub use range::{ProvenLeaf, RangeError, RangeProof};
pub use report::Report;
pub use stage_rescan::StageRescan;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
