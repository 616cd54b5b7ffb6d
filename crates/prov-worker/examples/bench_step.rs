//! Benchmark: the time of one training step of the main job's model in tch, and the provenance
//! work a checkpoint adds to training.
//!
//! The model is the [main job](../../../book/src/main-job.md)'s `pretrain` default shape
//! (hidden 256, MLP 1024, 4 layers, 4 query and 2 key-value heads, vocabulary 4096, RoPE base
//! 5e5, initialisation 0.008944), batch 8 of 128 tokens, with the Goldfish loss (k = 50,
//! h = 50), gradient clipping at 0.1 and `AdEMAMix` under the WSD schedule: exactly what
//! `Trainer::train_step` does in the stage. The samples are synthetic (`SplitMix64` ids, the
//! same ones `scripts/bench_train_hf.py` draws), so no store or tokenizer is needed.
//!
//! 1. **Steps.** `--warmup` untimed steps, then `--steps` timed ones, each timed alone.
//! 2. **Checkpoints.** `--checkpoints` times, one more (untimed) step, then the work the
//!    `pretrain` stage does for a checkpoint, timed in phases, into a temporary store: the
//!    weights and optimizer state copied out of libtorch, both encoded as safetensors, the
//!    BLAKE3 of every weight tensor, both files written to the store (hashed while written,
//!    fsync, rename, index), the RNG, log and checkpoint record objects and the progress file.
//!    The BLAKE3 of the two files alone is also timed, for information (the store write
//!    includes it).
//!
//! With `--phases` it instead times the parts of a step (batch and Goldfish mask, forward,
//! loss, backward, clipping, optimizer), on a copy of `train_step`'s body built from the
//! crate's public parts (`Decoder`, `AdEMAMix`, `goldfish`), for finding where the time goes;
//! `scripts/bench_train_hf.py --phases` times the same parts in transformers.
//!
//! Prints one JSON object on stdout; `scripts/bench-train` runs it beside the transformers
//! side and prints the table.
//!
//! ```sh
//! ATEN_CPU_CAPABILITY=avx2 cargo run --release --locked -p prov-train --example bench_step -- --threads 1
//! ```
//!
//! Options: `--threads T` (libtorch intra-op threads, default 1), `--warmup W` (default 3),
//! `--steps N` (default 20), `--checkpoints K` (default 3), `--seed S` (default 1),
//! `--store-dir DIR` (where the temporary store goes, default the system's temporary
//! directory), `--phases` (see above), `--no-deterministic` (`ATen`'s deterministic-algorithms mode off; `prov` always
//! runs with it on), `--glibc-malloc-defaults` (leave glibc's `malloc` returning freed memory
//! to the kernel; `prov` tells it to keep it, see `prov_torch::keep_freed_memory`). Without
//! `ATEN_CPU_CAPABILITY` in the environment it pins `avx2`, as `prov` does.

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use prov_dataset::tokens::SplitMix64;
use prov_manifest::{CheckpointRecord, Finite, Record, SCHEMA_VERSION, encode_value, put_record};
use prov_store::{Digest, ObjectKind, Store};
use prov_torch::NamedTensors;
use prov_train::goldfish;
use prov_train::loop_config::{IGNORE_INDEX, LoopConfig, ScheduleKind};
use prov_train::model_config::{ModelConfig, hf_config};
use prov_train::optimizer::AdEMAMixConfig;
use prov_train::schedule::Wsd;
use prov_worker::model::{Decoder, decays};
use prov_worker::trainer::{Samples, Trainer};
use serde_json::{Value, json};
use tch::nn::VarStore;
use tch::{Device, Kind, Reduction, Tensor};

/// The main job's model (`pretrain`'s defaults; vocabulary and sequence length from its data).
fn model_config() -> ModelConfig {
    prov_train::pretrain::model_config(&prov_train::pretrain::ModelParams::default(), 4096, SEQ_LEN)
}

const SEQ_LEN: i64 = 128;
const BATCH: u64 = 8;
/// The main job's steps; the schedule's phases depend on it.
const MAIN_JOB_STEPS: u64 = 300;

/// Sample `i` is `seq_len + 1` ids from `SplitMix64` seeded with `seed * 2^32 + i`, each
/// modulo the vocabulary.
struct Synthetic {
    seed: u64,
    vocab: u64,
}

impl Samples for Synthetic {
    type Error = String;
    fn sample(&self, index: u64) -> Result<Vec<u32>, String> {
        let mut rng = SplitMix64((self.seed << 32) + index);
        Ok((0..=SEQ_LEN).map(|_| (rng.next_u64() % self.vocab) as u32).collect())
    }
}

struct Args {
    threads: usize,
    warmup: u64,
    steps: u64,
    checkpoints: u64,
    seed: u64,
    store_dir: Option<PathBuf>,
    deterministic: bool,
    phases: bool,
    glibc_malloc_defaults: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        threads: 1,
        warmup: 3,
        steps: 20,
        checkpoints: 3,
        seed: 1,
        store_dir: None,
        deterministic: true,
        phases: false,
        glibc_malloc_defaults: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--no-deterministic" {
            a.deterministic = false;
            continue;
        }
        if flag == "--phases" {
            a.phases = true;
            continue;
        }
        if flag == "--glibc-malloc-defaults" {
            a.glibc_malloc_defaults = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag} {value}: {e}"));
        match flag.as_str() {
            "--threads" => a.threads = number()? as usize,
            "--warmup" => a.warmup = number()?,
            "--steps" => a.steps = number()?,
            "--checkpoints" => a.checkpoints = number()?,
            "--seed" => a.seed = number()?,
            "--store-dir" => a.store_dir = Some(PathBuf::from(&value)),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if a.threads == 0 || a.steps == 0 {
        return Err("--threads and --steps must be at least 1".into());
    }
    Ok(a)
}

/// Seconds spent in each phase of one checkpoint.
#[derive(Default)]
struct CheckpointTimes {
    copy_out: f64,
    encode: f64,
    tensor_digests: f64,
    store_files: f64,
    small_objects: f64,
    /// Not part of the total: the store's write hashes the files itself.
    file_digests_alone: f64,
    weights_bytes: usize,
    optimizer_bytes: usize,
}

impl CheckpointTimes {
    fn total(&self) -> f64 {
        self.copy_out + self.encode + self.tensor_digests + self.store_files + self.small_objects
    }
}

/// What stays fixed over a run's checkpoints.
struct Run<'a> {
    store: &'a Store,
    config: Digest,
    tokenizer: Digest,
    seed: u64,
    progress: PathBuf,
    written: Vec<Digest>,
}

/// The `pretrain` stage's checkpoint (`CheckpointWriter::record`, `put_record`, the progress
/// file), phase by phase.
fn checkpoint(run: &mut Run<'_>, trainer: &Trainer) -> CheckpointTimes {
    let store = run.store;
    let mut t = CheckpointTimes::default();
    let clock = Instant::now();
    let weights = trainer.weights();
    let optimizer = trainer.optimizer_state();
    t.copy_out = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let config_text = String::from_utf8(store.read(&run.config).unwrap()).unwrap();
    let weights_file = weights.to_safetensors(&config_text);
    let optimizer_file = optimizer.to_safetensors("{}");
    t.encode = clock.elapsed().as_secs_f64();
    t.weights_bytes = weights_file.len();
    t.optimizer_bytes = optimizer_file.len();

    let clock = Instant::now();
    let tensors: BTreeMap<String, Digest> = weights
        .0
        .iter()
        .map(|(name, (_, values))| (name.clone(), Digest::of(&NamedTensors::le_bytes(values))))
        .collect();
    t.tensor_digests = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let weights_digest = store.put_bytes(ObjectKind::Blob, &weights_file).unwrap();
    let optimizer_digest = store.put_bytes(ObjectKind::Blob, &optimizer_file).unwrap();
    t.store_files = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let rng = json!({ "init_seed": run.seed, "draws_after_init": 0 });
    let rng_digest = store.put_bytes(ObjectKind::Blob, &encode_value(&rng)).unwrap();
    let log_digest = store.put_bytes(ObjectKind::Blob, &trainer.log_bytes()).unwrap();
    let last = trainer.log().last().unwrap();
    let record = CheckpointRecord {
        schema: SCHEMA_VERSION,
        step: trainer.step(),
        config: run.config,
        weights: weights_digest,
        tensors,
        optimizer: optimizer_digest,
        rng: rng_digest,
        data_position: trainer.step() * BATCH,
        loss: Finite::new(last.loss),
        log: Some(log_digest),
        tokenizer: Some(run.tokenizer),
        palette: None,
    };
    run.written.push(put_record(store, &Record::Checkpoint(record)).unwrap());
    let progress_dir = run.progress.parent().unwrap();
    prov_store::write_atomically(progress_dir, &run.progress, &serde_json::to_vec(&run.written).unwrap()).unwrap();
    t.small_objects = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let both = (Digest::of(&weights_file), Digest::of(&optimizer_file));
    t.file_digests_alone = clock.elapsed().as_secs_f64();
    assert_eq!(both, (weights_digest, optimizer_digest));
    t
}

fn loop_config(total_steps: u64) -> LoopConfig {
    let steps = total_steps.max(MAIN_JOB_STEPS);
    let mut optimizer = AdEMAMixConfig::default();
    optimizer.resolve(steps).unwrap();
    LoopConfig {
        steps,
        batch_size: BATCH,
        lr: 3e-3,
        warmup_steps: steps / 10,
        cooldown_steps: steps / 5,
        schedule: ScheduleKind::Wsd,
        optimizer: prov_train::optimizer::OptimizerConfig::AdEMAMix(optimizer),
        clip: 0.1,
        goldfish_k: Some(50),
        goldfish_h: 50,
        phases: Vec::new(),
    }
}

/// The parts of a step, as `Trainer::train_step` does them, timed one by one (seconds per
/// step, median over the timed steps).
fn phases(args: &Args, model: &ModelConfig, config: &LoopConfig, data: &Synthetic) -> Value {
    goldfish::table();
    tch::manual_seed(args.seed.cast_signed());
    let vs = VarStore::new(Device::Cpu);
    let decoder = Decoder::new(&vs.root(), model);
    let mut params: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let with_decay = params.iter().map(|(n, t)| (n.clone(), t.shallow_clone(), decays(&t.size()))).collect();
    let mut optimizer =
        prov_worker::optimizer::Optimizer::new(&config.optimizer, config.lr, with_decay, model.hidden_size);
    let schedule = Wsd::new(config.lr, config.steps, config.warmup_steps, config.cooldown_steps);
    let names = ["batch_goldfish", "forward", "loss", "backward", "clip", "optimizer", "total"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for step in 1..=args.warmup + args.steps {
        let mut t = [0.0; 7];
        let mut clock = Instant::now();
        let mut lap = |slot: &mut f64| {
            *slot = clock.elapsed().as_secs_f64();
            clock = Instant::now();
        };
        let mut inputs = Vec::new();
        let mut labels = Vec::new();
        for i in 0..BATCH {
            let row: Vec<i64> = data.sample((step - 1) * BATCH + i).unwrap().into_iter().map(i64::from).collect();
            inputs.extend_from_slice(&row[..row.len() - 1]);
            let mut target = row[1..].to_vec();
            let mask = goldfish::drop_mask(&target, config.goldfish_k.unwrap(), config.goldfish_h);
            for (l, drop) in target.iter_mut().zip(mask) {
                if drop {
                    *l = IGNORE_INDEX;
                }
            }
            labels.extend(target);
        }
        let inputs = Tensor::from_slice(&inputs).view([-1, SEQ_LEN]);
        let labels = Tensor::from_slice(&labels).view([-1]);
        lap(&mut t[0]);
        optimizer.zero_grad();
        let logits = decoder.forward(&inputs);
        lap(&mut t[1]);
        let vocab = logits.size()[2];
        let loss = logits.view([-1, vocab]).to_kind(Kind::Float).cross_entropy_loss::<Tensor>(
            &labels,
            None,
            Reduction::Mean,
            IGNORE_INDEX,
            0.0,
        );
        lap(&mut t[2]);
        loss.backward();
        lap(&mut t[3]);
        optimizer.clip_grad_norm(config.clip);
        lap(&mut t[4]);
        optimizer.step(schedule.lr(step)).expect("gradients have their parameters' shapes");
        let _ = loss.double_value(&[]);
        lap(&mut t[5]);
        t[6] = t[..6].iter().sum();
        if step > args.warmup {
            for (v, x) in times.iter_mut().zip(t) {
                v.push(x);
            }
        }
    }
    Value::Object(names.iter().zip(&times).map(|(n, v)| ((*n).to_owned(), json!(median(v)))).collect())
}

/// Seconds this process's threads have been runnable but waiting for a CPU (the second field
/// of each `/proc/self/task/*/schedstat`): how much other load took from the benchmark.
fn runqueue_wait() -> f64 {
    let Ok(tasks) = fs_err::read_dir("/proc/self/task") else { return f64::NAN };
    let mut ns = 0u64;
    for task in tasks.flatten() {
        if let Ok(text) = fs_err::read_to_string(task.path().join("schedstat")) {
            ns += text.split_whitespace().nth(1).and_then(|w| w.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

/// Sets libtorch up as `prov` does (unless told otherwise) and returns the `ATen` capability.
/// Call it first in `main`, before any thread exists and before libtorch runs.
fn set_up_libtorch(args: &Args) -> String {
    if std::env::var_os(prov_exec::aten::ATEN_CPU_CAPABILITY).is_none() {
        // SAFETY: called first thing in `main`, before any thread exists and before libtorch runs.
        #[allow(unsafe_code)]
        unsafe {
            prov_exec::aten::pin_capability(prov_exec::aten::PORTABLE_CAPABILITY);
        }
    }
    if !args.glibc_malloc_defaults {
        assert!(prov_torch::keep_freed_memory(), "glibc refused the malloc settings");
    }
    prov_torch::set_deterministic_algorithms(args.deterministic);
    prov_torch::pin_threads(args.threads);
    std::env::var(prov_exec::aten::ATEN_CPU_CAPABILITY).unwrap_or_default()
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_step: {e}");
            std::process::exit(2);
        }
    };
    let capability = set_up_libtorch(&args);

    let model = model_config();
    let total = args.warmup + args.steps + args.checkpoints;
    let config = loop_config(total);
    let data = Synthetic { seed: args.seed, vocab: model.vocab_size as u64 };
    let order: Vec<u64> = (0..config.steps * BATCH).collect();
    if args.phases {
        let out = json!({
            "side": "tch",
            "threads": args.threads,
            "capability": capability,
            "deterministic": args.deterministic,
            "keep_freed_memory": !args.glibc_malloc_defaults,
            "phases": phases(&args, &model, &config, &data),
        });
        println!("{out}");
        return;
    }

    let start = Instant::now();
    let mut trainer = Trainer::new(&model, &config, args.seed);
    let init_seconds = start.elapsed().as_secs_f64();

    for _ in 0..args.warmup {
        trainer.train_step(&data, &order).unwrap();
    }
    let mut step_seconds = Vec::with_capacity(args.steps as usize);
    let wait_before = runqueue_wait();
    for _ in 0..args.steps {
        let clock = Instant::now();
        trainer.train_step(&data, &order).unwrap();
        step_seconds.push(clock.elapsed().as_secs_f64());
    }
    let runqueue_wait_seconds = runqueue_wait() - wait_before;

    let parent = args.store_dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("prov-bench-train.").tempdir_in(&parent).unwrap();
    let store = Store::init(&tmp.path().join(".prov")).unwrap();
    // Written once per run by the stage, before training: not a checkpoint's cost.
    let special = BTreeMap::from([("bos", 0), ("eos", 1), ("pad", 2)]);
    let config_digest = store.put_bytes(ObjectKind::Blob, &encode_value(&hf_config(&model, &special))).unwrap();
    let tokenizer = store.put_bytes(ObjectKind::Blob, b"{\"stand-in\": \"tokenizer.json\"}").unwrap();
    let mut run = Run {
        store: &store,
        config: config_digest,
        tokenizer,
        seed: args.seed,
        progress: store.root().join("progress").join("pretrain-bench.json"),
        written: Vec::new(),
    };
    let mut checkpoints = Vec::new();
    for _ in 0..args.checkpoints {
        trainer.train_step(&data, &order).unwrap();
        checkpoints.push(checkpoint(&mut run, &trainer));
    }
    drop(store);

    let log = trainer.log();
    let phase = |f: fn(&CheckpointTimes) -> f64| checkpoints.iter().map(f).collect::<Vec<f64>>();
    let parameters: usize = trainer.weights().0.values().map(|(_, v)| v.len()).sum();
    let out = json!({
        "side": "tch",
        "libtorch": prov_torch::LIBTORCH_VERSION,
        "threads": args.threads,
        "capability": capability,
        "deterministic": args.deterministic,
        "batch": BATCH,
        "seq_len": SEQ_LEN,
        "parameters": parameters,
        "optimizer": "AdEMAMix (prov-train)",
        "init_seconds": init_seconds,
        "warmup": args.warmup,
        "step_seconds": step_seconds,
        "step_median": median(&step_seconds),
        "runqueue_wait_seconds": runqueue_wait_seconds,
        "first_loss": log.first().map(|l| l.loss),
        "last_loss": log.last().map(|l| l.loss),
        "goldfish_dropped_fraction": trainer.dropped_fraction(),
        "checkpoint": {
            "total": phase(CheckpointTimes::total),
            "copy_out": phase(|t| t.copy_out),
            "encode": phase(|t| t.encode),
            "tensor_digests": phase(|t| t.tensor_digests),
            "store_files": phase(|t| t.store_files),
            "small_objects": phase(|t| t.small_objects),
            "file_digests_alone": phase(|t| t.file_digests_alone),
            "weights_bytes": checkpoints.first().map(|t| t.weights_bytes),
            "optimizer_bytes": checkpoints.first().map(|t| t.optimizer_bytes),
        },
    });
    println!("{}", Value::to_string(&out));
}
