#!/usr/bin/env python3
"""Writes Bifixer's rule tables, read from the installed `bifixer` package, as a Provenant
rules file (book: formats/bifixer-rules.md).

    .venv/bin/python scripts/bifixer-rules.py OUT LANG [LANG ...]

Bifixer (GPL-3.0) keeps its character replacements, punctuation normalisation, orthographic
corrections and detokenisation lists in its code and data files. Provenant's engine is its own,
but these tables are Bifixer's, so Provenant does not ship them: this script takes them from
the pinned package (lockfiles/requirements.txt) and a recipe pins the file it writes like any
input. The file is canonical JSON (sorted object keys, no spaces, UTF-8), so the same package
and languages give the same bytes and the same digest.

The script refuses a table the engine would read differently from Bifixer: a character key
whose regular-expression escape is not a literal, or an orthographic replacement that is empty.
"""

import json
import re
import sys
from importlib.metadata import version

from bifixer import restorative_cleaning as rc

# Characters that are special in a Python regular expression: a key of Bifixer's character
# table is matched as "\" + key, which is the literal key only when no later character is
# special and the first is not an ASCII letter, digit or underscore (whose escape means
# something else).
SPECIAL = set(".^$*+?{}[]\\|()")


def characters(lang):
    chars, pattern = rc.getCharsReplacements(lang)
    for key in chars:
        first = key[0]
        if (first.isascii() and (first.isalnum() or first == "_")) or any(c in SPECIAL for c in key[1:]):
            sys.exit(f"bifixer-rules: character key {key!r} of {lang} is not a literal in Bifixer's pattern")
    assert pattern.pattern == "(\\" + "|\\".join(chars.keys()) + ")"
    return [[k, v] for k, v in chars.items()]


def punctuation(lang):
    escaped, pattern = rc.getNormalizedPunctReplacements(lang)
    out = []
    for key, value in escaped.items():
        plain = re.sub(r"\\(.)", r"\1", key, flags=re.S)
        if re.escape(plain) != key:
            sys.exit(f"bifixer-rules: punctuation key {key!r} of {lang} does not unescape")
        out.append([plain, value])
    assert pattern.pattern == "|".join(escaped.keys())
    return out


def orthography(lang):
    table = rc.getReplacements(lang)
    for key, value in table.items():
        if not value:
            sys.exit(f"bifixer-rules: the orthographic replacement of {key!r} in {lang} is empty")
    return [[k, v] for k, v in table.items()]


def detokenisation(lang):
    return [[k, list(v)] for k, v in rc.getDetokenizations(lang).items()]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, langs = sys.argv[1], sys.argv[2:]
    rules = {
        "format": "bifixer-rules 1",
        "bifixer": version("bifixer"),
        "languages": {},
    }
    for lang in langs:
        code = lang.lower()
        rules["languages"][code] = {
            "cjk": code in rc.cjk_langs,
            "characters": characters(code),
            "punctuation": punctuation(code),
            "orthography": orthography(code),
            "detokenisation": detokenisation(code),
        }
    text = json.dumps(rules, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
