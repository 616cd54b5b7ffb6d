//! The `bits-per-weight` claim (AFM, §5.2): a `palettize` stage's checkpoint takes at most the
//! claimed bits per weight over the layers' projection matrices, and its weights are what its
//! palette says they are.
//!
//! What it re-derives, from the checkpoint's weights and not from the palette's numbers: that
//! every tensor the palette calls palettized holds, in each group of rows, at most `2^bits`
//! distinct values, each a half-precision number (a lookup table of that size); that every
//! 8-bit tensor holds at most 255 distinct values per row; and, from those schemes and the
//! tensors' sizes, the bits per weight by the book's formula, which must be the palette's and
//! at most the claim. What it reads from the records: the palette the checkpoint names, and
//! that the palette's source is the stage's input. This module is the audit's own reading of
//! the book's format; it shares no code with `prov-palette`.

use std::collections::{BTreeMap, BTreeSet};

use prov_manifest::{CheckpointRecord, NamedTensors, Record, StageRecord, get_record};
use prov_store::Digest;
use serde_json::Value;

use super::{ClaimResult, RunContext, no_stage};

/// Bits a lookup-table entry or a row scale costs, as the book counts them.
const TABLE_ENTRY_BITS: u64 = 16;

/// The `bits-per-weight` claim.
pub(super) fn bits_per_weight(cx: &RunContext<'_>, stage: Option<&str>, max: f64) -> ClaimResult {
    let mut result = ClaimResult::new(
        "bits-per-weight",
        format!(
            "the palettized checkpoint's projection matrices take at most {max} bits per weight, lookup tables included, and its weights are its palette's"
        ),
    );
    let stages = cx.stages_of("palettize", stage);
    if stages.is_empty() {
        no_stage(&mut result, "palettize", stage);
    }
    for s in stages {
        result.evidence(format!("stage `{}` (palettize)", s.name()), s.manifest);
        if let Err(e) = check(cx, &s.record, max, &mut result) {
            result.fail(format!("`{}`: {e}", s.name()));
        }
    }
    result
}

fn check(cx: &RunContext<'_>, s: &StageRecord, max: f64, result: &mut ClaimResult) -> Result<(), String> {
    let name = s.name.as_str();
    let output = s.outputs.get("model").ok_or("no `model` output")?.digest;
    let checkpoint = match get_record(cx.store, &output).map_err(|e| e.to_string())? {
        Record::Checkpoint(c) => c,
        other => return Err(format!("its `model` is a {} record", other.kind_name())),
    };
    let palette_digest = checkpoint.palette.ok_or("its checkpoint names no palette")?;
    let palette: Value = serde_json::from_slice(&cx.store.read(&palette_digest).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    if palette["format"] != "prov-palette" || palette["version"] != 1 {
        return Err(format!("palette `{palette_digest}` is not a `prov-palette` version 1 file"));
    }
    let source = s.inputs.get("model").ok_or("no `model` input")?;
    if palette["source"].as_str() != Some(source.to_string().as_str()) {
        return Err(format!("the palette names source {}, the stage read `{source}`", palette["source"]));
    }
    result.evidence(format!("`{name}` palette"), palette_digest);
    let weights = read_weights(cx, &checkpoint)?;
    let group_rows = palette["config"]["group_rows"].as_u64().filter(|g| *g > 0).ok_or("no positive `group_rows`")?;
    let schemes = palette["tensors"].as_object().ok_or("no `tensors` map")?;
    let listed: BTreeSet<&String> = schemes.keys().collect();
    if listed != weights.0.keys().collect::<BTreeSet<_>>() {
        return Err("the palette's tensors are not the checkpoint's".into());
    }
    let (mut projection, mut model) = ((0u64, 0u64), (0u64, 0u64));
    let layers = palette["layers"].as_array().ok_or("no `layers` list")?;
    for (tensor, scheme) in schemes {
        let (shape, values) = &weights.0[tensor];
        let rows = shape.first().copied().unwrap_or(1).max(1) as u64;
        let n = values.len() as u64;
        let bits = match scheme["scheme"].as_str() {
            Some("palette") => {
                let bits =
                    scheme["bits"].as_u64().filter(|b| (1..=8).contains(b)).ok_or(format!("`{tensor}`: no `bits`"))?;
                let groups = rows.div_ceil(group_rows);
                if scheme["groups"].as_u64() != Some(groups) {
                    return Err(format!(
                        "`{tensor}`: the palette counts {} groups, its {rows} rows make {groups}",
                        scheme["groups"]
                    ));
                }
                let layer = tensor
                    .strip_prefix("model.layers.")
                    .and_then(|r| r.split('.').next())
                    .and_then(|l| l.parse::<usize>().ok());
                if layer.and_then(|l| layers.get(l)).and_then(Value::as_u64) != Some(bits) {
                    return Err(format!("`{tensor}` has {bits} bits, not its layer's"));
                }
                check_tables(tensor, values, (n / rows) as usize, group_rows as usize, bits)?;
                let b = n * bits + groups * (1 << bits) * TABLE_ENTRY_BITS;
                projection = (projection.0 + b, projection.1 + n);
                b
            }
            Some("linear8") => {
                check_rows(tensor, values, (n / rows) as usize)?;
                n * 8 + rows * TABLE_ENTRY_BITS
            }
            Some("float") => n * 32,
            other => return Err(format!("`{tensor}`: unknown scheme {other:?}")),
        };
        model = (model.0 + bits, model.1 + n);
    }
    let per_weight = |(bits, n): (u64, u64)| if n == 0 { 0.0 } else { bits as f64 / n as f64 };
    let (bpw, model_bpw) = (per_weight(projection), per_weight(model));
    for (field, derived) in [("bits_per_weight", bpw), ("model_bits_per_weight", model_bpw)] {
        let stated = palette[field].as_f64().ok_or(format!("no `{field}`"))?;
        if (stated - derived).abs() > 1e-9 {
            return Err(format!("the palette states {field} {stated}, its schemes and sizes give {derived}"));
        }
    }
    result.evidence(format!("`{name}` bits per weight (projections)"), format!("{bpw:.4}"));
    result.evidence(format!("`{name}` bits per weight (whole model)"), format!("{model_bpw:.4}"));
    result.rechecked.push(format!(
        "`{name}`: every palettized group of the checkpoint's weights holds at most its table's half-precision values, every 8-bit row at most 255 values; the bits per weight recomputed from the schemes and sizes"
    ));
    if bpw > max {
        result.fail(format!("`{name}`'s projections take {bpw:.4} bits per weight, more than the claimed {max}"));
    }
    Ok(())
}

/// The checkpoint's weights, every tensor checked against the digest its record lists.
fn read_weights(cx: &RunContext<'_>, c: &CheckpointRecord) -> Result<NamedTensors, String> {
    let weights = NamedTensors::from_safetensors(&cx.store.read(&c.weights).map_err(|e| e.to_string())?)?;
    for (name, digest) in &c.tensors {
        let (_, values) = weights.0.get(name).ok_or(format!("tensor `{name}` is listed but missing"))?;
        if Digest::of(&NamedTensors::le_bytes(values)) != *digest {
            return Err(format!("tensor `{name}` does not have the digest its record lists"));
        }
    }
    if weights.0.len() != c.tensors.len() {
        return Err("the weights hold tensors the record does not list".into());
    }
    Ok(weights)
}

/// Each group of `group_rows` rows holds at most `2^bits` distinct values, all half-precision.
fn check_tables(tensor: &str, values: &[f32], columns: usize, group_rows: usize, bits: u64) -> Result<(), String> {
    for (g, group) in values.chunks(group_rows * columns.max(1)).enumerate() {
        let distinct: BTreeSet<u32> = group.iter().map(|v| (v + 0.0).to_bits()).collect();
        if distinct.len() as u64 > 1 << bits {
            return Err(format!(
                "`{tensor}` group {g} holds {} distinct values, more than a {bits}-bit table",
                distinct.len()
            ));
        }
        if let Some(v) = group.iter().find(|v| f32::from(half::f16::from_f32(**v)).to_bits() != v.to_bits()) {
            return Err(format!("`{tensor}` group {g} holds {v}, not a half-precision table entry"));
        }
    }
    Ok(())
}

/// Each row holds at most 255 distinct values (signed 8-bit integers times a scale).
fn check_rows(tensor: &str, values: &[f32], columns: usize) -> Result<(), String> {
    let mut counts = BTreeMap::new();
    for (r, row) in values.chunks(columns.max(1)).enumerate() {
        let distinct: BTreeSet<u32> = row.iter().map(|v| (v + 0.0).to_bits()).collect();
        if distinct.len() > 255 {
            counts.insert(r, distinct.len());
        }
    }
    match counts.first_key_value() {
        Some((r, n)) => Err(format!("`{tensor}` row {r} holds {n} distinct values, more than 8 bits give")),
        None => Ok(()),
    }
}
