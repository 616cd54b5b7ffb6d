//! One file per subcommand; this module holds the `Command` enum and the one dispatch.

mod attest;
mod audit;
mod card;
mod diff;
mod doctor;
mod explain;
mod gc;
mod init;
mod license;
mod lineage;
mod lock;
mod log;
mod model;
mod prove;
mod replay;
mod run;
mod serve;
mod show;
mod status;
mod task;
mod verify;
mod verify_attestation;
mod verify_proof;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    Init(init::InitArgs),
    Doctor(doctor::DoctorArgs),
    Lock(lock::LockArgs),
    Run(run::RunArgs),
    Replay(replay::ReplayArgs),
    Verify(verify::VerifyArgs),
    Status(status::StatusArgs),
    Log(log::LogArgs),
    Show(show::ShowArgs),
    Diff(diff::DiffArgs),
    Lineage(lineage::LineageArgs),
    Explain(explain::ExplainArgs),
    Eval(model::EvalArgs),
    Sample(model::SampleArgs),
    Export(model::ExportArgs),
    Audit(audit::AuditArgs),
    Prove(prove::ProveArgs),
    Card(card::CardArgs),
    License(license::LicenseArgs),
    VerifyProof(verify_proof::VerifyProofArgs),
    Attest(attest::AttestArgs),
    VerifyAttestation(verify_attestation::VerifyAttestationArgs),
    Gc(gc::GcArgs),
    Serve(serve::ServeArgs),
    #[command(hide = true)]
    Task(task::TaskArgs),
}

pub(crate) fn dispatch(ui: &mut Ui, cx: &CommandContext, command: &Command) -> Result<(), CommandError> {
    match command {
        Command::Init(a) => init::cmd_init(ui, cx, a),
        Command::Doctor(a) => doctor::cmd_doctor(ui, cx, a),
        Command::Lock(a) => lock::cmd_lock(ui, cx, a),
        Command::Run(a) => run::cmd_run(ui, cx, a),
        Command::Replay(a) => replay::cmd_replay(ui, cx, a),
        Command::Verify(a) => verify::cmd_verify(ui, cx, a),
        Command::Status(a) => status::cmd_status(ui, cx, a),
        Command::Log(a) => log::cmd_log(ui, cx, a),
        Command::Show(a) => show::cmd_show(ui, cx, a),
        Command::Diff(a) => diff::cmd_diff(ui, cx, a),
        Command::Lineage(a) => lineage::cmd_lineage(ui, cx, a),
        Command::Explain(a) => explain::cmd_explain(ui, cx, a),
        Command::Eval(a) => model::cmd_eval(ui, cx, a),
        Command::Sample(a) => model::cmd_sample(ui, cx, a),
        Command::Export(a) => model::cmd_export(ui, cx, a),
        Command::Audit(a) => audit::cmd_audit(ui, cx, a),
        Command::Prove(a) => prove::cmd_prove(ui, cx, a),
        Command::Card(a) => card::cmd_card(ui, cx, a),
        Command::License(a) => license::cmd_license(ui, cx, a),
        Command::VerifyProof(a) => verify_proof::cmd_verify_proof(ui, cx, a),
        Command::Attest(a) => attest::cmd_attest(ui, cx, a),
        Command::VerifyAttestation(a) => verify_attestation::cmd_verify_attestation(ui, cx, a),
        Command::Gc(a) => gc::cmd_gc(ui, cx, a),
        Command::Serve(a) => serve::cmd_serve(ui, cx, a),
        Command::Task(a) => task::cmd_task(ui, cx, a),
    }
}
