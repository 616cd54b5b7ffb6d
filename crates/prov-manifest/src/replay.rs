//! What a replay is judged by, and the record a replay leaves behind.
//!
//! A replay re-executes a recorded run and compares each stage with its recording. Two stage
//! records are replays of each other when they are the same stage (name, kind, version,
//! determinism, config, inputs, seeds) with the same outputs and statistics; the envelope, which
//! says where a stage ran, is not compared here ([`StageRecord::replay_difference`]). Whether a
//! stage of class `envelope` may be compared at all across envelopes is the replaying
//! executor's decision, recorded in [`ReplayRecord::envelope_check`].
//!
//! A [`ReplayRecord`] is the content-addressed outcome of one replay: the recording it was
//! compared with, the envelope it ran in, the stage record each re-executed stage produced, and
//! where it diverged. Audits read these records, not the store's execution log, which is an
//! index that an edit of its database could rewrite.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::encode_value;
use crate::name::Name;
use crate::records::{Determinism, Envelope, OutputRef, StageRecord};
use prov_store::Digest;

/// How a replayed stage record differs from its recording, in the terms a replay is judged
/// by: the first difference found, fields of the stage first, then outputs by name, then
/// statistics by name.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayDifference {
    /// Not a replay of the same stage: a field that the lockfile and the stage's inputs
    /// decide differs (`name`, `stage_kind`, `version`, `determinism`, `config`, `inputs`,
    /// `seeds`, or, for a `portable` stage, whose key holds no envelope, `key`).
    Stage {
        /// The field that differs.
        field: &'static str,
    },
    /// An output's digest differs, or the output exists on one side only.
    Output {
        /// Output name.
        output: String,
        /// In the recording.
        recorded: Option<OutputRef>,
        /// In the replay.
        replayed: Option<OutputRef>,
    },
    /// The outputs are equal but a statistic differs.
    Stats {
        /// Statistic name.
        field: String,
        /// In the recording.
        recorded: Option<Value>,
        /// In the replay.
        replayed: Option<Value>,
    },
}

impl std::fmt::Display for ReplayDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |o: &Option<OutputRef>| o.map_or_else(|| "(none)".to_owned(), |o| o.digest.to_string());
        let value = |v: &Option<Value>| v.as_ref().map_or_else(|| "(none)".to_owned(), ToString::to_string);
        match self {
            Self::Stage { field } => write!(f, "`{field}` differs: not a replay of the recorded stage"),
            Self::Output { output, recorded, replayed } => {
                write!(f, "output `{output}` recorded {}, replayed {}", show(recorded), show(replayed))
            }
            Self::Stats { field, recorded, replayed } => {
                write!(f, "statistic `{field}` recorded {}, replayed {}", value(recorded), value(replayed))
            }
        }
    }
}

impl StageRecord {
    /// Compares `replayed`, a re-execution of this recorded stage, with this record; `None`
    /// when it reproduces the recording. The envelope is not compared, nor, for a stage
    /// whose key holds the envelope (classes `envelope` and `tolerance`), the key.
    ///
    /// JSON values (`config`, `stats`) are compared in their canonical encoding, which is what
    /// a record's digest covers: a statistic computed as the float `0.0` is written `0` and
    /// reads back as the integer `0`, and is the same statistic.
    pub fn replay_difference(&self, replayed: &StageRecord) -> Option<ReplayDifference> {
        let same = |a: Option<&Value>, b: Option<&Value>| a.map(encode_value) == b.map(encode_value);
        let identity: [(&'static str, bool); 8] = [
            ("schema", self.schema == replayed.schema),
            ("name", self.name == replayed.name),
            ("stage_kind", self.stage_kind == replayed.stage_kind),
            ("version", self.version == replayed.version),
            ("determinism", self.determinism == replayed.determinism),
            ("config", same(Some(&self.config), Some(&replayed.config))),
            ("inputs", self.inputs == replayed.inputs),
            ("seeds", self.seeds == replayed.seeds),
        ];
        if let Some((field, _)) = identity.iter().find(|(_, equal)| !equal) {
            return Some(ReplayDifference::Stage { field });
        }
        if self.determinism == Determinism::Portable && self.key != replayed.key {
            return Some(ReplayDifference::Stage { field: "key" });
        }
        let outputs: std::collections::BTreeSet<&String> = self.outputs.keys().chain(replayed.outputs.keys()).collect();
        for name in outputs {
            let (recorded, again) = (self.outputs.get(name).copied(), replayed.outputs.get(name).copied());
            if recorded != again {
                return Some(ReplayDifference::Output { output: name.clone(), recorded, replayed: again });
            }
        }
        let stats: std::collections::BTreeSet<&String> = self.stats.keys().chain(replayed.stats.keys()).collect();
        for field in stats {
            let (recorded, again) = (self.stats.get(field), replayed.stats.get(field));
            if !same(recorded, again) {
                return Some(ReplayDifference::Stats {
                    field: field.clone(),
                    recorded: recorded.cloned(),
                    replayed: again.cloned(),
                });
            }
        }
        None
    }
}

/// How the replay compared the envelope of a stage of class `envelope` or `tolerance` with
/// the recorded one before re-executing it (a `portable` stage is compared in any envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeCheck {
    /// Every field had to be equal (`prov replay` of a run recorded in this store).
    Full,
    /// Only the fields that decide results ([`Envelope::result_differences`]) had to be
    /// equal (`prov replay --against`: a run recorded on another machine).
    ResultFields,
    /// Differences were reported and the stage compared anyway (`--ignore-envelope`).
    Ignored,
}

/// How a stage's outputs were obtained in a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayStatus {
    /// Re-executed, and equal to the recording.
    Replayed,
    /// Taken from the recording without re-executing (before `--from`).
    Reused,
}

/// One stage of a replay, in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayStage {
    /// Stage name.
    pub name: Name,
    /// Re-executed or reused.
    pub status: ReplayStatus,
    /// The stage record of this replay: the one the re-execution produced (`replayed`), or
    /// the recorded one (`reused`).
    pub manifest: Digest,
}

/// One envelope field that differs between the recording and the replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeDifference {
    /// The field (`cpu_model`, `aten_cpu_capability`, …).
    pub field: String,
    /// Its value in the recording.
    pub recorded: String,
    /// Its value in the replay.
    pub replayed: String,
}

impl EnvelopeDifference {
    /// The differences between two envelopes, in field order.
    pub fn between(recorded: &Envelope, replayed: &Envelope) -> Vec<Self> {
        Self::from_triples(recorded.differences(replayed))
    }

    /// Converts `(field, recorded, replayed)` triples.
    pub fn from_triples<F: Into<String>>(triples: Vec<(F, String, String)>) -> Vec<Self> {
        triples.into_iter().map(|(f, recorded, replayed)| Self { field: f.into(), recorded, replayed }).collect()
    }
}

/// Where a replay stopped because it could not claim equality.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReplayDivergence {
    /// An output's bytes differ.
    Output {
        /// Stage name.
        stage: Name,
        /// Output name.
        output: String,
        /// The recorded output, if the recording has it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recorded: Option<OutputRef>,
        /// The replayed output, if the replay produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replayed: Option<OutputRef>,
        /// The stage record the re-execution produced (evidence, not a reference: `gc` may
        /// collect it and the outputs it names).
        manifest: Digest,
        /// Envelope fields that differed and were ignored (`--ignore-envelope`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        envelope_ignored: Vec<EnvelopeDifference>,
    },
    /// The outputs are equal but a statistic differs.
    Stats {
        /// Stage name.
        stage: Name,
        /// Statistic name.
        field: String,
        /// The recorded value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recorded: Option<Value>,
        /// The replayed value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replayed: Option<Value>,
        /// The stage record the re-execution produced (evidence, not a reference).
        manifest: Digest,
        /// Envelope fields that differed and were ignored (`--ignore-envelope`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        envelope_ignored: Vec<EnvelopeDifference>,
    },
    /// A stage of class `envelope` met an envelope that differs from its recording on the
    /// fields [`ReplayRecord::envelope_check`] compares: it was not re-executed.
    Envelope {
        /// Stage name.
        stage: Name,
        /// The fields that differ.
        differences: Vec<EnvelopeDifference>,
    },
}

impl ReplayDivergence {
    /// The stage where the replay stopped.
    pub fn stage(&self) -> &Name {
        match self {
            Self::Output { stage, .. } | Self::Stats { stage, .. } | Self::Envelope { stage, .. } => stage,
        }
    }

    /// The envelope differences that were ignored to compare the stage anyway.
    pub fn envelope_ignored(&self) -> &[EnvelopeDifference] {
        match self {
            Self::Output { envelope_ignored, .. } | Self::Stats { envelope_ignored, .. } => envelope_ignored,
            Self::Envelope { .. } => &[],
        }
    }
}

/// The outcome of one replay of a recorded run, written when the replay ends (identical or
/// diverged; a replay that fails with an error writes none). It holds no clock: the same
/// replay in the same envelope writes the same record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRecord {
    /// Always [`crate::SCHEMA_VERSION`].
    pub schema: u32,
    /// The lockfile replayed: the run id.
    pub lockfile: Digest,
    /// The run record the replay compared with.
    pub recording: Digest,
    /// The envelope the replay ran in.
    pub envelope: Envelope,
    /// How envelope-class stages' envelopes were compared before re-executing them.
    pub envelope_check: EnvelopeCheck,
    /// The stages the replay went through, in plan order, up to its end, its `--until` stage
    /// or the stage before its divergence.
    pub stages: Vec<ReplayStage>,
    /// Where it diverged; absent when every stage it went through is equal to the recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<ReplayDivergence>,
}

impl ReplayRecord {
    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.stages {
            if !seen.insert(&s.name) {
                return Err(format!("stage `{}` is listed twice", s.name));
            }
        }
        if let Some(d) = &self.divergence
            && seen.contains(d.stage())
        {
            return Err(format!("stage `{}` both diverged and is listed as reproduced", d.stage()));
        }
        Ok(())
    }

    /// The digests the record refers to: the lockfile, the recording and the stage records.
    pub(crate) fn references(&self) -> Vec<Digest> {
        let mut v: Vec<Digest> = self.stages.iter().map(|s| s.manifest).collect();
        v.push(self.lockfile);
        v.push(self.recording);
        v
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::record::Record;
    use crate::records::OutputType;

    fn envelope(cpu: &str) -> Envelope {
        Envelope {
            workbench_version: "0.1.0".into(),
            os: "Linux 6.1".into(),
            arch: "x86_64".into(),
            cpu_model: cpu.into(),
            cpu_flags: vec!["avx2".into()],
            threads: 2,
            device: "cpu".into(),
            libtorch: None,
            aten_cpu_capability: None,
            mkl_cbwr: None,
            onednn_max_cpu_isa: None,
            cuda: None,
        }
    }

    fn recorded(determinism: Determinism) -> StageRecord {
        StageRecord {
            schema: 1,
            name: "train".parse().unwrap(),
            stage_kind: "pretrain".into(),
            version: 2,
            determinism,
            key: Digest::of(b"key on machine A"),
            config: json!({"steps": 3}),
            inputs: BTreeMap::from([("tokens".to_owned(), Digest::of(b"tokens"))]),
            seeds: BTreeMap::from([("init".to_owned(), 7)]),
            envelope: envelope("CPU A"),
            outputs: BTreeMap::from([(
                "model".to_owned(),
                OutputRef { output_type: OutputType::Checkpoint, digest: Digest::of(b"weights") },
            )]),
            stats: BTreeMap::from([("final_loss".to_owned(), json!(6.5))]),
        }
    }

    #[test]
    fn another_envelope_and_its_key_are_not_a_difference() {
        let a = recorded(Determinism::Envelope);
        let b = StageRecord { envelope: envelope("CPU B"), key: Digest::of(b"key on machine B"), ..a.clone() };
        assert_eq!(a.replay_difference(&b), None);
    }

    /// A float statistic that is a whole number reads back from the stored recording as an
    /// integer (canonical JSON writes `0.0` as `0`); the re-execution holds the float.
    #[test]
    fn values_are_compared_in_their_canonical_encoding() {
        let mut a = recorded(Determinism::Envelope);
        a.stats.insert("dropped".into(), json!(0));
        a.config = json!({"lr": 1});
        let mut b = a.clone();
        b.stats.insert("dropped".into(), json!(0.0));
        b.config = json!({"lr": 1.0});
        assert_ne!(a.stats, b.stats, "serde_json tells the integer from the float");
        assert_eq!(a.replay_difference(&b), None);
        b.stats.insert("dropped".into(), json!(0.5));
        assert!(matches!(a.replay_difference(&b), Some(ReplayDifference::Stats { .. })));
    }

    #[test]
    fn every_field_but_the_envelope_is_compared() {
        let a = recorded(Determinism::Envelope);
        let other = Digest::of(b"other");
        let cases: Vec<(StageRecord, &str)> = vec![
            (StageRecord { name: "other".parse().unwrap(), ..a.clone() }, "name"),
            (StageRecord { stage_kind: "sft".into(), ..a.clone() }, "stage_kind"),
            (StageRecord { version: 3, ..a.clone() }, "version"),
            (StageRecord { determinism: Determinism::Tolerance, ..a.clone() }, "determinism"),
            (StageRecord { config: json!({"steps": 4}), ..a.clone() }, "config"),
            (StageRecord { inputs: BTreeMap::from([("tokens".to_owned(), other)]), ..a.clone() }, "inputs"),
            (StageRecord { seeds: BTreeMap::new(), ..a.clone() }, "seeds"),
        ];
        for (b, field) in cases {
            assert_eq!(a.replay_difference(&b), Some(ReplayDifference::Stage { field }), "{field}");
        }
        let mut b = a.clone();
        b.outputs.get_mut("model").unwrap().digest = other;
        assert!(
            matches!(a.replay_difference(&b), Some(ReplayDifference::Output { ref output, .. }) if output == "model")
        );
        let mut b = a.clone();
        b.stats.insert("final_loss".into(), json!(6.4));
        assert_eq!(
            a.replay_difference(&b),
            Some(ReplayDifference::Stats {
                field: "final_loss".into(),
                recorded: Some(json!(6.5)),
                replayed: Some(json!(6.4))
            })
        );
        // A portable stage's key holds no envelope: another key is another stage.
        let p = recorded(Determinism::Portable);
        let q = StageRecord { key: other, envelope: envelope("CPU B"), ..p.clone() };
        assert_eq!(p.replay_difference(&q), Some(ReplayDifference::Stage { field: "key" }));
    }

    #[test]
    fn a_replay_record_round_trips_and_refuses_a_stage_listed_twice() {
        let stage = |name: &str| ReplayStage {
            name: name.parse().unwrap(),
            status: ReplayStatus::Replayed,
            manifest: Digest::of(name.as_bytes()),
        };
        let mut record = ReplayRecord {
            schema: 1,
            lockfile: Digest::of(b"lock"),
            recording: Digest::of(b"run"),
            envelope: envelope("CPU B"),
            envelope_check: EnvelopeCheck::ResultFields,
            stages: vec![stage("corpus"), stage("shards")],
            divergence: Some(ReplayDivergence::Stats {
                stage: "train".parse().unwrap(),
                field: "final_loss".into(),
                recorded: Some(json!(6.5)),
                replayed: None,
                manifest: Digest::of(b"replayed train"),
                envelope_ignored: vec![],
            }),
        };
        let bytes = Record::Replay(record.clone()).to_bytes().unwrap();
        assert!(bytes.starts_with(br#"{"divergence":{"field":"final_loss","kind":"stats","#), "{bytes:?}");
        assert_eq!(Record::from_bytes(&bytes).unwrap(), Record::Replay(record.clone()));
        // The divergent stage's record is evidence, not a reference.
        let refs = Record::Replay(record.clone()).references();
        assert!(!refs.contains(&Digest::of(b"replayed train")));
        assert!(refs.contains(&Digest::of(b"run")) && refs.contains(&Digest::of(b"corpus")));

        record.stages.push(stage("corpus"));
        let bytes = Record::Replay(record.clone()).to_bytes().unwrap();
        let e = Record::from_bytes(&bytes).unwrap_err();
        assert!(e.to_string().contains("stage `corpus` is listed twice"), "{e}");
        record.stages.pop();
        record.stages.push(stage("train"));
        let bytes = Record::Replay(record).to_bytes().unwrap();
        let e = Record::from_bytes(&bytes).unwrap_err();
        assert!(e.to_string().contains("both diverged and is listed"), "{e}");
    }
}
