//! The audit's re-checks that use the stages' own code ([`Rescan`]): the PII matcher as a
//! `pii` stage configured it, and the robots matcher as a `robots` stage did. The audit's
//! independent checks (its PII scanner, its n-gram overlap check) are in [`crate::pii_scan`]
//! and [`crate::overlap`]; these are the second opinions and the re-derivations from pinned
//! inputs.

use prov_pii::{Redactor, StrictOptions};
use prov_store::{Digest, Store};
use serde_json::Value;

use crate::{PiiMatcher, Rescan, RobotsDecider};

/// [`Rescan`] with the stage implementations of `prov-robots` and `prov-pii`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageRescan;

impl Rescan for StageRescan {
    fn pii_matcher(&self, config: &Value) -> Result<PiiMatcher, String> {
        let config: prov_pii::PiiConfig =
            serde_json::from_value(config.clone()).map_err(|e| format!("not a `pii` config this build knows: {e}"))?;
        let redactor = Redactor::new(config.mode, StrictOptions { keep_private_ips: config.keep_private_ips });
        Ok(Box::new(move |text| redactor.redact(text).counts().total()))
    }

    fn robots_decider<'s>(
        &self,
        store: &'s Store,
        config: &Value,
        snapshot: &Digest,
    ) -> Result<RobotsDecider<'s>, String> {
        let decide = prov_robots::robots_decider(store, config, snapshot).map_err(|e| e.to_string())?;
        Ok(Box::new(decide))
    }
}
