"""EuroLLM's heuristic filter (EuroLLM-22B report, section 2.3) in plain Python.

Written from the definitions in the book ("The EuroLLM recipe", "What the heuristics count"),
not from the Rust, for two uses:

- crates/prov-heuristics/tests/python_reference.rs feeds it real documents and compares its
  decisions, removed paragraphs and kept text with Provenant's, document by document;
- scripts/bench-heuristics times it against `prov`'s rules on the same corpus, one core each.

Usage: heuristics_reference.py [--config JSON] [--bench] < documents.jsonl
Each input line is {"id", "text"}; each output line is {"id", "rule", "evidence", "text"}
with "text" only for a document whose paragraphs were removed. With --bench nothing is
written per document: the last line is {"documents", "bytes", "seconds"}.

Needs the `regex` module (pinned in lockfiles/requirements.txt) for Unicode properties,
which Python's `re` does not know.
"""

import json
import sys
import time

import regex

DEFAULTS = {
    "min_chars": 200,
    "lorem_ipsum": True,
    "javascript": True,
    "curly_brackets": True,
    "max_uppercase_fraction": 0.4,
    "max_symbol_word_ratio": 0.1,
    "max_non_alpha_word_fraction": 0.2,
}

WHITESPACE = regex.compile(r"\p{White_Space}+")
LETTER = regex.compile(r"\p{Alphabetic}")
UPPERCASE_LETTER = regex.compile(r"[\p{Alphabetic}&&\p{Uppercase}]", regex.V1)
LOREM_IPSUM = regex.compile(r"[Ll][Oo][Rr][Ee][Mm]\p{White_Space}+[Ii][Pp][Ss][Uu][Mm]")
# A letter or digit: Unicode Alphabetic or a number (general category N).
JAVASCRIPT = regex.compile(
    r"(?<![\p{Alphabetic}\p{N}])[Jj][Aa][Vv][Aa][Ss][Cc][Rr][Ii][Pp][Tt](?![\p{Alphabetic}\p{N}])"
)


def paragraph_rule(p, c):
    """The rule that removes paragraph `p`, or None: uppercase, symbol ratio, words without letters."""
    letters = len(LETTER.findall(p))
    if letters and len(UPPERCASE_LETTER.findall(p)) / letters > c["max_uppercase_fraction"]:
        return "uppercase"
    words = [w for w in WHITESPACE.split(p) if w]
    if not words:
        return None
    n = len(words)
    ellipses = p.count("...") + p.count("\u2026")
    if p.count("#") / n > c["max_symbol_word_ratio"] or ellipses / n > c["max_symbol_word_ratio"]:
        return "symbol-ratio"
    if sum(1 for w in words if not LETTER.search(w)) / n > c["max_non_alpha_word_fraction"]:
        return "non-alpha-words"
    return None


def page_rule(text, c):
    """(rule, first match) of the first page rule that matches, or None."""
    if c["lorem_ipsum"]:
        m = LOREM_IPSUM.search(text)
        if m:
            return "lorem-ipsum", m.start(), m.group()
    if c["javascript"]:
        m = JAVASCRIPT.search(text)
        if m:
            return "javascript", m.start(), m.group()
    if c["curly_brackets"]:
        found = [i for i in (text.find("{"), text.find("}")) if i >= 0]
        if found:
            return "curly-bracket", min(found), text[min(found)]
    return None


def decide(text, c):
    page = page_rule(text, c)
    if page:
        rule, at, matched = page
        return rule, {"paragraph": text.count("\n", 0, at), "match": matched}, None
    paragraphs = text.split("\n")
    kept, removed = [], {}
    for i, p in enumerate(paragraphs):
        rule = paragraph_rule(p, c)
        if rule is None:
            kept.append(p)
        else:
            removed.setdefault(rule, []).append(i)
    left = "\n".join(kept)
    evidence = {"paragraphs": len(paragraphs), "removed": removed, "chars": len(left)}
    if len(left) < c["min_chars"]:
        return "too-short", evidence, None
    if not removed:
        return "kept", None, None
    return "paragraphs", evidence, left


def main():
    args = sys.argv[1:]
    config = dict(DEFAULTS)
    if "--config" in args:
        config.update(json.loads(args[args.index("--config") + 1]))
    bench = "--bench" in args
    docs = [json.loads(line) for line in sys.stdin.buffer.read().decode("utf-8").split("\n") if line]
    out = []
    start = time.perf_counter()
    for d in docs:
        rule, evidence, text = decide(d["text"], config)
        if not bench:
            row = {"id": d["id"], "rule": rule, "evidence": evidence}
            if text is not None:
                row["text"] = text
            out.append(json.dumps(row, ensure_ascii=False))
    seconds = time.perf_counter() - start
    if bench:
        size = sum(len(d["text"].encode("utf-8")) for d in docs)
        out.append(json.dumps({"documents": len(docs), "bytes": size, "seconds": seconds}))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
