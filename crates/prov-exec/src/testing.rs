//! What tests of stage kinds share: a [`StageContext`] over a store, without a run.

use std::collections::BTreeMap;
use std::path::Path;

use prov_manifest::Envelope;
use prov_store::{Digest, Store};
use serde_json::Value;

use crate::stage::{StageContext, StageInput};

/// The parts of a [`StageContext`] that a test does not choose: a thread pool, this machine's
/// envelope, no seeds.
pub struct TestBench {
    pool: rayon::ThreadPool,
    envelope: Envelope,
    seeds: BTreeMap<String, u64>,
}

impl TestBench {
    /// A bench with `threads` threads.
    ///
    /// # Panics
    ///
    /// When the thread pool cannot be built.
    pub fn new(threads: usize) -> Self {
        Self {
            pool: rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool"),
            envelope: crate::capture_envelope(
                u32::try_from(threads).unwrap_or(u32::MAX),
                &crate::TorchFacts::default(),
            ),
            seeds: BTreeMap::new(),
        }
    }

    /// The context of stage `name` with `config` and `inputs`, over `store`, whose project
    /// root is `root`.
    pub fn context<'a>(
        &'a self,
        store: &'a Store,
        root: &'a Path,
        name: &'a str,
        config: &'a Value,
        inputs: &'a BTreeMap<String, StageInput>,
    ) -> StageContext<'a> {
        StageContext {
            store,
            name,
            key: Digest::of(name.as_bytes()),
            config,
            inputs,
            seeds: &self.seeds,
            project_root: root,
            pool: &self.pool,
            allow_commands: false,
            worker: Path::new("prov-worker"),
            envelope: &self.envelope,
            work: store.root().join("tmp").join(format!("work-{name}")),
            prepared: crate::Prepared::default(),
        }
    }
}
