//! The stage key: what decides whether cached outputs may be reused.
//!
//! The key is BLAKE3 of the canonical JSON object
//!
//! ```json
//! {"config":…,"envelope":…,"inputs":{"name":"blake3:…"},"kind":"stage-key",
//!  "seeds":{"name":1},"stage_kind":"shard","version":1}
//! ```
//!
//! where `envelope` is [`crate::key_envelope`] of the stage's class. Canonical JSON is
//! unambiguous (every string is delimited, every map sorted), so no two different tuples
//! share an encoding. The stage's *name* is deliberately not in the key: renaming a stage
//! does not invalidate its outputs.

use std::collections::BTreeMap;

use prov_manifest::to_canonical_bytes;
use prov_store::Digest;
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
struct KeyInput<'a> {
    kind: &'static str,
    stage_kind: &'a str,
    version: u32,
    config: &'a Value,
    inputs: &'a BTreeMap<String, Digest>,
    seeds: &'a BTreeMap<String, u64>,
    envelope: &'a Value,
}

/// Computes a stage key.
pub fn stage_key(
    stage_kind: &str,
    version: u32,
    config: &Value,
    inputs: &BTreeMap<String, Digest>,
    seeds: &BTreeMap<String, u64>,
    key_envelope: &Value,
) -> Digest {
    let bytes = to_canonical_bytes(&KeyInput {
        kind: "stage-key",
        stage_kind,
        version,
        config,
        inputs,
        seeds,
        envelope: key_envelope,
    })
    .expect("key inputs hold no floats outside canonical JSON values");
    Digest::of(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_part_changes_the_key() {
        let inputs = BTreeMap::from([("docs".to_owned(), Digest::of(b"a"))]);
        let seeds = BTreeMap::from([("s".to_owned(), 1u64)]);
        let base = stage_key("shard", 1, &json!({"shards": 2}), &inputs, &seeds, &Value::Null);
        assert_eq!(base, stage_key("shard", 1, &json!({"shards": 2}), &inputs, &seeds, &Value::Null));
        assert_ne!(base, stage_key("sample", 1, &json!({"shards": 2}), &inputs, &seeds, &Value::Null));
        assert_ne!(base, stage_key("shard", 2, &json!({"shards": 2}), &inputs, &seeds, &Value::Null));
        assert_ne!(base, stage_key("shard", 1, &json!({"shards": 3}), &inputs, &seeds, &Value::Null));
        let other_inputs = BTreeMap::from([("docs".to_owned(), Digest::of(b"b"))]);
        assert_ne!(base, stage_key("shard", 1, &json!({"shards": 2}), &other_inputs, &seeds, &Value::Null));
        let other_seeds = BTreeMap::from([("s".to_owned(), 2u64)]);
        assert_ne!(base, stage_key("shard", 1, &json!({"shards": 2}), &inputs, &other_seeds, &Value::Null));
        assert_ne!(base, stage_key("shard", 1, &json!({"shards": 2}), &inputs, &seeds, &json!({"threads": 1})));
    }

    #[test]
    fn map_keys_and_values_are_not_interchangeable() {
        // {a: b} and {b: a} must not collide.
        let s = BTreeMap::new();
        let i = BTreeMap::new();
        let a = stage_key("k", 1, &json!({"a": "b"}), &i, &s, &Value::Null);
        let b = stage_key("k", 1, &json!({"b": "a"}), &i, &s, &Value::Null);
        assert_ne!(a, b);
    }
}
