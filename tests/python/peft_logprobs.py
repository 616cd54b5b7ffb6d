"""Per-token log-probabilities of a Hugging Face model, optionally with a PEFT LoRA adapter.

The independent side of the PEFT interoperability test (AFM §5): PyPI transformers and peft,
not Provenant, load an exported base model and, on top of it, a LoRA adapter in the PEFT format,
and compute the log-probabilities of given token sequences. Provenant's `prov eval --adapter`
must give the same log-probabilities for the same base, adapter and sequences, within 1e-4. The
adapter is applied as peft applies it at inference (`PeftModel.from_pretrained`, not merged into
the base weights), so the test checks both the adapter files Provenant writes and the
arithmetic of applying them.

Usage:

  peft_logprobs.py --base BASE_DIR [--adapter ADAPTER_DIR] --ids IDS.json

Input:

  - BASE_DIR: a Hugging Face model folder (config.json, model.safetensors, tokenizer files) that
    `transformers.AutoModelForCausalLM.from_pretrained` loads, such as `prov export` writes
    (Llama- or Apertus-architecture decoders).
  - ADAPTER_DIR (optional): a PEFT LoRA adapter folder (adapter_config.json,
    adapter_model.safetensors), loaded with `peft.PeftModel.from_pretrained` on top of the base.
    Without it the base model alone is evaluated.
  - IDS.json: a JSON array of sequences, each a JSON array of token ids (at least one id each).

Output (stdout): one JSON object `{"sequences": [[logp, ...], ...]}`, with, for each input
sequence in order, the natural-log probability of each token after the first given all the
tokens before it (a sequence of n ids gives n - 1 numbers). The model runs in float32, in eval
mode, without gradients, on one CPU thread; each sequence is run alone (batch of one, no
padding), and the numbers are `log_softmax(logits[:-1], -1)` gathered at `ids[1:]`.

With an adapter, the script also fails unless the tensors of adapter_model.safetensors are
exactly the LoRA weights peft loaded into the model (same names, none missing, none left over,
equal values): peft itself only warns about missing ones and ignores extra ones.

Errors go to stderr, with a non-zero exit status.
"""

import argparse
import json
import sys


def read_ids(path):
    with open(path, encoding="utf-8") as f:
        seqs = json.load(f)
    if not isinstance(seqs, list):
        raise ValueError(f"{path}: expected a JSON array of sequences")
    for i, seq in enumerate(seqs):
        if not isinstance(seq, list) or not seq:
            raise ValueError(f"{path}: sequence {i} is not a non-empty array of token ids")
        for t in seq:
            if not isinstance(t, int) or isinstance(t, bool) or t < 0:
                raise ValueError(f"{path}: sequence {i} has a token id that is not a non-negative integer: {t!r}")
    return seqs


def check_adapter_loaded(model, adapter_dir):
    """Fail unless the adapter's tensors are exactly the LoRA weights peft put into the model.

    peft only warns about adapter weights it did not find in the file (leaving them at their
    initial values) and silently ignores tensors in the file that match no LoRA module (as when
    `target_modules` names fewer modules than the file has weights for), so without this check
    an adapter that peft reads differently from how it was written would pass unnoticed.
    """
    import os

    import peft
    import torch
    from safetensors.torch import load_file

    path = os.path.join(adapter_dir, "adapter_model.safetensors")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file (only safetensors adapters are read)")
    saved = load_file(path)
    loaded = peft.get_peft_model_state_dict(model)
    missing = sorted(set(loaded) - set(saved))
    unexpected = sorted(set(saved) - set(loaded))
    if missing or unexpected:
        raise ValueError(
            f"{path}: its tensors do not match the LoRA weights of the model peft built from "
            f"adapter_config.json: missing {missing[:5]}{' ...' if len(missing) > 5 else ''} "
            f"({len(missing)}), unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''} "
            f"({len(unexpected)})"
        )
    for name, t in saved.items():
        if not torch.equal(t.to(torch.float32), loaded[name].to(torch.float32)):
            raise ValueError(f"{path}: tensor {name} is not what the model holds after loading")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="Hugging Face model folder")
    ap.add_argument("--adapter", help="PEFT LoRA adapter folder (applied unmerged)")
    ap.add_argument("--ids", required=True, help="JSON array of token-id sequences")
    args = ap.parse_args()

    seqs = read_ids(args.ids)

    import torch
    import transformers

    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = transformers.AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32)
    if args.adapter is not None:
        import peft

        model = peft.PeftModel.from_pretrained(model, args.adapter)
    model = model.to(torch.float32)
    if args.adapter is not None:
        check_adapter_loaded(model, args.adapter)
    model.eval()

    vocab = model.get_output_embeddings().weight.shape[0]
    out = []
    with torch.no_grad():
        for i, seq in enumerate(seqs):
            if max(seq) >= vocab:
                raise ValueError(f"sequence {i} has token id {max(seq)}, beyond the vocabulary ({vocab})")
            if len(seq) < 2:
                out.append([])
                continue
            ids = torch.tensor([seq], dtype=torch.long)
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[0]
            logp = torch.log_softmax(logits[:-1].to(torch.float32), dim=-1)
            picked = logp.gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)
            out.append([float(x) for x in picked.tolist()])

    json.dump({"sequences": out}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        print(f"peft_logprobs.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
