//! `prov verify-attestation`: check a signed statement, and what it says of a run.

use std::path::PathBuf;

use prov_attest::{Envelope, PublicKey, attach, check_about_run, read_provenance, verify_statement};
use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::load_lockfile;
use crate::ui::Ui;

/// Check an attestation's signature and statement, and with `--run` that it is about a run
///
/// Reads a DSSE envelope (`prov attest` and `prov replay --attest` write them; so do the
/// in-toto tools) and checks, in this order: that a signature verifies with one of the keys
/// given (the key ids the envelope states are not trusted), that the signed payload is an
/// in-toto Statement v1, and, for Provenant's run and replay statements, that the SLSA
/// Provenance predicate reads. With `--run`, that the statement is about that recorded run:
/// it names the run's lockfile and run record, and its subjects are exactly the run's outputs,
/// with both digests recomputed from the store. `--add` then keeps it beside the run, so that
/// `prov show` lists it and `prov audit` counts a signed replay.
///
/// A model signature (a Sigstore bundle in the `OpenSSF` model signing format, as `prov
/// export --sign` and `model_signing sign key` write) is checked the same way, and with
/// `--model DIR` against the folder: every file but the ignored ones must be signed, with its
/// digest.
///
/// Exits 0 when everything holds, 2 when a signature does not verify or the statement is about
/// other outputs, 1 when the file is not an attestation.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyAttestationArgs {
    /// The attestation: a DSSE envelope (JSON)
    file: PathBuf,
    /// A public key it may be signed with (PEM or OpenSSH `.pub`); repeat for several
    #[arg(long, value_name = "PUB", required = true)]
    key: Vec<PathBuf>,
    /// The recorded run it must be about (run id or lockfile path)
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// Keep the attestation in the store beside the run once it verifies
    #[arg(long, requires = "run")]
    add: bool,
    /// The model folder a model signature must be the signature of
    #[arg(long, value_name = "DIR", conflicts_with = "run")]
    model: Option<PathBuf>,
}

pub(crate) fn cmd_verify_attestation(
    ui: &mut Ui,
    cx: &CommandContext,
    args: &VerifyAttestationArgs,
) -> Result<(), CommandError> {
    let mut keys: Vec<PublicKey> = Vec::new();
    for k in &args.key {
        let key = PublicKey::read(&cx.cwd.join(k)).map_err(CommandError::from)?;
        // The same key given twice (as PEM and as an OpenSSH line) is one key.
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let bytes = prov_store::read_named_file(&cx.cwd.join(&args.file), 64 << 20, "the attestation")
        .map_err(|e| CommandError::input(format!("reading the attestation: {e}")))?;
    let shown = args.file.display().to_string();
    if prov_attest::is_sigstore_bundle(&bytes) {
        if args.run.is_some() {
            return Err(CommandError::input(format!(
                "{shown}: a model signature (a Sigstore bundle) is about a model folder, not a run"
            ))
            .with_hint("check it against the folder with `--model DIR`"));
        }
        return verify_model(ui, cx, args, &bytes, &keys);
    }
    if args.model.is_some() {
        return Err(CommandError::input(format!("{shown}: not a model signature (a Sigstore bundle)"))
            .with_hint("`--model` checks what `prov export --sign` or `model_signing sign` wrote"));
    }
    let envelope = Envelope::parse(&bytes).map_err(|e| CommandError::from(e).prefixed(&shown))?;
    let (statement, signers) =
        verify_statement(&envelope, &keys).map_err(|e| CommandError::from(e).prefixed(&shown))?;
    // Another predicate or build type is reported as such; a SLSA predicate that does not read,
    // or one of Provenant's build types without its parameters, is refused.
    let provenance = match read_provenance(&statement) {
        Ok(p) => Some(p),
        Err(prov_attest::ProvenanceError::Unrecognised(_)) => None,
        Err(e) => return Err(CommandError::from(e).prefixed(&shown)),
    };
    let mut about_run = None;
    if let Some(run_arg) = &args.run {
        let access = if args.add { Access::Shared } else { Access::ReadOnly };
        let (store, _) = cx.open_store(access, true)?;
        let loaded = load_lockfile(&store, run_arg)?;
        let run_id = prov_manifest::run_id(&loaded.bytes);
        let Some(run) = prov_exec::load_recorded_run(&store, &run_id)? else {
            return Err(CommandError::input(format!("no completed run of `{}` in this store", loaded.display)));
        };
        let read = check_about_run(&store, &statement, &run).map_err(|e| CommandError::from(e).prefixed(&shown))?;
        let record = if args.add { Some(attach(&store, &bytes, &envelope, run.manifest, read.role)?) } else { None };
        about_run = Some((run.manifest, read.role, record));
    }
    // The keys that signed: every signer is one of the keys given.
    let signed_by: Vec<(&String, &PublicKey)> =
        signers.iter().filter_map(|id| keys.iter().find(|k| &k.keyid() == id).map(|k| (id, k))).collect();
    ui.json(
        "attestation",
        json!({
            "file": shown,
            "verified": true,
            "signers": signed_by.iter().map(|(id, key)| {
                json!({"keyid": id, "algorithm": key.algorithm().name(), "openssh_fingerprint": key.openssh_fingerprint()})
            }).collect::<Vec<_>>(),
            "predicate_type": statement.predicate_type,
            "role": provenance.as_ref().map(|p| p.role.as_str()),
            "subjects": statement.subject.len(),
            "run_manifest": about_run.as_ref().map(|(m, _, _)| m.to_string()),
            "record": about_run.as_ref().and_then(|(_, _, r)| r.map(|r| r.to_string())),
        }),
    )?;
    let by: Vec<String> = signed_by
        .iter()
        .map(|(id, key)| format!("{} key {id} ({})", key.algorithm().name(), key.openssh_fingerprint()))
        .collect();
    ui.line(format!("attestation {shown}: signature valid, signed by {}", by.join(" and ")))?;
    let said = match &provenance {
        Some(p) => format!(
            "  statement  SLSA Provenance v1 of a {} of lockfile {}, {} subjects",
            p.role.as_str(),
            p.lockfile,
            statement.subject.len()
        ),
        None => format!("  statement  `{}`, {} subjects", statement.predicate_type, statement.subject.len()),
    };
    ui.line(said)?;
    if let Some((manifest, role, record)) = &about_run {
        ui.line(format!(
            "  about run  {manifest}: its subjects are the run's outputs ({} attestation)",
            role.as_str()
        ))?;
        if let Some(r) = record {
            ui.line(format!("  kept as attestation {r}"))?;
        }
    }
    Ok(())
}

fn verify_model(
    ui: &mut Ui,
    cx: &CommandContext,
    args: &VerifyAttestationArgs,
    bytes: &[u8],
    keys: &[PublicKey],
) -> Result<(), CommandError> {
    let shown = args.file.display().to_string();
    let dir = args.model.as_ref().map(|d| cx.cwd.join(d));
    let verified = prov_attest::verify_model_signature(bytes, keys, dir.as_deref())
        .map_err(|e| CommandError::from(prov_attest::AttestError::from(e)).prefixed(&shown))?;
    ui.json(
        "model_signature",
        json!({
            "file": shown,
            "verified": true,
            "signers": verified.signers,
            "model": verified.model,
            "files": verified.files.iter().map(|f| json!({"name": f.name, "digest": f.digest})).collect::<Vec<_>>(),
            "folder": args.model.as_ref().map(|d| d.display().to_string()),
        }),
    )?;
    ui.line(format!("model signature {shown}: signature valid, signed by {}", verified.signers.join(" and ")))?;
    ui.line(format!("  model      `{}`, {} files", verified.model, verified.files.len()))?;
    if let Some(d) = &args.model {
        ui.line(format!("  folder     {}: every file signed, with its digest", d.display()))?;
    }
    Ok(())
}
