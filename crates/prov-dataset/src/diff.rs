//! Where two datasets first disagree: shard, row and column.

use prov_manifest::DatasetRecord;
use prov_store::Store;

use crate::document::COLUMNS;
use crate::{DatasetError, Document, read_shard};

/// The first place two datasets differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetDifference {
    /// Index of the first shard whose digest differs (or that exists on one side only).
    pub shard: usize,
    /// Row within that shard, when the difference is in a row.
    pub row: Option<u64>,
    /// Row across the whole dataset.
    pub global_row: Option<u64>,
    /// Column that differs first, in schema order; `None` when a row exists on one side only.
    pub column: Option<String>,
    /// The expected value (recorded side), shortened for display.
    pub expected: String,
    /// The actual value (replayed side), shortened for display.
    pub actual: String,
}

/// Compares `expected` with `actual` and returns their first difference, or `None` when all
/// shards are identical.
pub fn first_difference(
    store: &Store,
    expected: &DatasetRecord,
    actual: &DatasetRecord,
) -> Result<Option<DatasetDifference>, DatasetError> {
    let n = expected.shards.len().max(actual.shards.len());
    let mut rows_before = 0u64;
    for i in 0..n {
        let (e, a) = (expected.shards.get(i), actual.shards.get(i));
        match (e, a) {
            (Some(e), Some(a)) if e.digest == a.digest => {
                rows_before += e.rows;
            }
            (Some(e), Some(a)) => {
                let left = read_shard(store, &e.digest)?;
                let right = read_shard(store, &a.digest)?;
                let mut diff = first_row_difference(&left, &right).unwrap_or_else(|| DatasetDifference {
                    shard: i,
                    row: None,
                    global_row: None,
                    column: None,
                    expected: format!("shard {} ({} rows)", e.digest, e.rows),
                    actual: format!("shard {} ({} rows): same rows, different bytes", a.digest, a.rows),
                });
                diff.shard = i;
                diff.global_row = diff.row.map(|r| rows_before + r);
                return Ok(Some(diff));
            }
            (e, a) => {
                let show = |s: Option<&prov_manifest::ShardRef>| {
                    s.map_or_else(|| "(no shard)".to_owned(), |s| format!("shard {} ({} rows)", s.digest, s.rows))
                };
                return Ok(Some(DatasetDifference {
                    shard: i,
                    row: None,
                    global_row: None,
                    column: None,
                    expected: show(e),
                    actual: show(a),
                }));
            }
        }
    }
    Ok(None)
}

fn first_row_difference(left: &[Document], right: &[Document]) -> Option<DatasetDifference> {
    let n = left.len().max(right.len());
    for r in 0..n {
        let diff = |column: Option<&str>, expected: String, actual: String| DatasetDifference {
            shard: 0,
            row: Some(r as u64),
            global_row: None,
            column: column.map(str::to_owned),
            expected,
            actual,
        };
        match (left.get(r), right.get(r)) {
            (Some(l), Some(rr)) => {
                let lv = fields(l);
                let rv = fields(rr);
                for (c, name) in COLUMNS.iter().enumerate() {
                    if lv[c] != rv[c] {
                        return Some(diff(Some(name), show(lv[c]), show(rv[c])));
                    }
                }
            }
            (l, rr) => {
                let row =
                    |d: Option<&Document>| d.map_or_else(|| "(no row)".to_owned(), |d| format!("row id {}", d.id));
                return Some(diff(None, row(l), row(rr)));
            }
        }
    }
    None
}

fn fields(d: &Document) -> [Option<&str>; 6] {
    [
        Some(d.id.as_str()),
        Some(d.text.as_str()),
        d.url.as_deref(),
        d.date.as_deref(),
        d.language.as_deref(),
        d.metadata.as_deref(),
    ]
}

fn show(v: Option<&str>) -> String {
    match v {
        None => "null".to_owned(),
        Some(s) if s.chars().count() > 80 => {
            let head: String = s.chars().take(77).collect();
            format!("{head:?}…")
        }
        Some(s) => format!("{s:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ShardWriter, write_dataset};

    fn dataset(store: &Store, shards: &[Vec<Document>]) -> DatasetRecord {
        let refs = shards
            .iter()
            .map(|docs| {
                let mut w = ShardWriter::new(store).unwrap();
                for d in docs {
                    w.push(d.clone()).unwrap();
                }
                w.finish().unwrap()
            })
            .collect();
        write_dataset(store, refs).unwrap().1
    }

    #[test]
    fn names_shard_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let base: Vec<Vec<Document>> =
            (0..3).map(|s| (0..5).map(|r| Document::new(format!("{s}-{r}"), format!("t{s}{r}"))).collect()).collect();
        let a = dataset(&store, &base);
        assert_eq!(first_difference(&store, &a, &a).unwrap(), None);

        let mut changed = base.clone();
        changed[1][3].language = Some("fr".into());
        let b = dataset(&store, &changed);
        let d = first_difference(&store, &a, &b).unwrap().unwrap();
        assert_eq!((d.shard, d.row, d.global_row, d.column.as_deref()), (1, Some(3), Some(8), Some("language")));
        assert_eq!((d.expected.as_str(), d.actual.as_str()), ("null", "\"fr\""));

        let mut shorter = base.clone();
        shorter[2].pop();
        let c = dataset(&store, &shorter);
        let d = first_difference(&store, &a, &c).unwrap().unwrap();
        assert_eq!((d.shard, d.row, d.column), (2, Some(4), None));

        let fewer = dataset(&store, &base[..2]);
        let d = first_difference(&store, &a, &fewer).unwrap().unwrap();
        assert_eq!((d.shard, d.row, d.actual.as_str()), (2, None, "(no shard)"));
    }
}
