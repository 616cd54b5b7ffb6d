//! One document and the shard schema.

use std::sync::{Arc, OnceLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use prov_manifest::Column;

/// One row of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Document {
    /// Unique identifier within the dataset.
    pub id: String,
    /// The text.
    pub text: String,
    /// Where it was crawled from.
    pub url: Option<String>,
    /// Crawl date as found (ISO 8601 in `FineWeb`).
    pub date: Option<String>,
    /// Language code.
    pub language: Option<String>,
    /// Every other input field, as a canonical JSON object; `None` when there were none.
    pub metadata: Option<String>,
}

impl Document {
    /// Returns a document with only `id` and `text`.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self { id: id.into(), text: text.into(), ..Self::default() }
    }

    /// The primary subtag of the document's language ([`primary_language`]), `und` without one.
    pub fn primary_language(&self) -> String {
        primary_language(self.language.as_deref().unwrap_or("und"))
    }
}

/// The primary subtag of a language tag, ASCII-lowercased: `de` of `de-CH` or `DE_at`. Filters
/// that apply per language (the heuristics, the n-gram models, the toxicity classifiers) name
/// languages this way.
pub fn primary_language(tag: &str) -> String {
    tag.split(['-', '_']).next().unwrap_or(tag).to_ascii_lowercase()
}

/// The column names, in file order.
pub const COLUMNS: [&str; 6] = ["id", "text", "url", "date", "language", "metadata"];

/// Returns the Arrow schema of a shard.
pub fn document_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, false),
                Field::new("text", DataType::Utf8, false),
                Field::new("url", DataType::Utf8, true),
                Field::new("date", DataType::Utf8, true),
                Field::new("language", DataType::Utf8, true),
                Field::new("metadata", DataType::Utf8, true),
            ]))
        })
        .clone()
}

/// Returns the shard schema as dataset-record columns.
pub fn document_columns() -> Vec<Column> {
    document_schema()
        .fields()
        .iter()
        .map(|f| Column { name: f.name().clone(), data_type: f.data_type().to_string(), nullable: f.is_nullable() })
        .collect()
}

/// The key of a document id under a seed: the first 8 bytes (little endian) of
/// `BLAKE3(seed as 8 little-endian bytes || id)`. Ordering documents by it gives a seeded
/// order that does not depend on where they sit: the `sample` stage keeps the smallest keys,
/// the toxicity classifier's training balances and holds out by them.
pub fn sample_key(seed: u64, id: &str) -> u64 {
    let mut h = prov_store::Hasher::new();
    h.update(&seed.to_le_bytes());
    h.update(id.as_bytes());
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d.as_bytes()[..8]);
    u64::from_le_bytes(first)
}
