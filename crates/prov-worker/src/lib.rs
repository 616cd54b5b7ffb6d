//! The worker: everything Provenant computes with libtorch, and the process that computes it.
//! `prov` never links libtorch (its start-up would cost every command half a second); it
//! starts `prov-worker` for the stages whose kinds say they run here and for `prov eval`,
//! `prov sample` and `prov export`, and a cluster node runs the same executable.
//!
//! What runs here: the Apertus-style decoder ([`model`]), its training loop ([`trainer`]) with
//! its optimizer ([`optimizer`]: `AdEMAMix`, [`ademamix`], or AFM's RMSProp with momentum, [`rmsprop`]) and the preference losses ([`preference_loss`]), checkpoints
//! loaded into a model for scoring, sampling and export and written from a trainer
//! ([`checkpoint`]), the runs of the training stages ([`pretrain`], [`sft`], [`lora`],
//! [`completions`], [`alignment`], [`evaluate`], AFM's [`reward_model`] and [`mdloo`], sharing
//! [`fine_tuning`]) and of the toxicity classifier's
//! training ([`toxicity`]). Their kinds (configuration, inputs, outputs, versions) are
//! `prov-train`'s and `prov-toxicity`'s, registered alike in `prov` and here.
//!
//! The protocol ([`main`]): `prov-worker VERB` reads one JSON request on standard input and
//! writes one JSON reply on standard output. Before anything computes, it pins what the
//! envelope records: the `ATen` CPU capability `prov` put in its environment, one inter-op
//! thread, the intra-op threads the stage or task names, and `ATen`'s deterministic algorithms.
//!
//! Every tensor that reaches hashed bytes goes through `prov_manifest::NamedTensors` (copied
//! out of libtorch by `prov_torch::TorchTensors`), in name order; every random draw comes from a generator seeded from the stage's seed.

pub mod ademamix;
pub mod alignment;
pub mod checkpoint;
pub mod completions;
pub mod evaluate;
pub mod fine_tuning;
pub mod lora;
pub mod mdloo;
pub mod model;
pub mod optimizer;
pub mod parameter_state;
pub mod preference_loss;
pub mod pretrain;
pub mod reward_model;
pub mod rmsprop;
pub mod sft;
pub mod tasks;
pub mod toxicity;
pub mod trainer;

use std::io::{Read as _, Write as _};
use std::sync::Arc;

use prov_exec::worker::{RemoteStageError, Reply, StageRequest, TorchClaim, serve_stage};
use prov_exec::{Registry, StageRun};

/// The computations this worker attaches to their kinds.
pub fn runs() -> Vec<Arc<dyn StageRun>> {
    use prov_train::alignment::Method;
    vec![
        Arc::new(pretrain::PretrainRun),
        Arc::new(sft::SftRun),
        Arc::new(lora::LoraRun),
        Arc::new(completions::SampleCompletionsRun),
        Arc::new(alignment::AlignRun(Method::Dpo)),
        Arc::new(alignment::AlignRun(Method::Qrpo)),
        Arc::new(evaluate::ChrfEvalRun),
        Arc::new(reward_model::RewardModelRun),
        Arc::new(reward_model::RewardModelScoreRun),
        Arc::new(mdloo::MdlooRun),
        Arc::new(reward_model::BestOfNRun),
        Arc::new(toxicity::ToxicityTrainRun),
    ]
}

/// The kinds this worker runs, with their computations attached.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    prov_train::register_libtorch_kinds(&mut registry);
    registry.register(Arc::new(prov_toxicity::ToxicityTrainStage));
    registry.attach_runs(runs());
    registry
}

/// Why this worker cannot compute under `envelope`: the loader mapped another libtorch than
/// it was built for, it links another libtorch than the envelope records, or `ATen` itself says it dispatches to other CPU kernels than the
/// recorded capability (asked of `ATen`, not read from the variable that asks for them).
fn check_torch(envelope: &prov_manifest::Envelope) -> Result<(), String> {
    let (root, loaded) = prov_torch::loaded_libtorch()?;
    if loaded != prov_torch::LIBTORCH_VERSION {
        return Err(format!(
            "the worker was built for libtorch {}, but the loader mapped libtorch {loaded} from {}",
            prov_torch::LIBTORCH_VERSION,
            root.display()
        ));
    }
    if envelope.libtorch.as_deref() != Some(prov_torch::LIBTORCH_VERSION) {
        return Err(format!(
            "the worker links libtorch {}, the envelope records {}",
            prov_torch::LIBTORCH_VERSION,
            envelope.libtorch.as_deref().unwrap_or("none")
        ));
    }
    let runs = prov_torch::cpu_capability();
    if envelope.aten_cpu_capability.as_deref() != Some(runs.as_str()) {
        return Err(format!(
            "the worker runs ATen capability {runs}, the envelope records {}",
            envelope.aten_cpu_capability.as_deref().unwrap_or("none")
        ));
    }
    check_device(envelope)?;
    // MKL and oneDNN read their variables when libtorch first computes, which is after this
    // check: what is in this process's environment is what they will use.
    for (name, recorded) in [
        (prov_exec::aten::MKL_CBWR, &envelope.mkl_cbwr),
        (prov_exec::aten::ONEDNN_MAX_CPU_ISA, &envelope.onednn_max_cpu_isa),
    ] {
        let here = std::env::var(name).ok().filter(|v| !v.is_empty());
        if here != *recorded {
            return Err(format!(
                "the worker runs with {name}={}, the envelope records {}",
                here.as_deref().unwrap_or("(unset)"),
                recorded.as_deref().unwrap_or("none")
            ));
        }
    }
    Ok(())
}

/// Chooses the device the envelope names for this worker's stage, and for a CUDA device
/// checks that the GPU, driver, libraries and deterministic settings here are the ones the
/// envelope records (read again in this process, which is the one that computes).
fn check_device(envelope: &prov_manifest::Envelope) -> Result<(), String> {
    let device: prov_exec::ComputeDevice =
        envelope.device.parse().map_err(|e| format!("the envelope's device: {e}"))?;
    match (device, &envelope.cuda) {
        (prov_exec::ComputeDevice::Cpu, None) => prov_torch::cuda::use_device(tch::Device::Cpu),
        (prov_exec::ComputeDevice::Cpu, Some(_)) => Err("the envelope records CUDA facts for a CPU stage".into()),
        (prov_exec::ComputeDevice::Cuda(_), None) => {
            Err(format!("the envelope records no CUDA facts for a stage on {device}"))
        }
        (prov_exec::ComputeDevice::Cuda(index), Some(recorded)) => {
            let here = prov_torch::cuda::facts(index)?;
            let (here, recorded) = (here.values(), recorded.values());
            if let Some(i) = (0..here.len()).find(|&i| here[i] != recorded[i]) {
                let field = prov_manifest::CudaEnvelope::FIELDS[i];
                return Err(format!(
                    "the worker runs with {field} = {}, the envelope records {}",
                    here[i], recorded[i]
                ));
            }
            let index = usize::try_from(index).map_err(|_| "a device index beyond this machine's".to_owned())?;
            prov_torch::cuda::use_device(tch::Device::Cuda(index))
        }
    }
}

/// Where the last panic happened (`file:line`), kept by the panic hook for the reply.
static PANIC_AT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

pub(crate) fn panic_place() -> Option<String> {
    PANIC_AT.lock().ok().and_then(|mut p| p.take())
}

/// Pins what every libtorch computation of this process must run under, before the first:
/// deterministic algorithms, and glibc keeping freed memory (training frees and re-allocates
/// the same sizes every step; returning them to the kernel costs about 5% of a step of the
/// main job's model, and changes no value, so glibc refusing is not an error).
fn pin_libtorch() {
    prov_torch::set_deterministic_algorithms(true);
    let _ = prov_torch::keep_freed_memory();
}

/// The worker's `main`: `prov-worker stage|eval|sample|export` with a JSON request on
/// standard input; or `prov-worker facts`, which prints the libtorch it links.
pub fn main() -> std::process::ExitCode {
    let verb = std::env::args().nth(1).unwrap_or_default();
    // A worker whose `prov` is killed stops too (and releases the store); one whose `prov` is
    // already gone does not start. Run by hand, without `prov`, it has no parent to follow.
    let parent = std::env::var(prov_exec::worker::PARENT_ENV).ok().and_then(|p| p.parse::<u32>().ok());
    if let Some(parent) = parent
        && !prov_torch::die_with_parent(parent)
    {
        return std::process::ExitCode::from(1);
    }
    let mut input = Vec::new();
    if verb != "facts" && std::io::stdin().read_to_end(&mut input).is_err() {
        return std::process::ExitCode::from(1);
    }
    // A panic is reported in the reply, with its place; Rust's own message would only repeat
    // it on standard error.
    std::panic::set_hook(Box::new(|info| {
        if let (Some(l), Ok(mut at)) = (info.location(), PANIC_AT.lock()) {
            *at = Some(format!("{}:{}", l.file(), l.line()));
        }
    }));
    pin_libtorch();
    let reply = match verb.as_str() {
        "facts" => to_line(&Reply::<_, ()>::Ok(TorchClaim {
            libtorch: Some(prov_torch::LIBTORCH_VERSION.to_owned()),
            aten_cpu_capability: Some(prov_torch::cpu_capability()),
        })),
        "stage" => match serde_json::from_slice::<StageRequest>(&input) {
            Ok(request) => {
                let mut reply = serve_stage(&registry(), &request, check_torch);
                if let (Reply::Err(RemoteStageError::Panic { message }), Some(at)) = (&mut reply, panic_place()) {
                    *message = format!("{message} (at {at})");
                }
                to_line(&reply)
            }
            Err(e) => bad_request(&e),
        },
        "cuda-facts" => match serde_json::from_slice::<u32>(&input) {
            Ok(index) => to_line(&match prov_torch::cuda::facts(index) {
                Ok(facts) => Reply::Ok(facts),
                Err(message) => Reply::Err(message),
            }),
            Err(e) => bad_request(&e),
        },
        "eval" => tasks::answer(&input, tasks::eval),
        "sample" => tasks::answer(&input, tasks::sample),
        "export" => tasks::answer(&input, tasks::export),
        other => {
            let message = format!(
                "prov-worker: unknown verb `{other}`; expected stage, eval, sample, export, facts or cuda-facts\n"
            );
            let _ = std::io::stderr().write_all(message.as_bytes());
            return std::process::ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(reply.as_bytes()).and_then(|()| out.flush()).is_err() {
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}

/// A reply as one JSON line.
fn to_line<T: serde::Serialize>(reply: &T) -> String {
    let mut line = serde_json::to_string(reply).expect("replies encode");
    line.push('\n');
    line
}

/// A request that does not parse: `prov` and the worker disagree on the protocol.
fn bad_request(e: &serde_json::Error) -> String {
    let failure = prov_train::checkpoint_tasks::TaskFailure::input(format!("the worker cannot read its request: {e}"));
    to_line(&Reply::<(), _>::Err(failure))
}

/// Overwrites `target` (under `no_grad`) with a stored tensor of the same shape; the error
/// names the tensor.
pub(crate) fn copy_stored(target: &mut tch::Tensor, name: &str, stored: &(Vec<usize>, Vec<f32>)) -> Result<(), String> {
    let (shape, values) = stored;
    let dims: Vec<i64> = shape.iter().map(|&d| i64::try_from(d).expect("a tensor dimension fits in i64")).collect();
    if dims != target.size() {
        return Err(format!("`{name}`: the stored shape {dims:?} is not the model's {:?}", target.size()));
    }
    target.copy_(&tch::Tensor::from_slice(values).view(dims.as_slice()).to_device(target.device()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use prov_train::goldfish;
    use tch::{Device, Kind, Tensor};

    /// The worker takes the device from the envelope and refuses envelopes whose device and
    /// CUDA facts disagree, either way round, before it chooses a device.
    #[test]
    fn device_and_cuda_facts_must_agree() {
        let cpu = prov_exec::capture_envelope(1, &prov_exec::TorchFacts::default());
        let facts = prov_manifest::CudaEnvelope {
            gpu_model: "NVIDIA H100 80GB HBM3".into(),
            driver: "580.65.06".into(),
            cuda_runtime: "13.0".into(),
            cudnn: "9.20.0".into(),
            cublas: "13.1.1".into(),
            deterministic: "on".into(),
        };
        let forged = prov_manifest::Envelope { cuda: Some(facts.clone()), ..cpu.clone() };
        assert!(super::check_device(&forged).unwrap_err().contains("CUDA facts for a CPU stage"));
        let bare = prov_manifest::Envelope { device: "cuda:0".into(), ..cpu.clone() };
        assert!(super::check_device(&bare).unwrap_err().contains("no CUDA facts"));
        let bad = prov_manifest::Envelope { device: "gpu".into(), ..cpu.clone() };
        assert!(super::check_device(&bad).unwrap_err().contains("`cpu` or `cuda:N`"));
        super::check_device(&cpu).unwrap();
        assert_eq!(prov_torch::device(), Device::Cpu);
    }

    /// `prov` draws the Goldfish table without libtorch (`prov_train::goldfish`); here it is
    /// compared with libtorch's own `torch.rand` after the same seed, every entry.
    #[test]
    fn the_goldfish_table_is_libtorch_rand() {
        tch::manual_seed(goldfish::TABLE_SEED);
        let t = Tensor::rand([goldfish::TABLE_SIZE], (Kind::Float, Device::Cpu));
        assert_eq!(prov_torch::f32_values(&t).as_slice(), goldfish::table());
    }

    /// The worker's kinds are exactly the kinds its runs compute, one run each; each is
    /// `prov-train`'s or `prov-toxicity`'s specification, which `prov` registers too
    /// (`tests/test_worker.rs` runs them through `prov`).
    #[test]
    fn every_kind_has_exactly_one_run() {
        let runs: Vec<&str> = super::runs().iter().map(|r| r.kind()).collect();
        let distinct: std::collections::BTreeSet<&str> = runs.iter().copied().collect();
        assert_eq!(distinct.len(), runs.len(), "two runs for one kind: {runs:?}");
        let kinds: std::collections::BTreeSet<&str> = super::registry().names().into_iter().collect();
        assert_eq!(kinds, distinct);
    }
}
