//! Named float32 tensors and their safetensors encoding: the bytes of a checkpoint's weights
//! and optimizer state objects. The encoding is fixed by the tensors alone (names in order,
//! header written by hand), so that the same tensors always hash the same; it is read here
//! without libtorch, so that `prov` can check a checkpoint's tensors against its record
//! without loading libtorch (the worker converts them to and from libtorch tensors).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Named float32 tensors, ordered by name: a checkpoint's weights or optimizer state as the
/// store keeps them (a safetensors file), independent of libtorch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamedTensors(pub BTreeMap<String, (Vec<usize>, Vec<f32>)>);

impl NamedTensors {
    /// The little-endian bytes of one tensor, as safetensors stores them.
    pub fn le_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Encodes the tensors as a safetensors file with one metadata entry, `config`.
    pub fn to_safetensors(&self, config: &str) -> Vec<u8> {
        self.to_safetensors_with(&[("config", config)])
    }

    /// Encodes the tensors as a safetensors file with the given metadata entries (`format:
    /// pt` is what transformers requires of a model file).
    ///
    /// The header is written by hand so that its bytes are fixed by the tensors alone:
    /// metadata in the order given, tensors in name order, offsets packed in that order, keys
    /// in a fixed order, and the header padded with spaces to a multiple of 8 bytes (as the
    /// format allows).
    pub fn to_safetensors_with(&self, metadata: &[(&str, &str)]) -> Vec<u8> {
        let entries: Vec<String> = metadata
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}:{}",
                    serde_json::to_string(k).expect("a string serialises"),
                    serde_json::to_string(v).expect("a string serialises")
                )
            })
            .collect();
        let mut header = format!("{{\"__metadata__\":{{{}}}", entries.join(","));
        let mut offset = 0usize;
        for (name, (shape, values)) in &self.0 {
            let len = values.len() * 4;
            let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
            let _ = write!(
                header,
                ",{}:{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                serde_json::to_string(name).expect("a string serialises"),
                dims.join(","),
                offset,
                offset + len
            );
            offset += len;
        }
        header.push('}');
        while header.len() % 8 != 0 {
            header.push(' ');
        }
        let mut out = Vec::with_capacity(8 + header.len() + offset);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        for (_, values) in self.0.values() {
            out.extend(Self::le_bytes(values));
        }
        out
    }

    /// Reads a safetensors file of float32 tensors (any writer's); other dtypes and malformed
    /// files are errors that say what is wrong.
    pub fn from_safetensors(bytes: &[u8]) -> Result<Self, String> {
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
        let mut out = BTreeMap::new();
        for (name, view) in file.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(format!("tensor `{name}` is {:?}, not F32", view.dtype()));
            }
            let values = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            out.insert(name, (view.shape().to_vec(), values));
        }
        Ok(Self(out))
    }
}
