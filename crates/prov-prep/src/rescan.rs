//! The audit's re-checks that need this crate's stages ([`prov_audit::Rescan`]): the PII
//! matcher as a `pii` stage configured it, and the robots matcher as a `robots` stage did.
//! The audit's own independent checks (its PII scanner, its n-gram overlap check) live in
//! `prov-audit`; these are the second opinions and the re-derivations from pinned inputs.

use prov_audit::Rescan;
use prov_store::{Digest, Store};
use serde_json::Value;

use crate::pii::{Redactor, StrictOptions};

/// [`Rescan`] with this crate's stage implementations.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrepRescan;

impl Rescan for PrepRescan {
    fn pii_matcher(&self, config: &Value) -> Result<prov_audit::PiiMatcher, String> {
        let config: crate::PiiConfig =
            serde_json::from_value(config.clone()).map_err(|e| format!("not a `pii` config this build knows: {e}"))?;
        let redactor = Redactor::new(config.mode, StrictOptions { keep_private_ips: config.keep_private_ips });
        Ok(Box::new(move |text| redactor.redact(text).counts().total()))
    }

    fn robots_decider<'s>(
        &self,
        store: &'s Store,
        config: &Value,
        snapshot: &Digest,
    ) -> Result<prov_audit::RobotsDecider<'s>, String> {
        let decide = crate::robots_decider(store, config, snapshot).map_err(|e| e.to_string())?;
        Ok(Box::new(decide))
    }
}
