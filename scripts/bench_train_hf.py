#!/usr/bin/env python3
"""The transformers side of the training-step benchmark (scripts/bench-train).

Times one training step of transformers' ApertusForCausalLM in PyTorch eager mode, float32,
with the same shape, batch, data, loss and optimizer as crates/prov-worker/examples/bench_step.rs
(the main job's model: hidden 256, MLP 1024, 4 layers, 4 query and 2 key-value heads,
vocabulary 4096, RoPE base 5e5, xIELU, untied embeddings, no biases; batch 8 of 128 tokens).

One step, as the Rust Trainer does it:
  the batch: 8 samples of 129 SplitMix64 ids (the Rust side's samples, id for id);
  the Goldfish mask (k = 50, h = 50) in torch operations, as the released code does it
    (product of each window of h labels in int64, floor-modulo 1,000,003, looked up in the
    table torch.rand(1000003) drawn after torch.manual_seed(2971215073));
  forward (logits for every position), float32 cross-entropy ignoring -100, backward;
  torch.nn.utils.clip_grad_norm_(0.1);
  AdEMAMix, written out as Apple's reference implementation (ml-ademamix) updates each
    parameter, with the Apertus defaults and WSD's learning rate; weight decay on matrices.

Usage: bench_train_hf.py [--threads T] [--warmup W] [--steps N] [--seed S]
                         [--attn eager|sdpa] [--optimizer ademamix|adamw] [--no-deterministic]
                         [--phases]
--phases times the parts of a step (batch and Goldfish mask, forward, loss, backward,
clipping, optimizer) one by one instead, as bench_step --phases does on the tch side.
Prints one JSON object. ATEN_CPU_CAPABILITY must be set before torch starts; without it this
script sets avx2 (what prov uses by default) before importing torch.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS = 4096, 256, 1024, 4, 4, 2
SEQ_LEN, BATCH = 128, 8
MAIN_JOB_STEPS = 300
GOLDFISH_K, GOLDFISH_H = 50, 50
TABLE_SIZE, TABLE_SEED = 1_000_003, 2_971_215_073
MASK64 = (1 << 64) - 1


def splitmix64(state):
    """Yields SplitMix64 outputs from `state` (Steele, Lea and Flood 2014)."""
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


def sample(seed, index):
    """The Rust side's sample `index`: SEQ_LEN + 1 ids."""
    rng = splitmix64(((seed << 32) + index) & MASK64)
    return [next(rng) % VOCAB for _ in range(SEQ_LEN + 1)]


def goldfish_mask(labels, table):
    """True where Goldfish drops the label: the released code's torch operations."""
    windows = labels.unfold(1, GOLDFISH_H, 1)  # [batch, time - h + 1, h]
    keys = windows.prod(dim=-1) % TABLE_SIZE
    dropped = table[keys] < 1.0 / GOLDFISH_K
    head = torch.zeros(labels.shape[0], GOLDFISH_H - 1, dtype=torch.bool)
    return torch.cat([head, dropped], dim=1)


def runqueue_wait():
    """Seconds this process's threads have been runnable but waiting for a CPU (the second
    field of each /proc/self/task/*/schedstat), as bench_step measures it."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except OSError:
            pass
    return total / 1e9


def wsd_lr(step, peak, steps, warmup, cooldown):
    """The WSD schedule of prov-train (schedule.rs), step from 1."""
    t = step - 1
    decay_start = steps - cooldown
    if t < warmup:
        share = 0.1 + 0.9 * t / warmup
    elif t < decay_start:
        share = 1.0
    else:
        progress = min((t - decay_start + 1) / cooldown, 1.0)
        share = 0.1 + 0.9 * (1.0 - math.sqrt(progress))
    return peak * share


class AdEMAMix:
    """AdEMAMix as Apple's reference implementation updates a parameter (in-place tensor
    operations per parameter), with prov-train's schedules for alpha and beta3."""

    def __init__(self, named_params, steps, betas=(0.9, 0.999, 0.9999), alpha=8.0, eps=1e-8, weight_decay=0.1):
        self.params = [(p, p.ndim >= 2) for _, p in sorted(named_params, key=lambda x: x[0])]
        self.state = [(torch.zeros_like(p), torch.zeros_like(p), torch.zeros_like(p)) for p, _ in self.params]
        self.betas, self.alpha, self.eps, self.wd = betas, alpha, eps, weight_decay
        self.warmup = steps  # T_alpha = T_beta3 = the run's steps (prov-train's default)
        self.t = 0

    def beta3_at(self, t):
        b1, _, b3 = self.betas
        if t >= self.warmup:
            return b3

        def f(b):
            return math.log(0.5) / math.log(b + 1e-8) - 1

        def f_inv(x):
            return math.pow(0.5, 1 / (x + 1))

        a = t / self.warmup
        return f_inv((1 - a) * f(b1) + a * f(b3))

    @torch.no_grad()
    def step(self, lr):
        self.t += 1
        t = self.t
        b1, b2, _ = self.betas
        b3 = self.beta3_at(t)
        alpha = min(t * self.alpha / self.warmup, self.alpha)
        bias_correction1 = 1 - b1**t
        bias_correction2 = 1 - b2**t
        for (p, decay), (fast, slow, sq) in zip(self.params, self.state):
            grad = p.grad
            if grad is None:
                continue
            fast.mul_(b1).add_(grad, alpha=1 - b1)
            slow.mul_(b3).add_(grad, alpha=1 - b3)
            sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = (sq.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
            update = (fast.div(bias_correction1) + alpha * slow) / denom
            if decay and self.wd != 0:
                update.add_(p, alpha=self.wd)
            p.add_(update, alpha=-lr)


def build_model(attn, seed):
    from transformers import ApertusConfig, ApertusForCausalLM

    config = ApertusConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        hidden_act="xielu",
        max_position_embeddings=SEQ_LEN,
        initializer_range=0.008944,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        tie_word_embeddings=False,
        attention_bias=False,
        attention_dropout=0.0,
        pad_token_id=None,
        bos_token_id=0,
        eos_token_id=1,
        use_cache=False,
        dtype="float32",
    )
    config._attn_implementation = attn
    torch.manual_seed(seed)
    model = ApertusForCausalLM(config)
    model.train()
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        raise SystemExit(f"bench_train_hf: parameters are {dtypes}, not float32 alone")
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--optimizer", choices=["ademamix", "adamw"], default="ademamix")
    ap.add_argument("--no-deterministic", action="store_true")
    ap.add_argument("--phases", action="store_true")
    args = ap.parse_args()

    # As prov_torch::pin_threads: intra-op threads T, inter-op threads 1.
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    # prov runs every libtorch computation in deterministic-algorithms mode.
    torch.use_deterministic_algorithms(not args.no_deterministic)

    import transformers

    torch.manual_seed(TABLE_SEED)
    table = torch.rand(TABLE_SIZE)
    model = build_model(args.attn, args.seed)
    total = args.warmup + args.steps
    steps = max(total, MAIN_JOB_STEPS)
    named = list(model.named_parameters())
    if args.optimizer == "ademamix":
        opt = AdEMAMix(named, steps)
    else:
        decay = [p for _, p in named if p.ndim >= 2]
        no_decay = [p for _, p in named if p.ndim < 2]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
            lr=3e-3,
            betas=(0.9, 0.999),
            eps=1e-8,
        )

    names = ["batch_goldfish", "forward", "loss", "backward", "clip", "optimizer"]
    laps = {n: [] for n in names + ["total"]}
    losses, step_seconds, dropped_total, label_total = [], [], 0, 0
    wait_before = None
    for step in range(1, total + 1):
        if step == args.warmup + 1:
            wait_before = runqueue_wait()
        t = [time.perf_counter()]
        rows = torch.tensor(
            [sample(args.seed, (step - 1) * BATCH + i) for i in range(BATCH)], dtype=torch.int64
        )
        inputs, labels = rows[:, :-1], rows[:, 1:].clone()
        drop = goldfish_mask(labels, table)
        labels[drop] = -100
        lr = wsd_lr(step, 3e-3, steps, steps // 10, steps // 5)
        t.append(time.perf_counter())
        model.zero_grad()
        logits = model(input_ids=inputs).logits
        t.append(time.perf_counter())
        loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(), labels.reshape(-1), ignore_index=-100)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        t.append(time.perf_counter())
        if args.optimizer == "ademamix":
            opt.step(lr)
        else:
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
        losses.append(loss.item())
        t.append(time.perf_counter())
        elapsed = t[-1] - t[0]
        dropped_total += int(drop.sum())
        label_total += drop.numel()
        if step > args.warmup:
            step_seconds.append(elapsed)
            if args.phases:
                for n, a, b in zip(names, t, t[1:]):
                    laps[n].append(b - a)
                laps["total"].append(elapsed)

    runqueue_wait_seconds = runqueue_wait() - wait_before

    if args.phases:
        print(json.dumps({
            "side": "transformers",
            "threads": torch.get_num_threads(),
            "attn": model.config._attn_implementation,
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "phases": {n: statistics.median(v) for n, v in laps.items()},
        }))
        return

    print(
        json.dumps(
            {
                "side": "transformers",
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "python": sys.version.split()[0],
                "threads": torch.get_num_threads(),
                "capability": os.environ.get("ATEN_CPU_CAPABILITY"),
                "cpu_capability_used": torch.backends.cpu.get_cpu_capability(),
                "deterministic": torch.are_deterministic_algorithms_enabled(),
                "attn": model.config._attn_implementation,
                "optimizer": "AdEMAMix (Apple's update, in-place per parameter)"
                if args.optimizer == "ademamix"
                else "torch.optim.AdamW (default: foreach)",
                "batch": BATCH,
                "seq_len": SEQ_LEN,
                "parameters": sum(p.numel() for p in model.parameters()),
                "warmup": args.warmup,
                "step_seconds": step_seconds,
                "step_median": statistics.median(step_seconds),
                "runqueue_wait_seconds": runqueue_wait_seconds,
                "first_loss": losses[0],
                "last_loss": losses[-1],
                "goldfish_dropped_fraction": dropped_total / label_total,
            }
        )
    )


if __name__ == "__main__":
    main()
