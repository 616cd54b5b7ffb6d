//! Where a replayed `pretrain` stage departs from its recording: the first step whose log
//! line differs, the first checkpoint and tensor that differ, or the tensor a damaged store
//! no longer holds.

use prov_exec::Located;
use prov_manifest::{CheckpointRecord, NamedTensors};
use prov_store::{Digest, Store};
use serde_json::{Value, json};

use crate::loop_config::{StepLog, decode_log};

/// The first step whose log line differs: a line for people and its JSON form.
pub(super) fn first_log_difference(expected: &[StepLog], actual: &[StepLog]) -> Option<(String, Value)> {
    let (e, a) = expected.iter().zip(actual).find(|(e, a)| e != a)?;
    let mut fields = Vec::new();
    let mut data = serde_json::Map::new();
    for (name, x, y) in [("loss", e.loss, a.loss), ("grad_norm", e.grad_norm, a.grad_norm), ("lr", e.lr, a.lr)] {
        if x.to_bits() != y.to_bits() {
            fields.push(format!("{name} recorded {x}, replayed {y}"));
            data.insert(name.into(), json!({ "recorded": x, "replayed": y }));
        }
    }
    if (e.tokens, e.dropped) != (a.tokens, a.dropped) {
        fields.push(format!("labels recorded {}/{} dropped, replayed {}/{}", e.tokens, e.dropped, a.tokens, a.dropped));
        data.insert("labels".into(), json!({ "recorded": [e.tokens, e.dropped], "replayed": [a.tokens, a.dropped] }));
    }
    Some((
        format!("first divergent step: {} ({})", e.step, fields.join("; ")),
        json!({ "step": e.step, "fields": data }),
    ))
}

/// Where two checkpoint records differ: the first step whose log differs, and the first
/// tensor (in name order) whose digest differs, with its largest absolute difference when
/// both weights are in the store.
pub(super) fn locate_checkpoint(store: &Store, name: &str, expected: &Digest, actual: &Digest) -> Option<Located> {
    let (e, a) =
        (crate::checkpoint::read_record(store, expected).ok()?, crate::checkpoint::read_record(store, actual).ok()?);
    let mut lines = vec![format!("first divergent checkpoint: {name} (step {})", e.step)];
    let mut data = serde_json::Map::new();
    data.insert("checkpoint".into(), json!(name));
    data.insert("checkpoint_step".into(), json!(e.step));
    let logs = e.log.zip(a.log).and_then(|(le, la)| {
        Some((decode_log(&store.read(&le).ok()?).ok()?, decode_log(&store.read(&la).ok()?).ok()?))
    });
    if let Some((line, step)) = logs.and_then(|(le, la)| first_log_difference(&le, &la)) {
        lines.push(line);
        data.insert("first_step".into(), step);
    }
    let differing: Vec<&String> =
        e.tensors.iter().filter(|(n, d)| a.tensors.get(*n) != Some(*d)).map(|(n, _)| n).collect();
    if let Some(first) = differing.first() {
        let weights = |r: &CheckpointRecord| NamedTensors::from_safetensors(&store.read(&r.weights).ok()?).ok();
        let largest = weights(&e).zip(weights(&a)).and_then(|(we, wa)| {
            let (x, y) = (&we.0.get(*first)?.1, &wa.0.get(*first)?.1);
            Some(x.iter().zip(y).map(|(p, q)| f64::from((p - q).abs())).fold(0.0, f64::max))
        });
        let text = largest.map_or_else(String::new, |m| format!(", largest |difference| {m:e}"));
        lines.push(format!(
            "first divergent tensor: {first}{text} ({} of {} tensors differ)",
            differing.len(),
            e.tensors.len()
        ));
        data.insert("tensor".into(), json!(first));
        data.insert("max_abs_difference".into(), json!(largest));
        data.insert("tensors_differing".into(), json!(differing.len()));
    }
    Some(Located { lines, data: Value::Object(data) })
}

/// The first tensor of checkpoint `name` whose stored bytes (read without verification) no
/// longer have the digest its record lists.
pub(super) fn damaged_tensor(store: &Store, name: &str, digest: &Digest) -> Option<Located> {
    let record = crate::checkpoint::read_record(store, digest).ok()?;
    if store.verify(&record.weights).is_ok() {
        return None;
    }
    let raw = fs_err::read(store.object_path(&record.weights)).ok()?;
    let line = match NamedTensors::from_safetensors(&raw) {
        Ok(weights) => {
            let bad = record
                .tensors
                .iter()
                .find(|(n, d)| weights.0.get(*n).is_none_or(|(_, v)| Digest::of(&NamedTensors::le_bytes(v)) != **d))?;
            format!("damaged checkpoint: {name} (step {}), first damaged tensor: {}", record.step, bad.0)
        }
        Err(e) => format!("damaged checkpoint: {name} (step {}): its weights no longer parse ({e})", record.step),
    };
    Some(Located {
        lines: vec![line.clone()],
        data: json!({ "checkpoint": name, "step": record.step, "detail": line }),
    })
}
