//! `prov attest`: sign what a recorded run produced.

use std::path::PathBuf;

use prov_attest::{KeyAlgorithm, SigningKey, attach, run_statement, sign_statement};
use prov_manifest::AttestationRole;
use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::load_lockfile;
use crate::ui::Ui;

/// Sign a statement of what a recorded run produced (in-toto, SLSA Provenance, DSSE)
///
/// Writes an in-toto Statement v1 whose subjects are the run's outputs (`STAGE/OUTPUT`, with
/// their BLAKE3 and SHA-256) and whose predicate is SLSA Provenance v1: the lockfile and the
/// sources it pins as the build's definition, Provenant's version, the run record and the
/// envelopes as its run details. The statement is signed in a DSSE envelope (Ed25519 or ECDSA
/// P-256), kept in the store beside the run (`prov show RUN` lists it) and, with `--out`,
/// written to a file. `prov verify-attestation` checks it, and so do the in-toto tools
/// (`securesystemslib`, `in-toto-attestation`). The same run signed with the same key gives
/// the same bytes. The book's "Attestations" chapter describes the formats.
///
/// `--generate-key FILE` makes a key pair instead: FILE (PKCS#8 PEM, readable by its owner
/// only) and FILE.pub (PEM); it never overwrites a file.
#[derive(Debug, clap::Args)]
pub(crate) struct AttestArgs {
    /// Run id (full or a prefix of at least 6 hex digits) or lockfile path
    #[arg(required_unless_present = "generate_key")]
    run: Option<String>,
    /// The private key to sign with: PKCS#8 or SEC1 PEM, or OpenSSH; Ed25519 or ECDSA P-256
    #[arg(long, value_name = "FILE", required_unless_present = "generate_key")]
    key: Option<PathBuf>,
    /// Also write the signed envelope (JSON) to FILE
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Make a new key pair, FILE and FILE.pub, and sign nothing
    #[arg(long, value_name = "FILE", conflicts_with_all = ["run", "key", "out"])]
    generate_key: Option<PathBuf>,
    /// The algorithm of `--generate-key`: ed25519 or ecdsa-p256 (which model signing needs)
    #[arg(long, value_name = "ALG", default_value = "ed25519", requires = "generate_key")]
    key_type: KeyAlgorithm,
}

pub(crate) fn cmd_attest(ui: &mut Ui, cx: &CommandContext, args: &AttestArgs) -> Result<(), CommandError> {
    if let Some(path) = &args.generate_key {
        return generate(ui, cx, path, args.key_type);
    }
    let (Some(run_arg), Some(key_path)) = (&args.run, &args.key) else {
        unreachable!("clap requires RUN and --key without --generate-key")
    };
    let key = SigningKey::read(&cx.cwd.join(key_path)).map_err(CommandError::from)?;
    let (store, _) = cx.open_store(Access::Shared, true)?;
    let loaded = load_lockfile(&store, run_arg)?;
    let run_id = prov_manifest::run_id(&loaded.bytes);
    let Some(run) = prov_exec::load_recorded_run(&store, &run_id)? else {
        return Err(CommandError::input(format!("no completed run of `{}` in this store", loaded.display))
            .with_hint("run it with `prov run` first; an attestation states what a recorded run produced"));
    };
    let statement = run_statement(&store, &run).map_err(CommandError::from)?;
    let envelope = sign_statement(&statement, &key);
    let bytes = envelope.to_json();
    let record = attach(&store, &bytes, &envelope, run.manifest, AttestationRole::Run)?;
    let public = key.public();
    ui.json(
        "attestation",
        json!({
            "record": record.to_string(),
            "run_manifest": run.manifest.to_string(),
            "role": "run",
            "keyid": public.keyid(),
            "algorithm": public.algorithm().name(),
            "subjects": statement.subject.len(),
            "file": args.out.as_ref().map(|o| o.display().to_string()),
        }),
    )?;
    if let Some(out) = &args.out {
        cx.write_output(out, &bytes, "attestation")?;
    }
    ui.line(format!(
        "attested run {} ({}): {} outputs, signed by {} key {}",
        run.manifest,
        run.record.recipe,
        statement.subject.len(),
        public.algorithm().name(),
        public.keyid()
    ))?;
    ui.line(format!("  kept as attestation {record}"))?;
    if let Some(out) = &args.out {
        ui.line(format!("  wrote {}", out.display()))?;
    }
    Ok(())
}

fn generate(
    ui: &mut Ui,
    cx: &CommandContext,
    path: &std::path::Path,
    algorithm: KeyAlgorithm,
) -> Result<(), CommandError> {
    let key = SigningKey::generate(algorithm);
    let public_path = key.write_pair(&cx.cwd.join(path)).map_err(CommandError::from)?;
    let public = key.public();
    ui.json(
        "key",
        json!({
            "private": path.display().to_string(),
            "public": public_path.display().to_string(),
            "algorithm": algorithm.name(),
            "keyid": public.keyid(),
            "openssh_fingerprint": public.openssh_fingerprint(),
        }),
    )?;
    ui.line(format!("new {} key {}", algorithm.name(), public.keyid()))?;
    ui.line(format!("  private  {} (keep it secret: it signs as you)", path.display()))?;
    ui.line(format!("  public   {} (give it to whoever verifies)", public_path.display()))?;
    ui.line(format!("  openssh  {}", public.openssh_fingerprint()))?;
    Ok(())
}
