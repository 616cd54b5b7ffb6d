//! `prov show`.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::Path;

use prov_manifest::{Content, LoadedRun, Lockfile, Record, StageRecord, StoredError, looks_like_record};
use prov_store::{Access, Digest, Store};
use prov_textfix::shown::visible;
use serde_json::{Value, json};

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::{LoadedLockfile, load_lockfile, resolve_object, resolve_run_id};
use crate::ui::{Ui, format_bytes, format_value, pretty_json, table};

/// Show a run, a manifest or any object of the store
///
/// TARGET is a lockfile path, a run id, or the digest of any object, in full or as a prefix
/// of at least 6 hex digits (a prefix that names exactly one run wins over other objects).
///
/// For a run: the lockfile's recipe, seed and sources, and the latest completed run of it in
/// this store with a table of its stages (kind, determinism class, stage key, outputs and
/// statistics). For a manifest: its kind, a summary for stage, run and dataset records, and
/// the record itself. For any other object (a file, a Parquet shard): its kind, size, the
/// shard's row count, and the manifests that reference it. Every object is read verified; one
/// whose bytes no longer match its digest makes the command exit 2.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// Run id, lockfile path, or object digest (full or a prefix of at least 6 hex digits)
    target: String,
}

/// Objects up to this size whose kind the index does not know are read to see whether they
/// are records.
const SNIFF_LIMIT: u64 = 64 << 20;

pub(crate) fn cmd_show(ui: &mut Ui, cx: &CommandContext, args: &ShowArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    if Path::new(&args.target).is_file() {
        let loaded = load_lockfile(&store, &args.target)?;
        return show_run(ui, &store, &loaded);
    }
    let digest = match resolve_run_id(&store, &args.target) {
        Ok(d) => d,
        Err(_) => resolve_object(&store, &args.target)?,
    };
    if !store.contains(&digest) {
        return Err(CommandError::input(format!("no object `{digest}` in this store")));
    }
    match store.index().object_kind(&digest)?.as_deref() {
        Some("manifest") => {
            let bytes = store.read(&digest)?;
            show_record(ui, &store, &digest, &bytes)
        }
        Some("shard") => {
            let size = store.verify(&digest)?;
            // Document shards and ledger shards alike: the row count is in the footer.
            let rows = prov_dataset::shard_rows(&store, &digest).map_err(|e| {
                if e.is_integrity_failure() {
                    CommandError::integrity(e.to_string())
                } else {
                    CommandError::input(e.to_string())
                }
            })?;
            show_object(ui, &store, &digest, "shard", size, Some(rows))
        }
        known => {
            let size = store.verify(&digest)?;
            if known.is_none() && size <= SNIFF_LIMIT {
                let bytes = store.read(&digest)?;
                if looks_like_record(&bytes) {
                    return show_record(ui, &store, &digest, &bytes);
                }
            }
            show_object(ui, &store, &digest, known.unwrap_or("blob"), size, None)
        }
    }
}

fn decode(digest: &Digest, bytes: &[u8]) -> Result<Record, CommandError> {
    Record::from_bytes(bytes).map_err(|source| StoredError::Decode { digest: *digest, source }.into())
}

fn record_json(digest: &Digest, record: &Record, referrers: &[Digest]) -> Value {
    json!({
        "digest": digest.to_string(),
        "kind": record.kind_name(),
        "record": serde_json::to_value(record).expect("records are plain JSON"),
        "referrers": referrers.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

fn show_record(ui: &mut Ui, store: &Store, digest: &Digest, bytes: &[u8]) -> Result<(), CommandError> {
    let record = decode(digest, bytes)?;
    if let Record::Lockfile(lockfile) = record {
        let loaded = LoadedLockfile { lockfile, bytes: bytes.to_vec(), display: digest.to_string() };
        return show_run(ui, store, &loaded);
    }
    let referrers = ordered_referrers(store, digest)?;
    ui.json("record", record_json(digest, &record, &referrers))?;
    ui.line(format!("{} {digest}", record.kind_name()))?;
    match &record {
        Record::Stage(s) => stage_summary(ui, store, s)?,
        Record::Run(r) => {
            ui.line(format!("  recipe    {}", r.recipe))?;
            ui.line(format!("  run id    {}", r.lockfile))?;
            ui.line(format!("  root      {}", r.root))?;
            let run = LoadedRun::from_record(store, *digest, r.clone())?;
            ui.line(stages_table(&run).lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n"))?;
            attestation_lines(ui, store, digest)?;
        }
        Record::Dataset(d) => {
            ui.line(format!(
                "  {} rows in {} {} shards ({}), merkle root {}",
                d.rows,
                d.shards.len(),
                d.format,
                format_bytes(d.shards.iter().map(|s| s.bytes).sum()),
                d.merkle_root.short()
            ))?;
            let cols: Vec<String> = d.columns.iter().map(|c| format!("{}: {}", c.name, c.data_type)).collect();
            ui.line(format!("  columns   {}", cols.join(", ")))?;
        }
        Record::Source(s) => {
            ui.line(format!("  {} from {}: {}", s.name, s.origin, content_summary(&s.content)))?;
        }
        Record::Replay(r) => {
            ui.line(format!("  run id    {}", r.lockfile))?;
            ui.line(format!("  recording {}", r.recording))?;
            let replayed = r.stages.iter().filter(|s| s.status == prov_manifest::ReplayStatus::Replayed).count();
            ui.line(format!("  stages    {replayed} re-executed, {} reused", r.stages.len() - replayed))?;
            match &r.divergence {
                None => ui.line("  outcome   identical")?,
                Some(d) => ui.line(format!("  outcome   diverged at stage `{}`", d.stage()))?,
            }
        }
        Record::Attestation(a) => {
            ui.line(format!("  role      {}", a.role.as_str()))?;
            ui.line(format!("  run       {}", a.run))?;
            ui.line(format!("  envelope  {}", a.envelope))?;
            ui.line(format!(
                "  key ids   {} (as the envelope states them: `prov verify-attestation` checks them)",
                a.keyids.join(", ")
            ))?;
        }
        _ => {}
    }
    referrers_line(ui, &referrers)?;
    ui.line("")?;
    ui.line(pretty_json(&serde_json::to_value(&record).expect("records are plain JSON")))?;
    Ok(())
}

/// The manifests that reference `digest`, ordered by what they name (a stage record by its
/// stage name, another record by its kind), then digest. A stage record's digest depends on
/// the envelope it holds, so an order by digest would list the same run's stages in another
/// order on another machine. A referrer that cannot be read sorts last, by digest.
fn ordered_referrers(store: &Store, digest: &Digest) -> Result<Vec<Digest>, CommandError> {
    let mut keyed: Vec<((bool, String), Digest)> = store
        .index()
        .referrers(digest)?
        .into_iter()
        .map(|r| {
            let key = match prov_manifest::get_record(store, &r) {
                Ok(Record::Stage(s)) => (false, format!("stage {}", s.name)),
                Ok(other) => (false, other.kind_name().to_owned()),
                Err(_) => (true, String::new()),
            };
            (key, r)
        })
        .collect();
    keyed.sort();
    Ok(keyed.into_iter().map(|(_, r)| r).collect())
}

fn referrers_line(ui: &mut Ui, referrers: &[Digest]) -> Result<(), CommandError> {
    if !referrers.is_empty() {
        let shown: Vec<String> = referrers.iter().map(Digest::short).collect();
        ui.line(format!("  referenced by {}", shown.join(" ")))?;
    }
    Ok(())
}

fn content_summary(c: &Content) -> String {
    match c {
        Content::File { digest, size } => format!("file {} ({})", digest.short(), format_bytes(*size)),
        Content::Tree { digest, files, size } => {
            format!("tree {} ({files} files, {})", digest.short(), format_bytes(*size))
        }
    }
}

fn stage_summary(ui: &mut Ui, store: &Store, s: &StageRecord) -> Result<(), CommandError> {
    ui.line(format!("  name      {}", s.name))?;
    ui.line(format!("  kind      {} v{} ({})", s.stage_kind, s.version, s.determinism.as_str()))?;
    ui.line(format!("  key       {}", s.key))?;
    for (name, d) in &s.inputs {
        let kind = store.index().object_kind(d)?.unwrap_or_else(|| "object".to_owned());
        ui.line(format!("  input     {name} = {d} ({kind})"))?;
    }
    for (name, seed) in &s.seeds {
        ui.line(format!("  seed      {name} = {seed}"))?;
    }
    for (name, o) in &s.outputs {
        let t = serde_json::to_value(o.output_type).expect("output types are strings");
        ui.line(format!("  output    {name} = {} ({})", o.digest, t.as_str().unwrap_or("?")))?;
    }
    if !s.stats.is_empty() {
        ui.line(format!("  stats     {}", compact_stats(&s.stats)))?;
    }
    let e = &s.envelope;
    ui.line(format!(
        "  envelope  prov {}, {}, {}, {} threads, {}{}",
        e.workbench_version,
        e.os,
        e.arch,
        e.threads,
        e.device,
        e.libtorch.as_ref().map_or_else(String::new, |t| format!(", libtorch {t}"))
    ))?;
    Ok(())
}

/// Renders statistics as `k=v` pairs; long nested values are shortened to their size.
fn compact_stats(stats: &std::collections::BTreeMap<String, Value>) -> String {
    stats
        .iter()
        .map(|(k, v)| {
            let shown = format_value(v);
            let shown = match v {
                Value::Object(m) if shown.len() > 40 => format!("{{{} entries}}", m.len()),
                Value::Array(a) if shown.len() > 40 => format!("[{} items]", a.len()),
                _ => shown,
            };
            format!("{k}={shown}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A table of a run's stages.
fn stages_table(run: &LoadedRun) -> String {
    let mut rows = Vec::new();
    for s in run.stages().iter().map(|s| &s.record) {
        let outputs: Vec<String> = s
            .outputs
            .iter()
            .map(|(name, o)| {
                let t = serde_json::to_value(o.output_type).expect("output types are strings");
                format!("{name}={}:{}", t.as_str().unwrap_or("?"), o.digest.short())
            })
            .collect();
        rows.push(vec![
            s.name.to_string(),
            s.stage_kind.clone(),
            s.determinism.as_str().to_owned(),
            s.key.short(),
            outputs.join(" "),
            compact_stats(&s.stats),
        ]);
    }
    table(&["stage", "kind", "determinism", "key", "outputs", "stats"], &rows)
}

fn show_run(ui: &mut Ui, store: &Store, loaded: &LoadedLockfile) -> Result<(), CommandError> {
    let run_id = prov_manifest::run_id(&loaded.bytes);
    let l = &loaded.lockfile;
    let lock_record = Record::Lockfile(l.clone());
    let recorded = prov_exec::load_recorded_run(store, &run_id)?;
    ui.json("record", record_json(&run_id, &lock_record, &[]))?;
    if let Some(run) = &recorded {
        ui.json("record", record_json(&run.manifest, &Record::Run(run.record.clone()), &[]))?;
        for st in run.stages() {
            ui.json("record", record_json(&st.manifest, &Record::Stage(st.record.clone()), &[]))?;
        }
    }

    ui.line(format!("run {run_id} ({})", l.recipe.name))?;
    ui.line(format!("  lockfile  {}", loaded.display))?;
    let commands = if l.allow_commands { ", commands allowed" } else { "" };
    ui.line(format!("  recipe    {} ({}), seed {}{commands}", l.recipe.name, visible(&l.recipe.path), l.seed))?;
    source_lines(ui, l)?;
    if let Some(run) = &recorded {
        ui.line(format!("recorded run {} (root {})", run.manifest, run.record.root.short()))?;
        ui.line(stages_table(run))?;
        return attestation_lines(ui, store, &run.manifest);
    }
    ui.line("not recorded: no completed run of it in this store")?;
    let rows: Vec<Vec<String>> = l
        .stages
        .iter()
        .map(|s| {
            let inputs: Vec<String> = s.inputs.iter().map(|(k, i)| format!("{k}={}.{}", i.stage, i.output)).collect();
            vec![
                s.name.to_string(),
                s.stage_kind.clone(),
                format!("v{}", s.version),
                s.determinism.as_str().to_owned(),
                inputs.join(" "),
            ]
        })
        .collect();
    ui.line(table(&["stage", "kind", "version", "determinism", "inputs"], &rows))?;
    Ok(())
}

/// The attestations kept beside a run: who they say signed, not checked (that takes a key).
fn attestation_lines(ui: &mut Ui, store: &Store, run: &Digest) -> Result<(), CommandError> {
    let attestations = prov_manifest::attestations_of(store, run)?;
    for (digest, a) in &attestations {
        ui.json(
            "attestation",
            json!({"record": digest.to_string(), "role": a.role.as_str(), "envelope": a.envelope.to_string(), "keyids": a.keyids}),
        )?;
    }
    if attestations.is_empty() {
        return Ok(());
    }
    ui.line(format!(
        "attestations ({}, signatures not checked here: `prov verify-attestation` checks one)",
        attestations.len()
    ))?;
    let rows: Vec<Vec<String>> = attestations
        .iter()
        .map(|(digest, a)| {
            let keys: Vec<String> = a.keyids.iter().map(|k| prov_attest::short_keyid(k)).collect();
            vec![digest.short(), a.role.as_str().to_owned(), keys.join(" "), a.envelope.short()]
        })
        .collect();
    ui.line(table(&["attestation", "role", "key ids (stated)", "envelope"], &rows))?;
    Ok(())
}

fn source_lines(ui: &mut Ui, l: &Lockfile) -> Result<(), CommandError> {
    for s in &l.sources {
        let mut extra = String::new();
        // A lockfile's strings are its author's: one must not write a line of its own.
        if let Some(lic) = &s.license {
            let _ = write!(extra, ", license {}", visible(lic));
        }
        if let Some(r) = &s.retrieved {
            let _ = write!(extra, ", retrieved {}", visible(r));
        }
        ui.line(format!(
            "  source    {} = {}: {}{extra}",
            s.name,
            visible(s.path.as_str()),
            content_summary(&s.content)
        ))?;
    }
    Ok(())
}

fn show_object(
    ui: &mut Ui,
    store: &Store,
    digest: &Digest,
    kind: &str,
    size: u64,
    rows: Option<u64>,
) -> Result<(), CommandError> {
    let referrers = ordered_referrers(store, digest)?;
    let mut data = json!({
        "digest": digest.to_string(),
        "kind": kind,
        "size": size,
        "referrers": referrers.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    if let Some(r) = rows {
        data["rows"] = json!(r);
    }
    ui.json("object", data)?;
    ui.line(format!("{kind} {digest}"))?;
    ui.line(format!("  size      {} ({size} bytes)", format_bytes(size)))?;
    if let Some(r) = rows {
        ui.line(format!("  rows      {r}"))?;
    }
    referrers_line(ui, &referrers)?;
    if kind == "blob"
        && !ui.is_json()
        && let Some(preview) = text_preview(store, digest)?
    {
        ui.line("")?;
        ui.line(preview)?;
    }
    Ok(())
}

/// Returns the first lines of an object that looks like text (already verified by the
/// caller), or `None`.
fn text_preview(store: &Store, digest: &Digest) -> Result<Option<String>, CommandError> {
    const HEAD: u64 = 4096;
    const LINES: usize = 10;
    let mut head = Vec::new();
    fs_err::File::open(store.object_path(digest))?.take(HEAD).read_to_end(&mut head)?;
    if head.contains(&0) {
        return Ok(None);
    }
    let text = match std::str::from_utf8(&head) {
        Ok(t) => t,
        // A multi-byte character cut at the end of the window.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
        Err(_) => return Ok(None),
    };
    let mut lines: Vec<&str> = text.lines().take(LINES).collect();
    let complete = head.len() < HEAD as usize && text.lines().count() <= LINES;
    if !complete {
        lines.push("…");
    }
    Ok(Some(lines.iter().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n")))
}
