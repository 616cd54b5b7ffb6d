"""An independent reference implementation of the `code-packages` stage's license decisions.

Written from the book's specification only, NOT from the Rust code (nothing under crates/ was
read while writing it):

  - book/src/afm.md, "Code from the package registries" ("Packages and their metadata", "The
    decision", "The `code-packages` stage") and, for the names of license and readme files,
    "Term-list filters: profanity and math";
  - book/src/licenses.md, "Evaluating an expression" and "License files".

Usage:

  code_license_reference.py --packages DIR --policy POLICY.yaml --stage STAGE.json
      [--extensions c,cc,... --max-bytes N] [--notes]
  code_license_reference.py --dump-stage --store STORE --manifest DIGEST [--stage-name NAME]

The first form re-derives, from the unpacked packages in DIR and the policy file, every
package's metadata (registry, name, version, id, declared string and field, from every
metadata file at its root), its license files, its vendored directories,
the parts of its SPDX expression, the expression, its evaluation against the policy (decision,
rule, `excluded_by`), and every ledger row of its code files (id, decision, rule, evidence), and
compares them with what the Rust stage produced (STAGE.json, below). Expressions are compared by
equivalence (license-expression's `Licensing.is_equivalent`), everything else by equality. Each
difference is printed (package directory or row id, field, stage value, reference value) and the
script exits 1; when there is none it prints `code-license reference: N packages, M rows agree`
and exits 0. `--extensions` and `--max-bytes` default to the stage's defaults, as the book gives
them; the stage's recorded `config` is checked against them.

What it takes from the stage, and why: the result of matching each license file's text against
the SPDX license texts, i.e. each file's `licenses` (the licenses tied at the best score, when
that score is at least 0.9) and `candidates` (`[id, score]` pairs: every license scoring at
least 0.9, best first, ties by id, scores rounded to 3 decimals). That matching is another
component's job (askalono-style Dice scoring over the 600+ texts of the SPDX list) with its own
reference; everything downstream of it (which parts it adds to the expression, which candidate a
file is taken for as a declared license, the decision) is recomputed here. The candidates' form
and their agreement with `licenses` are checked (see `candidates_problem`). The word count of a
file that matches nothing (more than 60 words: `LicenseRef-unrecognised-<path>`) is computed here
from the file in DIR. Nothing else is read from the stage except to compare it. The `nearest`
text of each file is matching output too: it is only checked for consistency with `licenses` (a
file that matches has its nearest text among its matches, with a score of at least 0.9; one that
does not has a score below 0.9).

SPDX expressions are parsed by license-expression (the PyPI package of the same name) over the
SPDX ids of the SPDX license list it vendors: a declared string normalises when it is a valid
SPDX expression and not otherwise. license-expression's own `get_spdx_licensing()` is NOT used
as is, because it also accepts ScanCode's non-SPDX aliases (`GPL` is read as
`GPL-1.0-or-later`, `BSD-2` as `BSD-2-Clause`, `LicenseRef-MIT-Bootstrap` as `MIT`), which the
book counts as ambiguous or as references. The licensing built here knows only the list's ids
(case-insensitively), the GNU ids' deprecated forms (`GPL-2.0` for `GPL-2.0-only`, `GPL-2.0+`
for `GPL-2.0-or-later`), `X+` for any other id X, and `LicenseRef-`, `DocumentRef-` and
`AdditionRef-` references. The Rust stage normalises more strings than that (its table reads
`MIT/Apache-2.0`, `Apache License 2.0`, ...). A declared string that is not a valid SPDX
expression but that the stage normalised is reported as a difference this reference cannot
decide (`cannot decide`); the rest of that package is then checked against the stage's
reading. The vendored SPDX list (license-expression 30.4.4: SPDX 3.27) is older than the Rust
side's (3.29), so an id added since would show up the same way.

Readings taken where the specification leaves a choice (numbered where the code applies them).
Readings 2 to 4 and 11 to 15 are not in the book: 2 to 4 are what the stage was seen to do on
synthetic packages (written to probe them), recorded here so that the book can be made to say
them; 11 to 15 were seen to agree with the stage, except where noted.

  1. `declared_field` is the metadata field the declared string came from, as the book names it
     (`license`, `licenses`, `License-Expression`, `License`), null without a declaration.
  2. An empty or `UNKNOWN` value (any case, trimmed) is no declaration in every registry's
     metadata. PyPI: `License` is read when `License-Expression` declares nothing (absent, empty
     or `UNKNOWN`). npm: `licenses` is read only when `license` is absent; a `license` that is
     present but declares nothing (empty, `UNKNOWN`, null) is no declaration.
  3. npm: a `license` value that is neither a string nor an object whose `type` is one (null,
     an array such as `["MIT"]`, a number) is no declaration; it does not fail the stage.
  4. npm: the `licenses` values that declare nothing are dropped before the rest are joined.
  5. Scores are compared in thousandths, as the stage reports them (3 decimals): a later
     candidate is "at most 0.05 below" when first - later <= 0.050, the first "under 0.99" when
     it is at most 0.989; of several later candidates that qualify, the first is `declared`.
  6. (retired: the rule order is now the book's)
  7. `excluded_by` is empty for an allowed package (an allowed `A OR B` with `B` denied is not
     excluded by anything), and row evidence carries it for `code:denied` only (not for
     `code:vendored`, whose evidence is `package`, `license` when there is one, `vendored`).
  8. Only regular files count (symbolic links are neither license files, metadata files nor
     code files).
  9. The verdict's `decision` is `allow` for `code:allowed` and `deny` for every other rule.
 10. PKG-INFO: the continuation lines of a repeated (ignored) header are ignored with it; a
     non-empty line that is neither `Key: value` nor a continuation fails the stage.
 11. Several metadata files at the root, one of which declares: the declared string is that
     file's string as it is, not in parentheses (`MIT`, not `(MIT)`). Every present file must
     parse as a package, with a name and a version (the book says so since).
 12. npm `SEE LICENSE IN <file>`: read (prefix case-sensitive, after leading white space) in a
     `license` string or `type` only; in the legacy `licenses` list it is an ordinary string
     (the book says so since).
 13. Several declaring files: `declared_field` is the first declaring file's field.
 14. A metadata file below the root that does not parse, or lacks a name or a version, is no
     package (it neither fails the stage nor makes a vendored directory); a vendored
     directory's path is `/`-separated and relative to the package root.
 15. `UNLICENSED` as the whole declared string of any metadata file at the root is the
     package's declared string (the book says so since: joined, it could be bypassed).
     Its package's license files are still matched and listed (`declared` null); `spdx` is
     null and `unknown` says why.
 16. An npm `@scope/name`: the scope is `@` and at least one more character, any but `/`.
"""

import argparse
import json
import os
import re
import sys
import tomllib
import unicodedata

from license_expression import (
    AND,
    OR,
    LicenseSymbol,
    LicenseWithExceptionSymbol,
    Licensing,
    get_license_index,
)

DEFAULT_EXTENSIONS = (
    "c cc cjs cpp cs cxx go h hpp java js jsx kt lua m mjs php pl py r rb rs scala sh sql "
    "swift ts tsx"
).split()
DEFAULT_MAX_BYTES = 1_000_000
MATCH_THRESHOLD = 0.9

# License and notice file names (afm.md, term lists; licenses.md, "License files"): one of these
# words, in any case, alone or followed by `.`, `-` or `_` and more.
LICENSE_NAME = re.compile(r"(?i)^(LICENSE|LICENCE|COPYING|COPYRIGHT|UNLICENSE|NOTICE)([._-].*)?$", re.S)
README_NAME = re.compile(r"(?i)^README", re.S)

# Unicode's White_Space characters (what "white space" is taken to mean; Python's str.split()
# also splits at U+001C..U+001F, which are not white space).
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
WORDS = re.compile("[^" + "".join(WHITE_SPACE) + "]+")
NOTICE_WORDS = 60  # a license file matching nothing with more words is unrecognised terms
DECLARED_MARGIN = 50  # thousandths: a later candidate this close to the first is declared ...
DECLARED_BELOW = 990  # ... while the first scores under 0.99


class Unreadable(Exception):
    """A package the stage must fail on (the reference says why)."""


# --------------------------------------------------------------------------------------------
# SPDX: a strict licensing over the SPDX list that license-expression vendors
# --------------------------------------------------------------------------------------------

REF_TOKEN = re.compile(r"(?i)(?<![A-Za-z0-9.+:-])((?:DocumentRef-[A-Za-z0-9.-]+:)?(?:LicenseRef|AdditionRef)-[A-Za-z0-9.-]+)")


def _spdx_symbols():
    """LicenseSymbols for the SPDX ids of license-expression's vendored index.

    Returns (symbols, plus_keys): plus_keys maps the internal key of `X+` (for an id X without an
    `-or-later` form on the list) to its SPDX spelling.
    """
    entries = [e for e in get_license_index() if e.get("spdx_license_key")
               and not e["spdx_license_key"].lower().startswith("licenseref-")]
    ids = {e["spdx_license_key"] for e in entries}
    lower_ids = {i.lower() for i in ids}
    symbols, plus_keys = [], {}
    for e in entries:
        key = e["spdx_license_key"]
        aliases = []
        for alias in e.get("other_spdx_license_keys") or []:
            # The GNU ids' deprecated SPDX forms only: `GPL-2.0` (-only), `GPL-2.0+` (-or-later).
            if key.endswith("-only") and alias == key[: -len("-only")]:
                aliases.append(alias)
            elif key.endswith("-or-later") and alias == key[: -len("-or-later")] + "+":
                aliases.append(alias)
        if (not e.get("is_exception") and not key.endswith(("-only", "-or-later"))
                and f"{key}-or-later".lower() not in lower_ids):
            # `X+` for a license without an `-or-later` id: its own symbol (a `+` may not be
            # in a license-expression key, so the key spells it `-or-later`).
            plus_key = f"{key}-or-later"
            plus_keys[plus_key] = f"{key}+"
            symbols.append(LicenseSymbol(plus_key, aliases=(f"{key}+",)))
        symbols.append(LicenseSymbol(key, aliases=tuple(aliases),
                                     is_exception=bool(e.get("is_exception"))))
    return symbols, plus_keys


SPDX_SYMBOLS, PLUS_KEYS = _spdx_symbols()
SPDX_IDS = {s.key.lower(): s.key for s in SPDX_SYMBOLS if s.key not in PLUS_KEYS and not s.is_exception}
BASE_LICENSING = Licensing(SPDX_SYMBOLS)
_licensings = {(): BASE_LICENSING}


def licensing_for(text):
    """The strict licensing, with the references `text` names added as symbols of their own."""
    refs = tuple(sorted({m.group(1) for m in REF_TOKEN.finditer(text or "")}))
    if refs not in _licensings:
        extra = [LicenseSymbol(r, is_exception=r.lower().startswith("additionref-")
                               or ":additionref-" in r.lower()) for r in refs]
        _licensings[refs] = Licensing(SPDX_SYMBOLS + extra)
    return _licensings[refs]


def parse_spdx(text):
    """The expression tree of a valid SPDX expression, or None."""
    if text is None or not text.strip():
        return None
    licensing = licensing_for(text)
    try:
        info = licensing.validate(text, strict=True)
        if info.errors:
            return None
        return licensing.parse(text, validate=True, strict=True)
    except Exception:  # license-expression raises several kinds for junk (`MIT/Apache-2.0`)
        return None


def flat_args(node):
    """The operands of an AND or OR, with nested operands of the same operator spliced in."""
    out = []
    for arg in node.args:
        if type(arg) is type(node):
            out.extend(flat_args(arg))
        else:
            out.append(arg)
    return out


def spdx_key(symbol):
    return PLUS_KEYS.get(symbol.key, symbol.key)


def requirements(node):
    """The requirements (licenses with their `+` and `WITH`) of an expression, in written order."""
    if isinstance(node, (LicenseSymbol, LicenseWithExceptionSymbol)):
        return [node]
    return [r for arg in flat_args(node) for r in requirements(arg)]


def render(node):
    """An expression in SPDX syntax: operands in order, compound operands parenthesised."""
    if isinstance(node, LicenseWithExceptionSymbol):
        return f"{spdx_key(node.license_symbol)} WITH {node.exception_symbol.key}"
    if isinstance(node, LicenseSymbol):
        return spdx_key(node)
    op = " AND " if isinstance(node, AND) else " OR "
    return op.join(render(a) if isinstance(a, (LicenseSymbol, LicenseWithExceptionSymbol))
                   else f"({render(a)})" for a in flat_args(node))


def license_of(requirement):
    return requirement.license_symbol if isinstance(requirement, LicenseWithExceptionSymbol) else requirement


def family(license_id):
    """`GPL-2.0-only`, `GPL-2.0-or-later` and `GPL-2.0+` are one family (afm.md, The decision)."""
    f = license_id[:-1] if license_id.endswith("+") else license_id
    for suffix in ("-only", "-or-later"):
        if f.endswith(suffix):
            return f[: -len(suffix)]
    return f


def equivalent(a, b):
    """Both null, or both valid SPDX expressions that license-expression finds equivalent."""
    if a is None or b is None:
        return a is None and b is None
    if a == b:  # also for what is not SPDX (`UNLICENSED`)
        return True
    ea, eb = parse_spdx(a), parse_spdx(b)
    if ea is None or eb is None:
        return False
    return licensing_for(f"{a} {b}").is_equivalent(ea, eb)


# --------------------------------------------------------------------------------------------
# The policy and the evaluation of an expression (licenses.md, Evaluating an expression)
# --------------------------------------------------------------------------------------------

def read_policy(path):
    text = open(path, encoding="utf-8").read()
    try:
        import yaml  # PyYAML, when the venv has it
        doc = yaml.safe_load(text)
    except ImportError:
        doc = _minimal_yaml(text)
    allow = set()
    for license_id in doc.get("allow") or []:
        canonical = SPDX_IDS.get(str(license_id).lower())
        if canonical is None:
            sys.exit(f"{path}: `{license_id}` is not an SPDX license id (of the list license-expression vendors)")
        allow.add(canonical)
    allow_with = {(p["license"].lower(), p["addition"].lower()) for p in doc.get("allow_with") or []}
    if doc.get("ambiguous", "deny") != "deny":
        # The reference never has an ambiguous reading (a string is SPDX or it is not), so a
        # policy that would allow ambiguity could decide differently; refuse rather than guess.
        sys.exit(f"{path}: only `ambiguous: deny` is supported by this reference")
    return {"name": str(doc["name"]), "allow": allow, "allow_with": allow_with}


def _minimal_yaml(text):
    """Enough YAML for a policy file: `key: value`, `key: [a, b]` and `- item` lists."""
    doc, key = {}, None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if line.lstrip().startswith("- ") and key is not None:
            doc.setdefault(key, []).append(line.strip()[2:].strip().strip("\"'"))
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if value.startswith("[") and value.endswith("]"):
            doc[key] = [v.strip().strip("\"'") for v in value[1:-1].split(",") if v.strip()]
        elif value:
            doc[key] = value.strip("\"'")
    return doc


_VERSION = re.compile(r"^(.*?)(\d+(?:\.\d+)*)(.*)$")


def _is_same_or_later(candidate, base):
    """Whether SPDX id `candidate` is `base` or a later version of it (same name and variant)."""
    c, b = _VERSION.match(family(candidate)), _VERSION.match(family(base))
    if not c or not b:
        return family(candidate).lower() == family(base).lower()
    if c.group(1).lower() != b.group(1).lower() or c.group(3).lower() != b.group(3).lower():
        return False
    return tuple(map(int, c.group(2).split("."))) >= tuple(map(int, b.group(2).split(".")))


def license_allowed(symbol, policy):
    key = symbol.key
    if key in policy["allow"]:
        return True
    # `X+` and `X-or-later`: X or any later version of X on the allow list (a later version
    # on the allow list is on the SPDX list: the allow list is checked against it).
    if key in PLUS_KEYS or key.endswith("-or-later"):
        base = PLUS_KEYS[key][:-1] if key in PLUS_KEYS else key[: -len("-or-later")]
        return any(_is_same_or_later(a, base) for a in policy["allow"])
    return False


def requirement_allowed(req, policy):
    if isinstance(req, LicenseWithExceptionSymbol):
        lic, exc = req.license_symbol, req.exception_symbol
        if (spdx_key(lic).lower(), exc.key.lower()) in policy["allow_with"]:
            return True
        if exc.key.lower().startswith("additionref-") or ":additionref-" in exc.key.lower():
            return False  # an unknown addition may restrict the license
        return license_allowed(lic, policy)  # a listed exception only adds permissions
    return license_allowed(req, policy)


def evaluate(node, policy):
    """(allowed, deciding requirements) as licenses.md's operator rules give them."""
    if isinstance(node, (LicenseSymbol, LicenseWithExceptionSymbol)):
        return requirement_allowed(node, policy), [node]
    want = isinstance(node, OR)  # OR: the first allowed operand decides; AND: the first denied
    every = []
    for arg in flat_args(node):
        allowed, deciders = evaluate(arg, policy)
        if allowed == want:
            return allowed, deciders
        every.extend(deciders)
    return not want, every  # nothing decided early: every operand decides


# --------------------------------------------------------------------------------------------
# Packages (afm.md, Packages and their metadata; The decision)
# --------------------------------------------------------------------------------------------

def _declaration(value):
    """A declared value trimmed, or None when empty or `UNKNOWN`."""
    if value is None:
        return None
    value = value.strip()
    return None if value == "" or value.upper() == "UNKNOWN" else value


def read_pkg_info(path):
    """Core metadata headers (keys lower-cased, first of a key wins) up to the first empty line."""
    try:
        text = open(path, "rb").read().decode("utf-8")
    except UnicodeDecodeError as e:
        raise Unreadable(f"PKG-INFO is not UTF-8: {e}")
    headers, current = {}, None  # current: the key whose value a continuation extends, or None
    skipping = False
    for line in text.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if line == "":
            break
        if line[0] in " \t":
            if current is None and not skipping:
                raise Unreadable(f"PKG-INFO: a continuation line before any header: {line!r}")
            if not skipping:
                headers[current] = headers[current] + "\n" + line.strip()
            continue
        key, colon, value = line.partition(":")
        if not colon:
            raise Unreadable(f"PKG-INFO: not a `Key: value` header line: {line!r}")
        key = key.strip().lower()
        skipping = key in headers  # reading 10: a repeated key's continuations go with it, unused
        if not skipping:
            headers[key] = value.strip()
            current = key
    return {k: v.strip() for k, v in headers.items()}


METADATA_FILES = ("Cargo.toml", "PKG-INFO", "package.json")  # table order
SEE_LICENSE_IN = "SEE LICENSE IN"


def _read_cargo(path):
    try:
        doc = tomllib.loads(open(path, "rb").read().decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise Unreadable(f"Cargo.toml does not parse: {e}")
    package = doc.get("package")
    if not isinstance(package, dict):
        raise Unreadable("Cargo.toml has no [package] table")
    license_value = package.get("license")
    license_file = package.get("license-file")
    if license_value is not None and not isinstance(license_value, str):
        raise Unreadable("Cargo.toml: package.license is not a string")
    if license_file is not None and not isinstance(license_file, str):
        raise Unreadable("Cargo.toml: package.license-file is not a string")
    declared = _declaration(license_value)
    return {"registry": "crates.io", "name": package.get("name"), "version": package.get("version"),
            "declared": declared, "field": "license" if declared else None,
            "license_file": license_file}


def _read_npm(path):
    try:
        doc = json.loads(open(path, "rb").read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Unreadable(f"package.json does not parse: {e}")
    if not isinstance(doc, dict):
        raise Unreadable("package.json is not an object")
    named = []  # the files `SEE LICENSE IN <file>` values name, in order

    def value_of(v, in_license=False):
        # reading 3: a value that is neither a string nor an object whose `type` is one
        # (null, an array, a number) is no declaration
        if isinstance(v, dict) and isinstance(v.get("type"), str):
            v = v["type"]
        if not isinstance(v, str):
            return None
        rest = v.lstrip()
        if in_license and rest.startswith(SEE_LICENSE_IN):  # declares nothing; names a file
            named.append(rest[len(SEE_LICENSE_IN):].strip())  # reading 12
            return None
        return _declaration(v)

    if "license" in doc:  # reading 2: present, even when it declares nothing
        declared, field = value_of(doc["license"], in_license=True), "license"
    elif "licenses" in doc:
        values = doc["licenses"] if isinstance(doc["licenses"], list) else []
        values = [d for d in map(value_of, values) if d is not None]  # reading 4
        joined = values[0] if len(values) == 1 else " OR ".join(f"({v})" for v in values)
        declared, field = (joined if values else None), "licenses"
    else:
        declared, field = None, None
    return {"registry": "npm", "name": doc.get("name"), "version": doc.get("version"),
            "declared": declared, "field": field if declared else None,
            "license_file": named[0] if named else None}


def _read_pypi(path):
    headers = read_pkg_info(path)
    # reading 2: `License` when `License-Expression` declares nothing (absent, empty, UNKNOWN)
    declared, field = _declaration(headers.get("license-expression")), "License-Expression"
    if declared is None:
        declared, field = _declaration(headers.get("license")), "License"
    return {"registry": "pypi", "name": headers.get("name"), "version": headers.get("version"),
            "declared": declared, "field": field if declared else None, "license_file": None}


READERS = {"Cargo.toml": _read_cargo, "package.json": _read_npm, "PKG-INFO": _read_pypi}


def read_metadata_files(directory):
    """Each metadata file present (a regular file) in `directory`, read, in table order."""
    out = []
    for name in METADATA_FILES:
        full = os.path.join(directory, name)
        if os.path.isfile(full) and not os.path.islink(full):  # reading 8
            out.append(READERS[name](full))
    return out


def read_metadata(pkg_dir):
    """(registry, name, version, declared string or None, declared_field or None, license_file).

    Several metadata files: the first names the package, each declaring one's string is put in
    parentheses and the strings joined by ` AND ` (reading 11: one declaring file's string is
    itself), and the license file is the first one named.
    """
    files = read_metadata_files(pkg_dir)
    if not files:
        raise Unreadable("no Cargo.toml, package.json or PKG-INFO at its root")
    first = files[0]
    for f in files:
        if not isinstance(f["name"], str) or not isinstance(f["version"], str) or not f["name"] or not f["version"]:
            raise Unreadable(f"a metadata file lacks a name or a version (name {f['name']!r}, version {f['version']!r})")
    declaring = [f for f in files if f["declared"] is not None]
    unlicensed = [f for f in declaring if f["declared"].strip() == "UNLICENSED"]
    if unlicensed:
        declaring = unlicensed[:1]
    if len(declaring) == 1:
        declared, field = declaring[0]["declared"], declaring[0]["field"]
    elif declaring:
        declared = " AND ".join(f"({f['declared']})" for f in declaring)
        field = field_of_several(declaring)
    else:
        declared, field = None, None
    license_file = next((f["license_file"] for f in files if f["license_file"] is not None), None)
    return (first["registry"], first["name"], first["version"], declared, field, license_file)


def field_of_several(declaring):
    """reading 13: `declared_field` when several files declare (the book does not say)."""
    return declaring[0]["field"]


def valid_name_version(registry, name, version):
    """Why a registry would not accept the name or version, or None (afm.md, Packages)."""
    for what, value in (("name", name), ("version", version)):
        if value == "" or any(unicodedata.category(c) == "Cc" or c in WHITE_SPACE for c in value):
            return f"its {what} {value!r} is empty or holds white space or a control character"
    if "/" in version or "@" in version:
        return f"its version {version!r} holds `/` or `@`"
    if "/" in name or "@" in name:
        scope, slash, rest = name.partition("/")
        # reading 16: the scope is `@` and at least one more character, any but `/` (the book
        # does not forbid an `@` in it: `@a@b/c` is accepted, which npm itself would refuse)
        scoped = (registry == "npm" and slash and scope.startswith("@") and len(scope) >= 2
                  and rest and "/" not in rest and "@" not in rest)
        if not scoped:
            return f"its name {name!r} holds `@` or `/` (not an npm `@scope/name`)"
    return None


def byte_order(path):
    return os.fsencode(path)


def package_files(pkg_dir):
    """Every regular file of a package, as `/`-separated paths, in byte order."""
    out = []
    for root, dirs, files in os.walk(pkg_dir, followlinks=False):
        for name in files:
            full = os.path.join(root, name)
            if os.path.isfile(full) and not os.path.islink(full):  # reading 8
                out.append(os.path.relpath(full, pkg_dir).replace(os.sep, "/"))
    return sorted(out, key=byte_order)


def is_code(path, extensions):
    name = path.rsplit("/", 1)[-1]
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and stem != "" and ext.lower() in extensions


def vendored_dirs(pkg_dir, own):
    """The outermost vendored directories below the root, `/`-separated, in byte order.

    A directory holds a bundled dependency when it holds a license file (a regular file whose
    name is a license file's) or a metadata file that parses as a package other than `own`
    ((registry, name, version)); one that does not parse, or lacks a name or a version, is no
    package (reading 14) and does not fail the stage.
    """
    found = []
    for root, dirs, files in os.walk(pkg_dir, followlinks=False):
        dirs.sort(key=byte_order)
        rel = os.path.relpath(root, pkg_dir).replace(os.sep, "/")
        if rel == ".":
            continue
        regular = [f for f in files if os.path.isfile(os.path.join(root, f))
                   and not os.path.islink(os.path.join(root, f))]
        vendored = any(LICENSE_NAME.match(f) for f in regular)
        if not vendored:
            for name in METADATA_FILES:
                if name not in regular:
                    continue
                try:
                    meta = READERS[name](os.path.join(root, name))
                except Unreadable:
                    continue
                if not (isinstance(meta["name"], str) and isinstance(meta["version"], str)
                        and meta["name"] and meta["version"]):
                    continue
                if (meta["registry"], meta["name"], meta["version"]) != own:
                    vendored = True
                    break
        if vendored:
            found.append(rel)
            dirs[:] = []  # a vendored directory inside another adds nothing
    return sorted(found, key=byte_order)


def word_count(pkg_dir, path):
    text = open(os.path.join(pkg_dir, path), "rb").read().decode("utf-8", errors="replace")
    return len(WORDS.findall(text))


def unrecognised_ref(path):
    return "LicenseRef-unrecognised-" + "".join(
        c if (c.isascii() and c.isalnum()) or c == "." else "-" for c in path)


def read_package(pkg_dir):
    """A package's metadata, id, declared reading and license file paths (not yet decided)."""
    registry, name, version, declared, field, license_file = read_metadata(pkg_dir)
    if not isinstance(name, str) or not isinstance(version, str) or not name or not version:
        raise Unreadable(f"its metadata lacks a name or a version (name {name!r}, version {version!r})")
    invalid = valid_name_version(registry, name, version)
    if invalid:
        raise Unreadable(invalid)
    package_id = f"{registry}/{name}@{version}"

    paths = [p for p in package_files(pkg_dir) if "/" not in p and LICENSE_NAME.match(p)]
    if license_file is not None:
        rel = license_file[2:] if license_file.startswith("./") else license_file
        if not os.path.isfile(os.path.join(pkg_dir, rel)):
            raise Unreadable(f"license-file `{license_file}` does not exist")
        if rel not in paths:
            paths.append(rel)
    paths.sort(key=byte_order)

    unlicensed = declared is not None and declared.strip() == "UNLICENSED"
    spdx = parse_spdx(declared) if declared is not None and not unlicensed else None
    verdict = {"package": package_id, "declared_field": field, "declared": declared,
               "unlicensed": unlicensed, "spdx_tree": spdx,
               "unknown": declared is not None and spdx is None,
               "words": {p: word_count(pkg_dir, p) for p in paths},
               "vendored": vendored_dirs(pkg_dir, (registry, name, version)), "files": []}
    return verdict, paths, package_id


def milli(score):
    """A score as an integer number of thousandths (reading 5: the stage rounds to 3 decimals)."""
    return round(float(score) * 1000)


def taken_for_declared(candidates, declared_families):
    """The candidate a file is taken for as a declared license, or None (afm.md, The decision)."""
    if not candidates:
        return None
    first_id, first_score = candidates[0]
    if family(first_id) in declared_families:
        return first_id
    if milli(first_score) < DECLARED_BELOW:
        for cid, score in candidates[1:]:
            if family(cid) in declared_families and milli(first_score) - milli(score) <= DECLARED_MARGIN:
                return cid
    return None


def decide_package(verdict, paths, stage_files, policy):
    """Parts, expression and evaluation, given the declared reading in verdict["spdx_tree"].

    stage_files maps a license file's path to the stage's match of its text
    ({"licenses": [...], "candidates": [[id, score], ...]}), the one input taken from the stage.
    """
    spdx = verdict["spdx_tree"]
    verdict["spdx"] = render(spdx) if spdx is not None else None
    declared_ids = [spdx_key(license_of(r)) for r in requirements(spdx)] if spdx is not None else []
    declared_families = {family(d) for d in declared_ids}
    parts = [f"({verdict['spdx']})"] if spdx is not None else []
    for path in paths:
        match = stage_files.get(path) or {"licenses": [], "candidates": []}
        licenses = match.get("licenses") or []
        candidates = [tuple(c) for c in match.get("candidates") or []
                      if isinstance(c, list) and len(c) == 2]
        taken_for = None
        if not licenses:
            if verdict["words"][path] > NOTICE_WORDS:
                parts.append(unrecognised_ref(path))
        else:
            taken_for = taken_for_declared(candidates, declared_families)
            if taken_for is None:
                parts.extend(licenses)  # the file is one of them: all must be allowed
        verdict["files"].append({"path": path, "declared": taken_for})
    if verdict["unlicensed"]:
        # `UNLICENSED`: denied outright, no expression (reading 15: the files are still matched)
        verdict.update(rule="code:denied", license=None, excluded_by=["UNLICENSED"],
                       deciders=["UNLICENSED"], tree=None)
        return verdict
    if not parts:
        rule = "code:unknown-license" if verdict["declared"] is not None else "code:no-license"
        verdict.update(rule=rule, license=None, excluded_by=[], deciders=[], tree=None)
        return verdict
    expression = " AND ".join(parts)
    tree = parse_spdx(expression)
    if tree is None:
        raise Unreadable(f"the reference cannot parse its own expression `{expression}`")
    allowed, deciders = evaluate(tree, policy)
    denied = [r for r in requirements(tree) if not requirement_allowed(r, policy)]
    verdict.update(
        rule="code:allowed" if allowed else "code:denied",
        license=render(tree),
        excluded_by=[] if allowed else [render(r) for r in denied],  # reading 7
        deciders=[render(r) for r in deciders],
        tree=tree,
    )
    return verdict


def code_rows(pkg_dir, package_id, verdict, extensions, max_bytes):
    rows = {}
    for path in package_files(pkg_dir):
        if not is_code(path, extensions):
            continue
        evidence = {"package": package_id}
        if verdict["license"] is not None:
            evidence["license"] = verdict["license"]
        vendored = next((v for v in verdict["vendored"] if path.startswith(v + "/")), None)
        if vendored is not None:  # first, whatever the package's verdict
            rule = "code:vendored"
            evidence["vendored"] = vendored
        elif verdict["rule"] != "code:allowed":
            rule = verdict["rule"]
            if rule == "code:denied":  # reading 7
                evidence["excluded_by"] = list(verdict["excluded_by"])
        else:
            data = open(os.path.join(pkg_dir, path), "rb").read()
            if len(data) > max_bytes:  # before the UTF-8 check
                rule = "code:too-large"
                evidence["bytes"] = len(data)
            else:
                try:
                    data.decode("utf-8")
                    rule = "code:allowed"
                except UnicodeDecodeError:
                    rule = "code:not-utf8"
        rows[f"{package_id}/{path}"] = {
            "decision": "kept" if rule == "code:allowed" else "removed",
            "rule": rule,
            "evidence": evidence,
        }
    return rows


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.differences = []

    def diff(self, where, field, stage, reference):
        self.differences.append((where, field, stage, reference))

    def equal(self, where, field, stage, reference):
        if stage != reference:
            self.diff(where, field, stage, reference)

    def equiv(self, where, field, stage, reference):
        if not equivalent(stage, reference):
            self.diff(where, field, stage, reference)

    def equiv_list(self, where, field, stage, reference):
        stage = list(stage or [])
        if len(stage) != len(reference) or not all(
                isinstance(s, str) and equivalent(s, r) for s, r in zip(stage, reference)):
            self.diff(where, field, stage, reference)


def backticked(text):
    return re.findall(r"`([^`]*)`", text or "")


def names_in_order(text, wanted):
    """Whether each requirement of `wanted` appears backticked in `text`, in that order.

    `X WITH E` may be named whole or by its license `X` (a reason may speak of `X` and of `E`).
    """
    quoted = backticked(text)
    i = 0
    for want in wanted:
        forms = [want] + ([want.split(" WITH ")[0]] if " WITH " in want else [])
        while i < len(quoted) and not any(equivalent(quoted[i], f) for f in forms):
            i += 1
        if i == len(quoted):
            return False
        i += 1
    return True


def candidates_problem(candidates, licenses):
    """What is wrong with a file's `candidates` as the book defines them, or None.

    They are the text matching's output, taken as given; only their form and their agreement
    with `licenses` are checked: `[id, score]` pairs, scores of at least 0.9 with 3 decimals,
    best first and ties by id, and the matches the candidates tied with the first (plus the
    `-only` id of each GNU `-or-later` one among them).
    """
    if not isinstance(candidates, list) or not all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], str)
            and isinstance(c[1], (int, float)) and not isinstance(c[1], bool) for c in candidates):
        return "a list of [id, score] pairs"
    if any(round(c[1], 3) != c[1] or c[1] < MATCH_THRESHOLD or c[1] > 1 for c in candidates):
        return "scores in [0.9, 1] with at most 3 decimals"
    keys = [(-milli(score), byte_order(cid)) for cid, score in candidates]
    if keys != sorted(keys) or len(set(c[0] for c in candidates)) != len(candidates):
        return "distinct ids, best first, ties by id"
    if bool(candidates) != bool(licenses):
        return "candidates exactly when the file matches"
    if candidates:
        tied = [cid for cid, score in candidates if milli(score) == milli(candidates[0][1])]
        added = [c[: -len("-or-later")] + "-only" for c in tied
                 if c.endswith("-or-later") and c.startswith(("GPL-", "LGPL-", "AGPL-", "GFDL-"))]
        if sorted(set(licenses)) != sorted(set(tied + added)):
            return f"licenses {licenses} are not the candidates tied first {tied} (+ {added})"
    return None


def check(packages_dir, policy, stage, extensions, max_bytes, notes=False):
    report = Report()
    config = stage.get("config") or {}
    report.equal("config", "policy", config.get("policy"), policy["name"])
    report.equal("config", "extensions", config.get("extensions"), sorted(set(extensions)))
    report.equal("config", "max_bytes", config.get("max_bytes"), max_bytes)

    dirs = []
    for entry in sorted(os.listdir(packages_dir), key=byte_order):
        full = os.path.join(packages_dir, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            dirs.append(entry)
        elif not (LICENSE_NAME.match(entry) or README_NAME.match(entry)):
            report.diff(entry, "top-level file", "(stage ran)",
                        "the stage must fail: only package directories, license and readme files")
    stage_packages = stage.get("packages") or {}
    report.equal("packages", "directories", sorted(stage_packages, key=byte_order), dirs)

    stage_rows = {}
    for row in stage.get("rows") or []:
        if row["id"] in stage_rows:
            report.diff(row["id"], "id", "appears twice", "once")
        stage_rows[row["id"]] = row
    reference_rows, ids = {}, {}
    for d in dirs:
        where = d
        got = stage_packages.get(d)
        if got is None:
            continue
        sv = got.get("verdict") or {}
        stage_files = {f.get("path"): f for f in sv.get("files") or []}
        try:
            verdict, paths, package_id = read_package(os.path.join(packages_dir, d))
        except Unreadable as e:
            report.diff(where, "package", "(stage read it)", f"the stage must fail: {e}")
            continue
        if package_id in ids:
            report.diff(where, "package", "(stage ran)",
                        f"the stage must fail: `{package_id}` is also the id of {ids[package_id]}")
        ids[package_id] = d
        report.equal(where, "package", got.get("package"), package_id)
        report.equal(where, "declared_field", got.get("declared_field"), verdict["declared_field"])
        report.equal(where, "verdict.declared", sv.get("declared"), verdict["declared"])

        if verdict["unknown"] and sv.get("spdx") is not None:
            # The Rust normaliser reads more than SPDX syntax; this reference cannot judge it.
            report.diff(where, "verdict.spdx (cannot decide)", sv.get("spdx"),
                        f"`{verdict['declared']}` is not a valid SPDX expression here; the stage's "
                        "normalisation table read it, which this reference cannot check; the rest "
                        "of the package is checked against the stage's reading")
            verdict["spdx_tree"] = parse_spdx(sv["spdx"])
            verdict["unknown"] = verdict["spdx_tree"] is None
        decide_package(verdict, paths, stage_files, policy)

        report.equiv(where, "verdict.spdx", sv.get("spdx"), verdict["spdx"])
        report.equal(where, "verdict.unknown is null", sv.get("unknown") is None, not verdict["unknown"])
        report.equal(where, "verdict.files[].path", [f.get("path") for f in sv.get("files") or []],
                     [f["path"] for f in verdict["files"]])
        for ref_file in verdict["files"]:
            sf = stage_files.get(ref_file["path"])
            if sf is None:
                continue
            fw = f"{where}/{ref_file['path']}"
            report.equal(fw, "declared", sf.get("declared"), ref_file["declared"])
            licenses, nearest = sf.get("licenses") or [], sf.get("nearest")
            problem = candidates_problem(sf.get("candidates"), licenses)
            if problem:
                report.diff(fw, "candidates", sf.get("candidates"), problem)
            if licenses:
                ok = (isinstance(nearest, list) and len(nearest) == 2 and nearest[0] in licenses
                      and nearest[1] >= MATCH_THRESHOLD)
                want = f"one of {licenses}, score >= {MATCH_THRESHOLD}"
            else:
                ok = nearest is None or (isinstance(nearest, list) and len(nearest) == 2
                                         and nearest[1] < MATCH_THRESHOLD)
                want = f"null or a score < {MATCH_THRESHOLD}"
            if not ok:
                report.diff(fw, "nearest", nearest, want)
            if notes and not licenses:
                print(f"note: {fw}: matches nothing, {verdict['words'][ref_file['path']]} words",
                      file=sys.stderr)

        decision = "allow" if verdict["rule"] == "code:allowed" else "deny"  # reading 9
        report.equal(where, "verdict.decision", sv.get("decision"), decision)
        report.equal(where, "verdict.rule", sv.get("rule"), verdict["rule"])
        report.equiv(where, "verdict.license", sv.get("license"), verdict["license"])
        stage_excluded = sv.get("excluded_by") or []
        report.equiv_list(where, "verdict.excluded_by", [e[0] if isinstance(e, list) and e else e
                                                           for e in stage_excluded],
                          verdict["excluded_by"])
        for entry in stage_excluded:
            if not (isinstance(entry, list) and len(entry) == 2 and names_in_order(entry[1], [entry[0]])):
                report.diff(where, "verdict.excluded_by reason", entry, "[requirement, a reason naming it]")
        if verdict["deciders"] and not names_in_order(sv.get("reason"), verdict["deciders"]):
            report.diff(where, "verdict.reason", sv.get("reason"),
                        "a reason naming the deciding requirements " + ", ".join(f"`{r}`" for r in verdict["deciders"]))

        rows = code_rows(os.path.join(packages_dir, d), package_id, verdict, extensions, max_bytes)
        reference_rows.update(rows)

    for row_id in sorted(set(stage_rows) | set(reference_rows), key=byte_order):
        s, r = stage_rows.get(row_id), reference_rows.get(row_id)
        if s is None or r is None:
            report.diff(row_id, "row", "present" if s else "absent", "present" if r else "absent")
            continue
        report.equal(row_id, "decision", s.get("decision"), r["decision"])
        report.equal(row_id, "rule", s.get("rule"), r["rule"])
        se, re_ = s.get("evidence"), r["evidence"]
        if isinstance(se, str):
            se = json.loads(se)
        if not isinstance(se, dict):
            report.diff(row_id, "evidence", se, re_)
            continue
        report.equal(row_id, "evidence keys", sorted(se), sorted(re_))
        report.equal(row_id, "evidence.package", se.get("package"), re_["package"])
        report.equiv(row_id, "evidence.license", se.get("license"), re_.get("license"))
        if "excluded_by" in se or "excluded_by" in re_:
            report.equiv_list(row_id, "evidence.excluded_by", se.get("excluded_by"), re_.get("excluded_by") or [])
        if "vendored" in se or "vendored" in re_:
            report.equal(row_id, "evidence.vendored", se.get("vendored"), re_.get("vendored"))
        if "bytes" in se or "bytes" in re_:
            report.equal(row_id, "evidence.bytes", se.get("bytes"), re_.get("bytes"))
    return report, len(dirs), len(reference_rows)


# --------------------------------------------------------------------------------------------
# STAGE.json from a store (a convenience; the Rust test writes STAGE.json itself)
# --------------------------------------------------------------------------------------------

def dump_stage(store, digest, stage_name=None):
    """STAGE.json from a store: a code-packages stage manifest, or a run manifest with it."""
    import pyarrow.parquet as pq

    def obj_path(d):
        h = d.split(":", 1)[1]
        return os.path.join(store, "objects", h[:2], h[2:])

    def record(d):
        return json.loads(open(obj_path(d), "rb").read())

    rec = record(digest)
    if rec.get("kind") == "run":
        stages = [record(s["manifest"]) for s in rec["stages"]]
        stages = [s for s in stages if (s.get("name") == stage_name if stage_name
                                        else s.get("stage_kind") == "code-packages")]
        if len(stages) != 1:
            sys.exit(f"{len(stages)} matching stages in run {digest}; name one with --stage-name")
        rec = stages[0]
    if rec.get("stage_kind") != "code-packages":
        sys.exit(f"{digest} is not a code-packages stage manifest")
    ledger = record(rec["outputs"]["ledger"]["digest"])
    parts = record(ledger["parts"])
    rows = []
    for shard in parts["shards"]:
        for row in pq.read_table(obj_path(shard["digest"])).to_pylist():
            evidence = json.loads(row["evidence"]) if row["evidence"] is not None else None
            rows.append({"id": row["id"], "decision": row["decision"], "rule": row["rule"],
                         "evidence": evidence})
    return {"config": rec["config"], "packages": rec["stats"]["packages"], "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", help="the packages directory (the stage's `packages` input)")
    ap.add_argument("--policy", help="the policy file (e.g. recipes/license-policies/afm-code.yaml)")
    ap.add_argument("--stage", help="STAGE.json: the stage's config, statistics' packages and ledger rows")
    ap.add_argument("--extensions", default=",".join(DEFAULT_EXTENSIONS),
                    help="comma-separated code extensions (default: the stage's 28)")
    ap.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)
    ap.add_argument("--notes", action="store_true",
                    help="also print, on stderr, where the stage's text matches are not as the book "
                         "defines them (a match that is not a candidate); they are taken as given")
    ap.add_argument("--dump-stage", action="store_true",
                    help="write STAGE.json for --manifest in --store to stdout and exit")
    ap.add_argument("--store", help="a store directory (`.prov`)")
    ap.add_argument("--manifest", help="a code-packages stage manifest digest, or a run manifest digest")
    ap.add_argument("--stage-name", help="with a run manifest: the stage's name")
    args = ap.parse_args(argv)
    if args.dump_stage:
        if not (args.store and args.manifest):
            ap.error("--dump-stage needs --store and --manifest")
        json.dump(dump_stage(args.store, args.manifest, args.stage_name), sys.stdout,
                  indent=1, sort_keys=True, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    if not (args.packages and args.policy and args.stage):
        ap.error("--packages, --policy and --stage are required")
    extensions = {e.strip().lower().lstrip(".") for e in args.extensions.split(",") if e.strip()}
    policy = read_policy(args.policy)
    stage = json.load(open(args.stage, encoding="utf-8"))
    report, n_packages, n_rows = check(args.packages, policy, stage, extensions, args.max_bytes, args.notes)
    if report.differences:
        for where, field, stage_value, reference_value in report.differences:
            print(f"{where}: {field}: stage {json.dumps(stage_value, ensure_ascii=False, default=str)}"
                  f" != reference {json.dumps(reference_value, ensure_ascii=False, default=str)}")
        print(f"code-license reference: {len(report.differences)} differences")
        return 1
    print(f"code-license reference: {n_packages} packages, {n_rows} rows agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
