"""An independent reference implementation of the AFM n-gram decontamination rule.

Written from the book's specification only, NOT from the Rust code (nothing under crates/ was
read while writing it):

  - book/src/afm.md: "Decontamination with a common-usage threshold", "Benchmark n-grams",
    "The `benchmark-ngrams` stage", "The `ngram-decontaminate` stage";
  - book/src/stage-kinds.md, `## decontaminate`, the "Tokens." paragraph;
  - book/src/formats/shards.md, "Documents from input files" (JSON Lines only).

The Rust end-to-end test (tests/test_afm.rs) runs the `benchmark-ngrams` and
`ngram-decontaminate` stages on a corpus, runs this script on the same benchmark and corpus
files, and compares: the counts file's `ngrams` (and its `documents`, `benchmark_examples`),
the stages' statistics `benchmark_too_short` and `benchmark_ngrams`, and the ledger's rule and
evidence for every document.

Usage:

  afm_decontaminate_reference.py --benchmark BENCH.jsonl --docs A.jsonl [--docs B.jsonl ...]
      --min-n 4 --max-n 13 --count documents|occurrences --threshold T
  afm_decontaminate_reference.py --self-test

The corpus is the documents of the --docs files in the given order; the counts are taken over
that same corpus, and every document of it is then decided. One JSON object is printed
(sorted keys, no ASCII escaping, separators "," and ":"):

  {"documents": N, "benchmark_examples": N, "benchmark_too_short": N, "benchmark_ngrams": N,
   "ngrams": [[text, count], ...],            # count >= 1, sorted by the text's UTF-8 bytes
   "ledger": {doc_id: {"rule": "ngram-decontaminate:...", "evidence": null | {...}}}}

Any refusal (bad input, repeated id, bad parameter) exits 1 with the reason on stderr.

It is deliberately simple: benchmark n-grams are tuples of token strings in a dict (compared
exactly, no hashing of our own), and every window of every length of every document is looked
up in that dict.

Ambiguities in the specification, and the reading taken here (the most literal one):

  1. Unicode version. Lowercasing ("`str::to_lowercase`, full Unicode"), the White_Space set
     and the general category P are version-dependent and the book pins no Unicode version.
     This script uses Python's str.lower() and unicodedata (Unicode 14.0.0 in Python 3.11);
     Rust's std and crates may use a newer version. The results can differ only for characters
     assigned after Unicode 14 (e.g. about 40 code points that are P in Unicode 16/17 but
     unassigned in 14). The script prints a warning on stderr when an input text holds a
     character that is unassigned (Cn) in its Unicode database.
  2. Final sigma. "Full Unicode" lowercasing with `str::to_lowercase` maps a capital sigma to
     the final form "ς" at the end of a word (a context-dependent rule), which Python's
     str.lower() also does; the book does not say so, and a reader implementing "lowercase each
     character" would map every Σ to "σ". Taken here: the context rule (as str::to_lowercase).
     Also not said: lowercasing comes before splitting (taken literally: the whole text is
     lowercased, then split), no Unicode normalisation (NFC/NFKC) is applied (taken: none), no
     language tailoring (Turkish dotless i) is applied (taken: none).
  3. "Unicode white space". Taken as the White_Space property (what Rust's split_whitespace
     uses). NOTE: Python's str.split() also splits at U+001C..U+001F, which are not
     White_Space; this script therefore splits with an explicit White_Space set.
  4. "Lines that are empty or only whitespace are skipped" (shards.md): which white space is
     not said. Taken: Unicode White_Space (as Rust's str::trim). Lines are split at "\\n" only
     (a trailing "\\r" is JSON white space and ignored by the parser). A UTF-8 byte order mark,
     non-UTF-8 bytes, NaN/Infinity literals and an object with a repeated member name are not
     addressed by the book; this script refuses all of them.
  5. Overlapping occurrences in `count: occurrences`: "the number of positions where it holds
     it" is taken literally, so overlapping occurrences all count ("a a a" holds "a a" at 2
     positions).
  6. The evidence's `position` for an n-gram held several times: the selection is over
     (n-gram, position) pairs, so the lowest position wins; for the chosen n-gram this is its
     first position. The selection is then total (one n-gram per length and position).
  7. Which corpus the counts are over: the book lets `benchmark-ngrams` and
     `ngram-decontaminate` read different datasets ("0 when absent"). This script takes the
     counts over the very corpus it decides, as the e2e test runs them.
  8. `rare` and `common` count distinct n-grams over all lengths (a 4-gram and the 5-gram that
     extends it are two n-grams), as "distinct rare and common benchmark n-grams" reads.
"""

import argparse
import json
import sys
import time
import unicodedata

RULE_CLEAN = "ngram-decontaminate:clean"
RULE_COMMON = "ngram-decontaminate:common-usage"
RULE_CONTAMINATED = "ngram-decontaminate:contaminated"

# The Unicode White_Space property (PropList.txt; unchanged since Unicode 6.3).
WHITE_SPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)]
    + ["\u0020", "\u0085", "\u00a0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)


class Refusal(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Tokens (stage-kinds.md, decontaminate, "Tokens.")


def is_punctuation(ch):
    return unicodedata.category(ch).startswith("P")


def split_white_space(text):
    """Split at runs of White_Space characters; no empty words."""
    words, current = [], []
    for ch in text:
        if ch in WHITE_SPACE:
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    return words


def strip_punctuation(word):
    start, end = 0, len(word)
    while start < end and is_punctuation(word[start]):
        start += 1
    while end > start and is_punctuation(word[end - 1]):
        end -= 1
    return word[start:end]


def tokens(text):
    lowered = text.lower()  # full Unicode lowercasing, with the final-sigma rule
    out = []
    for word in split_white_space(lowered):
        word = strip_punctuation(word)
        if word:
            out.append(word)
    return out


# ---------------------------------------------------------------------------------------------
# Documents from JSON Lines files (formats/shards.md, "Documents from input files")


def _no_constants(name):
    raise ValueError(f"`{name}` is not JSON")


def _no_repeated_members(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"member `{k}` appears twice")
        obj[k] = v
    return obj


def read_jsonl(path):
    """Yield (id, text) for every document of a .jsonl/.json file, in file order."""
    if not path.lower().endswith((".jsonl", ".json")):
        raise Refusal(f"{path}: only plain JSON Lines (.jsonl, .json) is supported here")
    data = open(path, "rb").read()
    if data.startswith(b"\xef\xbb\xbf"):
        raise Refusal(f"{path}: starts with a byte order mark")
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refusal(f"{path}: not UTF-8: {e}")
    for lineno, line in enumerate(content.split("\n"), start=1):
        if all(ch in WHITE_SPACE for ch in line):
            continue
        try:
            obj = json.loads(
                line, parse_constant=_no_constants, object_pairs_hook=_no_repeated_members
            )
        except ValueError as e:
            raise Refusal(f"{path}:{lineno}: not a JSON object: {e}")
        if not isinstance(obj, dict):
            raise Refusal(f"{path}:{lineno}: not a JSON object")
        if "id" not in obj:
            raise Refusal(f"{path}:{lineno}: field `id` is missing")
        doc_id = obj["id"]
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise Refusal(f"{path}:{lineno}: field `id`: expected a string or an integer")
        if isinstance(doc_id, int):
            doc_id = str(doc_id)
        if "text" not in obj:
            raise Refusal(f"{path}:{lineno}: field `text` is missing")
        if not isinstance(obj["text"], str):
            raise Refusal(f"{path}:{lineno}: field `text`: expected a string")
        for field in ("url", "date", "language"):
            if field in obj and obj[field] is not None and not isinstance(obj[field], str):
                raise Refusal(f"{path}:{lineno}: field `{field}`: expected a string or null")
        yield doc_id, obj["text"]


def warn_unassigned(where, text):
    for ch in text:
        if unicodedata.category(ch) == "Cn":
            print(
                f"warning: {where}: U+{ord(ch):04X} is unassigned in Unicode "
                f"{unicodedata.unidata_version}; its case and category may differ in Rust",
                file=sys.stderr,
            )
            return


# ---------------------------------------------------------------------------------------------
# Benchmark n-grams (afm.md, "Benchmark n-grams")


def benchmark_ngrams(examples, min_n, max_n):
    """examples: list of (id, text) in benchmark order.

    Returns (names, too_short): names maps each benchmark n-gram (a tuple of tokens) to the id
    of the first example, in benchmark order, that holds it."""
    names = {}
    too_short = 0
    seen_ids = set()
    for ex_id, text in examples:
        if ex_id in seen_ids:
            raise Refusal(f"benchmark example id `{ex_id}` appears twice; ids must name examples")
        seen_ids.add(ex_id)
        toks = tokens(text)
        if len(toks) < min_n:
            too_short += 1
        for n in range(min_n, max_n + 1):
            for p in range(0, len(toks) - n + 1):
                gram = tuple(toks[p : p + n])
                if gram not in names:
                    names[gram] = ex_id
    return names, too_short


def held(toks, names, min_n, max_n):
    """Every (n-gram, position) a document holds: a dict n-gram -> list of positions."""
    out = {}
    for n in range(min_n, max_n + 1):
        for p in range(0, len(toks) - n + 1):
            gram = tuple(toks[p : p + n])
            if gram in names:
                out.setdefault(gram, []).append(p)
    return out


def ngram_text(gram):
    return " ".join(gram)


# ---------------------------------------------------------------------------------------------
# The two stages


def run(benchmark_path, docs_paths, min_n, max_n, count, threshold, warn=True):
    if min_n < 1:
        raise Refusal("min_n must be at least 1")
    if max_n < min_n or max_n > 64:
        raise Refusal("max_n must be at least min_n and at most 64")
    if count not in ("documents", "occurrences"):
        raise Refusal("count must be `documents` or `occurrences`")
    if threshold < 1:
        raise Refusal("threshold must be at least 1")

    examples = list(read_jsonl(benchmark_path))
    if warn:
        for ex_id, text in examples:
            warn_unassigned(f"benchmark example `{ex_id}`", text)
    names, too_short = benchmark_ngrams(examples, min_n, max_n)

    # benchmark-ngrams: count over the corpus. The per-document holdings are kept for the
    # decision below (a pure function of the document's tokens, so computing them once is the
    # same as computing them again).
    counts = {}
    corpus = []  # (id, holdings)
    seen_ids = set()
    for path in docs_paths:
        for doc_id, text in read_jsonl(path):
            if doc_id in seen_ids:
                raise Refusal(f"corpus document id `{doc_id}` appears twice")
            seen_ids.add(doc_id)
            if warn:
                warn_unassigned(f"document `{doc_id}`", text)
            h = held(tokens(text), names, min_n, max_n)
            for gram, positions in h.items():
                add = 1 if count == "documents" else len(positions)
                counts[gram] = counts.get(gram, 0) + add
            corpus.append((doc_id, h))

    ngrams_list = sorted(
        ([ngram_text(g), c] for g, c in counts.items() if c >= 1),
        key=lambda pair: pair[0].encode("utf-8"),
    )

    # ngram-decontaminate: decide each document.
    ledger = {}
    for doc_id, h in corpus:
        rare = [g for g in h if counts.get(g, 0) < threshold]
        common = [g for g in h if counts.get(g, 0) >= threshold]
        if not h:
            ledger[doc_id] = {"rule": RULE_CLEAN, "evidence": None}
            continue
        if rare:
            rule, deciding = RULE_CONTAMINATED, rare
        else:
            rule, deciding = RULE_COMMON, common
        # Every (n-gram, position) pair of the deciding kind; the longest, then the lowest
        # count, then the lowest position.
        pairs = [(g, p) for g in deciding for p in h[g]]
        best_gram, best_pos = min(
            pairs, key=lambda gp: (-len(gp[0]), counts.get(gp[0], 0), gp[1])
        )
        ledger[doc_id] = {
            "rule": rule,
            "evidence": {
                "benchmark": names[best_gram],
                "ngram": ngram_text(best_gram),
                "n": len(best_gram),
                "corpus_count": counts.get(best_gram, 0),
                "position": best_pos,
                "rare": len(rare),
                "common": len(common),
            },
        }

    return {
        "documents": len(corpus),
        "benchmark_examples": len(examples),
        "benchmark_too_short": too_short,
        "benchmark_ngrams": len(names),
        "ngrams": ngrams_list,
        "ledger": ledger,
    }


def dumps(obj):
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# Self-test: small cases whose expected outputs were derived by hand from the book.


def ev(benchmark, ngram, count, position, rare, common):
    return {
        "benchmark": benchmark,
        "ngram": ngram,
        "n": len(ngram.split(" ")),
        "corpus_count": count,
        "position": position,
        "rare": rare,
        "common": common,
    }


def clean():
    return {"rule": RULE_CLEAN, "evidence": None}


def common_usage(*a):
    return {"rule": RULE_COMMON, "evidence": ev(*a)}


def contaminated(*a):
    return {"rule": RULE_CONTAMINATED, "evidence": ev(*a)}


def self_test_cases():
    cases = []

    # A. The threshold boundary: a count equal to the threshold is common, one under is rare.
    #    Tokens of b1: alpha beta gamma delta; n in 2..3 -> 3 + 2 = 5 distinct n-grams.
    cases.append(
        dict(
            name="A threshold boundary",
            bench=[{"id": "b1", "text": "Alpha beta gamma delta"}],
            docs=[[
                {"id": "d1", "text": "Alpha, beta!"},
                {"id": "d2", "text": "(alpha) BETA zeta"},
                {"id": "d3", "text": "beta gamma."},
                {"id": "d4", "text": "nothing here"},
            ]],
            min_n=2, max_n=3, count="documents", threshold=2,
            expected={
                "documents": 4, "benchmark_examples": 1, "benchmark_too_short": 0,
                "benchmark_ngrams": 5,
                "ngrams": [["alpha beta", 2], ["beta gamma", 1]],
                "ledger": {
                    "d1": common_usage("b1", "alpha beta", 2, 0, 0, 1),
                    "d2": common_usage("b1", "alpha beta", 2, 0, 0, 1),
                    "d3": contaminated("b1", "beta gamma", 1, 0, 1, 0),
                    "d4": clean(),
                },
            },
        )
    )

    # B. Tokens: Unicode lowercasing (with final sigma), White_Space (not U+001C), punctuation
    #    stripped from both ends only, symbols kept, empty words dropped, no normalisation.
    #    "fr" -> tous les êtres (1 n-gram); "g" -> οδος και πολη with a final ς (1 n-gram);
    #    "short" -> 2 tokens < 3.
    cases.append(
        dict(
            name="B tokens",
            bench=[
                {"id": "fr", "text": "« Tous les êtres »"},
                {"id": "g", "text": "ΟΔΟΣ ΚΑΙ ΠΟΛΗ"},
                {"id": "short", "text": "Hello, World!"},
            ],
            docs=[[
                {"id": "t01", "text": "TOUS\u00a0LES\u3000ÊTRES!!!"},
                {"id": "t02", "text": "tous les-êtres"},
                {"id": "t03", "text": "$tous les êtres"},
                {"id": "t04", "text": "tous\u001cles êtres"},
                {"id": "t05", "text": "¿Tous les êtres?"},
                {"id": "t06", "text": "οδοσ και πολη"},
                {"id": "t07", "text": "Οδος και πολη"},
                {"id": "t08", "text": "\"tous\" \u2028les\t\têtres\u2026"},
                {"id": "t09", "text": "tous les e\u0302tres"},
                {"id": "t10", "text": "'tous' les êtres"},
                {"id": "t11", "text": "x tous -- les êtres"},
                {"id": "t12", "text": "hello world"},
            ]],
            min_n=3, max_n=3, count="documents", threshold=1000,
            expected={
                "documents": 12, "benchmark_examples": 3, "benchmark_too_short": 1,
                "benchmark_ngrams": 2,
                "ngrams": [["tous les êtres", 5], ["οδος και πολη", 1]],
                "ledger": {
                    "t01": contaminated("fr", "tous les êtres", 5, 0, 1, 0),
                    "t02": clean(),
                    "t03": clean(),
                    "t04": clean(),
                    "t05": contaminated("fr", "tous les êtres", 5, 0, 1, 0),
                    "t06": clean(),
                    "t07": contaminated("g", "οδος και πολη", 1, 0, 1, 0),
                    "t08": contaminated("fr", "tous les êtres", 5, 0, 1, 0),
                    "t09": clean(),
                    "t10": contaminated("fr", "tous les êtres", 5, 0, 1, 0),
                    "t11": contaminated("fr", "tous les êtres", 5, 1, 1, 0),
                    "t12": clean(),
                },
            },
        )
    )

    # C. count: occurrences vs documents. Benchmark "a b a b a", n = 2: "a b", "b a".
    #    d1 "a b a b": a b @0,@2; b a @1. d2 "a b": a b @0.
    #    occurrences: a b 3, b a 1; documents: a b 2, b a 1.
    c_bench = [{"id": "x", "text": "a b a b a"}]
    c_docs = [[{"id": "d1", "text": "a b a b"}, {"id": "d2", "text": "a b"}]]
    cases.append(
        dict(
            name="C1 occurrences",
            bench=c_bench, docs=c_docs, min_n=2, max_n=2, count="occurrences", threshold=3,
            expected={
                "documents": 2, "benchmark_examples": 1, "benchmark_too_short": 0,
                "benchmark_ngrams": 2,
                "ngrams": [["a b", 3], ["b a", 1]],
                "ledger": {
                    "d1": contaminated("x", "b a", 1, 1, 1, 1),
                    "d2": common_usage("x", "a b", 3, 0, 0, 1),
                },
            },
        )
    )
    cases.append(
        dict(
            name="C2 documents",
            bench=c_bench, docs=c_docs, min_n=2, max_n=2, count="documents", threshold=3,
            expected={
                "documents": 2, "benchmark_examples": 1, "benchmark_too_short": 0,
                "benchmark_ngrams": 2,
                "ngrams": [["a b", 2], ["b a", 1]],
                "ledger": {
                    "d1": contaminated("x", "b a", 1, 1, 2, 0),
                    "d2": contaminated("x", "a b", 2, 0, 1, 0),
                },
            },
        )
    )
    # C3. Overlapping occurrences: "a a a" -> "a a", "a a a". Doc "a a a a": "a a" at 0,1,2;
    #     "a a a" at 0,1.
    cases.append(
        dict(
            name="C3 overlapping occurrences",
            bench=[{"id": "x", "text": "a a a"}],
            docs=[[{"id": "d", "text": "a a a a"}]],
            min_n=2, max_n=3, count="occurrences", threshold=3,
            expected={
                "documents": 1, "benchmark_examples": 1, "benchmark_too_short": 0,
                "benchmark_ngrams": 2,
                "ngrams": [["a a", 3], ["a a a", 2]],
                "ledger": {"d": contaminated("x", "a a a", 2, 0, 1, 1)},
            },
        )
    )

    # D1. The longest n-gram wins even when a shorter one has a lower count.
    #     e1 "a b c d": a b, b c, c d, a b c, b c d (5).
    #     d1,d2 "a b c"; d3 "x c d" (c d @1); d4 "a b c y c d".
    #     counts: a b 3, b c 3, a b c 3, c d 2.
    cases.append(
        dict(
            name="D1 longest first",
            bench=[{"id": "e1", "text": "a b c d"}],
            docs=[[
                {"id": "d1", "text": "a b c"},
                {"id": "d2", "text": "a b c"},
                {"id": "d3", "text": "x c d"},
                {"id": "d4", "text": "a b c y c d"},
            ]],
            min_n=2, max_n=3, count="documents", threshold=100,
            expected={
                "documents": 4, "benchmark_examples": 1, "benchmark_too_short": 0,
                "benchmark_ngrams": 5,
                "ngrams": [["a b", 3], ["a b c", 3], ["b c", 3], ["c d", 2]],
                "ledger": {
                    "d1": contaminated("e1", "a b c", 3, 0, 3, 0),
                    "d2": contaminated("e1", "a b c", 3, 0, 3, 0),
                    "d3": contaminated("e1", "c d", 2, 1, 1, 0),
                    "d4": contaminated("e1", "a b c", 3, 0, 4, 0),
                },
            },
        )
    )

    # D2. Among the longest, the lowest count (even at a later position); on equal counts,
    #     the lowest position. e1 "a b", e2 "c d", e3 "e f"; n = 2.
    #     counts: a b 4 (d1,d3,d4,d6), c d 4 (d1,d2,d5,d6), e f 2 (d1,d5).
    cases.append(
        dict(
            name="D2 lowest count, then lowest position",
            bench=[
                {"id": "e1", "text": "a b"},
                {"id": "e2", "text": "c d"},
                {"id": "e3", "text": "e f"},
            ],
            docs=[[
                {"id": "d1", "text": "a b c d e f"},
                {"id": "d2", "text": "c d"},
                {"id": "d3", "text": "a b"},
                {"id": "d4", "text": "a b"},
                {"id": "d5", "text": "e f c d"},
                {"id": "d6", "text": "c d x a b"},
            ]],
            min_n=2, max_n=2, count="documents", threshold=100,
            expected={
                "documents": 6, "benchmark_examples": 3, "benchmark_too_short": 0,
                "benchmark_ngrams": 3,
                "ngrams": [["a b", 4], ["c d", 4], ["e f", 2]],
                "ledger": {
                    "d1": contaminated("e3", "e f", 2, 4, 3, 0),
                    "d2": contaminated("e2", "c d", 4, 0, 1, 0),
                    "d3": contaminated("e1", "a b", 4, 0, 1, 0),
                    "d4": contaminated("e1", "a b", 4, 0, 1, 0),
                    "d5": contaminated("e3", "e f", 2, 0, 2, 0),
                    "d6": contaminated("e2", "c d", 4, 0, 2, 0),
                },
            },
        )
    )

    # E. Naming by the first example, a too-short example, a rare n-gram among common ones,
    #    several --docs files in order, an integer id, a blank line.
    #    e2 "one two three four": one two three, two three four, one two three four.
    #    e3 "Two three four five": two three four (named by e2), three four five,
    #    two three four five. 5 distinct. e1 has 2 tokens < min_n 3.
    #    counts: one two three 2, one two three four 2, two three four 3, three four five 1,
    #    two three four five 1. threshold 2.
    cases.append(
        dict(
            name="E naming, mixed, files",
            bench=[
                {"id": "e1", "text": "one two"},
                {"id": "e2", "text": "one two three four"},
                {"id": "e3", "text": "Two three four five"},
            ],
            docs=[
                [{"id": "a1", "text": "One two three four"},
                 {"id": "a2", "text": "one two three four!"}],
                [{"id": "b1", "text": "two three four five"},
                 {"id": 7, "text": "zero"}],
            ],
            min_n=3, max_n=4, count="documents", threshold=2,
            expected={
                "documents": 4, "benchmark_examples": 3, "benchmark_too_short": 1,
                "benchmark_ngrams": 5,
                "ngrams": [
                    ["one two three", 2],
                    ["one two three four", 2],
                    ["three four five", 1],
                    ["two three four", 3],
                    ["two three four five", 1],
                ],
                "ledger": {
                    "a1": common_usage("e2", "one two three four", 2, 0, 0, 3),
                    "a2": common_usage("e2", "one two three four", 2, 0, 0, 3),
                    "b1": contaminated("e3", "two three four five", 1, 0, 2, 1),
                    "7": clean(),
                },
            },
        )
    )
    return cases


def self_test():
    import os
    import tempfile

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(self_test_cases()):
            bench = os.path.join(tmp, f"bench{i}.jsonl")
            with open(bench, "w", encoding="utf-8") as f:
                for obj in case["bench"]:
                    f.write(json.dumps(obj, ensure_ascii=False) + "\n")
            docs = []
            for j, objs in enumerate(case["docs"]):
                path = os.path.join(tmp, f"docs{i}_{j}.jsonl")
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n")  # a blank line, skipped
                    for obj in objs:
                        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
                docs.append(path)
            got = run(bench, docs, case["min_n"], case["max_n"], case["count"],
                      case["threshold"], warn=False)
            # Round-trip through the printed form, as the Rust test reads it.
            got = json.loads(dumps(got))
            if got == case["expected"]:
                print(f"ok   {case['name']}")
            else:
                failures += 1
                print(f"FAIL {case['name']}\n  expected {dumps(case['expected'])}\n"
                      f"  got      {dumps(got)}")

        # Refusals: a repeated benchmark id, a repeated corpus id.
        for name, bench_objs, doc_objs in [
            ("repeated benchmark id",
             [{"id": "x", "text": "a b"}, {"id": "x", "text": "c d"}],
             [{"id": "d", "text": "a b"}]),
            ("repeated corpus id",
             [{"id": "x", "text": "a b"}],
             [{"id": "d", "text": "a b"}, {"id": "d", "text": "c"}]),
        ]:
            bench = os.path.join(tmp, "rb.jsonl")
            docs = os.path.join(tmp, "rd.jsonl")
            with open(bench, "w") as f:
                f.write("".join(json.dumps(o) + "\n" for o in bench_objs))
            with open(docs, "w") as f:
                f.write("".join(json.dumps(o) + "\n" for o in doc_objs))
            try:
                run(bench, [docs], 1, 2, "documents", 1, warn=False)
                failures += 1
                print(f"FAIL {name}: not refused")
            except Refusal as e:
                print(f"ok   {name} refused: {e}")

    # The White_Space set against the regex module's \p{White_Space}, when it is installed.
    try:
        import regex
    except ImportError:
        print("skip White_Space cross-check (no `regex` module)")
    else:
        ws = regex.compile(r"\p{White_Space}")
        theirs = {chr(c) for c in range(sys.maxunicode + 1) if ws.match(chr(c))}
        if theirs == WHITE_SPACE:
            print("ok   White_Space set equals regex's \\p{White_Space}")
        else:
            failures += 1
            print(f"FAIL White_Space set differs: {sorted(map(ord, theirs ^ WHITE_SPACE))}")

    if failures:
        print(f"{failures} self-test(s) failed")
        return 1
    print("all self-tests passed")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--benchmark")
    ap.add_argument("--docs", action="append", default=[])
    ap.add_argument("--min-n", type=int, default=4)
    ap.add_argument("--max-n", type=int, default=13)
    ap.add_argument("--count", choices=["documents", "occurrences"], default="documents")
    ap.add_argument("--threshold", type=int, default=1000)
    ap.add_argument("--timing", action="store_true", help="print the elapsed time on stderr")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    if not args.benchmark or not args.docs:
        ap.error("--benchmark and at least one --docs are required")
    start = time.monotonic()
    try:
        result = run(args.benchmark, args.docs, args.min_n, args.max_n, args.count,
                     args.threshold)
    except Refusal as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(dumps(result) + "\n")
    if args.timing:
        print(f"elapsed {time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
