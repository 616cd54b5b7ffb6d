"""PyTorch reference for the AFM distillation loss of Provenant's `pretrain` stage.

Written from the book's specification (book/src/afm.md, "Distillation"), which states the
loss as three PyTorch operations; it is a transcription of that page, by the same hand as the
Rust code (the report gives one sentence of prose, and no released implementation exists).
What agreement shows is that the worker computes exactly the stated rule: argmax ties broken
by the first index, the targets mixed in float32, the cross-entropy with probability targets
and mean reduction, and its gradient.

Input (stdin), one JSON object:

    {"n": positions, "vocab": V, "w": teacher weight,
     "student": [u32 bit patterns of the float32 logits, n * V, row-major],
     "teacher": [the same for the teacher's logits],
     "labels": [n true labels]}

Output (stdout), one JSON object: {"loss": u32 bits, "grad": [u32 bits of d loss / d
student, n * V]}.
"""

import json
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def from_bits(bits, shape):
    raw = struct.pack(f"<{len(bits)}I", *bits)
    return torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape).clone()


def to_bits(tensor):
    values = tensor.detach().reshape(-1).to(torch.float32).tolist()
    return list(struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values)))


def distillation_loss(student, labels, teacher, w):
    """The book's three operations."""
    t = teacher.argmax(-1)
    q = F.one_hot(labels, student.shape[1]).float() * (1 - w) + F.one_hot(t, student.shape[1]).float() * w
    return F.cross_entropy(student, q)


def main():
    case = json.load(sys.stdin)
    n, vocab = case["n"], case["vocab"]
    student = from_bits(case["student"], (n, vocab)).requires_grad_(True)
    teacher = from_bits(case["teacher"], (n, vocab))
    labels = torch.tensor(case["labels"], dtype=torch.int64)
    loss = distillation_loss(student, labels, teacher, case["w"])
    loss.backward()
    json.dump({"loss": to_bits(loss)[0], "grad": to_bits(student.grad)}, sys.stdout)


if __name__ == "__main__":
    main()
