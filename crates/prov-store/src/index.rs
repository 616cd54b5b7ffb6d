//! The `SQLite` index beside the objects: what each object is, which manifests reference it,
//! the stage cache and the log of executions.
//!
//! The index speeds things up and remembers history; it is never the only copy of a fact that
//! a verifier needs. Every object's bytes live in `objects/`, and the references it records are
//! also inside the manifests themselves. A process killed between writing an object and
//! recording it leaves an unrecorded object, which is harmless: it is found by the filesystem
//! scan and either re-recorded when written again or collected by `gc`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use crate::{Digest, StoreError};

const SCHEMA: &str = r"
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects(
    digest TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    kind TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refs(
    parent TEXT NOT NULL,
    child TEXT NOT NULL,
    PRIMARY KEY(parent, child)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_by_child ON refs(child);
CREATE TABLE IF NOT EXISTS stage_cache(
    key TEXT PRIMARY KEY,
    manifest TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS executions(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    recipe TEXT NOT NULL,
    lockfile_path TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    status TEXT NOT NULL,
    run_manifest TEXT,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS verified(
    digest TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stage_events(
    execution INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    stage TEXT NOT NULL,
    status TEXT NOT NULL,
    millis INTEGER NOT NULL,
    manifest TEXT,
    PRIMARY KEY(execution, seq)
) WITHOUT ROWID;
";

/// Formats milliseconds since the Unix epoch (the index's timestamps) as
/// `YYYY-MM-DD HH:MM:SSZ` (UTC), the civil date from the day count as Howard Hinnant's
/// `civil_from_days` computes it.
pub fn format_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// One execution of a lockfile (a `run` or a `replay`), as logged in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionRow {
    /// Row id, increasing with time.
    pub id: i64,
    /// The run id: digest of the lockfile.
    pub run_id: Digest,
    /// `run` or `replay`.
    pub mode: String,
    /// Recipe name.
    pub recipe: String,
    /// Lockfile path as the user gave it (display only).
    pub lockfile_path: String,
    /// Start, milliseconds since the Unix epoch.
    pub started_ms: i64,
    /// End, when finished.
    pub finished_ms: Option<i64>,
    /// `running`, `ok`, `failed`, `diverged`.
    pub status: String,
    /// The run manifest written at the end, when the run completed.
    pub run_manifest: Option<Digest>,
    /// Free text: the error or divergence summary.
    pub detail: Option<String>,
}

/// One stage boundary within an execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageEventRow {
    /// Stage name.
    pub stage: String,
    /// `executed`, `cached`, `replayed`, `reused`.
    pub status: String,
    /// Wall time in milliseconds.
    pub millis: i64,
    /// Stage manifest.
    pub manifest: Option<Digest>,
}

/// What a file's metadata says of its content without reading it: size, modification and
/// status-change times, inode. Writing a file changes its status-change time (`ctime`), which
/// no unprivileged call can set back, so an object with the stamp it had when it was last
/// hashed in full still holds the bytes that were hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub ino: u64,
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Self {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }
}

/// The `SQLite` index of a store.
pub struct Index {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The directory of a private copy, for a read-only store; removed on drop.
    snapshot: Option<tempfile::TempDir>,
}

fn parse_digest(s: &str) -> rusqlite::Result<Digest> {
    Digest::from_str(s)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e)))
}

impl Index {
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        let err = |e| StoreError::index(path, e);
        let conn = Connection::open(path).map_err(err)?;
        // Two prov processes may share a store: wait for each other's short write
        // transactions rather than failing.
        conn.busy_timeout(std::time::Duration::from_mins(1)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
        // In WAL mode NORMAL survives a killed process; only power loss may drop the last
        // transactions, which only ever refer to objects already durable on disk.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Self { path: path.to_owned(), conn: Mutex::new(conn), snapshot: None })
    }

    /// An index in memory, for a store opened [`crate::Access::Detached`]: it starts empty,
    /// takes what would be recorded and forgets it when the store is dropped. `path` is only
    /// named in errors.
    pub(crate) fn open_detached(path: &Path) -> Result<Self, StoreError> {
        let err = |e| StoreError::index(path, e);
        let conn = Connection::open_in_memory().map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Self { path: path.to_owned(), conn: Mutex::new(conn), snapshot: None })
    }

    /// Opens a private copy of the index at `path` (and of its write-ahead log), for a store
    /// opened read-only: `SQLite` writes beside a WAL database even to read it, which a
    /// read-only directory does not allow. Changes to the copy are discarded; a missing index
    /// gives an empty one.
    pub(crate) fn open_snapshot(path: &Path) -> Result<Self, StoreError> {
        let dir = tempfile::tempdir()?;
        let copy = dir.path().join("index.sqlite");
        for suffix in ["", "-wal"] {
            let from = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
            if from.is_file() {
                fs_err::copy(&from, format!("{}{suffix}", copy.display()))?;
            }
        }
        let mut index = Self::open(&copy)?;
        path.clone_into(&mut index.path);
        index.snapshot = Some(dir);
        Ok(index)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves the connection usable: SQLite rolls back.
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::index(&self.path, e)
    }

    pub(crate) fn record_object(&self, digest: &Digest, size: u64, kind: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO objects(digest, size, kind) VALUES (?1, ?2, ?3)
                 ON CONFLICT(digest) DO UPDATE SET kind = excluded.kind WHERE objects.kind = 'blob'",
                params![digest.to_string(), i64::try_from(size).unwrap_or(i64::MAX), kind],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    pub(crate) fn forget_objects(&self, digests: &[Digest]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        for d in digests {
            let s = d.to_string();
            tx.execute("DELETE FROM objects WHERE digest = ?1", [&s]).map_err(|e| self.err(e))?;
            tx.execute("DELETE FROM refs WHERE parent = ?1", [&s]).map_err(|e| self.err(e))?;
            tx.execute("DELETE FROM stage_cache WHERE manifest = ?1", [&s]).map_err(|e| self.err(e))?;
            tx.execute("DELETE FROM verified WHERE digest = ?1", [&s]).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// The stamp an object had when it was last hashed in full and matched its digest.
    pub(crate) fn verified_stamp(&self, digest: &Digest) -> Result<Option<FileStamp>, StoreError> {
        let to_u64 = |v: i64| u64::try_from(v).unwrap_or(u64::MAX);
        self.conn()
            .query_row(
                "SELECT size, mtime_ns, ctime_ns, ino FROM verified WHERE digest = ?1",
                [digest.to_string()],
                |r| {
                    Ok(FileStamp {
                        size: to_u64(r.get(0)?),
                        mtime_ns: r.get(1)?,
                        ctime_ns: r.get(2)?,
                        ino: to_u64(r.get(3)?),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Records the stamps of objects just hashed in full, in one transaction.
    pub(crate) fn record_verified(&self, stamps: &[(Digest, FileStamp)]) -> Result<(), StoreError> {
        if stamps.is_empty() {
            return Ok(());
        }
        let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        for (d, s) in stamps {
            tx.execute(
                "INSERT INTO verified(digest, size, mtime_ns, ctime_ns, ino) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(digest) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,
                 ctime_ns = excluded.ctime_ns, ino = excluded.ino",
                params![d.to_string(), to_i64(s.size), s.mtime_ns, s.ctime_ns, to_i64(s.ino)],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Returns the kind recorded for an object, if it was recorded.
    pub fn object_kind(&self, digest: &Digest) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row("SELECT kind FROM objects WHERE digest = ?1", [digest.to_string()], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Returns the recorded kind of every indexed object, in one query.
    pub fn all_kinds(&self) -> Result<std::collections::BTreeMap<Digest, String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT digest, kind FROM objects").map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((parse_digest(&r.get::<_, String>(0)?)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Returns every recorded object of a kind, sorted.
    pub fn objects_of_kind(&self, kind: &str) -> Result<Vec<Digest>, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT digest FROM objects WHERE kind = ?1 ORDER BY digest").map_err(|e| self.err(e))?;
        let rows = stmt.query_map([kind], |r| parse_digest(&r.get::<_, String>(0)?)).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Records that manifest `parent` references each of `children`.
    pub fn add_refs(&self, parent: &Digest, children: &[Digest]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT OR IGNORE INTO refs(parent, child) VALUES (?1, ?2)")
                .map_err(|e| self.err(e))?;
            let p = parent.to_string();
            for c in children {
                stmt.execute(params![p, c.to_string()]).map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Returns the manifests recorded as referencing `child`, sorted.
    pub fn referrers(&self, child: &Digest) -> Result<Vec<Digest>, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT parent FROM refs WHERE child = ?1 ORDER BY parent").map_err(|e| self.err(e))?;
        let rows =
            stmt.query_map([child.to_string()], |r| parse_digest(&r.get::<_, String>(0)?)).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Returns what manifest `parent` was recorded as referencing when it was written, sorted.
    /// For a manifest whose bytes are damaged this is the remaining evidence of its edges.
    pub fn recorded_references(&self, parent: &Digest) -> Result<Vec<Digest>, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT child FROM refs WHERE parent = ?1 ORDER BY child").map_err(|e| self.err(e))?;
        let rows =
            stmt.query_map([parent.to_string()], |r| parse_digest(&r.get::<_, String>(0)?)).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Returns the stage manifest cached under a stage key.
    pub fn cache_get(&self, key: &Digest) -> Result<Option<Digest>, StoreError> {
        let s: Option<String> = self
            .conn()
            .query_row("SELECT manifest FROM stage_cache WHERE key = ?1", [key.to_string()], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        s.map(|s| parse_digest(&s)).transpose().map_err(|e| self.err(e))
    }

    /// Records the stage manifest for a stage key. Call only once the manifest and all its
    /// outputs are durable.
    pub fn cache_put(&self, key: &Digest, manifest: &Digest) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO stage_cache(key, manifest) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET manifest = excluded.manifest",
                params![key.to_string(), manifest.to_string()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Forgets a cache entry (its objects failed verification).
    pub fn cache_remove(&self, key: &Digest) -> Result<(), StoreError> {
        self.conn().execute("DELETE FROM stage_cache WHERE key = ?1", [key.to_string()]).map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Logs the start of an execution and returns its row id.
    pub fn begin_execution(
        &self,
        run_id: &Digest,
        mode: &str,
        recipe: &str,
        lockfile_path: &str,
        started_ms: i64,
    ) -> Result<i64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO executions(run_id, mode, recipe, lockfile_path, started_ms, status)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running')",
            params![run_id.to_string(), mode, recipe, lockfile_path, started_ms],
        )
        .map_err(|e| self.err(e))?;
        Ok(conn.last_insert_rowid())
    }

    /// Logs one stage boundary of an execution.
    pub fn record_stage_event(
        &self,
        execution: i64,
        stage: &str,
        status: &str,
        millis: i64,
        manifest: Option<&Digest>,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO stage_events(execution, seq, stage, status, millis, manifest)
                 VALUES (?1, (SELECT COUNT(*) FROM stage_events WHERE execution = ?1), ?2, ?3, ?4, ?5)",
                params![execution, stage, status, millis, manifest.map(ToString::to_string)],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Logs the end of an execution.
    pub fn finish_execution(
        &self,
        execution: i64,
        status: &str,
        run_manifest: Option<&Digest>,
        detail: Option<&str>,
        finished_ms: i64,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE executions SET status = ?2, run_manifest = ?3, detail = ?4, finished_ms = ?5 WHERE id = ?1",
                params![execution, status, run_manifest.map(ToString::to_string), detail, finished_ms],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Returns logged executions, newest first.
    pub fn executions(&self) -> Result<Vec<ExecutionRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, run_id, mode, recipe, lockfile_path, started_ms, finished_ms, status, run_manifest, detail
                 FROM executions ORDER BY id DESC",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(ExecutionRow {
                    id: r.get(0)?,
                    run_id: parse_digest(&r.get::<_, String>(1)?)?,
                    mode: r.get(2)?,
                    recipe: r.get(3)?,
                    lockfile_path: r.get(4)?,
                    started_ms: r.get(5)?,
                    finished_ms: r.get(6)?,
                    status: r.get(7)?,
                    run_manifest: r.get::<_, Option<String>>(8)?.map(|s| parse_digest(&s)).transpose()?,
                    detail: r.get(9)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Returns the stage boundaries of one execution, in order.
    pub fn stage_events(&self, execution: i64) -> Result<Vec<StageEventRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT stage, status, millis, manifest FROM stage_events WHERE execution = ?1 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([execution], |r| {
                Ok(StageEventRow {
                    stage: r.get(0)?,
                    status: r.get(1)?,
                    millis: r.get(2)?,
                    manifest: r.get::<_, Option<String>>(3)?.map(|s| parse_digest(&s)).transpose()?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod format_tests {
    use super::format_utc;

    #[test]
    fn times_are_utc_civil_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(format_utc(1_795_310_000_000), "2026-11-22 01:13:20Z");
    }
}
