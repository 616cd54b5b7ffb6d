//! Writing and reading shards in the store.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use prov_manifest::{DatasetRecord, Record, ShardRef, put_record};
use prov_store::{Digest, ObjectKind, ObjectWriter, Store};

use crate::document::document_schema;
use crate::{DatasetError, Document, document_columns};

/// The `created_by` string written into every shard; part of the shard bytes.
pub const CREATED_BY: &str = "provenant prov-dataset 1";

/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 16_384;

/// Documents buffered before they are handed to the Parquet writer, and rows per record
/// batch when reading. Writing, the shard bytes do not depend on it as long as it divides
/// [`ROW_GROUP_ROWS`] and is a multiple of the writer's mini-batch (Parquet's
/// `write_batch_size`, 1,024 rows): the column writers see the same mini-batches. Smaller
/// batches hold less text at once (a batch is held twice: as documents and as Arrow arrays).
const BATCH_ROWS: usize = 1_024;

pub(crate) fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("3 is a valid zstd level")))
        .set_created_by(CREATED_BY.to_owned())
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_max_row_group_bytes(None)
        .set_statistics_enabled(EnabledStatistics::Page)
        .build()
}

/// Writes documents into one Parquet shard in the store.
pub struct ShardWriter<'s> {
    writer: ArrowWriter<ObjectWriter<'s>>,
    pending: Vec<Document>,
    rows: u64,
}

impl<'s> ShardWriter<'s> {
    /// Starts a shard.
    pub fn new(store: &'s Store) -> Result<Self, DatasetError> {
        let sink = store.writer(ObjectKind::Shard)?;
        let writer = ArrowWriter::try_new(sink, document_schema(), Some(writer_properties()))?;
        Ok(Self { writer, pending: Vec::with_capacity(BATCH_ROWS), rows: 0 })
    }

    /// Adds one document.
    pub fn push(&mut self, doc: Document) -> Result<(), DatasetError> {
        self.pending.push(doc);
        self.rows += 1;
        if self.pending.len() >= BATCH_ROWS {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<(), DatasetError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = to_batch(&self.pending)?;
        self.writer.write(&batch)?;
        self.pending.clear();
        Ok(())
    }

    /// Finishes the file, stores it and returns its reference.
    pub fn finish(mut self) -> Result<ShardRef, DatasetError> {
        self.flush_pending()?;
        // into_inner writes the footer and hands back the store writer.
        let sink = self.writer.into_inner()?;
        let bytes = sink.size();
        let digest = sink.finish()?;
        Ok(ShardRef { digest, rows: self.rows, bytes })
    }
}

fn to_batch(docs: &[Document]) -> Result<RecordBatch, DatasetError> {
    let col = |f: fn(&Document) -> Option<&str>| -> ArrayRef { Arc::new(docs.iter().map(f).collect::<StringArray>()) };
    Ok(RecordBatch::try_new(
        document_schema(),
        vec![
            col(|d| Some(d.id.as_str())),
            col(|d| Some(d.text.as_str())),
            col(|d| d.url.as_deref()),
            col(|d| d.date.as_deref()),
            col(|d| d.language.as_deref()),
            col(|d| d.metadata.as_deref()),
        ],
    )?)
}

/// Reads a stored shard's record batches, after verifying the shard's bytes.
pub fn read_shard_batches(store: &Store, digest: &Digest) -> Result<Vec<RecordBatch>, DatasetError> {
    let mut reader = open_shard(store, digest)?;
    let mut out = Vec::new();
    while let Some(batch) = next_batch(&mut reader, digest)? {
        out.push(batch);
    }
    Ok(out)
}

fn open_shard(store: &Store, digest: &Digest) -> Result<ParquetRecordBatchReader, DatasetError> {
    store.verify(digest)?;
    let file = fs_err::File::open(store.object_path(digest))?;
    crate::guard_parquet(
        || format!("shard `{digest}`"),
        || Ok(ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0)?.with_batch_size(BATCH_ROWS).build()?),
    )?
}

/// The next record batch of a shard, checked to have the document schema.
fn next_batch(reader: &mut ParquetRecordBatchReader, digest: &Digest) -> Result<Option<RecordBatch>, DatasetError> {
    let Some(batch) = crate::guard_parquet(|| format!("shard `{digest}`"), || reader.next())?.transpose()? else {
        return Ok(None);
    };
    if batch.schema().fields() != document_schema().fields() {
        return Err(DatasetError::Schema {
            digest: *digest,
            message: format!(
                "found columns {:?}",
                batch.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>()
            ),
        });
    }
    Ok(Some(batch))
}

/// Returns the number of rows of any stored Parquet shard (documents or ledger) from its
/// footer, after verifying the shard's bytes.
pub fn shard_rows(store: &Store, digest: &Digest) -> Result<u64, DatasetError> {
    store.verify(digest)?;
    let file = fs_err::File::open(store.object_path(digest))?;
    crate::guard_parquet(
        || format!("shard `{digest}`"),
        || {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0)?;
            Ok(u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0))
        },
    )?
}

/// Reads a stored shard's documents, after verifying the shard's bytes. The whole shard is
/// in memory at once; [`shard_documents`] streams it instead.
pub fn read_shard(store: &Store, digest: &Digest) -> Result<Vec<Document>, DatasetError> {
    shard_documents(store, digest)?.collect()
}

/// Streams a stored shard's documents in row order, after verifying the shard's bytes.
///
/// Memory does not grow with the shard: one record batch of at most 1,024 rows is decoded
/// at a time.
pub fn shard_documents(store: &Store, digest: &Digest) -> Result<ShardDocuments, DatasetError> {
    Ok(ShardDocuments { reader: open_shard(store, digest)?, digest: *digest, batch: None, row: 0, failed: false })
}

/// An iterator over the documents of a stored shard; see [`shard_documents`]. After an
/// error it yields nothing more.
pub struct ShardDocuments {
    reader: ParquetRecordBatchReader,
    digest: Digest,
    batch: Option<RecordBatch>,
    row: usize,
    failed: bool,
}

impl Iterator for ShardDocuments {
    type Item = Result<Document, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(batch) = &self.batch
                && self.row < batch.num_rows()
            {
                let s =
                    |i: usize| batch.column(i).as_any().downcast_ref::<StringArray>().expect("schema checked: Utf8");
                let opt = |i: usize| s(i).is_valid(self.row).then(|| s(i).value(self.row).to_owned());
                let doc = Document {
                    id: s(0).value(self.row).to_owned(),
                    text: s(1).value(self.row).to_owned(),
                    url: opt(2),
                    date: opt(3),
                    language: opt(4),
                    metadata: opt(5),
                };
                self.row += 1;
                return Some(Ok(doc));
            }
            self.row = 0;
            match next_batch(&mut self.reader, &self.digest) {
                Ok(Some(batch)) => self.batch = Some(batch),
                Ok(None) => {
                    self.batch = None;
                    return None;
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Stores the dataset record for shards written with [`ShardWriter`] and returns its digest.
pub fn write_dataset(store: &Store, shards: Vec<ShardRef>) -> Result<(Digest, DatasetRecord), DatasetError> {
    let record = DatasetRecord::new("parquet", document_columns(), shards);
    let digest = put_record(store, &Record::Dataset(record.clone()))?;
    Ok((digest, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(n: usize) -> Vec<Document> {
        (0..n)
            .map(|i| Document {
                id: format!("d{i:05}"),
                text: format!("text number {i} ünïcode"),
                url: (i % 3 != 0).then(|| format!("https://example.org/{i}")),
                date: Some("2025-01-31".into()),
                language: Some(if i % 2 == 0 { "en" } else { "de" }.into()),
                metadata: (i % 5 == 0).then(|| "{\"k\":1}".into()),
            })
            .collect()
    }

    fn write(store: &Store, docs: &[Document]) -> ShardRef {
        let mut w = ShardWriter::new(store).unwrap();
        for d in docs {
            w.push(d.clone()).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn shards_round_trip_and_are_byte_identical_across_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let input = docs(20_000);
        let a = write(&store, &input);
        let b = write(&store, &input);
        assert_eq!(a, b, "same rows, same bytes");
        assert_eq!(a.rows, 20_000);
        assert_eq!(a.bytes, fs_err::metadata(store.object_path(&a.digest)).unwrap().len());
        assert_eq!(read_shard(&store, &a.digest).unwrap(), input);
        let other = write(&store, &input[1..]);
        assert_ne!(other.digest, a.digest);
    }

    #[test]
    fn empty_shards_are_valid() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let s = write(&store, &[]);
        assert_eq!(s.rows, 0);
        assert!(read_shard(&store, &s.digest).unwrap().is_empty());
    }

    #[test]
    fn reading_a_corrupt_shard_is_an_integrity_failure() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let s = write(&store, &docs(10));
        let p = store.object_path(&s.digest);
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut bytes = fs_err::read(&p).unwrap();
        bytes[10] ^= 1;
        fs_err::write(&p, bytes).unwrap();
        assert!(read_shard(&store, &s.digest).unwrap_err().is_integrity_failure());
    }
}
