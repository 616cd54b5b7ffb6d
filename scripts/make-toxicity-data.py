#!/usr/bin/env python3
"""Make the toxicity classifier's labelled examples (recipes/data/toxicity/hatecheck.jsonl.gz).

Input: HateCheck (English) and Multilingual HateCheck (10 languages), CC-BY-4.0, as found in
the shared data directory ($PROV_SHARED_DATA/toxicity, see book/src/main-job.md). The output
is committed, with its origin and license in recipes/data/toxicity/THIRD_PARTY.md, so that the
main job trains its classifier on a fresh clone without the shared directory.

One JSON line per case, sorted by id, gzip-compressed with no name and mtime 0, so that the
file is byte-identical for the same inputs:
    {"id": "hatecheck-<lang>-<case id>", "text", "language": ISO 639-1, "label": "hateful" |
     "non-hateful", "functionality": HateCheck's functional test}

Usage: make-toxicity-data.py SHARED_TOXICITY_DIR OUT_FILE
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path

MULTILINGUAL = {
    "arabic": "ar",
    "dutch": "nl",
    "french": "fr",
    "german": "de",
    "hindi": "hi",
    "italian": "it",
    "mandarin": "zh",
    "polish": "pl",
    "portuguese": "pt",
    "spanish": "es",
}


def rows(src: Path):
    with open(src / "hatecheck-en" / "test_suite_cases.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            yield f"hatecheck-en-{int(r['case_id']):05d}", r["test_case"], "en", r["label_gold"], r["functionality"]
    for name, lang in MULTILINGUAL.items():
        with open(src / "multilingual-hatecheck" / f"{name}.csv", newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                number = int(r["mhc_case_id"].rsplit("-", 1)[1])
                yield f"hatecheck-{lang}-{number:05d}", r["test_case"], lang, r["label_gold"], r["functionality"]


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    seen = set()
    lines = []
    for doc_id, text, lang, label, functionality in rows(src):
        if doc_id in seen:
            raise SystemExit(f"duplicate id {doc_id}")
        seen.add(doc_id)
        if label not in ("hateful", "non-hateful"):
            raise SystemExit(f"{doc_id}: unexpected label {label!r}")
        text = " ".join(text.split())
        if not text:
            raise SystemExit(f"{doc_id}: empty text")
        record = {"id": doc_id, "text": text, "language": lang, "label": label, "functionality": functionality}
        lines.append((doc_id, json.dumps(record, ensure_ascii=False, separators=(",", ":"))))
    lines.sort()
    out.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(line + "\n" for _, line in lines).encode("utf-8")
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        f.write(body)


if __name__ == "__main__":
    main()
