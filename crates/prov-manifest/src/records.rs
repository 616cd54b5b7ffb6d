//! The typed records that manifests hold.
//!
//! Every record is a JSON object with a `kind` (which record it is) and a `schema` (its
//! version, currently 1). Records refuse unknown fields: a field dropped on re-serialisation
//! would change the hash. Maps are `BTreeMap`s and lists are sorted where order carries no
//! meaning, so that a record has one encoding by construction.

use std::collections::BTreeMap;

use prov_store::{Digest, merkle_root};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::Finite;
use crate::name::{Name, RelPath};

/// The schema version this build writes and reads for every record kind.
pub const SCHEMA_VERSION: u32 = 1;

/// Where the bytes of a source are: one file, or a directory as a [`TreeRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Content {
    /// A single file.
    File {
        /// BLAKE3 of the file's bytes.
        digest: Digest,
        /// Size in bytes.
        size: u64,
    },
    /// A directory.
    Tree {
        /// Digest of the canonical [`TreeRecord`].
        digest: Digest,
        /// Number of files.
        files: u64,
        /// Sum of the files' sizes.
        size: u64,
    },
}

impl Content {
    /// Returns the digest of the file or of the tree record.
    pub fn digest(&self) -> Digest {
        match self {
            Self::File { digest, .. } | Self::Tree { digest, .. } => *digest,
        }
    }
    /// Returns the total size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            Self::File { size, .. } | Self::Tree { size, .. } => *size,
        }
    }
}

/// An input pinned from outside the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The source's name in the recipe.
    pub name: Name,
    /// Where it came from: a path relative to the project root.
    pub origin: String,
    /// The pinned bytes.
    pub content: Content,
    /// Declared license (an SPDX expression or the string as found), if the recipe gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Declared retrieval date (ISO 8601), if the recipe gave one. Never the time of locking:
    /// that would put the clock into hashed bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieved: Option<String>,
}

/// One file of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeEntry {
    /// Relative path with `/` separators.
    pub path: RelPath,
    /// BLAKE3 of the file.
    pub digest: Digest,
    /// Size in bytes.
    pub size: u64,
    /// Whether any execute bit was set.
    pub executable: bool,
}

/// A directory, flattened to its files (a Merkle tree of depth one: the record's digest
/// commits to every file's digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Files sorted by path (byte order), paths unique.
    pub entries: Vec<TreeEntry>,
}

impl TreeRecord {
    pub(crate) fn validate(&self) -> Result<(), String> {
        for pair in self.entries.windows(2) {
            if pair[0].path.as_str() >= pair[1].path.as_str() {
                return Err(format!(
                    "tree entries must be sorted by path without duplicates: `{}` then `{}`",
                    pair[0].path, pair[1].path
                ));
            }
        }
        Ok(())
    }
}

/// A column of a dataset's schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    /// Column name.
    pub name: String,
    /// Arrow data type, as Arrow displays it (`Utf8`, `Int64`, …).
    pub data_type: String,
    /// Whether nulls are allowed.
    pub nullable: bool,
}

/// One shard of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRef {
    /// BLAKE3 of the shard file.
    pub digest: Digest,
    /// Rows in the shard.
    pub rows: u64,
    /// Size of the shard file in bytes.
    pub bytes: u64,
}

/// A dataset: ordered shards with one schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Shard file format; `parquet`.
    pub format: String,
    /// Columns, in file order.
    pub columns: Vec<Column>,
    /// Shards, in dataset order.
    pub shards: Vec<ShardRef>,
    /// Sum of the shards' rows.
    pub rows: u64,
    /// [`merkle_root`] over the shard digests in order.
    pub merkle_root: Digest,
}

impl DatasetRecord {
    /// Builds a dataset record, computing rows and the Merkle root.
    pub fn new(format: &str, columns: Vec<Column>, shards: Vec<ShardRef>) -> Self {
        let rows = shards.iter().map(|s| s.rows).sum();
        let digests: Vec<Digest> = shards.iter().map(|s| s.digest).collect();
        Self {
            schema: SCHEMA_VERSION,
            format: format.to_owned(),
            columns,
            merkle_root: merkle_root(&digests),
            shards,
            rows,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let rows: u64 = self.shards.iter().map(|s| s.rows).sum();
        if rows != self.rows {
            return Err(format!("`rows` is {} but the shards hold {rows}", self.rows));
        }
        let digests: Vec<Digest> = self.shards.iter().map(|s| s.digest).collect();
        let root = merkle_root(&digests);
        if root != self.merkle_root {
            return Err(format!("`merkle_root` is `{}` but the shards give `{root}`", self.merkle_root));
        }
        Ok(())
    }
}

/// The decision of a license verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The subject may be used.
    Allow,
    /// The subject must not be used.
    Deny,
}

/// A license decision about a source or dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The source or dataset manifest decided on.
    pub subject: Digest,
    /// SPDX expression the decision is about (for a string that does not normalise, the
    /// string as declared, trimmed).
    pub spdx: String,
    /// The id of the one record (document) of the subject that a reviewer's verdict is about;
    /// absent when the verdict is about every record that declares `spdx`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// Allow or deny.
    pub decision: Decision,
    /// Version of the policy applied.
    pub policy_version: String,
    /// The policy rule that fired, or `manual`.
    pub rule: String,
    /// Who decided (a person's identity or `policy`).
    pub reviewer: String,
    /// Why.
    pub rationale: String,
    /// When, RFC 3339 in UTC: a fact about the decision, recorded as data. Absent for a
    /// policy's verdict decided inside a run (a stage's output): its time is the run's, in
    /// the execution log, and a clock in the record would break bit-for-bit replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
}

/// How far a stage's outputs are reproducible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Determinism {
    /// Same bytes on any machine.
    Portable,
    /// Same bytes when the envelope is equal.
    Envelope,
    /// Equal within documented numeric bounds.
    Tolerance,
}

impl Determinism {
    /// Returns the name used in recipes and manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Envelope => "envelope",
            Self::Tolerance => "tolerance",
        }
    }
}

/// What must be equal for bit-for-bit equality, captured at every stage boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Version of the workbench (`prov --version`).
    pub workbench_version: String,
    /// Operating system and kernel release.
    pub os: String,
    /// CPU architecture.
    pub arch: String,
    /// CPU model name.
    pub cpu_model: String,
    /// CPU feature flags, sorted.
    pub cpu_flags: Vec<String>,
    /// Worker threads used by the stage.
    pub threads: u32,
    /// Compute device (`cpu`, `cuda:0`).
    pub device: String,
    /// libtorch version, for stages that use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libtorch: Option<String>,
    /// `ATEN_CPU_CAPABILITY` in force, for stages that use libtorch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aten_cpu_capability: Option<String>,
    /// `MKL_CBWR` in force, for stages that use MKL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mkl_cbwr: Option<String>,
    /// `ONEDNN_MAX_CPU_ISA` in force, for stages that use libtorch (whose CPU kernels include
    /// oneDNN's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onednn_max_cpu_isa: Option<String>,
    /// The GPU and CUDA libraries, for a stage that computes on `cuda:N` (absent on `cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaEnvelope>,
}

/// What decides a CUDA stage's bits beyond the CPU fields: the GPU model and driver, the
/// versions of the CUDA runtime, cuDNN and cuBLAS that libtorch loaded (read from the
/// libraries themselves, not from the build), and the deterministic settings in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaEnvelope {
    /// The GPU's model name, as the driver reports it (`NVIDIA H100 80GB HBM3`).
    pub gpu_model: String,
    /// The driver version (`580.65.06`).
    pub driver: String,
    /// The CUDA runtime version libtorch loaded (`13.0`).
    pub cuda_runtime: String,
    /// The cuDNN version libtorch loaded (`9.20.0`).
    pub cudnn: String,
    /// The cuBLAS version libtorch loaded (`13.1.1`).
    pub cublas: String,
    /// The deterministic settings in force, as `name=value` pairs separated by spaces, in a
    /// fixed order (`CUBLAS_WORKSPACE_CONFIG=:4096:8 cudnn_benchmark=off
    /// cudnn_deterministic=on deterministic_algorithms=on`).
    pub deterministic: String,
}

impl CudaEnvelope {
    /// The field names as [`Envelope::differences`] gives them, in declaration order.
    pub const FIELDS: [&'static str; 6] =
        ["cuda.gpu_model", "cuda.driver", "cuda.cuda_runtime", "cuda.cudnn", "cuda.cublas", "cuda.deterministic"];

    /// The field values, in the order of [`Self::FIELDS`].
    pub fn values(&self) -> [&str; 6] {
        [&self.gpu_model, &self.driver, &self.cuda_runtime, &self.cudnn, &self.cublas, &self.deterministic]
    }
}

impl Envelope {
    /// Returns the fields that differ between two envelopes, as `(field, self, other)`.
    pub fn differences(&self, other: &Self) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        let mut cmp = |name: &'static str, a: String, b: String| {
            if a != b {
                out.push((name, a, b));
            }
        };
        cmp("workbench_version", self.workbench_version.clone(), other.workbench_version.clone());
        cmp("os", self.os.clone(), other.os.clone());
        cmp("arch", self.arch.clone(), other.arch.clone());
        cmp("cpu_model", self.cpu_model.clone(), other.cpu_model.clone());
        cmp("cpu_flags", self.cpu_flags.join(" "), other.cpu_flags.join(" "));
        cmp("threads", self.threads.to_string(), other.threads.to_string());
        cmp("device", self.device.clone(), other.device.clone());
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
        cmp("libtorch", opt(&self.libtorch), opt(&other.libtorch));
        cmp("aten_cpu_capability", opt(&self.aten_cpu_capability), opt(&other.aten_cpu_capability));
        cmp("mkl_cbwr", opt(&self.mkl_cbwr), opt(&other.mkl_cbwr));
        cmp("onednn_max_cpu_isa", opt(&self.onednn_max_cpu_isa), opt(&other.onednn_max_cpu_isa));
        // A CUDA envelope against none names each CUDA field (`-` on the side without), so
        // that the message says what the other side lacks.
        let none = ["-"; 6];
        let a = self.cuda.as_ref().map_or(none, CudaEnvelope::values);
        let b = other.cuda.as_ref().map_or(none, CudaEnvelope::values);
        for (i, name) in CudaEnvelope::FIELDS.into_iter().enumerate() {
            cmp(name, a[i].to_owned(), b[i].to_owned());
        }
        out
    }

    /// The fields that decide what libtorch computes, and differ: the architecture, the
    /// device, the libtorch version, the `ATen` CPU capability, the MKL code path and oneDNN's
    /// instruction set. (Training
    /// stages pin their own thread count in their config, which is in the stage key.) Two
    /// machines equal on these fields compute the same bytes; the other fields (CPU model,
    /// kernel, core count) describe the machine, not the computation.
    pub fn result_differences(&self, other: &Self) -> Vec<(&'static str, String, String)> {
        const RESULT_FIELDS: [&str; 6] =
            ["arch", "device", "libtorch", "aten_cpu_capability", "mkl_cbwr", "onednn_max_cpu_isa"];
        // Every CUDA field decides results: another GPU model, driver or library version
        // runs other kernels.
        self.differences(other)
            .into_iter()
            .filter(|(f, _, _)| RESULT_FIELDS.contains(f) || f.starts_with("cuda."))
            .collect()
    }
}

/// What an output is, so that readers know how to follow its digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputType {
    /// A [`SourceRecord`].
    Source,
    /// A [`DatasetRecord`].
    Dataset,
    /// A [`TreeRecord`].
    Tree,
    /// A plain object.
    File,
    /// A [`CheckpointRecord`].
    Checkpoint,
    /// A [`crate::LedgerRecord`].
    Ledger,
}

/// One named output of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRef {
    /// What the digest names.
    #[serde(rename = "type")]
    pub output_type: OutputType,
    /// The output's digest.
    pub digest: Digest,
}

/// One stage boundary: everything that went in, everything that came out.
///
/// It holds no timings and no clock: the same inputs in the same envelope give the same
/// stage record byte for byte, so a replay can compare records. Timings live in the
/// store's execution log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Stage name in the recipe.
    pub name: Name,
    /// Stage kind (`source`, `shard`, …).
    pub stage_kind: String,
    /// Implementation version of the stage kind.
    pub version: u32,
    /// Determinism class.
    pub determinism: Determinism,
    /// The stage key this record is cached under.
    pub key: Digest,
    /// Canonical configuration, every default explicit.
    pub config: Value,
    /// Input name -> the manifest or object consumed.
    pub inputs: BTreeMap<String, Digest>,
    /// Seed name -> seed.
    pub seeds: BTreeMap<String, u64>,
    /// The envelope the stage ran in.
    pub envelope: Envelope,
    /// Output name -> what was produced.
    pub outputs: BTreeMap<String, OutputRef>,
    /// Deterministic statistics (counts, sizes).
    pub stats: BTreeMap<String, Value>,
}

/// Model weights and training state at one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Optimizer steps taken.
    pub step: u64,
    /// The model's `config.json` object.
    pub config: Digest,
    /// The safetensors file of the weights.
    pub weights: Digest,
    /// Tensor name -> BLAKE3 of the tensor's raw bytes.
    pub tensors: BTreeMap<String, Digest>,
    /// The optimizer state object.
    pub optimizer: Digest,
    /// The RNG state object.
    pub rng: Digest,
    /// Position in the data order (samples consumed).
    pub data_position: u64,
    /// Training loss at this step, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Finite>,
    /// The per-step training log up to this step (JSON Lines), when the trainer keeps one:
    /// a run resumed from this checkpoint continues it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<Digest>,
    /// The tokenizer (`tokenizer.json`) of a language model, so that the checkpoint can be
    /// evaluated, sampled and exported on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<Digest>,
    /// The palette description of a palettized checkpoint (a `palettize` stage's output):
    /// canonical JSON saying what each tensor became and the bits per weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub palette: Option<Digest>,
}

/// A sorted index of canonical JSON entries in JSON Lines chunks of `chunk_entries` entries
/// (the last chunk may hold fewer): a ledger's id directory (one entry `{"id":ID,"shard":S}`
/// per ledger row, sorted by id then shard) and the URL index (`{"id":ID,"url":KEY}`, sorted
/// by key then id). Its Merkle tree is the one over every entry's leaf (the BLAKE3 of its
/// JSON text) in order; since `chunk_entries` is a power of two, each chunk is a complete
/// subtree and [`prov_store::chunked_root`] of the chunk roots is the root. A proof reads the
/// one or two chunks around a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkedIndex {
    /// Entries in all chunks: the ledger's rows.
    pub entries: u64,
    /// Entries per chunk, a power of two.
    pub chunk_entries: u64,
    /// The chunks, in order.
    pub chunks: Vec<IndexChunk>,
    /// Merkle root over all entries.
    pub root: Digest,
}

/// One chunk of a [`ChunkedIndex`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexChunk {
    /// The JSON Lines object.
    pub digest: Digest,
    /// Its entries.
    pub entries: u64,
    /// The key of its first entry: where a reader looks for a key without opening chunks.
    pub first: String,
    /// Merkle root over its entries.
    pub root: Digest,
}

impl ChunkedIndex {
    /// Checks the chunk sizes, the order of their first keys, that they hold `entries`
    /// entries (and as many as `rows`, for a ledger's directory), and the root.
    ///
    /// # Errors
    ///
    /// What does not hold, as a sentence.
    pub fn validate(&self, rows: Option<u64>) -> Result<(), String> {
        if !self.chunk_entries.is_power_of_two() {
            return Err(format!("`chunk_entries` is {}, not a power of two", self.chunk_entries));
        }
        let last = self.chunks.len().saturating_sub(1);
        for (i, c) in self.chunks.iter().enumerate() {
            let fits =
                if i < last { c.entries == self.chunk_entries } else { (1..=self.chunk_entries).contains(&c.entries) };
            if !fits {
                return Err(format!(
                    "chunk {i} holds {} entries; every chunk but the last holds {}, the last 1 to {1}",
                    c.entries, self.chunk_entries
                ));
            }
        }
        if self.chunks.windows(2).any(|w| w[0].first.as_bytes() > w[1].first.as_bytes()) {
            return Err("the chunks' `first` keys are not in order".into());
        }
        let entries: u64 = self.chunks.iter().map(|c| c.entries).sum();
        if entries != self.entries {
            return Err(format!("`entries` is {} but the chunks hold {entries}", self.entries));
        }
        if let Some(rows) = rows.filter(|r| *r != entries) {
            return Err(format!("the directory holds {entries} entries, but the ledger has {rows} rows"));
        }
        let roots: Vec<Digest> = self.chunks.iter().map(|c| c.root).collect();
        let root = prov_store::chunked_root(&roots);
        if root != self.root {
            return Err(format!("`root` is `{}` but the chunk roots give `{root}`", self.root));
        }
        Ok(())
    }
}

/// A stage of a run, in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStage {
    /// Stage name.
    pub name: Name,
    /// Its stage record.
    pub manifest: Digest,
}

/// One complete execution of a lockfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Recipe name.
    pub recipe: String,
    /// The lockfile executed: the run id.
    pub lockfile: Digest,
    /// Stage records in plan order.
    pub stages: Vec<RunStage>,
    /// [`merkle_root`] over the stage record digests in plan order.
    pub root: Digest,
}

impl RunRecord {
    /// Builds a run record, computing its root.
    pub fn new(recipe: &str, lockfile: Digest, stages: Vec<RunStage>) -> Self {
        let digests: Vec<Digest> = stages.iter().map(|s| s.manifest).collect();
        Self { schema: SCHEMA_VERSION, recipe: recipe.to_owned(), lockfile, root: merkle_root(&digests), stages }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::Record;

    /// An envelope for records built in tests.
    pub(crate) fn envelope() -> Envelope {
        Envelope {
            workbench_version: "0.1.0".into(),
            os: "linux 6.1".into(),
            arch: "x86_64".into(),
            cpu_model: "test cpu".into(),
            cpu_flags: vec!["avx2".into(), "sse2".into()],
            threads: 2,
            device: "cpu".into(),
            libtorch: None,
            aten_cpu_capability: None,
            mkl_cbwr: None,
            onednn_max_cpu_isa: None,
            cuda: None,
        }
    }

    fn cuda() -> CudaEnvelope {
        CudaEnvelope {
            gpu_model: "NVIDIA H100 80GB HBM3".into(),
            driver: "580.65.06".into(),
            cuda_runtime: "13.0".into(),
            cudnn: "9.20.0".into(),
            cublas: "13.1.1".into(),
            deterministic: "CUBLAS_WORKSPACE_CONFIG=:4096:8 cudnn_benchmark=off cudnn_deterministic=on \
                            deterministic_algorithms=on"
                .into(),
        }
    }

    /// Every CUDA field decides results, and a difference names its field: another GPU
    /// model, another cuDNN, a CUDA envelope against a CPU one.
    #[test]
    fn cuda_fields_are_result_fields_named_each() {
        let gpu = Envelope { device: "cuda:0".into(), cuda: Some(cuda()), ..envelope() };
        assert!(gpu.result_differences(&gpu.clone()).is_empty());
        let other_gpu = Envelope {
            cuda: Some(CudaEnvelope { gpu_model: "NVIDIA A100-SXM4-40GB".into(), ..cuda() }),
            ..gpu.clone()
        };
        let d = gpu.result_differences(&other_gpu);
        assert_eq!(d, vec![("cuda.gpu_model", "NVIDIA H100 80GB HBM3".into(), "NVIDIA A100-SXM4-40GB".into())]);
        let other_cudnn = Envelope { cuda: Some(CudaEnvelope { cudnn: "9.1.0".into(), ..cuda() }), ..gpu.clone() };
        assert_eq!(gpu.result_differences(&other_cudnn)[0].0, "cuda.cudnn");
        // Against the CPU: the device and all six CUDA fields.
        let names: Vec<&str> = gpu.result_differences(&envelope()).into_iter().map(|(f, _, _)| f).collect();
        assert_eq!(names.len(), 7, "{names:?}");
        assert_eq!(names[0], "device");
        assert!(names[1..].iter().all(|n| n.starts_with("cuda.")), "{names:?}");
        // A CPU envelope's bytes do not change: no `cuda` key.
        let json = serde_json::to_string(&envelope()).unwrap();
        assert!(!json.contains("cuda"), "{json}");
        let back: Envelope = serde_json::from_str(&serde_json::to_string(&gpu).unwrap()).unwrap();
        assert_eq!(back, gpu);
    }

    fn samples() -> Vec<Record> {
        let d = Digest::of(b"x");
        vec![
            Record::Source(SourceRecord {
                schema: 1,
                name: "corpus".parse().unwrap(),
                origin: "data/x.jsonl".into(),
                content: Content::File { digest: d, size: 1 },
                license: Some("MIT".into()),
                retrieved: None,
            }),
            Record::Tree(TreeRecord {
                schema: 1,
                entries: vec![TreeEntry { path: "a/b.txt".parse().unwrap(), digest: d, size: 1, executable: false }],
            }),
            Record::Dataset(DatasetRecord::new(
                "parquet",
                vec![Column { name: "id".into(), data_type: "Utf8".into(), nullable: false }],
                vec![ShardRef { digest: d, rows: 3, bytes: 10 }],
            )),
            Record::Verdict(VerdictRecord {
                schema: 1,
                subject: d,
                spdx: "Apache-2.0".into(),
                record: None,
                decision: Decision::Allow,
                policy_version: "1".into(),
                rule: "permissive".into(),
                reviewer: "policy".into(),
                rationale: "listed as permissive".into(),
                decided_at: Some("2026-11-22T00:00:00Z".into()),
            }),
            Record::Stage(StageRecord {
                schema: 1,
                name: "shard".parse().unwrap(),
                stage_kind: "shard".into(),
                version: 1,
                determinism: Determinism::Portable,
                key: d,
                config: serde_json::json!({"shards": 4, "fraction": 0.1}),
                inputs: BTreeMap::from([("docs".into(), d)]),
                seeds: BTreeMap::from([("sample".into(), u64::MAX)]),
                envelope: envelope(),
                outputs: BTreeMap::from([(
                    "dataset".into(),
                    OutputRef { output_type: OutputType::Dataset, digest: d },
                )]),
                stats: BTreeMap::from([("rows".into(), serde_json::json!(3))]),
            }),
            Record::Checkpoint(CheckpointRecord {
                schema: 1,
                step: 10,
                config: d,
                weights: d,
                tensors: BTreeMap::from([("lm_head.weight".into(), d)]),
                optimizer: d,
                rng: d,
                data_position: 40,
                loss: Finite::new(2.5),
                log: Some(d),
                tokenizer: Some(d),
                palette: Some(d),
            }),
            Record::Run(RunRecord::new(
                "quickstart",
                d,
                vec![RunStage { name: "shard".parse().unwrap(), manifest: d }],
            )),
        ]
    }

    #[test]
    fn every_record_round_trips_canonically() {
        for r in samples() {
            let bytes = r.to_bytes().unwrap();
            let back = Record::from_bytes(&bytes).unwrap();
            assert_eq!(back, r);
            assert_eq!(back.to_bytes().unwrap(), bytes);
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.contains(&format!("\"kind\":\"{}\"", r.kind_name())), "{text}");
            assert!(text.contains("\"schema\":1"), "{text}");
        }
    }

    #[test]
    fn unknown_fields_and_newer_schemas_are_refused() {
        let src = samples().remove(0).to_bytes().unwrap();
        let text = String::from_utf8(src).unwrap();
        let extra = text.replacen("\"kind\"", "\"extra\":1,\"kind\"", 1);
        let err = Record::from_bytes(extra.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
        let newer = text.replace("\"schema\":1", "\"schema\":2");
        let err = Record::from_bytes(newer.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("unsupported source schema version (v2, but only v1"), "{err}");
    }

    #[test]
    fn dataset_invariants_are_checked_on_read() {
        let Record::Dataset(mut ds) = samples().remove(2) else { panic!() };
        ds.rows += 1;
        let err = Record::from_bytes(&Record::Dataset(ds.clone()).to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("`rows` is 4 but the shards hold 3"), "{err}");
        ds.rows -= 1;
        ds.merkle_root = Digest::of(b"forged");
        assert!(Record::from_bytes(&Record::Dataset(ds).to_bytes().unwrap()).is_err());
    }

    #[test]
    fn unsorted_trees_are_refused() {
        let d = Digest::of(b"x");
        let entry = |p: &str| TreeEntry { path: p.parse().unwrap(), digest: d, size: 1, executable: false };
        let t = Record::Tree(TreeRecord { schema: 1, entries: vec![entry("b"), entry("a")] });
        assert!(Record::from_bytes(&t.to_bytes().unwrap()).is_err());
        let dup = Record::Tree(TreeRecord { schema: 1, entries: vec![entry("a"), entry("a")] });
        assert!(Record::from_bytes(&dup.to_bytes().unwrap()).is_err());
    }

    #[test]
    fn explicit_nulls_and_forged_run_roots_are_refused() {
        let src = String::from_utf8(samples().remove(0).to_bytes().unwrap()).unwrap();
        let with_null = src.replace("\"origin\"", "\"license\":null,\"origin\"").replace(",\"license\":\"MIT\"", "");
        assert!(Record::from_bytes(with_null.as_bytes()).is_err(), "{with_null}");
        let Record::Run(mut run) = samples().pop().unwrap() else { panic!() };
        run.root = Digest::of(b"forged");
        let err = Record::from_bytes(&Record::Run(run).to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("`root` is"), "{err}");
    }

    #[test]
    fn references_follow_every_digest() {
        let run = samples().pop().unwrap();
        assert_eq!(run.references(), vec![Digest::of(b"x")]);
    }

    #[test]
    fn a_verdict_decided_in_a_run_has_no_time() {
        let Record::Verdict(mut v) = samples().remove(3) else { panic!() };
        v.decided_at = None;
        let bytes = Record::Verdict(v.clone()).to_bytes().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains("decided_at"), "{text}");
        assert_eq!(Record::from_bytes(&bytes).unwrap(), Record::Verdict(v));
        let with_null = text.replace("\"decision\"", "\"decided_at\":null,\"decision\"");
        assert!(Record::from_bytes(with_null.as_bytes()).is_err(), "{with_null}");
    }
}
