//! Reading documents from input files.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use arrow_array::{Array, RecordBatch, StringArray};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use serde_json::Value;

use crate::{DatasetError, Document};

/// The longest line of a JSON Lines file a reader takes, in bytes: one document. A
/// compressed file expands without bound (a 6 MiB `.jsonl.gz` held one line of 6 GiB), and a
/// line is held whole in memory; a longer one is an error naming it, not an allocation that
/// aborts the process.
pub const MAX_LINE_BYTES: u64 = 256 << 20;

/// Formats documents can be read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// One JSON object per line.
    Jsonl,
    /// JSON Lines compressed with gzip.
    JsonlGz,
    /// Parquet with at least `id` and `text` string columns.
    Parquet,
}

impl InputFormat {
    /// Returns the format a file name implies (case-insensitively).
    // Compound extensions (`.jsonl.gz`) need a suffix match on the lowercased name.
    #[allow(clippy::case_sensitive_file_extension_comparisons)]
    pub fn from_path(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".jsonl") || name.ends_with(".json") {
            Some(Self::Jsonl)
        } else if name.ends_with(".jsonl.gz") || name.ends_with(".json.gz") {
            Some(Self::JsonlGz)
        } else if name.ends_with(".parquet") {
            Some(Self::Parquet)
        } else {
            None
        }
    }
}

/// One document file of a source in the store: the object's path, its format, and the name
/// errors show (`<origin>` or `<origin>/<path in the tree>`).
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The object's path in the store (its bytes verified against their digest).
    pub path: PathBuf,
    /// The format its name implies.
    pub format: InputFormat,
    /// The name shown in errors.
    pub display: String,
}

/// Why a source's document files cannot be listed, other than a store error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceShapeError {
    /// The digest names a record of another kind.
    #[error("expected a source record: a JSON Lines file or a directory of them")]
    NotASource,
    /// The tree a source names is not a tree record.
    #[error("`{0}` is not a tree record")]
    NotATree(prov_store::Digest),
    /// A file whose name implies no document format.
    #[error("`{0}` is not JSON Lines (`.jsonl`, `.json`, optionally `.gz`) or `.parquet`")]
    NotDocuments(String),
}

/// The document files of a source record, in path order, each verified against its digest.
/// In a directory, the files for which `passed_over` is true (license files beside the data)
/// are left out. One listing for every reader of sources (the `shard` and `decontaminate`
/// stages, and the audit's independent rescan), so that they agree on what a source holds.
///
/// # Errors
///
/// [`SourceShapeError`] for a record that is not a source of document files (the outer
/// error); a store error, or a file whose bytes do not match its digest (the inner one).
pub fn source_files(
    store: &prov_store::Store,
    source: &prov_store::Digest,
    passed_over: &dyn Fn(&str) -> bool,
) -> Result<Result<Vec<SourceFile>, SourceShapeError>, DatasetError> {
    use prov_manifest::{Content, SourceRecord, StoredError, TreeRecord, get_typed};
    let src = match get_typed::<SourceRecord>(store, source) {
        Err(StoredError::WrongKind { .. }) => return Ok(Err(SourceShapeError::NotASource)),
        src => src?,
    };
    let file = |digest: &prov_store::Digest, display: String| {
        let Some(format) = InputFormat::from_path(Path::new(&display)) else {
            return Ok(Err(SourceShapeError::NotDocuments(display)));
        };
        store.verify(digest)?;
        Ok::<_, DatasetError>(Ok(SourceFile { path: store.object_path(digest), format, display }))
    };
    match src.content {
        Content::File { digest, .. } => Ok(file(&digest, src.origin.clone())?.map(|f| vec![f])),
        Content::Tree { digest, .. } => {
            let tree = match get_typed::<TreeRecord>(store, &digest) {
                Err(StoredError::WrongKind { .. }) => return Ok(Err(SourceShapeError::NotATree(digest))),
                tree => tree?,
            };
            let mut files = Vec::new();
            for e in tree.entries.into_iter().filter(|e| !passed_over(e.path.as_str())) {
                match file(&e.digest, format!("{}/{}", src.origin, e.path))? {
                    Ok(f) => files.push(f),
                    Err(e) => return Ok(Err(e)),
                }
            }
            Ok(Ok(files))
        }
    }
}

/// Reads documents from one file, streaming; the format follows from the file name.
pub fn read_documents(path: &Path) -> Result<DocumentReader, DatasetError> {
    let format = InputFormat::from_path(path).ok_or_else(|| DatasetError::UnsupportedFormat(path.to_owned()))?;
    read_documents_as(path, format, path)
}

/// Reads documents from one file in a given format; `display` names the file in errors
/// (a store object has no meaningful name of its own).
pub fn read_documents_as(path: &Path, format: InputFormat, display: &Path) -> Result<DocumentReader, DatasetError> {
    let file = fs_err::File::open(path)?;
    let inner = match format {
        InputFormat::Jsonl => Inner::Lines(Box::new(BufReader::with_capacity(1 << 20, file))),
        InputFormat::JsonlGz => {
            Inner::Lines(Box::new(BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(file))))
        }
        InputFormat::Parquet => {
            let reader = crate::guard_parquet(
                || format!("`{}`", display.display()),
                || ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0)?.with_batch_size(4096).build(),
            )??;
            Inner::Parquet { reader, batch: None, row: 0 }
        }
    };
    Ok(DocumentReader { path: display.to_owned(), inner, line: 0, buf: String::new() })
}

enum Inner {
    Lines(Box<dyn BufRead + Send>),
    Parquet { reader: ParquetRecordBatchReader, batch: Option<(RecordBatch, usize)>, row: u64 },
}

/// An iterator over the documents of one file.
pub struct DocumentReader {
    path: PathBuf,
    inner: Inner,
    line: u64,
    buf: String,
}

impl Iterator for DocumentReader {
    type Item = Result<Document, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Lines(reader) => loop {
                self.buf.clear();
                self.line += 1;
                match std::io::Read::take(&mut **reader, MAX_LINE_BYTES + 1).read_line(&mut self.buf) {
                    Ok(0) => return None,
                    Ok(n) if n as u64 > MAX_LINE_BYTES => {
                        return Some(Err(DatasetError::Input {
                            file: self.path.clone(),
                            line: self.line,
                            field: None,
                            message: format!("the line is longer than {MAX_LINE_BYTES} bytes, a document's most"),
                        }));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        return Some(Err(DatasetError::Input {
                            file: self.path.clone(),
                            line: self.line,
                            field: None,
                            message: format!("cannot read line: {e}"),
                        }));
                    }
                }
                if self.buf.trim().is_empty() {
                    continue;
                }
                return Some(parse_json_line(&self.path, self.line, &self.buf));
            },
            Inner::Parquet { reader, batch, row } => loop {
                if let Some((b, i)) = batch
                    && *i < b.num_rows()
                {
                    *row += 1;
                    let doc = document_from_batch(&self.path, *row, b, *i);
                    *i += 1;
                    return Some(doc);
                }
                let path = &self.path;
                match crate::guard_parquet(|| format!("`{}`", path.display()), || reader.next()) {
                    Ok(None) => return None,
                    Ok(Some(Ok(b))) => *batch = Some((b, 0)),
                    Ok(Some(Err(e))) => return Some(Err(DatasetError::Parquet(format!("{}: {e}", path.display())))),
                    Err(e) => return Some(Err(e)),
                }
            },
        }
    }
}

fn parse_json_line(path: &Path, line: u64, text: &str) -> Result<Document, DatasetError> {
    let err = |field: Option<&str>, message: String| DatasetError::Input {
        file: path.to_owned(),
        line,
        field: field.map(str::to_owned),
        message,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| err(None, format!("not valid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(err(None, "expected a JSON object per line".into()));
    };
    let id = match obj.remove("id") {
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
        Some(other) => {
            return Err(err(Some("id"), format!("expected a string, found {}", type_name(&other))));
        }
        None => return Err(err(Some("id"), "missing; every document needs an `id`".into())),
    };
    let text = match obj.remove("text") {
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(err(Some("text"), format!("expected a string, found {}", type_name(&other))));
        }
        None => return Err(err(Some("text"), "missing; every document needs a `text`".into())),
    };
    let mut optional = |name: &str| -> Result<Option<String>, DatasetError> {
        match obj.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(err(Some(name), format!("expected a string or null, found {}", type_name(&other)))),
        }
    };
    let url = optional("url")?;
    let date = optional("date")?;
    let language = optional("language")?;
    let metadata = if obj.is_empty() {
        None
    } else {
        let bytes = prov_manifest::encode_value(&Value::Object(obj));
        Some(String::from_utf8(bytes).expect("canonical JSON is UTF-8"))
    };
    Ok(Document { id, text, url, date, language, metadata })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn document_from_batch(path: &Path, row: u64, batch: &RecordBatch, i: usize) -> Result<Document, DatasetError> {
    let err = |field: &str, message: String| DatasetError::Input {
        file: path.to_owned(),
        line: row,
        field: Some(field.to_owned()),
        message,
    };
    for field in batch.schema().fields() {
        if !crate::document::COLUMNS.contains(&field.name().as_str()) {
            return Err(err(
                field.name(),
                "unsupported column; inputs carry `id`, `text`, `url`, `date`, `language` and `metadata` (a JSON object as a string)".into(),
            ));
        }
    }
    let column = |name: &str| -> Result<Option<String>, DatasetError> {
        let Some(col) = batch.column_by_name(name) else {
            return Ok(None);
        };
        if col.data_type() != &DataType::Utf8 {
            return Err(err(name, format!("expected a Utf8 column, found {}", col.data_type())));
        }
        let strings = col.as_any().downcast_ref::<StringArray>().expect("Utf8 columns are StringArrays");
        Ok(strings.is_valid(i).then(|| strings.value(i).to_owned()))
    };
    let id = column("id")?.ok_or_else(|| err("id", "missing or null; every document needs an `id`".into()))?;
    let text = column("text")?.ok_or_else(|| err("text", "missing or null; every document needs a `text`".into()))?;
    Ok(Document {
        id,
        text,
        url: column("url")?,
        date: column("date")?,
        language: column("language")?,
        metadata: column("metadata")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        fs_err::write(&p, text).unwrap();
        p
    }

    #[test]
    fn jsonl_fields_map_to_columns_and_extras_to_metadata() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "a.jsonl",
            "{\"id\":\"a\",\"text\":\"x\",\"url\":\"https://e.org/\",\"language\":\"en\",\"score\":0.5,\"dump\":\"CC\"}\n\n{\"id\":7,\"text\":\"y\",\"date\":null}\n",
        );
        let docs: Vec<Document> = read_documents(&p).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].metadata.as_deref(), Some("{\"dump\":\"CC\",\"score\":0.5}"));
        assert_eq!(docs[0].url.as_deref(), Some("https://e.org/"));
        assert_eq!(docs[1].id, "7");
        assert_eq!(docs[1].metadata, None);
    }

    #[test]
    fn bad_lines_name_file_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "b.jsonl", "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\",\"text\":3}\n");
        let err = read_documents(&p).unwrap().nth(1).unwrap().unwrap_err();
        let msg = err.to_string();
        assert!(msg.ends_with("b.jsonl:2: field `text`: expected a string, found a number"), "{msg}");
        let p = write(d.path(), "c.jsonl", "not json\n");
        assert!(
            read_documents(&p).unwrap().next().unwrap().unwrap_err().to_string().contains("c.jsonl:1: not valid JSON")
        );
        let p = write(d.path(), "d.jsonl", "{\"text\":\"no id\"}\n");
        assert!(read_documents(&p).unwrap().next().unwrap().unwrap_err().to_string().contains("field `id`: missing"));
        assert!(matches!(read_documents(&d.path().join("x.csv")), Err(DatasetError::UnsupportedFormat(_))));
    }

    /// A gzip file of a few hundred kilobytes whose one line expands past [`MAX_LINE_BYTES`]
    /// is an error naming its file and line, read with memory bounded by the limit: the
    /// adversarial review's 6 MiB file held one line of 6 GiB, and the reader aborted the
    /// process trying to hold it.
    #[test]
    fn a_line_longer_than_a_document_may_be_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bomb.jsonl.gz");
        let mut gz = flate2::write::GzEncoder::new(fs_err::File::create(&p).unwrap(), flate2::Compression::best());
        gz.write_all(b"{\"id\":\"a\",\"text\":\"ok\"}\n{\"id\":\"b\",\"text\":\"").unwrap();
        let zeros = vec![b'0'; 1 << 20];
        for _ in 0..=(MAX_LINE_BYTES >> 20) {
            gz.write_all(&zeros).unwrap();
        }
        gz.write_all(b"\"}\n").unwrap();
        gz.finish().unwrap();
        assert!(fs_err::metadata(&p).unwrap().len() < 2 << 20, "a small file");
        let mut docs = read_documents(&p).unwrap();
        assert_eq!(docs.next().unwrap().unwrap().id, "a");
        let msg = docs.next().unwrap().unwrap_err().to_string();
        assert!(msg.ends_with("bomb.jsonl.gz:2: the line is longer than 268435456 bytes, a document's most"), "{msg}");
    }

    #[test]
    fn gzip_input_reads_like_plain() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("g.jsonl.gz");
        let mut enc = flate2::write::GzEncoder::new(fs_err::File::create(&p).unwrap(), flate2::Compression::default());
        enc.write_all(b"{\"id\":\"a\",\"text\":\"x\"}\n").unwrap();
        enc.finish().unwrap();
        let docs: Vec<Document> = read_documents(&p).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(docs, vec![Document::new("a", "x")]);
    }
}
