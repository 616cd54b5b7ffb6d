//! Sentence pairs as documents, so that they flow through datasets, ledgers, `prov explain`,
//! proofs and cards like any other text: a pair is a [`Document`] whose `text` is the source
//! side and `language` the source language, with the target side and its language in the
//! document's metadata (`target`, `target_language`). Other metadata keys pass through; the
//! stages add theirs (`bifixer_hash`, `source_doc`, `target_doc`, `paragraph`).

use prov_dataset::Document;
use serde_json::{Map, Value};

/// The metadata key of the target side.
pub const TARGET: &str = "target";
/// The metadata key of the target side's language.
pub const TARGET_LANGUAGE: &str = "target_language";

/// A pair document's two sides, languages and other metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// The source side (the document's `text`).
    pub source: String,
    /// The source language (the document's `language`).
    pub source_language: String,
    /// The target side.
    pub target: String,
    /// The target language.
    pub target_language: String,
    /// Every other metadata key.
    pub metadata: Map<String, Value>,
}

/// Why a document is not a pair.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("document `{id}` is not a sentence pair: {reason}")]
pub struct NotAPair {
    /// The document.
    pub id: String,
    /// What it lacks.
    pub reason: String,
}

impl Pair {
    /// Reads `doc` as a pair.
    ///
    /// # Errors
    ///
    /// [`NotAPair`] when it has no language or its metadata lacks a string `target` or
    /// `target_language`.
    pub fn of(doc: &Document) -> Result<Self, NotAPair> {
        let fail = |reason: &str| NotAPair { id: doc.id.clone(), reason: reason.to_owned() };
        let source_language = doc.language.clone().ok_or_else(|| fail("it has no `language` (the source side's)"))?;
        let mut metadata = match doc.metadata.as_deref().map(serde_json::from_str::<Value>) {
            Some(Ok(Value::Object(m))) => m,
            Some(_) => return Err(fail("its metadata is not a JSON object")),
            None => return Err(fail("it has no metadata (`target`, `target_language`)")),
        };
        let mut take = |key: &str| match metadata.remove(key) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(fail(&format!("its metadata has no string `{key}`"))),
        };
        let target = take(TARGET)?;
        let target_language = take(TARGET_LANGUAGE)?;
        Ok(Self { source: doc.text.clone(), source_language, target, target_language, metadata })
    }

    /// The pair written back into `doc` (its id, url and date kept).
    #[must_use]
    pub fn into_document(self, doc: &Document) -> Document {
        let mut metadata = self.metadata;
        metadata.insert(TARGET.into(), Value::String(self.target));
        metadata.insert(TARGET_LANGUAGE.into(), Value::String(self.target_language));
        let bytes = prov_manifest::encode_value(&Value::Object(metadata));
        Document {
            id: doc.id.clone(),
            text: self.source,
            url: doc.url.clone(),
            date: doc.date.clone(),
            language: Some(self.source_language),
            metadata: Some(String::from_utf8(bytes).expect("canonical JSON is UTF-8")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_round_trips_through_a_document() {
        let doc = Document {
            language: Some("en".into()),
            metadata: Some(r#"{"paragraph":2,"target":"Hola","target_language":"es"}"#.into()),
            ..Document::new("p1", "Hello")
        };
        let pair = Pair::of(&doc).unwrap();
        assert_eq!((pair.target.as_str(), pair.target_language.as_str()), ("Hola", "es"));
        assert_eq!(pair.metadata.len(), 1);
        assert_eq!(pair.clone().into_document(&doc), doc);
    }

    #[test]
    fn documents_that_are_not_pairs_say_why() {
        let plain = Document { language: Some("en".into()), ..Document::new("d", "text") };
        assert!(Pair::of(&plain).unwrap_err().reason.contains("no metadata"));
        let half = Document { metadata: Some(r#"{"target":"x"}"#.into()), ..plain.clone() };
        assert!(Pair::of(&half).unwrap_err().reason.contains("`target_language`"));
        let unlabelled = Document { language: None, ..half };
        assert!(Pair::of(&unlabelled).unwrap_err().reason.contains("no `language`"));
    }
}
