//! What crosses a process boundary back into the coordinating process: objects another
//! process wrote without the index (a worker, a task on a cluster node), checked and taken
//! in; and the message of a panic caught at a stage boundary.

use prov_manifest::{StoredError, closure, get_record};
use prov_store::{Digest, ObjectKind, Store, StoreError};

/// The message a panic carried (`panic!("…")` gives a `&str` or a `String`).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Verifies every object reachable from `roots` and takes those the index does not know into
/// it, with their kinds and references ([`Store::adopt`]): for objects another process wrote
/// without the index (a task on a cluster node, the worker). Returns the first failure.
pub fn adopt_closure(store: &Store, pool: &rayon::ThreadPool, roots: &[Digest]) -> Result<(), StoredError> {
    let (reachable, problems) = closure(store, roots);
    if let Some((_, e)) = problems.into_iter().next() {
        return Err(e);
    }
    let mut objects = Vec::with_capacity(reachable.len());
    let mut references = Vec::new();
    for d in reachable {
        let head = object_head(store, &d)?;
        // A record is what parses as one (a JSON Lines log also begins with `{"`); reading it
        // verifies its bytes, so the references recorded are those of the digest.
        let record = if head.starts_with(b"{\"") { get_record(store, &d).ok() } else { None };
        let kind = if let Some(record) = record {
            references.push((d, record.references()));
            ObjectKind::Manifest
        } else if head.starts_with(b"PAR1") {
            ObjectKind::Shard
        } else {
            ObjectKind::Blob
        };
        objects.push((d, kind));
    }
    store.adopt(&objects, pool)?;
    for (d, children) in references {
        store.index().add_refs(&d, &children)?;
    }
    Ok(())
}

/// The first four bytes of an object.
fn object_head(store: &Store, digest: &Digest) -> Result<[u8; 4], StoreError> {
    use std::io::Read as _;
    let mut head = [0u8; 4];
    let mut file = match fs_err::File::open(store.object_path(digest)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StoreError::NotFound(*digest)),
        Err(e) => return Err(e.into()),
    };
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(head)
}
