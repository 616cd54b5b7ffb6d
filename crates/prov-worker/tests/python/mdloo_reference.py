"""PyTorch reference for the advantages and the loss of Provenant's `mdloo` stage.

An independent transcription of the book's page "The AFM recipe" (section "MDLOO"), written
from that page's rules and operation list without reading the Rust code. It checks the
leave-one-out advantages (f64), the Mirror Descent loss (float32) and its gradient with
respect to the policy's logits, bit for bit.

Input (stdin), one JSON object (rows prompt by prompt, k consecutive rows each):

    {"rows": R, "time": T, "vocab": V, "k": k, "beta": float, "gamma": float,
     "policy": [R * T * V u32 bit patterns of float32], "old": [the same for pi_t],
     "labels": [R * T ints], "mask": [R * T 0/1 ints],
     "scores": [R floats], "old_logp": [R floats], "ref_logp": [R floats]}

Output (stdout), one JSON object:

    {"advantages": [R floats], "loss": u32 bits, "grad": [R * T * V u32 bits]}
"""

import json
import sys

import numpy as np
import torch

torch.set_num_threads(1)


def from_bits(bits, shape):
    return torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32).reshape(shape).copy())


def to_bits(tensor):
    return tensor.detach().to(torch.float32).contiguous().numpy().reshape(-1).view(np.uint32).tolist()


def leave_one_out(scores, old_logp, ref_logp, beta, k):
    """Rewards R = r - beta * (log pi_t - log pi_ref), then A_i = R_i - (sum_{j != i} R_j) / (k - 1)."""
    rewards = [float(r) - beta * (float(o) - float(f)) for r, o, f in zip(scores, old_logp, ref_logp)]
    advantages = []
    for start in range(0, len(rewards), k):
        group = rewards[start:start + k]
        for i in range(k):
            total = 0.0
            for j in range(k):
                if j != i:
                    total += group[j]
            advantages.append(group[i] - total / (k - 1))
    return advantages


def mdloo_loss(policy, old, labels, mask, advantages, gamma):
    """The book's operations, in float32."""
    logp = policy.log_softmax(-1); logq = old.log_softmax(-1)
    lp = logp.gather(-1, labels[..., None]).squeeze(-1).masked_fill(~mask, 0).sum(-1)
    lq = logq.gather(-1, labels[..., None]).squeeze(-1).masked_fill(~mask, 0).sum(-1)
    ratio = (lp - lq).exp()
    kl = (logp.exp() * (logp - logq)).sum(-1).masked_fill(~mask, 0).sum(-1)
    return (-(ratio * advantages) + gamma * kl).mean()


def main():
    case = json.load(sys.stdin)
    R, T, V, k = case["rows"], case["time"], case["vocab"], case["k"]
    assert k >= 2 and R % k == 0
    advantages = leave_one_out(case["scores"], case["old_logp"], case["ref_logp"], float(case["beta"]), k)
    policy = from_bits(case["policy"], (R, T, V)).requires_grad_(True)
    old = from_bits(case["old"], (R, T, V))
    mask = torch.tensor(case["mask"], dtype=torch.int64).reshape(R, T) != 0
    labels = torch.tensor(case["labels"], dtype=torch.int64).reshape(R, T).masked_fill(~mask, 0)
    adv = torch.tensor(advantages, dtype=torch.float64).to(torch.float32)
    loss = mdloo_loss(policy, old, labels, mask, adv, float(case["gamma"]))
    loss.backward()
    json.dump({"advantages": advantages, "loss": to_bits(loss)[0], "grad": to_bits(policy.grad)}, sys.stdout)


if __name__ == "__main__":
    main()
