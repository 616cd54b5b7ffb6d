//! The object store on disk.
//!
//! ```text
//! .prov/
//!   VERSION            "1": layout version
//!   lock               advisory lock: shared for readers and writers of objects, exclusive for gc
//!   objects/ab/cdef…   object bytes, named by the 64 hex digits of their BLAKE3 (2 + 62), read-only
//!   tmp/               objects being written; renamed into objects/ only when complete and synced
//!   index.sqlite       the index (WAL), see [`crate::Index`]
//! ```

use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::digest::Hasher;
use crate::{Digest, FileStamp, Index, Mismatch, StoreError};

/// Layout version written to `VERSION`.
pub const LAYOUT_VERSION: u32 = 1;

/// Name of the store directory that `prov init` creates.
pub const STORE_DIR_NAME: &str = ".prov";

/// What an object is, recorded in the index for display and garbage collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// Opaque bytes: an imported file, a command's output.
    Blob,
    /// A canonical JSON record (see `prov-manifest`).
    Manifest,
    /// A dataset shard (Parquet).
    Shard,
}

impl ObjectKind {
    /// Returns the name stored in the index.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blob => "blob",
            Self::Manifest => "manifest",
            Self::Shard => "shard",
        }
    }
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and add objects; many processes at once.
    Shared,
    /// Remove objects (gc); no other process at the same time.
    Exclusive,
    /// Read only, from a store that may be on read-only media or a read-only copy (an
    /// auditor's): nothing in the store directory is created or written; the lock is taken
    /// shared if its file can be opened for reading; the index is read from a private copy.
    ReadOnly,
    /// Read and add objects, without the index: for a task on another machine of a cluster
    /// whose store is on a shared file system, where `SQLite` is not safe (its locks do not
    /// hold over NFS or Lustre). The lock is taken shared, objects are written as always (by
    /// atomic rename), and what would go into the index is kept in memory and dropped: the
    /// one process that opens the index, the run's coordinator, verifies the task's objects
    /// and records them ([`Store::adopt`]).
    Detached,
}

/// A content-addressed object store.
pub struct Store {
    root: PathBuf,
    index: Index,
    // Held for the store's lifetime; the OS releases it when the process dies, even on kill -9.
    /// The store's lock, held while the store is open (none for a read-only store whose lock
    /// file cannot be opened).
    _lock: Option<fs_err::File>,
}

/// Outcome of re-hashing every object.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Objects hashed.
    pub objects: u64,
    /// Bytes hashed.
    pub bytes: u64,
    /// Every object found, sorted.
    pub found: Vec<Digest>,
    /// Objects whose bytes do not match their name, sorted by digest.
    pub corrupt: Vec<Mismatch>,
    /// Files under `objects/` whose names are not digests.
    pub stray: Vec<PathBuf>,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// An object found on disk and where.
type Located = (Digest, PathBuf);

impl Store {
    /// Creates a store in `dir` (the `.prov` directory itself), readable by its owner only, or
    /// opens the one already there. Objects are copies of the project's sources, some of which
    /// only their owner may read: a store others can read would publish them.
    pub fn init(dir: &Path) -> Result<Self, StoreError> {
        Self::init_with_mode(dir, 0o700)
    }

    /// As [`Store::init`], but a new store is readable (not writable) by everyone: for a store
    /// a team shares on purpose.
    pub fn init_shared(dir: &Path) -> Result<Self, StoreError> {
        Self::init_with_mode(dir, 0o755)
    }

    fn init_with_mode(dir: &Path, mode: u32) -> Result<Self, StoreError> {
        use std::os::unix::fs::DirBuilderExt as _;
        if !dir.exists() {
            if let Some(parent) = dir.parent() {
                fs_err::create_dir_all(parent)?;
            }
            std::fs::DirBuilder::new().mode(mode).create(dir).map_err(StoreError::Io)?;
            // Exactly this mode, whatever the process umask made of it.
            fs_err::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        }
        fs_err::create_dir_all(dir.join("objects"))?;
        fs_err::create_dir_all(dir.join("tmp"))?;
        let version = dir.join("VERSION");
        if !version.exists() {
            write_atomically(&dir.join("tmp"), &version, format!("{LAYOUT_VERSION}\n").as_bytes())?;
        }
        Self::open(dir, Access::Shared, true)
    }

    /// Opens the store in `dir`, taking the lock in the given mode; with `wait` false, a
    /// conflicting lock gives [`StoreError::Busy`] instead of waiting.
    pub fn open(dir: &Path, access: Access, wait: bool) -> Result<Self, StoreError> {
        let version_path = dir.join("VERSION");
        if !version_path.is_file() {
            return Err(StoreError::NotAStore(dir.to_owned()));
        }
        let found = fs_err::read_to_string(&version_path)?;
        if found.trim() != LAYOUT_VERSION.to_string() {
            return Err(StoreError::UnsupportedVersion {
                path: dir.to_owned(),
                found: found.trim().to_owned(),
                supported: LAYOUT_VERSION,
            });
        }
        if access == Access::ReadOnly {
            // Shared with writers when the lock file can be read; a read-only copy has none.
            let lock = fs_err::File::open(dir.join("lock")).ok().filter(|f| f.file().lock_shared().is_ok());
            let index = Index::open_snapshot(&dir.join("index.sqlite"))?;
            return Ok(Self { root: dir.to_owned(), index, _lock: lock });
        }
        let lock = fs_err::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("lock"))?;
        let locked = match (access, wait) {
            (Access::Shared | Access::ReadOnly | Access::Detached, true) => lock.file().lock_shared().map(|()| true),
            (Access::Exclusive, true) => lock.file().lock().map(|()| true),
            (Access::Shared | Access::ReadOnly | Access::Detached, false) => try_lock(lock.file().try_lock_shared()),
            (Access::Exclusive, false) => try_lock(lock.file().try_lock()),
        }?;
        if !locked {
            return Err(StoreError::Busy(dir.to_owned()));
        }
        fs_err::create_dir_all(dir.join("tmp"))?;
        let index = if access == Access::Detached {
            Index::open_detached(&dir.join("index.sqlite"))?
        } else {
            Index::open(&dir.join("index.sqlite"))?
        };
        let lock = Some(lock);
        Ok(Self { root: dir.to_owned(), index, _lock: lock })
    }

    /// Returns the store directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Returns the index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Returns where an object's bytes live. Bytes read from there are not verified: use
    /// [`Store::verify`] or [`Store::open_verified`] where it matters.
    pub fn object_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.to_hex();
        self.root.join("objects").join(&hex[..2]).join(&hex[2..])
    }

    /// Returns true when the object's file exists (without verifying it).
    pub fn contains(&self, digest: &Digest) -> bool {
        self.object_path(digest).is_file()
    }

    /// Starts writing an object; [`ObjectWriter::finish`] names it.
    pub fn writer(&self, kind: ObjectKind) -> Result<ObjectWriter<'_>, StoreError> {
        let tmp_dir = self.root.join("tmp");
        loop {
            let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let path = tmp_dir.join(format!("{}-{nanos:08x}-{n}.tmp", std::process::id()));
            match fs_err::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(ObjectWriter {
                        store: self,
                        kind,
                        file: Some(BufWriter::with_capacity(1 << 20, file)),
                        tmp_path: path,
                        hasher: Hasher::new(),
                        size: 0,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Stores `bytes` and returns their digest.
    pub fn put_bytes(&self, kind: ObjectKind, bytes: &[u8]) -> Result<Digest, StoreError> {
        let mut w = self.writer(kind)?;
        w.write_all(bytes)?;
        w.finish()
    }

    /// Copies a file into the store, hashing while streaming, and returns its digest and size.
    pub fn put_file(&self, kind: ObjectKind, path: &Path) -> Result<(Digest, u64), StoreError> {
        let sealed = self.seal_file(kind, path)?;
        let size = sealed.size();
        Ok((sealed.commit()?, size))
    }

    /// Copies a file into the store's `tmp/`, hashing while streaming, and returns it sealed:
    /// in the store only once committed.
    pub fn seal_file(&self, kind: ObjectKind, path: &Path) -> Result<SealedObject<'_>, StoreError> {
        let mut src = fs_err::File::open(path)?;
        let mut w = self.writer(kind)?;
        io::copy(&mut src, &mut w)?;
        w.seal()
    }

    /// Reads a whole object and verifies it.
    pub fn read(&self, digest: &Digest) -> Result<Vec<u8>, StoreError> {
        let path = self.object_path(digest);
        let bytes = match fs_err::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotFound(*digest)),
            Err(e) => return Err(e.into()),
        };
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(Mismatch { expected: *digest, actual }.into());
        }
        Ok(bytes)
    }

    /// Opens an object for streaming; the reader fails at the end if the bytes do not match.
    pub fn open_verified(&self, digest: &Digest) -> Result<VerifiedReader, StoreError> {
        let path = self.object_path(digest);
        let file = match fs_err::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotFound(*digest)),
            Err(e) => return Err(e.into()),
        };
        Ok(VerifiedReader { inner: file, hasher: Hasher::new(), expected: *digest, done: false })
    }

    /// Re-hashes one object; returns its size.
    pub fn verify(&self, digest: &Digest) -> Result<u64, StoreError> {
        let path = self.object_path(digest);
        if !path.is_file() {
            return Err(StoreError::NotFound(*digest));
        }
        let (actual, size) = hash_file(&path, false)?;
        if actual != *digest {
            return Err(Mismatch { expected: *digest, actual }.into());
        }
        Ok(size)
    }

    /// Checks objects as [`Self::verify`] does, but re-hashes only those whose file changed
    /// since it was last hashed in full (its [`FileStamp`] differs from the one recorded
    /// then), and records the stamps of those it hashes. For the checks that run often (a
    /// cached stage's outputs, before they are reused): their cost is then one `stat` per
    /// unchanged object, not a read of every byte. The stamps live in the index, which the
    /// store's writers can edit like any file of the store; `prov verify` ([`Self::verify_all`])
    /// re-hashes everything and trusts no stamp. Returns the first failure.
    pub fn verify_unless_unchanged(&self, digests: &[Digest], pool: &rayon::ThreadPool) -> Result<(), StoreError> {
        let stamp_of = |d: &Digest| -> Result<FileStamp, StoreError> {
            match fs_err::metadata(self.object_path(d)) {
                Ok(m) if m.is_file() => Ok(FileStamp::of(&m)),
                Ok(_) => Err(StoreError::NotFound(*d)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(StoreError::NotFound(*d)),
                Err(e) => Err(e.into()),
            }
        };
        let mut to_hash = Vec::new();
        for d in digests {
            let now = stamp_of(d)?;
            if self.index.verified_stamp(d)? != Some(now) {
                to_hash.push((*d, now));
            }
        }
        let hashed: Vec<(Digest, FileStamp)> = pool
            .install(|| {
                to_hash
                    .par_iter()
                    .map(|(d, before)| {
                        self.verify(d)?;
                        // Recorded only when the file did not change while it was read.
                        Ok((*d, *before, stamp_of(d)? == *before))
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            })?
            .into_iter()
            .filter(|(_, _, steady)| *steady)
            .map(|(d, s, _)| (d, s))
            .collect();
        self.index.record_verified(&hashed)
    }

    /// Takes into the index objects that another process wrote without it (a task on another
    /// machine, a worker: [`Access::Detached`]): each is hashed in full first, and recorded,
    /// with its kind and the stamp it was hashed with, only when its bytes are its digest.
    /// Returns the first failure; objects checked before it stay recorded.
    pub fn adopt(&self, objects: &[(Digest, ObjectKind)], pool: &rayon::ThreadPool) -> Result<(), StoreError> {
        let checked: Vec<(Digest, ObjectKind, u64, Option<FileStamp>)> = pool.install(|| {
            objects
                .par_iter()
                .map(|(d, kind)| {
                    let before = fs_err::metadata(self.object_path(d)).map(|m| FileStamp::of(&m)).ok();
                    let size = self.verify(d)?;
                    let after = fs_err::metadata(self.object_path(d)).map(|m| FileStamp::of(&m)).ok();
                    Ok((*d, *kind, size, before.filter(|b| Some(*b) == after)))
                })
                .collect::<Result<_, StoreError>>()
        })?;
        for (d, kind, size, _) in &checked {
            self.index.record_object(d, *size, kind.as_str())?;
        }
        let stamps: Vec<(Digest, FileStamp)> = checked.iter().filter_map(|(d, _, _, s)| s.map(|s| (*d, s))).collect();
        self.index.record_verified(&stamps)
    }

    /// Lists every object on disk, sorted. Files that are not named like objects are ignored.
    pub fn list_objects(&self) -> Result<Vec<Digest>, StoreError> {
        let (mut found, _) = self.scan()?;
        found.sort();
        Ok(found.into_iter().map(|(d, _)| d).collect())
    }

    /// Returns the objects found (digest and path) and the stray files.
    fn scan(&self) -> Result<(Vec<Located>, Vec<PathBuf>), StoreError> {
        let mut found = Vec::new();
        let mut stray = Vec::new();
        let objects = self.root.join("objects");
        for prefix in fs_err::read_dir(&objects)? {
            let prefix = prefix?;
            let p = prefix.path();
            if !p.is_dir() {
                stray.push(p);
                continue;
            }
            let prefix_name = prefix.file_name().to_string_lossy().into_owned();
            for entry in fs_err::read_dir(&p)? {
                let entry = entry?;
                let name = format!("{prefix_name}{}", entry.file_name().to_string_lossy());
                match Digest::from_hex(&name) {
                    Ok(d) => found.push((d, entry.path())),
                    Err(_) => stray.push(entry.path()),
                }
            }
        }
        stray.sort();
        Ok((found, stray))
    }

    /// Re-hashes every object with `threads` threads (streaming; large objects are hashed
    /// with several threads too), and reports the ones that no longer match their names.
    pub fn verify_all(&self, threads: usize) -> Result<VerifyReport, StoreError> {
        let (found, stray) = self.scan()?;
        // Largest first, so the big files start early and the small ones fill the gaps.
        let sizes: Vec<u64> =
            found.iter().map(|(_, p)| fs_err::metadata(p).map(|m| m.len())).collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
            .map_err(|e| io::Error::other(e.to_string()))?;
        let multi = threads > 1;
        let results: Vec<io::Result<(usize, Digest, u64)>> =
            pool.install(|| order.par_iter().map(|&i| hash_file(&found[i].1, multi).map(|(d, n)| (i, d, n))).collect());
        let mut report = VerifyReport { stray, ..VerifyReport::default() };
        for r in results {
            let (i, actual, size) = r?;
            report.objects += 1;
            report.bytes += size;
            if actual != found[i].0 {
                report.corrupt.push(Mismatch { expected: found[i].0, actual });
            }
        }
        report.corrupt.sort_by_key(|a| a.expected);
        report.found = found.into_iter().map(|(d, _)| d).collect();
        report.found.sort();
        Ok(report)
    }

    /// Deletes objects (gc). Requires [`Access::Exclusive`]; also forgets them in the index.
    pub fn remove_objects(&self, digests: &[Digest]) -> Result<u64, StoreError> {
        let mut freed = 0;
        for d in digests {
            let p = self.object_path(d);
            if let Ok(m) = fs_err::metadata(&p) {
                freed += m.len();
            }
            match fs_err::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.index.forget_objects(digests)?;
        Ok(freed)
    }

    /// Removes partial writes left by killed processes. Requires [`Access::Exclusive`], so that
    /// no other process is writing.
    pub fn clean_tmp(&self) -> Result<usize, StoreError> {
        let mut n = 0;
        for entry in fs_err::read_dir(self.root.join("tmp"))? {
            let entry = entry?;
            if entry.path().is_dir() {
                fs_err::remove_dir_all(entry.path())?;
            } else {
                fs_err::remove_file(entry.path())?;
            }
            n += 1;
        }
        Ok(n)
    }

    /// Returns a fresh private directory under `tmp/` for a stage's scratch work.
    pub fn scratch_dir(&self, label: &str) -> Result<PathBuf, StoreError> {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.join("tmp").join(format!("{label}-{}-{n}", std::process::id()));
        if dir.exists() {
            fs_err::remove_dir_all(&dir)?;
        }
        fs_err::create_dir_all(&dir)?;
        Ok(dir)
    }
}

fn try_lock(r: Result<(), std::fs::TryLockError>) -> io::Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Hashes a file, streaming; with `multi`, large files are hashed on the current rayon pool.
fn hash_file(path: &Path, multi: bool) -> io::Result<(Digest, u64)> {
    let mut h = blake3::Hasher::new();
    let size = fs_err::metadata(path)?.len();
    // Below 128 KiB the parallel path is slower than a plain read (BLAKE3 docs).
    if multi && size >= 128 * 1024 {
        h.update_mmap_rayon(path).map_err(|e| io::Error::new(e.kind(), format!("{e}: {}", path.display())))?;
    } else if size >= 16 * 1024 * 1024 {
        h.update_mmap(path).map_err(|e| io::Error::new(e.kind(), format!("{e}: {}", path.display())))?;
    } else {
        let mut f = fs_err::File::open(path)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    }
    Ok((h.finalize().into(), size))
}

/// Writes `bytes` to `dest` atomically: temp file in `tmp_dir`, fsync, rename, fsync the directory.
///
/// The temp file is `.<pid>-<n>-<namespace>.tmp` ([`temp_file_name`]). A process killed
/// between creating and renaming it leaves it behind, and `tmp_dir` is often the user's own
/// output folder (`prov card --out`, `prov export`), which would then ship it: so the first
/// write of a process into a folder removes the temp files of processes of its own process
/// namespace that are no longer running ([`remove_stale_temps`]).
pub fn write_atomically(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    fs_err::create_dir_all(tmp_dir)?;
    remove_stale_temps(tmp_dir);
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = tmp_dir.join(temp_file_name(std::process::id(), n));
    {
        let mut f = fs_err::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs_err::rename(&tmp, dest)?;
    if let Some(parent) = dest.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Removes, once per process and folder, the temp files [`write_atomically`] left in `dir`
/// when killed: those named with this process's namespace ([`namespace_tag`]) whose process
/// is no longer running (no `/proc/<pid>`), never this process's own. A process id means
/// something only in its own process namespace on its own machine: a Slurm task on another
/// node writing into the shared store, or a process in a container, is not in this `/proc`,
/// and its temp file, named with another namespace, stays. Best effort: a file that cannot be
/// removed stays; where the namespace cannot be told, nothing is removed.
fn remove_stale_temps(dir: &Path) {
    static DONE: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    if namespace_tag().is_none() || !DONE.lock().is_ok_and(|mut done| done.insert(dir.to_path_buf())) {
        return;
    }
    let Ok(entries) = fs_err::read_dir(dir) else { return };
    let own = std::process::id();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_file_pid) else { continue };
        if pid != own && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = fs_err::remove_file(entry.path());
        }
    }
}

/// The name of [`write_atomically`]'s temp file number `n` of process `pid`:
/// `.<pid>-<n>-<namespace>.tmp`, or `.<pid>-<n>.tmp` where the namespace cannot be told.
fn temp_file_name(pid: u32, n: u64) -> String {
    match namespace_tag() {
        Some(tag) => format!(".{pid}-{n}-{tag}.tmp"),
        None => format!(".{pid}-{n}.tmp"),
    }
}

/// The process id of a temp file name of this process's namespace, else `None`.
fn temp_file_pid(name: &str) -> Option<u32> {
    let (rest, tag) = name.strip_prefix('.')?.strip_suffix(".tmp")?.rsplit_once('-')?;
    let (pid, n) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (Some(tag) == namespace_tag() && digits(pid) && digits(n)).then(|| pid.parse().ok()).flatten()
}

/// Twelve hex digits naming this machine's boot and this process's PID namespace (BLAKE3 of
/// the kernel's boot id and the namespace's `/proc/self/ns/pid` link), within which a process
/// id names one process; `None` where `/proc` does not tell.
fn namespace_tag() -> Option<&'static str> {
    static TAG: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let boot = fs_err::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let pid_ns = fs_err::read_link("/proc/self/ns/pid").ok()?;
        let digest = Digest::of(format!("{}\n{}", boot.trim(), pid_ns.display()).as_bytes());
        Some(digest.to_hex()[..12].to_owned())
    })
    .as_deref()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs_err::File::open(dir)?.sync_all()
}

/// Streams an object being added to the store. Dropping it without [`finish`](Self::finish)
/// removes the partial file.
pub struct ObjectWriter<'s> {
    store: &'s Store,
    kind: ObjectKind,
    file: Option<BufWriter<fs_err::File>>,
    tmp_path: PathBuf,
    hasher: Hasher,
    size: u64,
}

impl<'s> ObjectWriter<'s> {
    /// Returns the number of bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Makes the object durable under its digest and returns the digest.
    pub fn finish(self) -> Result<Digest, StoreError> {
        self.seal()?.commit()
    }

    /// Makes the written bytes durable in `tmp/` and computes their digest, without adding
    /// them to the store yet: the caller decides, from the digest, whether to
    /// [`commit`](SealedObject::commit) them (an imported source only when its digest is the
    /// pinned one) or to drop them.
    pub fn seal(mut self) -> Result<SealedObject<'s>, StoreError> {
        let file = self.file.take().expect("seal consumes the writer, so the file is present");
        let file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        let tmp_path = std::mem::take(&mut self.tmp_path);
        Ok(SealedObject {
            store: self.store,
            kind: self.kind,
            tmp_path: Some(tmp_path),
            digest: self.hasher.finalize(),
            size: self.size,
        })
    }
}

/// Bytes written and synced in the store's `tmp/`, with their digest, not yet in the store.
/// Dropping it without [`commit`](Self::commit) removes them.
pub struct SealedObject<'s> {
    store: &'s Store,
    kind: ObjectKind,
    tmp_path: Option<PathBuf>,
    digest: Digest,
    size: u64,
}

impl SealedObject<'_> {
    /// The digest of the bytes.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Their size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Adds the object to the store under its digest.
    pub fn commit(mut self) -> Result<Digest, StoreError> {
        let tmp_path = self.tmp_path.take().expect("commit consumes the object, so its file is present");
        let dest = self.store.object_path(&self.digest);
        let prefix_dir = dest.parent().expect("object paths have a prefix directory");
        if !prefix_dir.is_dir() {
            fs_err::create_dir_all(prefix_dir)?;
            sync_dir(&self.store.root.join("objects"))?;
        }
        set_read_only(&tmp_path)?;
        // Renaming over an existing copy is atomic and heals a corrupted one.
        fs_err::rename(&tmp_path, &dest)?;
        sync_dir(prefix_dir)?;
        self.store.index.record_object(&self.digest, self.size, self.kind.as_str())?;
        Ok(self.digest)
    }
}

impl Drop for SealedObject<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.tmp_path.take() {
            // Best effort: a leftover is removed by `gc` anyway.
            let _ = fs_err::remove_file(path);
        }
    }
}

fn set_read_only(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o444))
}

impl Write for ObjectWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let file = self.file.as_mut().ok_or_else(|| io::Error::other("object writer already finished"))?;
        let n = file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for ObjectWriter<'_> {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            // Best effort: a leftover is removed by `gc` anyway.
            let _ = fs_err::remove_file(&self.tmp_path);
        }
    }
}

/// A reader over an object that fails at the end when the bytes do not match the digest.
pub struct VerifiedReader {
    inner: fs_err::File,
    hasher: Hasher,
    expected: Digest,
    done: bool,
}

impl Read for VerifiedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() && !self.done {
            self.done = true;
            let actual = self.hasher.finalize();
            if actual != self.expected {
                return Err(io::Error::new(io::ErrorKind::InvalidData, Mismatch { expected: self.expected, actual }));
            }
        }
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::init(&dir.path().join(".prov")).unwrap();
        (dir, s)
    }

    fn flip_byte(path: &Path, at: usize) {
        use std::os::unix::fs::PermissionsExt;
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut bytes = fs_err::read(path).unwrap();
        bytes[at] ^= 0x01;
        fs_err::write(path, bytes).unwrap();
    }

    /// Changes one byte in place, keeping the file's size, modification time and permissions,
    /// as someone hiding an edit would.
    fn flip_byte_keeping_mtime(path: &Path, at: usize) {
        use std::os::unix::fs::PermissionsExt;
        let meta = fs_err::metadata(path).unwrap();
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut bytes = fs_err::read(path).unwrap();
        bytes[at] ^= 0x01;
        fs_err::write(path, bytes).unwrap();
        std::fs::File::options().write(true).open(path).unwrap().set_modified(meta.modified().unwrap()).unwrap();
        fs_err::set_permissions(path, meta.permissions()).unwrap();
    }

    #[test]
    fn unchanged_objects_are_not_read_again_and_a_hidden_edit_is_found() {
        let (_d, s) = store();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let a = s.put_bytes(ObjectKind::Blob, b"the first object").unwrap();
        let b = s.put_bytes(ObjectKind::Blob, b"the second object").unwrap();
        s.verify_unless_unchanged(&[a, b], &pool).unwrap();
        assert!(s.index.verified_stamp(&a).unwrap().is_some(), "hashed once, stamped");

        // An edit in place that keeps size and mtime still changes the status-change time:
        // the object is hashed again and the edit found.
        flip_byte_keeping_mtime(&s.object_path(&a), 3);
        let e = s.verify_unless_unchanged(&[a, b], &pool).unwrap_err();
        assert!(e.is_integrity_failure(), "{e}");
        // A missing object is missing, stamp or not.
        fs_err::remove_file(s.object_path(&b)).unwrap();
        assert!(matches!(s.verify_unless_unchanged(&[b], &pool), Err(StoreError::NotFound(_))));
        // And the full check trusts no stamp: an object whose recorded stamp was rewritten to
        // match its damaged file passes the quick check (that is what the stamp is for: no
        // read) but not `verify_all`.
        let now = FileStamp::of(&fs_err::metadata(s.object_path(&a)).unwrap());
        s.index.record_verified(&[(a, now)]).unwrap();
        s.verify_unless_unchanged(&[a], &pool).unwrap();
        assert_eq!(s.verify_all(1).unwrap().corrupt.len(), 1);
    }

    #[test]
    fn put_names_objects_by_their_blake3() {
        let (_d, s) = store();
        let digest = s.put_bytes(ObjectKind::Blob, b"hello").unwrap();
        assert_eq!(digest, Digest::of(b"hello"));
        assert_eq!(s.read(&digest).unwrap(), b"hello");
        let hex = digest.to_hex();
        assert!(s.root().join("objects").join(&hex[..2]).join(&hex[2..]).is_file());
        assert_eq!(s.index().object_kind(&digest).unwrap().as_deref(), Some("blob"));
        // Writing the same bytes again is idempotent.
        assert_eq!(s.put_bytes(ObjectKind::Blob, b"hello").unwrap(), digest);
        assert_eq!(s.list_objects().unwrap(), vec![digest]);
    }

    #[test]
    fn dropped_writer_leaves_nothing() {
        let (_d, s) = store();
        {
            let mut w = s.writer(ObjectKind::Blob).unwrap();
            w.write_all(b"partial").unwrap();
        }
        assert!(s.list_objects().unwrap().is_empty());
        assert_eq!(fs_err::read_dir(s.root().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn corruption_is_detected_by_every_read_path() {
        let (_d, s) = store();
        let good = s.put_bytes(ObjectKind::Blob, &vec![7u8; 300_000]).unwrap();
        let bad = s.put_bytes(ObjectKind::Blob, b"some bytes").unwrap();
        flip_byte(&s.object_path(&bad), 3);
        assert!(matches!(s.read(&bad), Err(StoreError::Corrupt(m)) if m.expected == bad));
        assert!(s.verify(&bad).unwrap_err().is_integrity_failure());
        let mut sink = Vec::new();
        let err = s.open_verified(&bad).unwrap().read_to_end(&mut sink).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        for threads in [1, 2] {
            let report = s.verify_all(threads).unwrap();
            assert_eq!(report.objects, 2);
            assert_eq!(report.corrupt.len(), 1);
            assert_eq!(report.corrupt[0].expected, bad);
        }
        assert_eq!(s.verify(&good).unwrap(), 300_000);
        // Writing the good bytes again heals the object.
        s.put_bytes(ObjectKind::Blob, b"some bytes").unwrap();
        assert!(s.verify_all(2).unwrap().corrupt.is_empty());
    }

    /// A killed writer's temp file in an output folder is removed by the next write there,
    /// once its process has ended; a live process's, this process's own, and files that only
    /// look alike stay.
    #[test]
    fn temp_files_of_ended_writers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let ended = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let live = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let tag = namespace_tag().unwrap();
        let names = [
            temp_file_name(ended, 3),
            temp_file_name(live.id(), 7),
            temp_file_name(std::process::id(), 999_999),
            ".notes.tmp".to_owned(),
            format!("{ended}-3-{tag}.tmp"),
            format!(".{ended}-x-{tag}.tmp"),
            // Another namespace's (a Slurm task on another node, a container): its process
            // is not in this `/proc`, and may be running.
            format!(".{ended}-3-000000000000.tmp"),
            format!(".{ended}-3.tmp"),
        ];
        for n in &names {
            fs_err::write(dir.path().join(n), "left").unwrap();
        }
        write_atomically(dir.path(), &dir.path().join("card.md"), b"card").unwrap();
        let mut live = live;
        live.kill().unwrap();
        live.wait().unwrap();
        let left: std::collections::BTreeSet<String> =
            fs_err::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        let mut expected: std::collections::BTreeSet<String> = names[1..].iter().cloned().collect();
        expected.insert("card.md".into());
        assert_eq!(left, expected);
    }

    #[test]
    fn exclusive_lock_excludes_a_second_opener() {
        let (_d, s) = store();
        let root = s.root().to_owned();
        // Locks are per open file description, so a second open in one process conflicts too.
        assert!(matches!(Store::open(&root, Access::Exclusive, false), Err(StoreError::Busy(_))));
        let shared = Store::open(&root, Access::Shared, false).unwrap();
        drop(shared);
        drop(s);
        let excl = Store::open(&root, Access::Exclusive, false).unwrap();
        assert!(matches!(Store::open(&root, Access::Shared, false), Err(StoreError::Busy(_))));
        drop(excl);
    }

    #[test]
    fn opening_a_non_store_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(Store::open(dir.path(), Access::Shared, true), Err(StoreError::NotAStore(_))));
    }

    #[test]
    fn remove_and_clean() {
        let (_d, s) = store();
        let a = s.put_bytes(ObjectKind::Blob, b"a").unwrap();
        let b = s.put_bytes(ObjectKind::Manifest, b"b").unwrap();
        s.index().cache_put(&Digest::of(b"key"), &b).unwrap();
        fs_err::write(s.root().join("tmp").join("leftover.tmp"), b"x").unwrap();
        assert_eq!(s.remove_objects(&[b]).unwrap(), 1);
        assert_eq!(s.list_objects().unwrap(), vec![a]);
        assert_eq!(s.index().cache_get(&Digest::of(b"key")).unwrap(), None);
        assert_eq!(s.clean_tmp().unwrap(), 1);
    }

    proptest::proptest! {
        #[test]
        fn streaming_one_shot_and_verify_agree(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200_000), chunk in 1usize..70_000) {
            let (_d, s) = store();
            let mut w = s.writer(ObjectKind::Blob).unwrap();
            for c in data.chunks(chunk) {
                w.write_all(c).unwrap();
            }
            let streamed = w.finish().unwrap();
            proptest::prop_assert_eq!(streamed, Digest::of(&data));
            proptest::prop_assert_eq!(hash_file(&s.object_path(&streamed), true).unwrap().0, streamed);
            proptest::prop_assert_eq!(hash_file(&s.object_path(&streamed), false).unwrap().0, streamed);
        }
    }
}
