//! The `bits-per-weight` claim (AFM, §5.2): a `palettize` stage's checkpoint takes at most the
//! claimed bits per weight over the layers' projection matrices, and its weights are what its
//! palette says they are.
//!
//! What it re-derives, from the checkpoint's weights and its float source's (the stage's input)
//! and not from the palette's numbers: which scheme each tensor must have, by its name (the
//! layers' seven projection matrices palettized, the embeddings 8-bit, every other tensor
//! kept); that every palettized tensor holds, in each group of the stage's `group_rows` rows,
//! at most `2^bits` distinct values, each a half-precision number, and leaves the squared
//! error against the source that the palette states; that every 8-bit tensor is exactly the
//! book's 8-bit rounding of the source and every kept tensor the source's; and, from the
//! schemes and sizes, the bits per weight, which must be the palette's and at most the claim.
//! This module is the audit's own reading of the book's format; it shares no code with
//! `prov-palette`.

use std::collections::BTreeSet;

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
    let checkpoint = checkpoint_record(cx, &output)?;
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
    let group_rows = s
        .config
        .get("group_rows")
        .and_then(Value::as_u64)
        .filter(|g| *g > 0)
        .ok_or("the stage's config has no positive `group_rows`")?;
    if palette["config"]["group_rows"].as_u64() != Some(group_rows) {
        return Err(format!(
            "the palette's `group_rows` is {}, the stage's {group_rows}",
            palette["config"]["group_rows"]
        ));
    }
    let weights = read_weights(cx, &checkpoint)?;
    let float = read_weights(cx, &checkpoint_record(cx, source)?)?;
    let schemes = palette["tensors"].as_object().ok_or("no `tensors` map")?;
    let listed: BTreeSet<&String> = schemes.keys().collect();
    if listed != weights.0.keys().collect::<BTreeSet<_>>() || listed != float.0.keys().collect::<BTreeSet<_>>() {
        return Err("the palette's tensors are not the checkpoint's and its source's".into());
    }
    let (mut projection, mut model) = ((0u64, 0u64), (0u64, 0u64));
    let layers = palette["layers"].as_array().ok_or("no `layers` list")?;
    for (tensor, scheme) in schemes {
        let (bits, n, palettized) = tensor_bits(tensor, scheme, (&weights, &float), group_rows, layers)?;
        if palettized {
            projection = (projection.0 + bits, projection.1 + n);
        }
        model = (model.0 + bits, model.1 + n);
    }
    if projection.1 == 0 {
        return Err("the checkpoint has no palettized projection matrix".into());
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
        "`{name}`: each tensor's scheme from its name; every palettized group of the checkpoint's weights holds at most its table's half-precision values and leaves the stated error against the float source; the 8-bit and kept tensors equal the book's rounding of the source and the source; the bits per weight recomputed from the schemes and sizes"
    ));
    if bpw > max {
        result.fail(format!("`{name}`'s projections take {bpw:.4} bits per weight, more than the claimed {max}"));
    }
    Ok(())
}

/// One tensor of the palette checked against the checkpoint (`weights.0`) and its source
/// (`weights.1`): its bits by the book's formula, its number of values, and whether it is
/// palettized.
fn tensor_bits(
    tensor: &str,
    scheme: &Value,
    (weights, float): (&NamedTensors, &NamedTensors),
    group_rows: u64,
    layers: &[Value],
) -> Result<(u64, u64, bool), String> {
    let (shape, values) = &weights.0[tensor];
    let (source_shape, source_values) = &float.0[tensor];
    if shape != source_shape {
        return Err(format!("`{tensor}` has shape {shape:?}, its source {source_shape:?}"));
    }
    let rows = shape.first().copied().unwrap_or(1).max(1) as u64;
    let n = values.len() as u64;
    let columns = usize::try_from(n / rows).map_err(|e| e.to_string())?;
    let stated = scheme["scheme"].as_str().unwrap_or_default();
    let expected = expected_scheme(tensor);
    if stated != expected {
        return Err(format!("`{tensor}` is `{stated}` in the palette; the book's scheme gives it `{expected}`"));
    }
    match expected {
        "palette" => {
            let bits =
                scheme["bits"].as_u64().filter(|b| (1..=8).contains(b)).ok_or(format!("`{tensor}`: no `bits`"))?;
            let groups = rows.div_ceil(group_rows);
            if scheme["groups"].as_u64() != Some(groups) {
                return Err(format!(
                    "`{tensor}`: the palette counts {} groups, its {rows} rows make {groups}",
                    scheme["groups"]
                ));
            }
            let layer = layer_of(tensor).ok_or(format!("`{tensor}` is in no layer"))?;
            if layers.get(layer).and_then(Value::as_u64) != Some(bits) {
                return Err(format!("`{tensor}` has {bits} bits, not its layer's"));
            }
            let group = usize::try_from(group_rows)
                .ok()
                .and_then(|g| g.checked_mul(columns.max(1)))
                .ok_or("`group_rows` is too large")?;
            check_tables(tensor, values, group, bits)?;
            let error = squared_difference(values, source_values);
            let stated_error = scheme["squared_error"].as_f64().ok_or(format!("`{tensor}`: no `squared_error`"))?;
            if (error - stated_error).abs() > 1e-9 * error.max(1e-12) {
                return Err(format!(
                    "`{tensor}`: the palette states a squared error of {stated_error}, its weights leave {error} against the source"
                ));
            }
            Ok((n * bits + groups * (1 << bits) * TABLE_ENTRY_BITS, n, true))
        }
        "linear8" => {
            if linear8(source_values, columns).iter().zip(values).any(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(format!("`{tensor}` is not the 8-bit rounding of its source"));
            }
            Ok((n * 8 + rows * TABLE_ENTRY_BITS, n, false))
        }
        _ => {
            if values.iter().zip(source_values).any(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(format!("`{tensor}` is kept in the palette but differs from its source"));
            }
            Ok((n * 32, n, false))
        }
    }
}

/// The scheme the book gives a tensor, by its name.
fn expected_scheme(name: &str) -> &'static str {
    const PROJECTIONS: [&str; 7] = [
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
    ];
    if name == "model.embed_tokens.weight" || name == "lm_head.weight" {
        return "linear8";
    }
    let in_layer = layer_of(name).and_then(|l| name.strip_prefix(&format!("model.layers.{l}.")).map(str::to_owned));
    if in_layer.is_some_and(|rest| PROJECTIONS.contains(&rest.as_str())) { "palette" } else { "float" }
}

/// The layer index of `model.layers.N.…`.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("model.layers.")?.split('.').next()?.parse().ok()
}

/// The sum of squared differences, in `f64`, in order.
fn squared_difference(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum()
}

/// The book's 8-bit rows: `s = half(max |w| / 127)`, `round(w / s)` ties to even, clamped to
/// ±127, times `s`; zero when `s` is.
fn linear8(values: &[f32], columns: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(values.len());
    for row in values.chunks(columns.max(1)) {
        let largest = row.iter().map(|v| f64::from(v.abs())).fold(0.0, f64::max);
        let scale = to_half(largest / 127.0);
        for v in row {
            let q =
                if scale == 0.0 { 0.0 } else { (f64::from(*v) / scale).round_ties_even().clamp(-127.0, 127.0) * scale };
            out.push(q as f32);
        }
    }
    out
}

/// `x` (finite, non-negative, at most half precision's largest value) rounded to the nearest
/// half-precision number, ties to the even one: the step between half-precision numbers is
/// `2^(e - 10)` at `2^e` (at least `2^-24`, the subnormals'), so `x` lies between two
/// multiples of it, both exact in `f64`.
fn to_half(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let exponent = x.log2().floor().max(-14.0);
    // `log2` may land one off at a power of two: correct the exponent on the value itself.
    let exponent = if 2f64.powf(exponent) > x { exponent - 1.0 } else { exponent }.max(-14.0);
    let step = 2f64.powf(exponent - 10.0);
    let below = (x / step).floor();
    let (low, high) = (below * step, (below + 1.0) * step);
    // Exact in `f64`: a tie is a true midpoint, which goes to the even multiple.
    match (x - low).total_cmp(&(high - x)) {
        std::cmp::Ordering::Less => low,
        std::cmp::Ordering::Equal if below.rem_euclid(2.0).to_bits() == 0.0f64.to_bits() => low,
        _ => high,
    }
}

/// The checkpoint record `digest`.
fn checkpoint_record(cx: &RunContext<'_>, digest: &prov_store::Digest) -> Result<CheckpointRecord, String> {
    match get_record(cx.store, digest).map_err(|e| e.to_string())? {
        Record::Checkpoint(c) => Ok(c),
        other => Err(format!("`{digest}` is a {} record, not a checkpoint", other.kind_name())),
    }
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

/// Each group of `group` values (rows by columns) holds at most `2^bits` distinct values, all
/// half-precision (a negative zero counts as zero).
fn check_tables(tensor: &str, values: &[f32], group: usize, bits: u64) -> Result<(), String> {
    for (g, chunk) in values.chunks(group.max(1)).enumerate() {
        let distinct: BTreeSet<u32> = chunk.iter().map(|v| (v + 0.0).to_bits()).collect();
        if distinct.len() as u64 > 1 << bits {
            return Err(format!(
                "`{tensor}` group {g} holds {} distinct values, more than a {bits}-bit table",
                distinct.len()
            ));
        }
        if let Some(v) = chunk.iter().find(|v| half::f16::from_f32(**v).to_f32().to_bits() != v.to_bits()) {
            return Err(format!("`{tensor}` group {g} holds {v}, not a half-precision table entry"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::to_half;

    /// One correct rounding to half precision, ties to even, across the binades and into the
    /// subnormals (written apart from `prov-palette`'s, which the claim checks).
    #[test]
    fn rounding_to_half_precision() {
        let step = 2f64.powi(-10);
        assert_eq!(to_half(1.0 + step / 2.0 + 2f64.powi(-40)).to_bits(), (1.0 + step).to_bits());
        assert_eq!(to_half(1.0 + step / 2.0).to_bits(), 1f64.to_bits());
        assert_eq!(to_half(1.0 + 1.5 * step).to_bits(), (1.0 + 2.0 * step).to_bits());
        assert_eq!(to_half(0.75).to_bits(), 0.75f64.to_bits());
        assert_eq!(to_half(3e-8).to_bits(), 2f64.powi(-24).to_bits());
        assert_eq!(to_half(65_504.0).to_bits(), 65_504f64.to_bits());
        for x in [0.1, 0.007_812_6, 1.0 / 127.0, 0.333_333, 1234.5678] {
            let h = to_half(x);
            assert!(f64::from(half::f16::from_f64(h)).to_bits() == h.to_bits(), "{x}: {h} is a half");
            assert!((h - x).abs() <= x * 2f64.powi(-11), "{x}: {h}");
        }
    }
}
