//! Stage kinds built into the executor: they need nothing but the store.

mod external;
mod source;

pub use external::{ExternalConfig, ExternalStage};
pub use source::{SourcePathError, SourceStage, confine_source};
