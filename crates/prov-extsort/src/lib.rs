//! External sort of byte records in bounded memory: the tool the stages use where their
//! state would otherwise grow with the corpus (dedup's buckets and exact keys, toxicity's
//! scores, the URL index's entries).
//!
//! A record is a fixed-width `[u8; W]` or a byte string `Vec<u8>` (stored with a length
//! prefix), compared as bytes, so a caller encodes its sort key big endian first. Producers hand over sorted *runs*: a parallel worker sorts what it made (one
//! shard's records) and writes it with [`ExternalSort::add_run`]; a sequential producer uses
//! a [`Pusher`], which spills a run whenever its buffer reaches the budget. A run written
//! elsewhere (by a map task on another machine, with [`write_run_to`]) is adopted with
//! [`ExternalSort::adopt_run`]: merged like the others, but never removed. A merge checks
//! that every run it reads is in order, and fails on one that is not.
//! [`ExternalSort::finish`] merges the runs, at most [`MAX_FAN_IN`] at a time, in as many
//! passes as needed, and returns the records in order.
//!
//! # Determinism
//!
//! The order is the byte order of whole records. Two records that compare equal are the
//! same bytes, so the output depends neither on the order in which runs were added (which
//! parallel workers decide) nor on how the records were cut into runs.
//!
//! # Memory and disk
//!
//! Memory: the caller's run buffers, plus [`MAX_FAN_IN`] read buffers of [`READ_BUFFER`]
//! bytes during a merge. Disk: the records, twice at most during a merge pass. Run files
//! live in the directory given to [`ExternalSort::new`], are removed as soon as they are
//! merged, and the directory is the caller's to remove (a stage uses its scratch directory,
//! which `prov gc` also clears after a crash).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Debug;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most runs merged at once: bounds the open files and the read buffers of a pass.
pub const MAX_FAN_IN: usize = 64;

/// The read buffer of each run during a merge.
pub const READ_BUFFER: usize = 64 * 1024;

/// A record of an [`ExternalSort`]: ordered by its bytes, written to and read from run files.
pub trait Record: Ord + Debug + Send + Sized {
    /// Writes the record to a run file.
    ///
    /// # Errors
    ///
    /// The writer's.
    fn write_to(&self, out: &mut impl Write) -> io::Result<()>;
    /// Reads the next record of a run file; `None` at its end.
    ///
    /// # Errors
    ///
    /// The reader's, and `UnexpectedEof` for a file that ends inside a record.
    fn read_from(input: &mut impl Read) -> io::Result<Option<Self>>;
    /// What the record costs in a buffer, for budgets.
    fn cost(&self) -> usize;
}

/// Fills `buf` from `input`: `false` at a clean end of file before the first byte.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a run file ends inside a record")),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl<const W: usize> Record for [u8; W] {
    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(self)
    }
    fn read_from(input: &mut impl Read) -> io::Result<Option<Self>> {
        let mut buf = [0u8; W];
        Ok(read_full(input, &mut buf)?.then_some(buf))
    }
    fn cost(&self) -> usize {
        W.max(1)
    }
}

/// A byte string, stored as its length (u32, little endian) and its bytes.
impl Record for Vec<u8> {
    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let len = u32::try_from(self.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a record of 4 GiB or more"))?;
        out.write_all(&len.to_le_bytes())?;
        out.write_all(self)
    }
    fn read_from(input: &mut impl Read) -> io::Result<Option<Self>> {
        let mut len = [0u8; 4];
        if !read_full(input, &mut len)? {
            return Ok(None);
        }
        let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
        if !read_full(input, &mut buf)? && !buf.is_empty() {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a run file ends inside a record"));
        }
        Ok(Some(buf))
    }
    fn cost(&self) -> usize {
        // The bytes, the vector itself and its length prefix on disk.
        self.len() + std::mem::size_of::<Self>() + 4
    }
}

/// Sorted runs of records, on disk, waiting to be merged.
#[derive(Debug)]
pub struct ExternalSort<R: Record> {
    dir: PathBuf,
    label: String,
    /// The runs, each with whether the sort owns (and removes) its file.
    runs: Mutex<Vec<(PathBuf, bool)>>,
    next: AtomicU64,
    budget_bytes: usize,
    record: std::marker::PhantomData<fn() -> R>,
}

impl<R: Record> ExternalSort<R> {
    /// A sort whose run files go to `dir` (which must exist), named after `label`; a
    /// [`Pusher`] holds at most `budget_bytes` of records before it spills a run.
    pub fn new(dir: &Path, label: &str, budget_bytes: usize) -> Self {
        Self {
            dir: dir.to_path_buf(),
            label: label.to_string(),
            runs: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            budget_bytes,
            record: std::marker::PhantomData,
        }
    }

    fn run_path(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{}-run-{n:06}.bin", self.label))
    }

    /// Sorts `records` and writes them as one run. Safe to call from many threads.
    pub fn add_run(&self, mut records: Vec<R>) -> io::Result<()> {
        self.write_run(&mut records)
    }

    /// Adds the run file at `path`, written by [`write_run_to`] (perhaps by another process):
    /// it is merged with the others and left where it is. A file that is not in order makes
    /// the merge fail when it gets there.
    pub fn adopt_run(&self, path: &Path) {
        self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((path.to_path_buf(), false));
    }

    /// Sorts `records` in place and writes them as one run (nothing for none).
    fn write_run(&self, records: &mut [R]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let path = self.run_path();
        write_run_to(records, fs_err::File::create(&path)?)?;
        self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((path, true));
        Ok(())
    }

    /// A buffer that spills a sorted run whenever it holds the budget.
    ///
    /// The buffer is allocated once, for the records the budget holds if each cost no more
    /// than its own size, and reused after each spill. Grown by doubling instead, a full
    /// buffer would be reached through a copy of half of it, and the allocator may keep
    /// the freed half resident for a while: up to 1.5 times the budget at the peak (the
    /// likely cause, not yet confirmed by a measurement, of most of what `dedup` grew by from
    /// 1 to 20 GiB, its buffers filling only on large corpora).
    pub fn pusher(&self) -> Pusher<'_, R> {
        let room = self.budget_bytes / std::mem::size_of::<R>().max(1) + 1;
        Pusher { sort: self, buffer: Vec::with_capacity(room), cost: 0 }
    }

    /// Merges every run and returns the records in byte order.
    pub fn finish(self) -> io::Result<Sorted<R>> {
        let mut runs = self.runs.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Paths sort by their counter, so passes are the same from run to run; the output
        // does not depend on it (see the crate doc), the file names do.
        runs.sort();
        let mut pass = 0;
        while runs.len() > MAX_FAN_IN {
            let mut merged = Vec::with_capacity(runs.len().div_ceil(MAX_FAN_IN));
            for (i, group) in runs.chunks(MAX_FAN_IN).enumerate() {
                let path = self.dir.join(format!("{}-pass{pass}-{i:06}.bin", self.label));
                let mut out = BufWriter::with_capacity(READ_BUFFER, fs_err::File::create(&path)?);
                let paths: Vec<PathBuf> = group.iter().map(|(p, _)| p.clone()).collect();
                for r in Merge::<R>::open(&paths)? {
                    r?.write_to(&mut out)?;
                }
                out.into_inner().map_err(io::IntoInnerError::into_error)?;
                for (p, owned) in group {
                    if *owned {
                        fs_err::remove_file(p)?;
                    }
                }
                merged.push((path, true));
            }
            runs = merged;
            pass += 1;
        }
        let paths: Vec<PathBuf> = runs.iter().map(|(p, _)| p.clone()).collect();
        let files = runs.into_iter().filter_map(|(p, owned)| owned.then_some(p)).collect();
        Ok(Sorted { merge: Merge::open(&paths)?, files })
    }
}

/// Sorts `records` in place and writes them to `file` as one run, in the format that
/// [`ExternalSort::adopt_run`] reads: the records one after the other, as
/// [`Record::write_to`] writes them.
///
/// # Errors
///
/// The file's.
pub fn write_run_to<R: Record>(records: &mut [R], file: impl Write) -> io::Result<()> {
    records.sort_unstable();
    let mut out = BufWriter::with_capacity(READ_BUFFER, file);
    for r in records.iter() {
        r.write_to(&mut out)?;
    }
    out.into_inner().map_err(io::IntoInnerError::into_error)?;
    Ok(())
}

/// Buffers records and spills them as sorted runs (see [`ExternalSort::pusher`]).
#[derive(Debug)]
pub struct Pusher<'a, R: Record> {
    sort: &'a ExternalSort<R>,
    buffer: Vec<R>,
    cost: usize,
}

impl<R: Record> Pusher<'_, R> {
    /// Adds one record.
    pub fn push(&mut self, record: R) -> io::Result<()> {
        self.cost += record.cost();
        self.buffer.push(record);
        if self.cost >= self.sort.budget_bytes {
            self.cost = 0;
            self.sort.write_run(&mut self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    /// Writes what is buffered as a last run.
    pub fn finish(mut self) -> io::Result<()> {
        self.sort.write_run(&mut self.buffer)
    }
}

/// A k-way merge of sorted run files.
#[derive(Debug)]
struct Merge<R: Record> {
    paths: Vec<PathBuf>,
    readers: Vec<BufReader<fs_err::File>>,
    heap: BinaryHeap<Reverse<(R, usize)>>,
    /// A read error, reported after the record before it; the merge ends there.
    failed: Option<io::Error>,
}

impl<R: Record> Merge<R> {
    fn open(paths: &[PathBuf]) -> io::Result<Self> {
        let mut readers = Vec::with_capacity(paths.len());
        let mut heap = BinaryHeap::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            let mut r = BufReader::with_capacity(READ_BUFFER, fs_err::File::open(p)?);
            if let Some(rec) = R::read_from(&mut r)? {
                heap.push(Reverse((rec, i)));
            }
            readers.push(r);
        }
        Ok(Self { paths: paths.to_vec(), readers, heap, failed: None })
    }
}

impl<R: Record> Iterator for Merge<R> {
    type Item = io::Result<R>;
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            self.heap.clear();
            return Some(Err(e));
        }
        let Reverse((rec, i)) = self.heap.pop()?;
        match R::read_from(&mut self.readers[i]) {
            // A run out of order would put records out of order without a word: it is an
            // error (a run adopted from elsewhere that is damaged, or not a run).
            Ok(Some(next)) if next < rec => {
                self.failed = Some(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("run file `{}` is not sorted", self.paths[i].display()),
                ));
            }
            Ok(Some(next)) => self.heap.push(Reverse((next, i))),
            Ok(None) => {}
            Err(e) => self.failed = Some(e),
        }
        Some(Ok(rec))
    }
}

/// The records of an [`ExternalSort`], in byte order. Its run files are removed when it is
/// dropped.
#[derive(Debug)]
pub struct Sorted<R: Record> {
    merge: Merge<R>,
    files: Vec<PathBuf>,
}

impl<R: Record> Iterator for Sorted<R> {
    type Item = io::Result<R>;
    fn next(&mut self) -> Option<Self::Item> {
        self.merge.next()
    }
}

impl<R: Record> Drop for Sorted<R> {
    fn drop(&mut self) {
        self.merge.readers.clear();
        for p in &self.files {
            let _ = fs_err::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted_through_disk(records: &[[u8; 3]], budget_bytes: usize, run_size: usize) -> Vec<[u8; 3]> {
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<[u8; 3]>::new(dir.path(), "t", budget_bytes);
        // Half through whole runs (as parallel workers do), half through a pusher.
        let (runs, pushed) = records.split_at(records.len() / 2);
        for chunk in runs.chunks(run_size.max(1)) {
            sort.add_run(chunk.to_vec()).unwrap();
        }
        let mut p = sort.pusher();
        for r in pushed {
            p.push(*r).unwrap();
        }
        p.finish().unwrap();
        let out: Vec<_> = sort.finish().unwrap().collect::<Result<_, _>>().unwrap();
        // Every run and pass file is gone once the result is dropped.
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 0);
        out
    }

    /// A pusher holds one buffer, allocated for the budget up front: pushing ten budgets of
    /// records never grows it or moves it (a grown buffer passes through a copy of half of
    /// itself), and the runs it spills still merge into the sorted records.
    #[test]
    fn a_pusher_fills_one_buffer_and_reuses_it_after_each_spill() {
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<[u8; 3]>::new(dir.path(), "t", 3 * 100);
        let mut pusher = sort.pusher();
        let (room, at) = (pusher.buffer.capacity(), pusher.buffer.as_ptr());
        assert!(room > 100, "room for the budget's records: {room}");
        let records: Vec<[u8; 3]> = (0..1000u32).map(|i| [(i * 7 % 256) as u8, (i % 13) as u8, 1]).collect();
        for r in &records {
            pusher.push(*r).unwrap();
            assert_eq!((pusher.buffer.capacity(), pusher.buffer.as_ptr()), (room, at), "never grown nor moved");
        }
        pusher.finish().unwrap();
        let mut expected = records;
        expected.sort_unstable();
        assert_eq!(sort.finish().unwrap().map(Result::unwrap).collect::<Vec<_>>(), expected);
    }

    #[test]
    fn merges_in_several_passes_when_there_are_many_runs() {
        // 5,000 one-record runs: three merge passes at a fan-in of 64.
        let records: Vec<[u8; 3]> =
            (0u32..10_000).map(|i| ((i * 7919) % 10_007).to_be_bytes()[1..].try_into().unwrap()).collect();
        let mut expected = records.clone();
        expected.sort_unstable();
        assert_eq!(sorted_through_disk(&records, 3, 1), expected);
    }

    #[test]
    fn an_empty_sort_yields_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<[u8; 8]>::new(dir.path(), "t", 1024);
        sort.add_run(Vec::new()).unwrap();
        assert_eq!(sort.finish().unwrap().count(), 0);
    }

    #[test]
    fn a_truncated_run_is_an_error_not_a_short_result() {
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<[u8; 4]>::new(dir.path(), "t", 1024);
        sort.add_run(vec![[1, 2, 3, 4], [5, 6, 7, 8]]).unwrap();
        let run = fs_err::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        fs_err::write(&run, [1, 2, 3, 4, 5, 6]).unwrap();
        let out: Vec<_> = sort.finish().unwrap().collect();
        assert_eq!(out.len(), 2);
        assert!(out[0].is_ok() && out[1].as_ref().is_err_and(|e| e.kind() == io::ErrorKind::UnexpectedEof));
    }

    /// Runs written elsewhere are merged with the sort's own, across several passes, and
    /// are still there afterwards; the sort's own files are gone.
    #[test]
    fn adopted_runs_are_merged_and_left_in_place() {
        let elsewhere = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<[u8; 2]>::new(dir.path(), "t", 1024);
        let mut expected = Vec::new();
        // 100 adopted runs and 100 own runs: two passes at a fan-in of 64.
        for i in 0u16..100 {
            let mut adopted: Vec<[u8; 2]> = (0..5).map(|k| (i * 5 + k).wrapping_mul(40_503).to_be_bytes()).collect();
            let mut own: Vec<[u8; 2]> = (0..5).map(|k| (i * 5 + k + 777).wrapping_mul(40_503).to_be_bytes()).collect();
            expected.extend(adopted.iter().chain(&own).copied());
            let path = elsewhere.path().join(format!("run-{i}.bin"));
            write_run_to(&mut adopted, fs_err::File::create(&path).unwrap()).unwrap();
            sort.adopt_run(&path);
            sort.add_run(std::mem::take(&mut own)).unwrap();
        }
        expected.sort_unstable();
        let out: Vec<_> = sort.finish().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(out, expected);
        assert_eq!(fs_err::read_dir(elsewhere.path()).unwrap().count(), 100, "adopted runs stay");
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 0, "own runs go");
    }

    /// A run out of order (a damaged or forged file adopted from elsewhere) fails the merge
    /// instead of yielding records out of order.
    #[test]
    fn a_run_out_of_order_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.bin");
        fs_err::write(&path, [1, 2, 9, 9, 3, 4]).unwrap();
        let sort = ExternalSort::<[u8; 2]>::new(dir.path(), "t", 1024);
        sort.adopt_run(&path);
        sort.add_run(vec![[5, 5]]).unwrap();
        let out: Vec<_> = sort.finish().unwrap().collect();
        assert!(out[..3].iter().all(Result::is_ok), "{out:?}");
        assert!(out[3].as_ref().is_err_and(|e| e.kind() == io::ErrorKind::InvalidData), "{out:?}");
        assert_eq!(out.len(), 4);
    }

    /// Byte strings pushed through a sort of `budget` bytes, read back.
    fn byte_strings_through_disk(records: &[Vec<u8>], budget: usize) -> Vec<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<Vec<u8>>::new(dir.path(), "t", budget);
        let mut p = sort.pusher();
        for r in records {
            p.push(r.clone()).unwrap();
        }
        p.finish().unwrap();
        sort.finish().unwrap().collect::<Result<_, _>>().unwrap()
    }

    /// Byte strings of any length, the empty one included, sort as bytes: a string before
    /// every longer string it begins.
    #[test]
    fn byte_strings_sort_as_bytes() {
        let mut records: Vec<Vec<u8>> =
            vec![b"b".to_vec(), Vec::new(), b"ab".to_vec(), b"a".to_vec(), b"a\0".to_vec(), b"ab".to_vec()];
        let out = byte_strings_through_disk(&records, 10);
        records.sort();
        assert_eq!(out, records);
    }

    proptest! {
        /// Byte strings through disk, whatever the budget: the in-memory sort.
        #[test]
        fn byte_strings_equal_the_in_memory_sort(
            records in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..6), 0..400),
            budget in 1usize..300,
        ) {
            let out = byte_strings_through_disk(&records, budget);
            let mut expected = records;
            expected.sort();
            prop_assert_eq!(out, expected);
        }

        /// Whatever the budget and the cut into runs, the output is the in-memory sort.
        #[test]
        fn equals_the_in_memory_sort(
            records in proptest::collection::vec(any::<[u8; 3]>(), 0..2000),
            budget in 3usize..400,
            run_size in 1usize..300,
        ) {
            let mut expected = records.clone();
            expected.sort_unstable();
            prop_assert_eq!(sorted_through_disk(&records, budget, run_size), expected);
        }
    }
}
