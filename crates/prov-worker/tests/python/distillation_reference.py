"""AFM's distillation loss (report §3.2.1) as PyTorch computes it.

An independent transcription of the book's "Distillation" section (book/src/afm.md),
written from that section alone, without reading the Rust code or the earlier script.
The operation list there is normative:

    t = teacher_logits.argmax(-1)                      # the first index of the largest, on a tie
    q = F.one_hot(y, vocab).float() * (1 - w) + F.one_hot(t, vocab).float() * w
    loss = F.cross_entropy(student_logits, q)          # probability targets, mean over n

Reads one JSON object on stdin:
    n, vocab  the number of positions and the vocabulary size;
    w         the teacher's weight (distillation.teacher_weight);
    labels    the n label token ids;
    student   the student's logits [n, vocab], row-major, as float32 bit patterns;
    teacher   the teacher's logits [n, vocab], row-major, as float32 bit patterns.
Writes one JSON object on stdout:
    loss      the float32 bit pattern of the loss;
    grad      the float32 bit patterns of d loss / d student_logits, row-major [n, vocab].
"""

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F


def float32_tensor(bits, n, vocab):
    """A float32 [n, vocab] tensor from its values' bit patterns."""
    values = np.array(bits, dtype=np.uint32).view(np.float32).reshape(n, vocab)
    return torch.from_numpy(values.copy())


def tensor_bits(t):
    """The float32 bit patterns of a tensor's values, flattened row-major."""
    return t.detach().contiguous().numpy().astype(np.float32, copy=False).view(np.uint32).reshape(-1).tolist()


def main():
    torch.set_num_threads(1)
    case = json.load(sys.stdin)
    n, vocab, w = int(case["n"]), int(case["vocab"]), float(case["w"])
    student_logits = float32_tensor(case["student"], n, vocab).requires_grad_(True)
    teacher_logits = float32_tensor(case["teacher"], n, vocab)
    y = torch.tensor(case["labels"], dtype=torch.int64)
    assert y.shape == (n,)

    # The teacher runs without gradients.
    with torch.no_grad():
        t = teacher_logits.argmax(-1)
    q = F.one_hot(y, vocab).float() * (1 - w) + F.one_hot(t, vocab).float() * w
    loss = F.cross_entropy(student_logits, q)
    assert loss.dtype == torch.float32 and student_logits.dtype == torch.float32
    loss.backward()

    json.dump({"loss": tensor_bits(loss)[0], "grad": tensor_bits(student_logits.grad)}, sys.stdout)


if __name__ == "__main__":
    main()
