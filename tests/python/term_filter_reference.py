"""An independent reference implementation of the `term-filter` stage (profanity and math lists).

Written from the book's specification only, NOT from the Rust code (nothing under crates/ was
read while writing it or revising it):

  - book/src/afm.md, "## Term-list filters: profanity and math": the params table (`mode`,
    `match`, `case`, `min_matches`), "Inputs" (one list file, or a directory of per-language
    lists `<language>.txt` with its license and README files passed over), the matching of a
    document against its primary language's list, "Occurrences", "Decision" (with the rule
    `term-filter:no-list`), the evidence and the statistics `terms`;
  - book/src/formats/shards.md, "Documents from input files" (JSON Lines only), for reading
    the documents (`id`, `text`, and the optional `language`, a string or null).

How tests/test_afm.rs uses it (`term_filters_decide_as_the_independent_reference`): the test
runs three `term-filter` stages on the main job's corpus (debian.jsonl and udhr.jsonl, in 3
shards): the profanity lists as a directory (`recipes/data/mini-afm/profanity/`, one
`<language>.txt` per language; remove, word, insensitive, min_matches 1), the math tags
(`math-tags.txt`; keep, substring, sensitive, 1) and the math symbols (`math-symbols.txt`;
keep, substring, sensitive, 3). For each it runs this script with the same list (file or
directory), the same two corpus files and the same parameters, and asserts that the stage's
statistics `terms` equals this script's `terms` map and that every ledger row's rule, decision
and evidence equals this script's for that document id (and that the profanity filter gives
three rules: clean, matched and no-list).

Usage:

  term_filter_reference.py --terms TERMS.txt|TERMS_DIR --docs A.jsonl [--docs B.jsonl ...]
      --mode remove|keep --match word|substring --case insensitive|sensitive --min-matches N
      [--timing]
  term_filter_reference.py --self-test

`--terms` a file: its list applies to every document. `--terms` a directory: per-language
lists, each document matched against the list of its primary language subtag.

One JSON object is printed (sorted keys, no ASCII escaping, separators "," and ":"):

  {"terms": {"*": N} | {language: N, ...},
   "ledger": {doc_id: {"rule": "term-filter:clean|matched|unmatched|no-list",
                       "decision": "kept"|"removed",
                       "evidence": null | {"term": t, "matches": n, "distinct": d}
                                   | {"language": subtag}}}}

Any refusal (a list with no term, a repeated term, a file in the directory that is neither a
list nor passed over, a repeated document id, bad input, a bad parameter) exits 1 with the
reason on stderr.

How it works (kept deliberately simple): the text is lowercased as a whole (when
case-insensitive) and every term is searched with str.find from every next character, so that
every (term, position) pair is seen, overlapping ones included. To keep ~2,000 terms against
~17,000 documents fast, a term is only searched in a document that contains the term's first
character (a term whose first character is absent cannot occur; this is a filter only, the
count itself is the plain search). Positions are Python character indexes; a valid UTF-8 term
can only match a valid UTF-8 text at a character boundary (UTF-8 is self-synchronising), so
the (term, byte position) pairs of the book and the (term, character index) pairs here are the
same pairs. The first occurrence is nevertheless chosen on the byte position (the UTF-8 length
of the text before it) and, at one position, on the UTF-8 length of the lowercased term (the
term as matched: lowercased alone when case-insensitive; when case-sensitive the longer of two
terms at one position also has the longer lowercase, since lowercasing never maps a character
to nothing and the final-sigma rule keeps byte lengths).

"Alphanumeric" (Rust's char::is_alphanumeric: the Alphabetic property, or the general category
N = Nd|Nl|No) is tested with the third-party `regex` module, `[\\p{Alphabetic}\\p{N}]`, whose
Unicode tables are newer (17.0 at the time of writing) than Python 3.11's unicodedata (14.0).
Python's str.isalnum() is NOT used: it misses combining marks and symbols with the
Other_Alphabetic property (U+0903, U+0345, the circled letters U+24B6.. "Ⓐ", ...).

What the revised section settles (and this script does): the terms of a case-insensitive list
are lowercased alone (so is the duplicate check); the word check looks at the lowercased text;
"longest" is by the bytes of the lowercased term; a document with at least one counting
occurrence has the evidence also when it has fewer than `min_matches`; a repeated term is
reported at the line of its second appearance; `terms` is a map (`*` for a single list).

Ambiguities in the specification, and the reading taken here:

  1. Unicode versions. The book pins Unicode 16 (the Rust standard library's) for the
     properties; lowercasing here is Python's str.lower() (Unicode 14.0 in Python 3.11; full
     mappings and the context-dependent final sigma, as Rust's str::to_lowercase), and the
     `regex` module's Alphabetic/N tables are Unicode 17.0. A character assigned after 14.0
     may lowercase differently, and one assigned in 17.0 is alphanumeric here but not in
     Rust's Unicode 16 tables. The script warns on stderr when a text or term holds a
     character that is unassigned in Python's Unicode tables (which covers both cases).
  2. Lowercasing is context-dependent (final sigma): the text is lowercased as a whole and each
     term alone, so the case-insensitive term "ΑΣ" (lowercased alone: "ας") does not occur in
     "ΑΣΑ" (lowercased: "ασα"), although it occurs there case-sensitively. Taken literally, as
     the section now says.
  3. The word check applies to the characters next to the occurrence whatever the term's own
     first and last characters are: the term " ass" does not count in "a ass" (before it:
     "a"), and the term "foo " does not count in "foo bar" (after it: "b"). Lowercasing can
     change the neighbour: "İSTANBUL" lowercases to "i" U+0307 "stanbul", so the term
     "stanbul" stands alone there case-insensitively (U+0307 is not alphanumeric) but not
     case-sensitively.
  4. Evidence `matches`, `distinct` and the first occurrence are over the occurrences that
     count (with `match: word`, those that stand alone).
  5. List files: split at "\\n" only (not at other Unicode line breaks); one trailing "\\r"
     dropped; a line of only white space is a term (nothing else is trimmed); a term cannot
     begin with "#". The line number reported for a repeated term is the 1-based line of its
     second appearance (the first is named too). A UTF-8 byte order mark and invalid UTF-8
     are not addressed by the book; this script refuses both. Every list of a directory is
     read and checked (no term, a repeated term) even if no document has its language.
  6. The directory of lists (not settled by the book):
     a. A name that is both passed over and a list name (`license.txt`, `notice.txt`,
        `copying.txt`, `readme.txt`, `readme2.txt`...) is passed over: the passed-over
        names are read as an exception to the lists, not the other way round.
     b. "In any case" is ASCII case (the names are matched with ASCII-only case folding;
        `LICENſE` with a long s is not a license name). `<language>.txt` is taken
        literally: one or more of `a`-`z` `0`-`9`, then `.txt` in lowercase (`DE.txt`,
        `de.TXT`, `de-at.txt`, `.txt` fail the stage).
     c. Only the directory's own files can be lists; a file in a subdirectory fails the
        stage unless its own name is passed over (`sub/LICENSE`). A symbolic link or other
        non-regular entry fails too (a source directory cannot hold one).
     d. A directory with no list at all (only passed-over files, or empty) is accepted:
        `terms` is `{}` and every document is `no-list`.
     e. A list may be named `und.txt`: it is then the list of the documents without a
        language (and of those whose language is `und...`).
  7. A document's language: absent or null gives `und`; the primary subtag is the part
     before the first `-` or `_`, with only `A`-`Z` lowercased (`DE_at` gives `de`; non-ASCII
     letters are left as they are and can match no list). An empty `language` (or one that
     starts with `-` or `_`) gives the empty subtag: the document is `no-list` with the
     evidence `{"language": ""}`, not `und` (the book says `und` only "without a language").
     With a single list, `language` is read (and must be a string or null) but not used.
  8. `min_matches` 0 is refused ("at least 1").
  9. Documents (shards.md): `id` a string or an integer (its decimal text); `text` a string;
     `language` absent, null or a string; blank lines (Unicode White_Space only) skipped. A
     byte order mark, invalid UTF-8, a text that is not valid Unicode (a lone surrogate
     escape), NaN/Infinity and a repeated member name are refused here.
"""

import argparse
import json
import os
import re
import stat
import sys
import time
import unicodedata

try:
    import regex
except ImportError:  # pragma: no cover - the project's venv has it
    regex = None

RULE_CLEAN = "term-filter:clean"
RULE_MATCHED = "term-filter:matched"
RULE_UNMATCHED = "term-filter:unmatched"
RULE_NO_LIST = "term-filter:no-list"

SINGLE = "*"  # the `terms` statistics' key for a single list


class Refusal(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Alphanumeric: Rust's char::is_alphanumeric = Alphabetic property, or general category N.

if regex is not None:
    _ALNUM_RE = regex.compile(r"[\p{Alphabetic}\p{N}]")

    def _alnum_uncached(ch):
        return _ALNUM_RE.match(ch) is not None
else:  # Standard-library approximation: misses Other_Alphabetic marks and symbols.

    def _alnum_uncached(ch):
        return ch.isalpha() or unicodedata.category(ch) in ("Nd", "Nl", "No")


_ALNUM_CACHE = {}


def is_alphanumeric(ch):
    r = _ALNUM_CACHE.get(ch)
    if r is None:
        r = _alnum_uncached(ch)
        _ALNUM_CACHE[ch] = r
    return r


def warn_unassigned(where, text, warn):
    if not warn:
        return
    for ch in set(text):
        if unicodedata.category(ch) == "Cn":
            print(
                f"warning: {where}: U+{ord(ch):04X} is unassigned in Python's Unicode "
                f"{unicodedata.unidata_version}; its lowercase may differ in Rust",
                file=sys.stderr,
            )


# ---------------------------------------------------------------------------------------------
# The term lists (afm.md, "Inputs")


def read_terms(path, case):
    """Returns a list of (listed, key): the term as the list spells it, and as it is matched
    (lowercased alone when case-insensitive)."""
    data = open(path, "rb").read()
    if data.startswith(b"\xef\xbb\xbf"):
        raise Refusal(f"{path}: starts with a byte order mark")
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refusal(f"{path}: not UTF-8: {e}")
    terms = []
    first_line = {}
    for lineno, line in enumerate(content.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if line == "" or line.startswith("#"):
            continue
        key = line.lower() if case == "insensitive" else line
        if key in first_line:
            how = " after lowercasing" if case == "insensitive" else ""
            raise Refusal(
                f"{path}:{lineno}: term `{line}` appears twice{how} "
                f"(first on line {first_line[key]})"
            )
        first_line[key] = lineno
        terms.append((line, key))
    if not terms:
        raise Refusal(f"{path}: the list has no term")
    return terms


# License and notice files: one of these words, in any (ASCII) case, followed by nothing, `.`,
# `-` or `_` (and then anything); README files: any name starting `README` in any case.
PASSED_OVER = re.compile(
    r"(?:LICENSE|LICENCE|COPYING|COPYRIGHT|UNLICENSE|NOTICE)(?:[._-].*)?|README.*",
    re.ASCII | re.IGNORECASE | re.DOTALL,
)
# A list: `<language>.txt`, the language a primary subtag in lowercase ASCII letters and digits.
LIST_NAME = re.compile(r"([a-z0-9]+)\.txt", re.ASCII | re.DOTALL)


def is_passed_over(name):
    return PASSED_OVER.fullmatch(name) is not None


def read_lists(path, case):
    """Returns (per_language, {language: terms}): one list under `*` for a file, or the
    directory's lists by language (docstring, reading 6)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise Refusal(f"{path}: {e.strerror}")
    if not stat.S_ISDIR(st.st_mode):
        return False, {SINGLE: read_terms(path, case)}
    lists = {}
    entries = []  # (relative path, full path), every entry of the tree but directories
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in list(dirs):
            full = os.path.join(root, name)
            if os.path.islink(full):  # os.walk lists a link to a directory among dirs
                dirs.remove(name)
                entries.append((os.path.relpath(full, path), full))
        for name in sorted(files):
            full = os.path.join(root, name)
            entries.append((os.path.relpath(full, path), full))
    for rel, full in sorted(entries):
        name = os.path.basename(rel)
        st = os.lstat(full)
        if not stat.S_ISREG(st.st_mode):
            raise Refusal(f"{path}: `{rel}` is not a regular file")
        if is_passed_over(name):
            continue
        m = LIST_NAME.fullmatch(rel)
        if m is None:
            raise Refusal(
                f"{path}: `{rel}` is neither a list (`<language>.txt`, the language in "
                f"lowercase ASCII letters and digits) nor a license, notice or README file"
            )
        lists[m.group(1)] = read_terms(full, case)
    return True, lists


def primary_subtag(language):
    """The document's primary language subtag: `und` without a language; else the language up
    to the first `-` or `_`, ASCII-lowercased."""
    if language is None:
        return "und"
    cut = len(language)
    for sep in ("-", "_"):
        i = language.find(sep)
        if i != -1:
            cut = min(cut, i)
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in language[:cut])


# ---------------------------------------------------------------------------------------------
# Documents from JSON Lines files (formats/shards.md, "Documents from input files")

WHITE_SPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)]
    + ["\u0020", "\u0085", "\u00a0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)


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
    """Yield (id, text, language) for every document of a .jsonl/.json file, in file order;
    language is None when the field is absent or null."""
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
        text = obj["text"]
        if not isinstance(text, str):
            raise Refusal(f"{path}:{lineno}: field `text`: expected a string")
        language = obj.get("language")
        if language is not None and not isinstance(language, str):
            raise Refusal(f"{path}:{lineno}: field `language`: expected a string or null")
        for name, value in (("id", doc_id), ("text", text), ("language", language or "")):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise Refusal(f"{path}:{lineno}: field `{name}`: not valid Unicode")
        yield doc_id, text, language


# ---------------------------------------------------------------------------------------------
# Occurrences and the decision (afm.md, "Occurrences", "Decision")


def index_terms(terms):
    """Map a first character to the terms beginning with it (a search filter only)."""
    by_first = {}
    for listed, key in terms:
        by_first.setdefault(key[0], []).append((listed, key))
    return by_first


def occurrences(text, by_first, match):
    """Returns (n, d, first_listed): counting occurrences, distinct terms among them, and the
    term (as listed) of the first occurrence (lowest byte position, then longest), or None."""
    n = 0
    d = 0
    best = None  # (byte position, -matched byte length, listed)
    length = len(text)
    for ch in set(text):
        for listed, key in by_first.get(ch, ()):
            k = len(key)
            count = 0
            first = -1
            i = text.find(key)
            while i != -1:
                ok = True
                if match == "word":
                    if i > 0 and is_alphanumeric(text[i - 1]):
                        ok = False
                    elif i + k < length and is_alphanumeric(text[i + k]):
                        ok = False
                if ok:
                    if first == -1:
                        first = i
                    count += 1
                i = text.find(key, i + 1)
            if count:
                n += count
                d += 1
                cand = (len(text[:first].encode("utf-8")), -len(key.encode("utf-8")), listed)
                if best is None or cand < best:
                    best = cand
    return n, d, (best[2] if best is not None else None)


def decide(n, mode, min_matches):
    hit = n >= min_matches
    if mode == "remove":
        return (RULE_MATCHED, "removed") if hit else (RULE_CLEAN, "kept")
    return (RULE_MATCHED, "kept") if hit else (RULE_UNMATCHED, "removed")


def decide_no_list(mode):
    return RULE_NO_LIST, ("kept" if mode == "remove" else "removed")


def run(terms_path, docs_paths, mode, match, case, min_matches, warn=True):
    if mode not in ("remove", "keep"):
        raise Refusal(f"mode: expected `remove` or `keep`, found `{mode}`")
    if match not in ("word", "substring"):
        raise Refusal(f"match: expected `word` or `substring`, found `{match}`")
    if case not in ("insensitive", "sensitive"):
        raise Refusal(f"case: expected `insensitive` or `sensitive`, found `{case}`")
    if not isinstance(min_matches, int) or min_matches < 1 or min_matches >= 2**64:
        raise Refusal(f"min_matches: expected an integer from 1 to 2^64-1, found {min_matches}")
    per_language, lists = read_lists(terms_path, case)
    indexes = {}
    for language, terms in lists.items():
        for listed, _ in terms:
            warn_unassigned(f"term `{listed}` ({language})", listed, warn)
        indexes[language] = index_terms(terms)
    ledger = {}
    for path in docs_paths:
        for doc_id, text, language in read_jsonl(path):
            if doc_id in ledger:
                raise Refusal(f"document id `{doc_id}` appears twice")
            if per_language:
                subtag = primary_subtag(language)
                by_first = indexes.get(subtag)
                if by_first is None:
                    rule, decision = decide_no_list(mode)
                    ledger[doc_id] = {"rule": rule, "decision": decision,
                                      "evidence": {"language": subtag}}
                    continue
            else:
                by_first = indexes[SINGLE]
            warn_unassigned(f"document `{doc_id}`", text, warn)
            t = text.lower() if case == "insensitive" else text
            n, d, first = occurrences(t, by_first, match)
            rule, decision = decide(n, mode, min_matches)
            evidence = None
            if n >= 1:
                evidence = {"term": first, "matches": n, "distinct": d}
            ledger[doc_id] = {"rule": rule, "decision": decision, "evidence": evidence}
    return {"terms": {language: len(terms) for language, terms in lists.items()},
            "ledger": ledger}


def dumps(obj):
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# Self-test: small cases whose expected outputs were derived by hand from the book.


def E(term, n, d):
    return {"term": term, "matches": n, "distinct": d}


def L(subtag):
    return {"language": subtag}


# A directory of per-language lists with license and README files beside them. The Dutch list
# has `nicht` and the French one `bitte` (afm.md's example): German text is matched against
# the German list only.
PROFANITY_DIR = {
    "de.txt": "# German\narsch\n",
    "nl.txt": "kut\nnicht\n",
    "fr.txt": "bitte\n",
    "LICENSE": "Creative Commons Attribution 4.0 International\n",
    "README.md": "One list per language.\n",
    "ReadMe": "r\n",
    "README": "r\n",
    "LICENSE-MIT": "m\n",
    "licence.md": "l\n",
    "COPYING.LESSER": "c\n",
    "copyright_2024": "c\n",
    "Notice": "n\n",
    "UNLICENSE": "u\n",
    "license.txt": "not a list\n",  # passed over, not the list of a language `license` (6a)
}
# Documents of several languages: (id, text[, language]); no third item: no `language` field.
PROFANITY_DOCS = [
    ("de1", "Das ist nicht schlimm, du Arsch!", "de-1996"),  # de list: `arsch`; not `nicht`
    ("de2", "Ich bitte dich: nicht!", "DE"),                 # de: nothing (ASCII-lowercased)
    ("de3", "ARSCH", "De_AT"),                               # `_` ends the subtag too
    ("nl1", "Dat is nicht goed, kut", "nl_BE"),              # nl: nicht@7, kut@19
    ("fr1", "Bitte, dit-il", "fr"),                          # fr: bitte
    ("ja1", "arsch nicht bitte", "ja"),                      # no ja list
    ("zh1", "arsch", "zh-Hant"),                             # no zh list
    ("absent", "arsch"),                                     # no language: und, no und list
    ("null", "arsch", None),                                 # language null: und
]


def self_test_cases():
    # Each case: name, terms (a file's text, or a directory: {name: text}), params, docs
    # [(id, text[, language])], expected {id: (rule, decision, evidence)}, expected number of
    # terms (an int n for a file, {"*": n}; or the map itself).
    C, M, U = "term-filter:clean", "term-filter:matched", "term-filter:unmatched"
    N = "term-filter:no-list"
    return [
        dict(
            name="overlaps: `aa` twice in `aaa` (substring), every (term, position) pair",
            terms="aa\na\n", mode="remove", match="substring", case="sensitive", min=1,
            n_terms=2,
            docs=[("d1", "aaa"), ("d2", "b"), ("d3", "aaaa")],
            # d1: aa@0, aa@1, a@0, a@1, a@2 -> 5, 2 distinct; at 0 the longest is `aa`.
            # d3: aa@0,1,2 + a@0..3 -> 7.
            expected={
                "d1": (M, "removed", E("aa", 5, 2)),
                "d2": (C, "kept", None),
                "d3": (M, "removed", E("aa", 7, 2)),
            },
        ),
        dict(
            name="overlaps and word boundaries: `aa` in `aaa` stands alone nowhere",
            terms="aa\n", mode="remove", match="word", case="sensitive", min=1, n_terms=1,
            docs=[("d1", "aaa"), ("d2", "aa aaa aa"), ("d3", "aa")],
            # d2: aa@0 (start, then ' ') counts; @3 (then 'a') no; @4 (after 'a') no;
            # @7 (after ' ', then end) counts.
            expected={
                "d1": (C, "kept", None),
                "d2": (M, "removed", E("aa", 2, 1)),
                "d3": (M, "removed", E("aa", 1, 1)),
            },
        ),
        dict(
            name="word boundaries: text start/end, punctuation, letters, digits, marks",
            terms="cat\n", mode="remove", match="word", case="sensitive", min=1, n_terms=1,
            docs=[
                ("start-end", "cat"),
                ("punct", "(cat). cat, cat!"),
                ("underscore", "_cat_"),           # `_` is not alphanumeric
                ("letter-after", "cats"),
                ("letter-before", "scat"),
                ("digit-before", "1cat"),
                ("digit-after", "cat2"),
                ("accented-before", "écat"),
                ("superscript-after", "cat\u00b2"),   # No: numeric
                ("roman-after", "cat\u2163"),         # Nl: numeric (and Alphabetic)
                ("han-after", "cat\u4e00"),           # Lo
                ("visarga-after", "cat\u0903"),       # Mc with Other_Alphabetic
                ("ypogegrammeni-after", "cat\u0345"),  # Mn with Other_Alphabetic
                ("circled-a-after", "cat\u24b6"),     # So with Other_Alphabetic
                ("acute-after", "cat\u0301"),         # Mn, not Alphabetic: counts
                ("dot-above-before", "\u0307cat"),    # Mn, not Alphabetic: counts
                ("nbsp", "\u00a0cat\u00a0"),
                ("mixed", "cat1 cat catcat cat"),     # @5 and @16 count: 2
            ],
            expected={
                "start-end": (M, "removed", E("cat", 1, 1)),
                "punct": (M, "removed", E("cat", 3, 1)),
                "underscore": (M, "removed", E("cat", 1, 1)),
                "letter-after": (C, "kept", None),
                "letter-before": (C, "kept", None),
                "digit-before": (C, "kept", None),
                "digit-after": (C, "kept", None),
                "accented-before": (C, "kept", None),
                "superscript-after": (C, "kept", None),
                "roman-after": (C, "kept", None),
                "han-after": (C, "kept", None),
                "visarga-after": (C, "kept", None),
                "ypogegrammeni-after": (C, "kept", None),
                "circled-a-after": (C, "kept", None),
                "acute-after": (M, "removed", E("cat", 1, 1)),
                "dot-above-before": (M, "removed", E("cat", 1, 1)),
                "nbsp": (M, "removed", E("cat", 1, 1)),
                "mixed": (M, "removed", E("cat", 2, 1)),
            },
        ),
        dict(
            name="case-insensitive: text and terms lowercased; evidence spells the list's term",
            terms="Cat\nDOG\n", mode="remove", match="word", case="insensitive", min=1,
            n_terms=2,
            docs=[("d1", "CAT cat Cat"), ("d2", "a Dog and a cAt"), ("d3", "CATS")],
            expected={
                "d1": (M, "removed", E("Cat", 3, 1)),
                "d2": (M, "removed", E("DOG", 2, 2)),
                "d3": (C, "kept", None),
            },
        ),
        dict(
            name="case-sensitive: compared as written",
            terms="Cat\ncat\n", mode="remove", match="word", case="sensitive", min=1,
            n_terms=2,
            docs=[("d1", "CAT cat Cat"), ("d2", "CAT"), ("d3", "Cat")],
            # d1: cat@4, Cat@8 -> 2 occurrences, 2 distinct, first `cat`.
            expected={
                "d1": (M, "removed", E("cat", 2, 2)),
                "d2": (C, "kept", None),
                "d3": (M, "removed", E("Cat", 1, 1)),
            },
        ),
        dict(
            name="case-insensitive: whole-text lowercasing (final sigma, İ, Kelvin sign)",
            terms="ΑΣ\nοδος\nstanbul\n\u212a\nka\n", mode="remove", match="substring",
            case="insensitive", min=1, n_terms=5,
            docs=[
                ("sigma-inside", "ΑΣΑ"),    # text -> "ασα"; term ΑΣ -> "ας": no
                ("sigma-final", "ΑΣ"),      # text -> "ας": yes
                ("odos", "ΟΔΟΣ"),           # text -> "οδος": yes
                ("istanbul", "İSTANBUL"),   # text -> "i̇stanbul": `stanbul` at byte 3
                ("kelvin", "KA"),           # "ka": k@0 (from U+212A) and ka@0: longest `ka`
            ],
            expected={
                "sigma-inside": (C, "kept", None),
                "sigma-final": (M, "removed", E("ΑΣ", 1, 1)),
                "odos": (M, "removed", E("οδος", 1, 1)),
                "istanbul": (M, "removed", E("stanbul", 1, 1)),
                "kelvin": (M, "removed", E("ka", 2, 2)),
            },
        ),
        dict(
            name="case-insensitive word check on the lowercased text (İ -> i + U+0307)",
            terms="stanbul\n", mode="remove", match="word", case="insensitive", min=1,
            n_terms=1,
            # Before `stanbul` is U+0307 in the lowercased text (not alphanumeric), although
            # it is `İ` (alphabetic) in the text as written: reading 4 of the docstring.
            docs=[("istanbul", "İSTANBUL"), ("plain", "ISTANBUL")],
            expected={
                "istanbul": (M, "removed", E("stanbul", 1, 1)),
                "plain": (C, "kept", None),
            },
        ),
        dict(
            name="min_matches 2, mode remove: clean (with or without evidence) / matched",
            terms="x\ny\n", mode="remove", match="word", case="sensitive", min=2, n_terms=2,
            docs=[("zero", "none here"), ("one", "x only"), ("two", "x and y"),
                  ("three", "x x x")],
            expected={
                "zero": (C, "kept", None),
                "one": (C, "kept", E("x", 1, 1)),
                "two": (M, "removed", E("x", 2, 2)),
                "three": (M, "removed", E("x", 3, 1)),
            },
        ),
        dict(
            name="min_matches 3, mode keep: unmatched (with or without evidence) / matched",
            terms="+\n=\n\\sum\n", mode="keep", match="substring", case="sensitive", min=3,
            n_terms=3,
            docs=[("zero", "prose"), ("two", "a+b=c"), ("three", "a+b=c+d"),
                  ("sum", "\\sum_i x_i = 1 + 1")],
            expected={
                "zero": (U, "removed", None),
                "two": (U, "removed", E("+", 2, 2)),
                "three": (M, "kept", E("+", 3, 2)),
                "sum": (M, "kept", E("\\sum", 3, 3)),
            },
        ),
        dict(
            name="min_matches 1, mode keep",
            terms="$$\n", mode="keep", match="substring", case="sensitive", min=1,
            n_terms=1,
            docs=[("no", "plain $ text"), ("yes", "$$$")],  # $$@0, $$@1
            expected={
                "no": (U, "removed", None),
                "yes": (M, "kept", E("$$", 2, 1)),
            },
        ),
        dict(
            name="evidence: lowest position, then the longest term, not list order",
            terms="zz\nb\nab\nc\nabc\n", mode="remove", match="substring",
            case="sensitive", min=1, n_terms=5,
            docs=[
                ("same-pos", "xabc abc"),  # ab@1,5 abc@1,5 b@2,6 c@3,7 -> 8, 4 distinct
                ("lowest", "b zz"),        # b@0 before zz@2
                ("bytes", "é c b"),       # c at byte 3, b at byte 5
            ],
            expected={
                "same-pos": (M, "removed", E("abc", 8, 4)),
                "lowest": (M, "removed", E("b", 2, 2)),
                "bytes": (M, "removed", E("c", 2, 2)),
            },
        ),
        dict(
            name="evidence: the first occurrence among those that count (word)",
            terms="ab\nabc\n", mode="remove", match="word", case="sensitive", min=1,
            n_terms=2,
            # abc@0 counts; ab@0 does not (then 'c'); ab@4 counts.
            docs=[("d1", "abc ab"), ("d2", "abcd ab")],
            expected={
                "d1": (M, "removed", E("abc", 2, 2)),
                "d2": (M, "removed", E("ab", 1, 1)),
            },
        ),
        dict(
            name="a term with a leading space (word and substring)",
            terms=" ass\n", mode="remove", match="word", case="sensitive", min=1,
            n_terms=1,
            docs=[
                ("after-letter", "a ass"),   # before ' ass' is 'a': no
                ("after-comma", ", ass."),   # before ',', after '.': yes
                ("assess", "x, assess"),     # after 'e': no
                ("start", "ass"),            # no space: no occurrence
            ],
            expected={
                "after-letter": (C, "kept", None),
                "after-comma": (M, "removed", E(" ass", 1, 1)),
                "assess": (C, "kept", None),
                "start": (C, "kept", None),
            },
        ),
        dict(
            name="a term with a leading space (substring)",
            terms=" ass\n", mode="remove", match="substring", case="sensitive", min=1,
            n_terms=1,
            docs=[("d1", "bass ass a ass"), ("d2", "class")],
            expected={
                "d1": (M, "removed", E(" ass", 2, 1)),
                "d2": (C, "kept", None),
            },
        ),
        dict(
            name="terms file: comments, empty lines, CRLF, untrimmed spaces, no final newline",
            terms="# a comment\n\nfoo\r\n\r\n  \n#bar\n #baz\nqux",
            mode="remove", match="substring", case="sensitive", min=1, n_terms=4,
            # terms: "foo", "  ", " #baz", "qux"
            docs=[("d1", "#bar"), ("d2", "foo  #bar"), ("d3", "a #baz"), ("d4", "qux\r")],
            expected={
                "d1": (C, "kept", None),
                "d2": (M, "removed", E("foo", 2, 2)),
                "d3": (M, "removed", E(" #baz", 1, 1)),
                "d4": (M, "removed", E("qux", 1, 1)),
            },
        ),
        dict(
            name="terms file: lines end at \\n only (U+2028, U+000C and an inner \\r stay)",
            terms="x\u2028y\np\rq\nf\x0cg\r\n",
            mode="remove", match="substring", case="sensitive", min=1, n_terms=3,
            docs=[("d1", "x y p q f g"), ("d2", "x\u2028y p\rq f\x0cg")],
            expected={
                "d1": (C, "kept", None),
                "d2": (M, "removed", E("x\u2028y", 3, 3)),
            },
        ),
        dict(
            name="integer ids, several files",
            terms="x\n", mode="remove", match="word", case="insensitive", min=1, n_terms=1,
            docs=[(7, "X"), ("8", "y")],
            expected={
                "7": (M, "removed", E("x", 1, 1)),
                "8": (C, "kept", None),
            },
        ),
        # --- A directory of per-language lists -----------------------------------------------
        dict(
            name="directory, mode remove: each document against its language's list; no-list kept",
            terms=PROFANITY_DIR, mode="remove", match="word", case="insensitive", min=1,
            n_terms={"de": 1, "fr": 1, "nl": 2},
            docs=PROFANITY_DOCS,
            expected={
                "de1": (M, "removed", E("arsch", 1, 1)),
                "de2": (C, "kept", None),
                "de3": (M, "removed", E("arsch", 1, 1)),
                "nl1": (M, "removed", E("nicht", 2, 2)),
                "fr1": (M, "removed", E("bitte", 1, 1)),
                "ja1": (N, "kept", L("ja")),
                "zh1": (N, "kept", L("zh")),
                "absent": (N, "kept", L("und")),
                "null": (N, "kept", L("und")),
            },
        ),
        dict(
            name="directory, mode keep: no-list removed, with its evidence",
            terms=PROFANITY_DIR, mode="keep", match="word", case="insensitive", min=1,
            n_terms={"de": 1, "fr": 1, "nl": 2},
            docs=PROFANITY_DOCS,
            expected={
                "de1": (M, "kept", E("arsch", 1, 1)),
                "de2": (U, "removed", None),
                "de3": (M, "kept", E("arsch", 1, 1)),
                "nl1": (M, "kept", E("nicht", 2, 2)),
                "fr1": (M, "kept", E("bitte", 1, 1)),
                "ja1": (N, "removed", L("ja")),
                "zh1": (N, "removed", L("zh")),
                "absent": (N, "removed", L("und")),
                "null": (N, "removed", L("und")),
            },
        ),
        dict(
            name="a single list applies to every document whatever its language",
            terms="arsch\n", mode="remove", match="word", case="insensitive", min=1,
            n_terms=1,
            docs=[("ja1", "arsch", "ja"), ("absent", "Arsch"), ("null", "x", None)],
            expected={
                "ja1": (M, "removed", E("arsch", 1, 1)),
                "absent": (M, "removed", E("arsch", 1, 1)),
                "null": (C, "kept", None),
            },
        ),
        dict(
            name="directory: an `und.txt` list is the one of documents without a language; "
                 "min_matches 2, evidence under it",
            terms={"und.txt": "x\n", "en.txt": "Foo\nbar\n", "readme.txt": "x\n"},
            mode="remove", match="word", case="insensitive", min=2,
            n_terms={"en": 2, "und": 1},
            docs=[
                ("u1", "x x"),                 # und list: 2
                ("u2", "x", "und-Latn"),       # und list: 1 < 2, evidence all the same
                ("e1", "FOO", "en-GB"),        # en: 1, the term as listed (`Foo`)
                ("e2", "foo bar", "en"),
                ("e3", "x x", "EN"),           # en list has no `x`
                ("d1", "x x foo", "de"),       # no de list
                ("empty", "x x", ""),          # empty subtag (reading 7): no list
                ("non-ascii", "x x", "EŃ-x"),   # only A-Z lowercased: `eŃ`, no list
            ],
            expected={
                "u1": (M, "removed", E("x", 2, 1)),
                "u2": (C, "kept", E("x", 1, 1)),
                "e1": (C, "kept", E("Foo", 1, 1)),
                "e2": (M, "removed", E("Foo", 2, 2)),
                "e3": (C, "kept", None),
                "d1": (N, "kept", L("de")),
                "empty": (N, "kept", L("")),
                "non-ascii": (N, "kept", L("eŃ")),
            },
        ),
        dict(
            name="directory: a list per language is checked for duplicates alone; "
                 "case-sensitive lists",
            terms={"de.txt": "nicht\nBitte\n", "nl.txt": "nicht\n", "fr.txt": "bitte\nBitte\n"},
            mode="remove", match="substring", case="sensitive", min=1,
            n_terms={"de": 2, "fr": 2, "nl": 1},
            docs=[("de1", "Bitte nicht", "de"), ("fr1", "bitte Bitte", "fr-CA"),
                  ("nl1", "Bitte", "nl")],
            expected={
                "de1": (M, "removed", E("Bitte", 2, 2)),
                "fr1": (M, "removed", E("bitte", 2, 2)),
                "nl1": (C, "kept", None),
            },
        ),
        dict(
            name="directory with no list, only license and README files (reading 6d)",
            terms={"LICENSE": "x\n", "README.md": "x\n", "legal/NOTICE.md": "x\n"},
            mode="keep", match="word", case="insensitive", min=1, n_terms={},
            docs=[("d1", "x", "en"), ("d2", "x")],
            expected={
                "d1": (N, "removed", L("en")),
                "d2": (N, "removed", L("und")),
            },
        ),
    ]


def self_test():
    import tempfile

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:

        def write(name, content):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(content)
            return path

        def write_terms(name, terms):
            """A list file, or a directory of files ({relative name: text})."""
            if isinstance(terms, str):
                return write(f"{name}.txt", terms)
            os.mkdir(os.path.join(tmp, name))
            for rel, text in terms.items():
                os.makedirs(os.path.dirname(os.path.join(tmp, name, rel)), exist_ok=True)
                write(os.path.join(name, rel), text)
            return os.path.join(tmp, name)

        def doc_line(doc):
            obj = {"id": doc[0], "text": doc[1]}
            if len(doc) > 2:
                obj["language"] = doc[2]
            return json.dumps(obj, ensure_ascii=False) + "\n"

        def write_docs(name, docs):
            return write(name, "\n" + "".join(doc_line(d) for d in docs))

        for k, case in enumerate(self_test_cases()):
            terms = write_terms(f"terms{k}", case["terms"])
            # Split the documents over two files (the second one may be empty).
            half = (len(case["docs"]) + 1) // 2
            docs = [write_docs(f"docs{k}a.jsonl", case["docs"][:half]),
                    write_docs(f"docs{k}b.jsonl", case["docs"][half:])]
            try:
                got = run(terms, docs, case["mode"], case["match"], case["case"], case["min"],
                          warn=False)
                got = json.loads(dumps(got))
            except Refusal as e:
                got = f"refused: {e}"
            n_terms = case["n_terms"]
            expected = {
                "terms": {SINGLE: n_terms} if isinstance(n_terms, int) else n_terms,
                "ledger": {
                    str(i): {"rule": r, "decision": dec, "evidence": ev}
                    for i, (r, dec, ev) in case["expected"].items()
                },
            }
            if got == expected:
                print(f"ok   {case['name']}")
            else:
                failures += 1
                print(f"FAIL {case['name']}\n  expected {dumps(expected)}\n"
                      f"  got      {dumps(got) if isinstance(got, dict) else got}")

        # Refusals: (name, terms text, case, docs, min_matches, expected fragment of the reason)
        refusals = [
            ("a repeated term (after lowercasing)", "Foo\nbar\nfoo\n", "insensitive",
             [("d", "x")], 1, ":3: term `foo` appears twice after lowercasing (first on line 1)"),
            ("a repeated term (CRLF on one line only)", "foo\r\nfoo\n", "sensitive",
             [("d", "x")], 1, ":2: term `foo` appears twice"),
            ("a repeated term after comments", "# c\nfoo\n\n# d\nfoo\n", "sensitive",
             [("d", "x")], 1, ":5: term `foo` appears twice"),
            ("no term (only comments and empty lines)", "# c\n\n\r\n#\n", "sensitive",
             [("d", "x")], 1, "the list has no term"),
            ("an empty file", "", "sensitive", [("d", "x")], 1, "the list has no term"),
            ("a repeated document id across files", "x\n", "sensitive",
             [("d", "x"), ("d", "y")], 1, "document id `d` appears twice"),
            ("a repeated document id, integer and string", "x\n", "sensitive",
             [(5, "x"), ("5", "y")], 1, "document id `5` appears twice"),
            ("min_matches 0", "x\n", "sensitive", [("d", "x")], 0, "min_matches"),
            ("a language that is not a string", "x\n", "sensitive", [("d", "x", 5)], 1,
             "field `language`: expected a string or null"),
            # A directory of lists: a file that is neither a list nor passed over.
            ("a stray notes.md beside the lists", {"de.txt": "a\n", "notes.md": "x\n"},
             "insensitive", [("d", "x", "de")], 1, "`notes.md` is neither a list"),
            ("an uppercase DE.txt", {"en.txt": "a\n", "DE.txt": "a\n"}, "insensitive",
             [("d", "x", "de")], 1, "`DE.txt` is neither a list"),
            ("de.TXT", {"de.TXT": "a\n"}, "insensitive", [("d", "x")], 1, "`de.TXT`"),
            ("a region in the name (de-at.txt)", {"de-at.txt": "a\n"}, "insensitive",
             [("d", "x")], 1, "`de-at.txt`"),
            ("an empty language (.txt)", {".txt": "a\n"}, "insensitive", [("d", "x")], 1,
             "`.txt`"),
            ("LICENSES (a letter after LICENSE)", {"de.txt": "a\n", "LICENSES": "x\n"},
             "insensitive", [("d", "x")], 1, "`LICENSES`"),
            ("NOTICEBOARD.txt", {"NOTICEBOARD.txt": "x\n"}, "insensitive", [("d", "x")], 1,
             "`NOTICEBOARD.txt`"),
            ("a hidden file", {"de.txt": "a\n", ".gitkeep": ""}, "insensitive",
             [("d", "x")], 1, "`.gitkeep`"),
            ("a list in a subdirectory (reading 6c)", {"sub/de.txt": "a\n"}, "insensitive",
             [("d", "x")], 1, "`sub/de.txt`"),
            ("a list of a directory with no term", {"de.txt": "a\n", "nl.txt": "# c\n\n"},
             "insensitive", [("d", "x", "de")], 1, "nl.txt: the list has no term"),
            ("a repeated term in a list of a directory", {"de.txt": "a\n", "nl.txt": "kut\nKut\n"},
             "insensitive", [("d", "x", "de")], 1,
             "nl.txt:2: term `Kut` appears twice after lowercasing (first on line 1)"),
        ]
        for k, (name, terms_text, case, docs, min_matches, fragment) in enumerate(refusals):
            terms = write_terms(f"rterms{k}", terms_text)
            paths = [write_docs(f"rdocs{k}_{j}.jsonl", [d]) for j, d in enumerate(docs)]
            try:
                run(terms, paths, "remove", "word", case, min_matches, warn=False)
                failures += 1
                print(f"FAIL refused: {name}: was accepted")
            except Refusal as e:
                if fragment in str(e):
                    print(f"ok   refused: {name}: {e}")
                else:
                    failures += 1
                    print(f"FAIL refused: {name}: reason `{e}` lacks `{fragment}`")

        # A repeated term is accepted when case-sensitive and the spellings differ.
        terms = write("cs.txt", "Foo\nfoo\n")
        docs = write_docs("cs.jsonl", [("d", "Foo foo FOO")])
        got = run(terms, [docs], "remove", "word", "sensitive", 1, warn=False)
        if got["terms"] == {SINGLE: 2} and got["ledger"]["d"]["evidence"] == E("Foo", 2, 2):
            print("ok   case-sensitive: `Foo` and `foo` are two terms")
        else:
            failures += 1
            print(f"FAIL case-sensitive `Foo`/`foo`: {dumps(got)}")

    if regex is None:
        print("warning: the `regex` module is missing; alphanumeric is approximated "
              "(Other_Alphabetic marks are not alphanumeric)")
    print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
    return 1 if failures else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--terms")
    ap.add_argument("--docs", action="append", default=[])
    ap.add_argument("--mode", default="remove")
    ap.add_argument("--match", default="word")
    ap.add_argument("--case", default="insensitive")
    ap.add_argument("--min-matches", type=int, default=1)
    ap.add_argument("--timing", action="store_true", help="print the elapsed time on stderr")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    if not args.terms or not args.docs:
        ap.error("--terms and at least one --docs are required")
    if regex is None:
        print("warning: the `regex` module is missing; alphanumeric is approximated",
              file=sys.stderr)
    start = time.monotonic()
    try:
        result = run(args.terms, args.docs, args.mode, args.match, args.case, args.min_matches)
    except Refusal as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(dumps(result))
    if args.timing:
        print(f"elapsed: {time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
