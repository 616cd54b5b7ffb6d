//! Stage kinds built into the executor: they need nothing but the store.

mod external;
mod source;

use std::sync::Arc;

pub use external::{ExternalConfig, ExternalStage};
pub use source::{SourcePathError, SourceStage, confine_source};

use crate::stage::Registry;

impl Registry {
    /// Returns a registry with the kinds built into the executor (`source`, `external`).
    pub fn with_builtins() -> Self {
        let mut r = Self::new();
        r.register(Arc::new(SourceStage));
        r.register(Arc::new(ExternalStage));
        r
    }
}
