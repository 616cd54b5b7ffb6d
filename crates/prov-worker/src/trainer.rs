//! The pretraining loop, apart from the store: batches from a data order, the Goldfish-masked
//! next-token loss, gradient clipping, the optimizer (`AdEMAMix` or AFM's RMSProp with momentum) under its schedule, the per-step log,
//! and the state a checkpoint holds. A run resumed from any checkpoint continues with
//! exactly the bytes of the uninterrupted run: after initialisation nothing is random (no
//! dropout), the data order is a pinned object, and the state restored is the whole state.

use prov_torch::{NamedTensors, TorchTensors as _};
use tch::nn::VarStore;
use tch::{Device, Kind, Reduction, Tensor};

use prov_train::goldfish;
use prov_train::loop_config::{IGNORE_INDEX, LoopConfig, ScheduleKind, StepLog, encode_log};
use prov_train::model_config::ModelConfig;
use prov_train::schedule::{Cosine, Linear, Phased, Schedule, Wsd};

use crate::model::{Decoder, decays};
use crate::optimizer::Optimizer;

/// The AFM report's distillation loss (§3.2.1): the cross-entropy of the student's logits
/// `[n, vocab]` (float32) against targets that put `1 - w` on each true label (`labels`,
/// `[n]`) and `w` on the teacher's top-1 prediction (the first largest of `teacher_logits`,
/// `[n, vocab]`), averaged over the `n` positions. Exactly these `PyTorch` operations (the
/// book's "The AFM recipe" lists them; `tests/python/distillation_reference.py` runs them):
/// `t = teacher.argmax(-1)`, `q = one_hot(labels).float() * (1 - w) + one_hot(t).float() *
/// w`, `cross_entropy(student, q)` with probability targets and mean reduction.
pub fn distillation_loss(student: &Tensor, labels: &Tensor, teacher: &Tensor, w: f64) -> Tensor {
    let vocab = student.size()[1];
    let top1 = teacher.argmax(-1, false);
    let target = labels.one_hot(vocab).to_kind(Kind::Float) * (1.0 - w) + top1.one_hot(vocab).to_kind(Kind::Float) * w;
    student.cross_entropy_loss::<Tensor>(&target, None, Reduction::Mean, IGNORE_INDEX, 0.0)
}

/// A source of training samples: each `seq_len + 1` token ids.
pub trait Samples {
    /// The error a read can give.
    type Error;
    /// The tokens of sample `index`.
    fn sample(&self, index: u64) -> Result<Vec<u32>, Self::Error>;
}

/// A variable store's variables, sorted by name (`VarStore::variables` is a hash map).
fn sorted_variables(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut params: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    params
}

/// Overwrites `params` (in name order) with `weights`, which must hold exactly their tensors.
/// Checks, before a model of `model_config` is allocated to hold `weights`, that the weights
/// can be that model's ([`ModelConfig::check_fits`]).
fn fits(model_config: &ModelConfig, weights: &NamedTensors) -> Result<(), String> {
    model_config.check_fits(weights.0.values().map(|(_, v)| v.len() as u128).sum())
}

fn load_into(params: &mut [(String, Tensor)], weights: &NamedTensors) -> Result<(), String> {
    let names: Vec<&String> = params.iter().map(|(n, _)| n).collect();
    let stored: Vec<&String> = weights.0.keys().collect();
    if names != stored {
        return Err(format!("the checkpoint holds tensors {stored:?}, the model has {names:?}"));
    }
    tch::no_grad(|| {
        for (name, t) in params.iter_mut() {
            crate::copy_stored(t, name, &weights.0[name.as_str()])?;
        }
        Ok::<(), String>(())
    })
}

/// The model, its optimizer and the log: everything a checkpoint holds.
pub struct Trainer {
    config: LoopConfig,
    vs: VarStore,
    model: Decoder,
    /// Parameters in name order, with their names.
    params: Vec<(String, Tensor)>,
    optimizer: Optimizer,
    schedule: Schedule,
    step: u64,
    log: Vec<StepLog>,
}

impl Trainer {
    /// A fresh model, initialised from libtorch's generator seeded with `seed`.
    pub fn new(model_config: &ModelConfig, config: &LoopConfig, seed: u64) -> Self {
        tch::manual_seed(seed.cast_signed());
        let vs = VarStore::new(prov_torch::device());
        let model = Decoder::new(&vs.root(), model_config);
        let params = sorted_variables(&vs);
        Self::assemble(config, vs, model, params, model_config.hidden_size)
    }

    /// A trainer of `model` whose optimizer updates `params` (in name order), under the
    /// schedule `config` names, at step 0.
    fn assemble(config: &LoopConfig, vs: VarStore, model: Decoder, params: Vec<(String, Tensor)>, hidden: i64) -> Self {
        let with_decay: Vec<(String, Tensor, bool)> =
            params.iter().map(|(n, t)| (n.clone(), t.shallow_clone(), decays(&t.size()))).collect();
        let optimizer = Optimizer::new(&config.optimizer, config.lr, with_decay, hidden);
        let schedule = match config.schedule {
            ScheduleKind::Wsd => {
                Schedule::Wsd(Wsd::new(config.lr, config.steps, config.warmup_steps, config.cooldown_steps))
            }
            ScheduleKind::Linear => Schedule::Linear(Linear::new(config.lr, config.steps, config.warmup_steps)),
            ScheduleKind::Cosine => Schedule::Cosine(Cosine::new(config.lr, config.steps, config.warmup_steps)),
            ScheduleKind::Phased => Schedule::Phased(Phased::new(config.phases.clone())),
        };
        Self { config: config.clone(), vs, model, params, optimizer, schedule, step: 0, log: Vec::new() }
    }

    /// A model holding `weights` (a checkpoint's, in name order) with a fresh optimizer: where
    /// fine-tuning and alignment start. Nothing is drawn at random: the initialisation that
    /// [`Trainer::new`] draws is overwritten.
    pub fn from_weights(
        model_config: &ModelConfig,
        config: &LoopConfig,
        weights: &NamedTensors,
    ) -> Result<Self, String> {
        fits(model_config, weights)?;
        let mut trainer = Self::new(model_config, config, 0);
        trainer.load_weights(weights)?;
        Ok(trainer)
    }

    /// A model holding `weights` (a checkpoint's), frozen, with a LoRA adapter of `rank` and
    /// `alpha` on every projection ([`Decoder::attach_lora`], its `A` drawn from libtorch's
    /// generator seeded with `seed`) and an optimizer over the adapter's matrices alone: where
    /// a `lora` stage starts. [`Trainer::weights`] is then the adapter's.
    pub fn lora(
        model_config: &ModelConfig,
        config: &LoopConfig,
        weights: &NamedTensors,
        (rank, alpha): (i64, f64),
        seed: u64,
    ) -> Result<Self, String> {
        fits(model_config, weights)?;
        // The base's draws are overwritten by its weights; only the adapter's `A` is drawn.
        tch::manual_seed(0);
        let vs = VarStore::new(prov_torch::device());
        let mut model = Decoder::new(&vs.root(), model_config);
        let mut base = sorted_variables(&vs);
        load_into(&mut base, weights)?;
        for (_, t) in &base {
            let _frozen = t.set_requires_grad(false);
        }
        tch::manual_seed(seed.cast_signed());
        let mut adapter = model.attach_lora(&vs.root(), rank, alpha);
        adapter.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Self::assemble(config, vs, model, adapter, model_config.hidden_size))
    }

    /// A model holding `weights` (a language model checkpoint's) with a reward model's
    /// `heads` attached ([`Decoder::attach_reward_heads`], drawn from libtorch's generator
    /// seeded with `seed`) and an optimizer over every parameter, the heads' included: where a
    /// `reward-model` stage starts.
    pub fn reward_model(
        model_config: &ModelConfig,
        config: &LoopConfig,
        weights: &NamedTensors,
        heads: &prov_train::reward_model::RewardHeads,
        seed: u64,
    ) -> Result<Self, String> {
        fits(model_config, weights)?;
        tch::manual_seed(0);
        let vs = VarStore::new(prov_torch::device());
        let mut model = Decoder::new(&vs.root(), model_config);
        load_into(&mut sorted_variables(&vs), weights)?;
        tch::manual_seed(seed.cast_signed());
        model.attach_reward_heads(&vs.root(), heads);
        let params = sorted_variables(&vs);
        Ok(Self::assemble(config, vs, model, params, model_config.hidden_size))
    }

    /// Steps taken.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The log so far.
    pub fn log(&self) -> &[StepLog] {
        &self.log
    }

    /// The model.
    pub fn model(&self) -> &Decoder {
        &self.model
    }

    /// One optimizer step on the next batch of `order`.
    pub fn train_step<S: Samples>(&mut self, data: &S, order: &[u64]) -> Result<&StepLog, S::Error> {
        let b = self.config.batch_size as usize;
        let start = self.step as usize * b;
        let indices = &order[start..start + b];
        let mut rows = Vec::with_capacity(b);
        for &i in indices {
            rows.push(data.sample(i)?);
        }
        Ok(self.train_rows(&rows))
    }

    /// The model, for a change between phases.
    pub fn model_mut(&mut self) -> &mut Decoder {
        &mut self.model
    }

    /// One optimizer step of the distillation loss ([`distillation_loss`]) on a batch of
    /// samples (each `seq_len + 1` token ids, all of one length), the targets mixing each
    /// true label with `teacher`'s top-1 prediction at its position, `teacher_weight` on the
    /// teacher. The teacher is run without gradients; no label is dropped.
    pub fn train_rows_distilled(&mut self, rows: &[Vec<u32>], teacher: &Decoder, teacher_weight: f64) -> &StepLog {
        let time = i64::try_from(rows[0].len() - 1).expect("a sample's length fits in i64");
        let mut inputs = Vec::with_capacity(rows.len() * (rows[0].len() - 1));
        let mut labels = Vec::with_capacity(inputs.capacity());
        for row in rows {
            let ids: Vec<i64> = row.iter().map(|&t| i64::from(t)).collect();
            inputs.extend_from_slice(&ids[..ids.len() - 1]);
            labels.extend_from_slice(&ids[1..]);
        }
        let device = self.vs.device();
        let tokens = labels.len() as u64;
        let inputs = Tensor::from_slice(&inputs).view([-1, time]).to_device(device);
        let labels = Tensor::from_slice(&labels).to_device(device);
        let teacher_logits = tch::no_grad(|| teacher.forward(&inputs));
        let step: Result<&StepLog, std::convert::Infallible> = self.step_with(tokens, 0, |model| {
            let logits = model.forward(&inputs);
            let vocab = logits.size()[2];
            Ok(distillation_loss(
                &logits.view([-1, vocab]).to_kind(Kind::Float),
                &labels,
                &teacher_logits.view([-1, vocab]).to_kind(Kind::Float),
                teacher_weight,
            ))
        });
        match step {
            Ok(log) => log,
        }
    }

    /// One optimizer step on a batch of samples (each `seq_len + 1` token ids, all of one
    /// length).
    pub fn train_rows(&mut self, rows: &[Vec<u32>]) -> &StepLog {
        let seq_plus_one = rows[0].len();
        let mut inputs = Vec::with_capacity(rows.len() * (seq_plus_one - 1));
        let mut labels = Vec::with_capacity(rows.len() * (seq_plus_one - 1));
        let mut dropped = 0u64;
        for row in rows {
            let ids: Vec<i64> = row.iter().map(|&t| i64::from(t)).collect();
            inputs.extend_from_slice(&ids[..ids.len() - 1]);
            let mut target = ids[1..].to_vec();
            if let Some(k) = self.config.goldfish_k {
                let mask = goldfish::drop_mask(&target, k, self.config.goldfish_h);
                for (t, drop) in target.iter_mut().zip(mask) {
                    if drop {
                        *t = IGNORE_INDEX;
                        dropped += 1;
                    }
                }
            }
            labels.extend(target);
        }
        let time = i64::try_from(seq_plus_one - 1).expect("a sample's length fits in i64");
        self.train_on_labels(&inputs, &labels, time, dropped)
    }

    /// One optimizer step of the next-token loss on a batch given as rows of `time` input ids
    /// (`inputs`, row after row) and their labels (`labels`, the same layout, [`IGNORE_INDEX`]
    /// where the loss does not train); `dropped` labels were removed by Goldfish.
    pub fn train_on_labels(&mut self, inputs: &[i64], labels: &[i64], time: i64, dropped: u64) -> &StepLog {
        let tokens = labels.iter().filter(|&&t| t != IGNORE_INDEX).count() as u64;
        let device = self.vs.device();
        let inputs = Tensor::from_slice(inputs).view([-1, time]).to_device(device);
        let labels = Tensor::from_slice(labels).view([-1]).to_device(device);
        let step: Result<&StepLog, std::convert::Infallible> = self.step_with(tokens, dropped, |model| {
            let logits = model.forward(&inputs);
            let vocab = logits.size()[2];
            Ok(logits.view([-1, vocab]).to_kind(Kind::Float).cross_entropy_loss::<Tensor>(
                &labels,
                None,
                Reduction::Mean,
                IGNORE_INDEX,
                0.0,
            ))
        });
        match step {
            Ok(log) => log,
        }
    }

    /// One optimizer step on the loss `loss` computes from the model: zero the gradients,
    /// back-propagate, clip, update at this step's learning rate, log. `tokens` and `dropped`
    /// go to the log as they are.
    pub fn step_with<E>(
        &mut self,
        tokens: u64,
        dropped: u64,
        loss: impl FnOnce(&Decoder) -> Result<Tensor, E>,
    ) -> Result<&StepLog, E> {
        let lr = self.schedule.lr(self.step + 1);
        self.optimizer.zero_grad();
        let loss = loss(&self.model)?;
        self.step += 1;
        loss.backward();
        let grad_norm = self.optimizer.clip_grad_norm(self.config.clip);
        self.optimizer
            .step(lr)
            .expect("every gradient and optimizer state has its parameter's shape, dtype and device");
        self.log.push(StepLog { step: self.step, loss: loss.double_value(&[]), grad_norm, lr, tokens, dropped });
        Ok(self.log.last().expect("just pushed"))
    }

    /// The device the model lives on.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// The weights, by name.
    pub fn weights(&self) -> NamedTensors {
        NamedTensors::from_tensors(self.params.iter().map(|(n, t)| (n.clone(), t)))
    }

    /// The optimizer's state, by name.
    pub fn optimizer_state(&self) -> NamedTensors {
        self.optimizer.state()
    }

    /// The log as JSON Lines, one canonical object per step.
    pub fn log_bytes(&self) -> Vec<u8> {
        encode_log(&self.log)
    }

    /// Continues from a checkpoint's weights, optimizer state and log, taken after
    /// `log.len()` steps.
    pub fn restore(
        &mut self,
        weights: &NamedTensors,
        optimizer: &NamedTensors,
        log: Vec<StepLog>,
    ) -> Result<(), String> {
        self.load_weights(weights)?;
        self.optimizer.load_state(optimizer, log.len() as u64)?;
        self.step = log.len() as u64;
        self.log = log;
        Ok(())
    }

    /// Overwrites the parameters with `weights`, which must hold exactly the model's tensors.
    fn load_weights(&mut self, weights: &NamedTensors) -> Result<(), String> {
        load_into(&mut self.params, weights)
    }

    /// The Goldfish share of labels dropped so far.
    pub fn dropped_fraction(&self) -> f64 {
        let dropped: u64 = self.log.iter().map(|l| l.dropped).sum();
        let kept: u64 = self.log.iter().map(|l| l.tokens).sum();
        if dropped + kept == 0 { 0.0 } else { dropped as f64 / (dropped + kept) as f64 }
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact values are the point: the formulas are exact here
mod tests {
    use super::*;
    use prov_train::loop_config::decode_log;
    use prov_train::optimizer::{AdEMAMixConfig, OptimizerConfig};

    /// Samples generated from their index: a deterministic stand-in for token shards.
    struct Synthetic {
        len: usize,
        vocab: u32,
    }

    impl Samples for Synthetic {
        type Error = String;
        fn sample(&self, index: u64) -> Result<Vec<u32>, String> {
            // A fixed bigram rule from a start that depends on the sample: easy to learn.
            let mut token = (index as u32 * 7) % self.vocab;
            Ok((0..self.len)
                .map(|_| {
                    let t = token;
                    token = (token * 3 + 1) % self.vocab;
                    t
                })
                .collect())
        }
    }

    fn tiny() -> (ModelConfig, LoopConfig) {
        let model = ModelConfig::small(40, 12);
        let mut optimizer = AdEMAMixConfig::default();
        optimizer.resolve(30).unwrap();
        let config = LoopConfig {
            steps: 30,
            batch_size: 3,
            lr: 1e-2,
            warmup_steps: 3,
            cooldown_steps: 6,
            schedule: ScheduleKind::Wsd,
            optimizer: OptimizerConfig::AdEMAMix(optimizer),
            clip: 1.0,
            goldfish_k: Some(4),
            goldfish_h: 2,
            phases: Vec::new(),
        };
        (model, config)
    }

    fn data() -> (Synthetic, Vec<u64>) {
        (Synthetic { len: 13, vocab: 40 }, (0..90u64).map(|i| (i * 11) % 90).collect())
    }

    fn run(steps: u64) -> Trainer {
        let (_, config) = tiny();
        run_with(&config, steps)
    }

    fn run_with(config: &LoopConfig, steps: u64) -> Trainer {
        let (model, _) = tiny();
        let (samples, order) = data();
        let mut trainer = Trainer::new(&model, config, 7);
        for _ in 0..steps {
            trainer.train_step(&samples, &order).unwrap();
        }
        trainer
    }

    #[test]
    fn training_learns_and_repeats_to_the_bit() {
        let (a, b) = (run(30), run(30));
        assert_eq!(a.weights(), b.weights());
        assert_eq!(a.log_bytes(), b.log_bytes());
        let log = a.log();
        assert!(log.last().unwrap().loss < log[0].loss - 0.5, "{log:?}");
        // Goldfish with k = 4 drops some labels, never the first h - 1 of a sample.
        let dropped: u64 = log.iter().map(|l| l.dropped).sum();
        assert!(dropped > 0 && a.dropped_fraction() < 0.5);
        assert_eq!(log.iter().map(|l| l.tokens + l.dropped).collect::<Vec<_>>(), vec![36; 30]);
    }

    #[test]
    fn resuming_from_any_step_gives_the_uninterrupted_bytes() {
        let full = run(30);
        let (model, config) = tiny();
        let (samples, order) = data();
        for at in [1, 10, 29] {
            let part = run(at);
            let log = decode_log(&part.log_bytes()).unwrap();
            // A fresh trainer from another seed: restoring must replace everything.
            let mut resumed = Trainer::new(&model, &config, 99);
            resumed.restore(&part.weights(), &part.optimizer_state(), log).unwrap();
            while resumed.step() < 30 {
                resumed.train_step(&samples, &order).unwrap();
            }
            assert_eq!(resumed.weights(), full.weights(), "resumed at {at}");
            assert_eq!(resumed.optimizer_state(), full.optimizer_state(), "resumed at {at}");
            assert_eq!(resumed.log_bytes(), full.log_bytes(), "resumed at {at}");
        }
    }

    /// AFM's optimizer in the same loop: it learns, and a run resumed from a checkpoint (its
    /// two state tensors per parameter) continues with the uninterrupted bytes.
    #[test]
    fn rmsprop_momentum_learns_and_resumes_to_the_bit() {
        let (model, mut config) = tiny();
        config.optimizer = serde_json::from_value(serde_json::json!({"kind": "rmsprop-momentum"})).unwrap();
        let full = run_with(&config, 30);
        let log = full.log();
        assert!(log.last().unwrap().loss < log[0].loss - 0.5, "{log:?}");
        assert!(
            full.optimizer_state().0.keys().all(|k| k.ends_with(".gradient_square_ema") || k.ends_with(".update_ema"))
        );
        let part = run_with(&config, 12);
        let mut resumed = Trainer::new(&model, &config, 99);
        resumed.restore(&part.weights(), &part.optimizer_state(), decode_log(&part.log_bytes()).unwrap()).unwrap();
        let (samples, order) = data();
        while resumed.step() < 30 {
            resumed.train_step(&samples, &order).unwrap();
        }
        assert_eq!((resumed.weights(), resumed.optimizer_state()), (full.weights(), full.optimizer_state()));
        // An AdEMAMix checkpoint is not this optimizer's state.
        let mut wrong = Trainer::new(&model, &config, 99);
        assert!(wrong.restore(&run(1).weights(), &run(1).optimizer_state(), Vec::new()).is_err());
    }

    #[test]
    fn restoring_a_foreign_checkpoint_is_an_error() {
        let part = run(1);
        let (mut model, config) = tiny();
        model.hidden_size = 48;
        let mut other = Trainer::new(&model, &config, 7);
        let err = other.restore(&part.weights(), &part.optimizer_state(), Vec::new()).unwrap_err();
        assert!(err.contains("shape"), "{err}");
    }

    #[test]
    fn the_log_round_trips() {
        let t = run(3);
        assert_eq!(decode_log(&t.log_bytes()).unwrap(), t.log());
        assert!(decode_log(b"{\"step\": 1}\n").unwrap_err().contains("log line 1"));
    }
}
