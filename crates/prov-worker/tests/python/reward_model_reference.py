"""PyTorch reference for the loss of Provenant's `reward-model` stage.

An independent transcription of the book's page "The AFM recipe" (section "The reward model",
"The model and its loss"), written from that page's operation list without reading the Rust
code. It checks the loss and its gradients with respect to the scores and the four grade
heads' logits, bit for bit.

Input (stdin), one JSON object:

    {"pairs": B, "levels": [B level names], "lambda": grade weight,
     "scores": [2B u32 bit patterns of float32, chosen rows then rejected rows],
     "grade_logits": [4 lists of 2B * 3 u32 bit patterns, row-major [2B, 3]],
     "grades": [4 lists of 2B ints in 0..3]}

Output (stdout), one JSON object:

    {"loss": u32 bits, "grad_scores": [2B u32 bits], "grad_logits": [4 lists of 2B * 3 u32 bits]}
"""

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)

LEVELS = {
    "significantly-better": 0.95,
    "better": 0.85,
    "slightly-better": 0.75,
    "negligibly-better": 0.65,
}


def from_bits(bits, shape):
    return torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32).reshape(shape).copy())


def to_bits(tensor):
    return tensor.detach().to(torch.float32).contiguous().numpy().reshape(-1).view(np.uint32).tolist()


def reward_model_loss(s, logits, grades, levels, lam):
    """The book's operations, in float32."""
    B = len(levels)
    d = s[:B] - s[B:]
    p = torch.tensor(levels, dtype=torch.float32)
    ranking = -(p * F.logsigmoid(d) + (1 - p) * F.logsigmoid(-d))
    grading = F.cross_entropy(logits[0], grades[0], reduction="none")
    for head in range(1, 4):
        grading = grading + F.cross_entropy(logits[head], grades[head], reduction="none")
    return ranking.mean() + lam * grading.mean()


def main():
    case = json.load(sys.stdin)
    B = case["pairs"]
    levels = [LEVELS[name] for name in case["levels"]]
    assert len(levels) == B
    s = from_bits(case["scores"], (2 * B,)).requires_grad_(True)
    logits = [from_bits(bits, (2 * B, 3)).requires_grad_(True) for bits in case["grade_logits"]]
    grades = [torch.tensor(g, dtype=torch.int64) for g in case["grades"]]
    assert len(logits) == 4 and len(grades) == 4
    loss = reward_model_loss(s, logits, grades, levels, float(case["lambda"]))
    loss.backward()
    json.dump(
        {
            "loss": to_bits(loss)[0],
            "grad_scores": to_bits(s.grad),
            "grad_logits": [to_bits(x.grad) for x in logits],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
