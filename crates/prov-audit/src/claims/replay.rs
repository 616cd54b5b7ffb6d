//! The `replay` claim: every stage of the run re-executed to its recorded outputs.
//!
//! The claim is decided from the replay records in the store (`prov replay` writes one when a
//! replay ends), never from the execution log, which is an index that an edit of its database
//! could rewrite. Each stage a replay record lists as re-executed is judged again here, the
//! way `prov replay` judges it: the stage record the re-execution produced is read, checked
//! against its digest, and compared with the recorded one on every field but the envelope
//! ([`StageRecord::replay_difference`]). A replay on another machine (another CPU model, CPU
//! flags or kernel) that reproduced the outputs is evidence of portability, and the claim says
//! so.
//!
//! Replays elsewhere count through signed replay attestations (`prov replay --attest`) kept
//! beside the run: the policy lists the replayers' public keys (`replayers`) and how many of
//! them must have signed (`min_signed_replays`). Each is verified here, with those keys only,
//! and its subjects recomputed from the store; a listed replayer's signed statement of other
//! outputs fails the claim. Replayers are counted by key, so one party signing twice counts
//! once.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prov_attest::{Envelope, PublicKey, check_about_run_with, read_provenance, verify_statement};
use prov_manifest::{AttestationRole, attestations_of};
use prov_manifest::{
    Determinism, EnvelopeDifference, Name, Record, ReplayDifference, ReplayDivergence, ReplayRecord, ReplayStatus,
    StageRecord, get_record, replays_of,
};
use prov_store::Digest;

use crate::claims::{ClaimResult, RunContext};

/// What the replay records say about one stage of the run.
#[derive(Default)]
struct Judged {
    /// Replays that reproduced the stage, with the envelope fields that differed from the
    /// recording's.
    identical: Vec<(Digest, Vec<EnvelopeDifference>)>,
    /// Why the stage fails the claim.
    failures: Vec<String>,
    /// What replays said without deciding (a different envelope kept the stage from being
    /// compared, or made a difference expected).
    notes: Vec<String>,
}

pub(super) fn replay(cx: &RunContext<'_>, replayers: &[(String, PublicKey)], min_signed: usize) -> ClaimResult {
    let mut result = ClaimResult::new("replay", "every stage of the run replays bit for bit".into());
    result.evidence("run manifest", cx.run.manifest);
    let replays = match replays_of(cx.store, &cx.run.manifest) {
        Ok(r) => r,
        Err(e) => {
            result.undecided(format!("the store's replay records cannot be listed: {e}"));
            return result;
        }
    };
    let mut judged: BTreeMap<Name, Judged> = BTreeMap::new();
    let recorded: BTreeMap<&Name, &StageRecord> = cx.run.stages().iter().map(|s| (&s.record.name, &s.record)).collect();
    let mut counted = 0;
    for (digest, replay) in &replays {
        if replay.lockfile != cx.run.record.lockfile {
            result.fail(format!(
                "replay record {digest} compares lockfile {} with this run, whose lockfile is {}",
                replay.lockfile, cx.run.record.lockfile
            ));
            continue;
        }
        counted += 1;
        judge_replay(cx, &recorded, *digest, replay, &mut judged, &mut result);
    }
    result.evidence("replay records of this run", counted);

    let mut missing = Vec::new();
    let mut elsewhere: BTreeMap<String, usize> = BTreeMap::new();
    let mut reproduced_elsewhere = 0;
    for s in cx.run.stages().iter().map(|s| &s.record) {
        let j = judged.remove(&s.name).unwrap_or_default();
        for note in &j.notes {
            result.evidence(format!("stage `{}`", s.name), note);
        }
        if !j.failures.is_empty() {
            result.evidence(format!("stage `{}`", s.name), "diverged");
            for f in j.failures {
                result.fail(format!("stage `{}` {f}", s.name));
            }
            continue;
        }
        let Some((first, _)) = j.identical.first() else {
            missing.push(s.name.to_string());
            continue;
        };
        let mut said = format!("replayed identical (replay record {first}");
        if j.identical.len() > 1 {
            let _ = write!(said, ", and {} more", j.identical.len() - 1);
        }
        said.push(')');
        // The replay furthest from the recording's machine is the strongest evidence.
        if let Some((_, most)) = j.identical.iter().max_by_key(|(_, d)| d.len()).filter(|(_, d)| !d.is_empty()) {
            let fields: Vec<&str> = most.iter().map(|d| d.field.as_str()).collect();
            let _ = write!(said, " in another envelope than the recording's ({} differ)", fields.join(", "));
            reproduced_elsewhere += 1;
            for f in fields {
                *elsewhere.entry(f.to_owned()).or_default() += 1;
            }
        } else {
            said.push_str(" in the recording's envelope");
        }
        result.evidence(format!("stage `{}`", s.name), said);
    }
    if reproduced_elsewhere > 0 {
        let fields: Vec<String> = elsewhere.keys().cloned().collect();
        result.evidence(
            "stages reproduced in another envelope (evidence of portability)",
            format!(
                "{reproduced_elsewhere} of {}: {} differ from the recording",
                cx.run.stages().len(),
                fields.join(", ")
            ),
        );
    }
    weigh_signed_replays(cx, replayers, min_signed, &mut missing, &mut result);
    if !missing.is_empty() {
        result.undecided(format!(
            "no replay record re-executed stage(s) {}: replay the run (`prov replay`, or `prov audit --replay`)",
            missing.join(", ")
        ));
    }
    result.rechecked.push(
        "every replay record of this run: each stage it lists as re-executed, its stage record read against its \
         digest and compared with the recorded one on every field but the envelope (outputs and statistics equal)"
            .into(),
    );
    result
}

/// Adds the signed replays to the claim: how many listed replayers signed one, whether the
/// policy's minimum is met, and the stages they reproduced that no replay here re-executed
/// (taken off `missing`).
fn weigh_signed_replays(
    cx: &RunContext<'_>,
    replayers: &[(String, PublicKey)],
    min_signed: usize,
    missing: &mut Vec<String>,
    result: &mut ClaimResult,
) {
    let signed = signed_replays(cx, replayers, result);
    if !replayers.is_empty() {
        result.evidence(
            "signed replays by listed replayers (distinct keys)",
            format!(
                "{} of {} listed{}",
                signed.len(),
                replayers.len(),
                if signed.is_empty() { String::new() } else { format!(": {}", signed.join(", ")) }
            ),
        );
    }
    if signed.len() < min_signed {
        result.undecided(format!(
            "the policy asks for signed replays by {min_signed} of its replayers, and {} signed one that reproduced \
             the run: have them replay it (`prov replay --attest KEY`) and add the attestation here \
             (`prov verify-attestation FILE --key PUB --run RUN --add`)",
            signed.len()
        ));
    }
    // A stage no replay of this store re-executed is still reproduced when listed replayers
    // signed whole replays that reproduced every output.
    if !missing.is_empty() && !signed.is_empty() && signed.len() >= min_signed {
        result.evidence(
            format!("stage(s) {}", missing.join(", ")),
            format!("reproduced by the signed replays of {}, not replayed in this store", signed.join(", ")),
        );
        missing.clear();
    }
}

/// The listed replayers (by the path their key is listed under) who signed a replay
/// attestation of this run whose subjects are the run's outputs. A replay attestation signed
/// by a listed key that states other outputs fails the claim: a replayer says the run did not
/// reproduce. One that no listed key signed is only noted: anyone can put a file in a store.
fn signed_replays(cx: &RunContext<'_>, replayers: &[(String, PublicKey)], result: &mut ClaimResult) -> Vec<String> {
    let mut signed = std::collections::BTreeSet::new();
    let attestations = match attestations_of(cx.store, &cx.run.manifest) {
        Ok(a) => a,
        Err(e) => {
            result.undecided(format!("the store's attestation records cannot be listed: {e}"));
            return Vec::new();
        }
    };
    let keys: Vec<PublicKey> = replayers.iter().map(|(_, k)| k.clone()).collect();
    // What is noted and not counted: records are unsigned data that anyone who can write to
    // the store can plant, so only a listed replayer's signature about this very run (its
    // lockfile and recording) is evidence, for the claim or against it.
    let (mut unsigned, mut unreadable, mut elsewhere) = (0, 0, 0);
    // The run's subjects, hashed once for every attestation that needs them.
    let mut expected: Option<Vec<prov_attest::ResourceDescriptor>> = None;
    for (digest, a) in attestations.iter().filter(|(_, a)| a.role == AttestationRole::Replay) {
        let read = cx.store.read(&a.envelope).map_err(|e| e.to_string());
        let Ok(envelope) = read.and_then(|b| Envelope::parse(&b).map_err(|e| e.to_string())) else {
            unreadable += 1;
            continue;
        };
        let Ok((statement, signers)) = verify_statement(&envelope, &keys) else {
            unsigned += 1;
            continue;
        };
        let names: Vec<&str> =
            replayers.iter().filter(|(_, k)| signers.contains(&k.keyid())).map(|(n, _)| n.as_str()).collect();
        let about_this_run = read_provenance(&statement).is_ok_and(|p| {
            p.role == AttestationRole::Replay
                && p.lockfile == cx.run.record.lockfile
                && p.recording == Some(cx.run.manifest)
        });
        if !about_this_run {
            elsewhere += 1;
            continue;
        }
        let subjects = match &expected {
            Some(e) => e,
            None => match prov_attest::run_subjects(cx.store, cx.run) {
                Ok(e) => expected.insert(e),
                Err(e) => {
                    result.fail(format!("the run's outputs cannot be read to check signed replays: {e}"));
                    return Vec::new();
                }
            },
        };
        match check_about_run_with(&statement, cx.run, subjects) {
            Ok(_) => signed.extend(names.iter().map(|n| (*n).to_owned())),
            Err(e) => result.fail(format!(
                "the replay attestation {digest} signed by {} does not reproduce the run: {e}",
                names.join(", ")
            )),
        }
    }
    for (n, what) in [
        (unsigned, "replay attestations not signed by a listed replayer (not counted)"),
        (unreadable, "attestation records whose envelope cannot be read (not counted)"),
        (elsewhere, "signed replay attestations about another run or recording (not counted)"),
    ] {
        if n > 0 {
            result.evidence(what, n);
        }
    }
    signed.into_iter().collect()
}

/// Judges one replay record: the stages it re-executed, and its divergence.
fn judge_replay(
    cx: &RunContext<'_>,
    recorded: &BTreeMap<&Name, &StageRecord>,
    digest: Digest,
    replay: &ReplayRecord,
    judged: &mut BTreeMap<Name, Judged>,
    result: &mut ClaimResult,
) {
    for s in replay.stages.iter().filter(|s| s.status == ReplayStatus::Replayed) {
        let Some(want) = recorded.get(&s.name) else {
            result.fail(format!("replay record {digest} lists stage `{}`, which the run does not have", s.name));
            continue;
        };
        let j = judged.entry(s.name.clone()).or_default();
        match get_record(cx.store, &s.manifest) {
            Ok(Record::Stage(again)) => match want.replay_difference(&again) {
                None => j.identical.push((digest, EnvelopeDifference::between(&want.envelope, &again.envelope))),
                Some(d) => j.failures.push(format!(
                    "is listed as replayed identical by replay record {digest}, but the stage record it produced \
                     ({}) differs from the recording: {d}",
                    s.manifest
                )),
            },
            Ok(other) => j.failures.push(format!(
                "is listed by replay record {digest} with {}, which is a {} record, not a stage record",
                s.manifest,
                other.kind_name()
            )),
            Err(e) => j.failures.push(format!(
                "is listed by replay record {digest} with stage record {}, which cannot be read: {e}",
                s.manifest
            )),
        }
    }
    let Some(divergence) = &replay.divergence else { return };
    let Some(want) = recorded.get(divergence.stage()) else {
        result.fail(format!(
            "replay record {digest} diverged at stage `{}`, which the run does not have",
            divergence.stage()
        ));
        return;
    };
    let j = judged.entry(divergence.stage().clone()).or_default();
    let what = match divergence {
        ReplayDivergence::Envelope { differences, .. } => {
            let fields: Vec<String> =
                differences.iter().map(|d| format!("{} `{}`, replay `{}`", d.field, d.recorded, d.replayed)).collect();
            j.notes.push(format!(
                "not re-executed by replay record {digest}: a stage of class `{}` and the envelope differs from \
                 the recording ({})",
                want.determinism.as_str(),
                fields.join("; ")
            ));
            return;
        }
        ReplayDivergence::Output { output, recorded, replayed, .. } => {
            ReplayDifference::Output { output: output.clone(), recorded: *recorded, replayed: *replayed }
        }
        ReplayDivergence::Stats { field, recorded, replayed, .. } => {
            ReplayDifference::Stats { field: field.clone(), recorded: recorded.clone(), replayed: replayed.clone() }
        }
    };
    // An `envelope` stage is bit for bit only where the fields that decide results are equal;
    // a replay that ignored a difference there (`--ignore-envelope`) shows where it diverges,
    // not that the run does not reproduce.
    let result_fields = want.envelope.result_differences(&replay.envelope);
    if want.determinism != Determinism::Portable && !result_fields.is_empty() {
        let fields: Vec<String> = result_fields.iter().map(|(f, a, b)| format!("{f} `{a}`, replay `{b}`")).collect();
        j.notes.push(format!(
            "diverged in replay record {digest} ({what}) in an envelope that decides its results differently ({}): \
             expected of a stage of class `{}`, not counted against the claim",
            fields.join("; "),
            want.determinism.as_str()
        ));
    } else {
        j.failures.push(format!("diverged in replay record {digest}: {what}"));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prov_manifest::{Envelope, EnvelopeCheck, OutputRef, OutputType, ReplayStage, RunRecord, RunStage, put_record};
    use prov_store::Store;
    use serde_json::json;

    use super::*;
    use crate::claims::Outcome;
    use crate::claims::{ClaimResult, RunContext};

    fn machine(cpu: &str, flags: &[&str], os: &str, aten: &str) -> Envelope {
        Envelope {
            workbench_version: "0.1.0".into(),
            os: os.into(),
            arch: "x86_64".into(),
            cpu_model: cpu.into(),
            cpu_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            threads: 2,
            device: "cpu".into(),
            libtorch: Some("2.13.0".into()),
            aten_cpu_capability: Some(aten.into()),
            mkl_cbwr: None,
            onednn_max_cpu_isa: None,
            cuda: None,
        }
    }

    fn recording_machine() -> Envelope {
        machine("AMD EPYC", &["avx2", "avx512f"], "Linux 6.18.44", "avx2")
    }

    /// The same computation on a CPU without AVX-512, another kernel: only the machine differs.
    fn other_machine() -> Envelope {
        machine("Intel Xeon", &["avx2"], "Linux 6.1.0", "avx2")
    }

    fn stage(name: &str, determinism: Determinism, input: Digest, output: &[u8], envelope: Envelope) -> StageRecord {
        StageRecord {
            schema: 1,
            name: name.parse().unwrap(),
            stage_kind: "test".into(),
            version: 1,
            determinism,
            key: Digest::of(format!("{name} {envelope:?}").as_bytes()),
            config: json!({}),
            inputs: BTreeMap::from([("in".to_owned(), input)]),
            seeds: BTreeMap::new(),
            envelope,
            outputs: BTreeMap::from([(
                "out".to_owned(),
                OutputRef { output_type: OutputType::File, digest: Digest::of(output) },
            )]),
            stats: BTreeMap::from([("n".to_owned(), json!(1))]),
        }
    }

    /// A recorded run of a portable stage `data` and an envelope stage `train`.
    fn recorded(store: &Store) -> (Digest, RunRecord) {
        let data = stage("data", Determinism::Portable, Digest::of(b"source"), b"data", recording_machine());
        let train = stage("train", Determinism::Envelope, Digest::of(b"data"), b"weights", recording_machine());
        let stages = [data, train]
            .into_iter()
            .map(|s| RunStage { name: s.name.clone(), manifest: put_record(store, &Record::Stage(s)).unwrap() })
            .collect();
        let run = RunRecord::new("test", Digest::of(b"lockfile"), stages);
        (put_record(store, &Record::Run(run.clone())).unwrap(), run)
    }

    /// Re-executions of the recorded stages in `envelope`; `train` gives `weights`.
    fn replayed(store: &Store, envelope: &Envelope, weights: &[u8]) -> Vec<(String, Digest)> {
        let portable = stage("data", Determinism::Portable, Digest::of(b"source"), b"data", envelope.clone());
        // A portable stage's key holds no envelope: the same key anywhere.
        let portable =
            StageRecord { key: Digest::of(format!("data {:?}", recording_machine()).as_bytes()), ..portable };
        let train = stage("train", Determinism::Envelope, Digest::of(b"data"), weights, envelope.clone());
        [portable, train]
            .into_iter()
            .map(|s| (s.name.to_string(), put_record(store, &Record::Stage(s)).unwrap()))
            .collect()
    }

    fn replay_record(
        store: &Store,
        run: Digest,
        envelope: Envelope,
        stages: &[(String, Digest)],
        divergence: Option<ReplayDivergence>,
    ) -> Digest {
        let record = ReplayRecord {
            schema: 1,
            lockfile: Digest::of(b"lockfile"),
            recording: run,
            envelope,
            envelope_check: EnvelopeCheck::ResultFields,
            stages: stages
                .iter()
                .map(|(name, m)| ReplayStage {
                    name: name.parse().unwrap(),
                    status: ReplayStatus::Replayed,
                    manifest: *m,
                })
                .collect(),
            divergence,
        };
        put_record(store, &Record::Replay(record)).unwrap()
    }

    fn claim(store: &Store, run_manifest: Digest) -> ClaimResult {
        let run = prov_manifest::LoadedRun::load(store, run_manifest).unwrap();
        replay(&RunContext::new(store, &run), &[], 0)
    }

    fn evidence(c: &ClaimResult) -> String {
        c.evidence.iter().map(|e| format!("{}: {}", e.name, e.value)).collect::<Vec<_>>().join("\n")
    }

    fn new_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        (dir, store)
    }

    /// The case of a run recorded on one machine and reproduced on another: the stage records
    /// differ (their envelopes, and the envelope stage's key), the outputs do not.
    #[test]
    fn a_replay_on_another_machine_with_equal_outputs_holds_and_says_where_it_ran() {
        let (_dir, store) = new_store();
        let (run_manifest, _) = recorded(&store);
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::CannotBeDecided, "{c:?}");
        assert!(c.reasons[0].contains("no replay record re-executed stage(s) data, train"), "{c:?}");

        let stages = replayed(&store, &other_machine(), b"weights");
        replay_record(&store, run_manifest, other_machine(), &stages, None);
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::Holds, "{c:?}");
        let shown = evidence(&c);
        assert!(
            shown.contains("stage `train`: replayed identical (replay record")
                && shown.contains("in another envelope than the recording's (os, cpu_model, cpu_flags differ)"),
            "{shown}"
        );
        assert!(shown.contains("evidence of portability): 2 of 2: cpu_flags, cpu_model, os differ"), "{shown}");
    }

    #[test]
    fn a_replay_in_the_recording_envelope_holds() {
        let (_dir, store) = new_store();
        let (run_manifest, run) = recorded(&store);
        let stages: Vec<(String, Digest)> = run.stages.iter().map(|s| (s.name.to_string(), s.manifest)).collect();
        replay_record(&store, run_manifest, recording_machine(), &stages, None);
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::Holds, "{c:?}");
        assert!(evidence(&c).contains("in the recording's envelope"), "{}", evidence(&c));
        assert!(!evidence(&c).contains("portability"), "{}", evidence(&c));
    }

    /// A replay record that calls a stage identical while the stage record it names has other
    /// outputs (forged, or written by a faulty build) fails the claim: the record is judged
    /// again, not believed.
    #[test]
    fn a_replay_record_whose_stage_record_differs_fails_naming_the_output() {
        let (_dir, store) = new_store();
        let (run_manifest, _) = recorded(&store);
        let stages = replayed(&store, &other_machine(), b"other weights");
        let forged = replay_record(&store, run_manifest, other_machine(), &stages, None);
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::Fails, "{c:?}");
        let reason = c.reasons.join("\n");
        assert!(reason.contains(&format!("stage `train` is listed as replayed identical by replay record {forged}")));
        assert!(reason.contains(&format!("output `out` recorded {}", Digest::of(b"weights"))), "{reason}");
    }

    /// A replay record naming, for a stage, the record of another stage with the same outputs.
    #[test]
    fn a_replay_record_naming_another_stages_record_fails() {
        let (_dir, store) = new_store();
        let (run_manifest, run) = recorded(&store);
        let data = run.stages[0].manifest;
        replay_record(&store, run_manifest, recording_machine(), &[("train".into(), data)], None);
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::Fails, "{c:?}");
        assert!(c.reasons.join("\n").contains("`name` differs: not a replay of the recorded stage"), "{c:?}");
    }

    #[test]
    fn a_divergence_fails_unless_the_envelope_decides_results_differently() {
        let (_dir, store) = new_store();
        let (run_manifest, _) = recorded(&store);
        let stages = replayed(&store, &other_machine(), b"weights");
        let divergence = |envelope_ignored| ReplayDivergence::Output {
            stage: "train".parse().unwrap(),
            output: "out".into(),
            recorded: Some(OutputRef { output_type: OutputType::File, digest: Digest::of(b"weights") }),
            replayed: Some(OutputRef { output_type: OutputType::File, digest: Digest::of(b"other") }),
            manifest: Digest::of(b"the divergent record"),
            envelope_ignored,
        };
        // Another ATen capability with --ignore-envelope: where it diverges, not a failure;
        // the stage is not shown to replay, so the claim cannot be decided yet.
        let avx512 = machine("Intel Xeon", &["avx2", "avx512f"], "Linux 6.1.0", "avx512");
        let ignored = EnvelopeDifference::from_triples(vec![("aten_cpu_capability", "avx2".into(), "avx512".into())]);
        replay_record(&store, run_manifest, avx512, &stages[..1], Some(divergence(ignored)));
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::CannotBeDecided, "{c:?}");
        assert!(evidence(&c).contains("not counted against the claim"), "{}", evidence(&c));
        // Then a replay that reproduces it: the claim holds.
        replay_record(&store, run_manifest, other_machine(), &stages, None);
        assert_eq!(claim(&store, run_manifest).outcome, Outcome::Holds);
        // A divergence where the result fields are equal is a failure, whatever else holds.
        let bad = replay_record(&store, run_manifest, other_machine(), &stages[..1], Some(divergence(vec![])));
        let c = claim(&store, run_manifest);
        assert_eq!(c.outcome, Outcome::Fails, "{c:?}");
        assert!(c.reasons.join("\n").contains(&format!("stage `train` diverged in replay record {bad}: output `out`")));
    }

    #[test]
    fn replays_of_another_recording_are_not_evidence() {
        let (_dir, store) = new_store();
        let (run_manifest, run) = recorded(&store);
        let stages: Vec<(String, Digest)> = run.stages.iter().map(|s| (s.name.to_string(), s.manifest)).collect();
        replay_record(&store, Digest::of(b"another run record"), recording_machine(), &stages, None);
        assert_eq!(claim(&store, run_manifest).outcome, Outcome::CannotBeDecided);
    }
}
