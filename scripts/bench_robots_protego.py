#!/usr/bin/env python3
"""The Protego 0.7.0 side of the robots benchmark (crates/prov-robots/benches/robots_vs_protego.rs).

Parses every robots.txt of the main job's snapshot and checks every document URL against
its host's rules for each agent, exactly the work the Rust side does, on one core. Prints
one JSON object: {"parse_s", "check_s", "checks", "disallowed"} (best of N runs).

With `--check-fixture FILE` (crates/prov-robots/src/protego-disagreements.json), checks
instead that Protego still gives the answer the fixture notes for each case, and exits 1 if not.

With `--disagreements DATA PROV` (PROV: a `prov` binary), makes every check of DATA with
Protego and with `prov explain robots --batch`, and prints each check where the two differ as a
JSON line {"host", "agent", "url", "ours", "protego", "class"}, then a count per class on
stderr. The class is the first of these changes to Protego that makes it answer as we do
(each applied on top of the ones before): see the book's robots benchmark for what each means.
"""

import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import protego._protego as protego_parser
import protego._ruleset as protego_rules
from protego import Protego

AGENTS = ["AI2Bot", "Applebot-Extended", "Bytespider", "CCBot", "CCBot/2.0", "CCBot/1.0", "ClaudeBot",
          "cohere-training-data-crawler", "Diffbot", "Meta-ExternalAgent", "Google-Extended", "GPTBot",
          "PanguBot", "*"]


def check_fixture(path: Path) -> None:
    cases = json.loads(path.read_text(encoding="utf-8"))["cases"]
    wrong = [c for c in cases if Protego.parse(c["body"]).can_fetch(c["url"], c["agent"]) != c["protego"]]
    for c in wrong:
        print(f"{c['class']} ({c['host']}): Protego no longer answers {c['protego']}", file=sys.stderr)
    print(f"{len(cases) - len(wrong)} of {len(cases)} fixture cases as noted")
    sys.exit(1 if wrong else 0)


def rfc_token(agent: str) -> str:
    """The RFC 9309 product token: the leading letters, `-` and `_` before any `/`."""
    return re.match(r"[A-Za-z_-]*", agent.split("/")[0].strip()).group(0).lower()


def exact_agent_match(rule_set, agent: str) -> int:
    if rule_set.user_agent == "*":
        return 1
    token = rfc_token(rule_set.user_agent)
    return len(token) if token and token == rfc_token(agent) else 0


def strict_directive(line: str):
    if ":" not in line:
        return None
    key, value = line.split(":", 1)
    key = key.strip().lower()
    known = ("user-agent", "allow", "disallow", "sitemap", "crawl-delay", "request-rate", "visit-time", "host")
    return (key if key in known else "unknown:" + key), value.strip()


def without_other_records(body: str) -> str:
    def other(line: str) -> bool:
        content = line.split("#")[0]
        return ":" in content and content.split(":")[0].strip().lower() not in ("user-agent", "allow", "disallow")
    return "\n".join(line for line in re.split(r"\r\n|\r|\n", body) if not other(line))


def plain_rule(field: str):
    def add(rule_set, pattern: str) -> None:
        url_pattern = rule_set._url_pattern(pattern)
        if url_pattern is not None:
            rule_set._rules.append(protego_rules._Rule(field=field, value=url_pattern))
    return add


def our_quoting(url: str) -> str:
    url = url.partition("#")[0]
    m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?]*(.*)", url)
    path = m.group(1) if m else url
    path = path if path.startswith("/") else "/" + path
    return re.sub(r"%([0-9a-fA-F]{2})", lambda e: "%" + e.group(1).upper(), path)


# (class, what it changes): a change to the body, or (module, attribute, replacement).
ORIGINAL = {}
STEPS = [
    ("bom", lambda body: body.lstrip("\ufeff")),
    ("lenient-directive-names", (protego_parser, "_extract_directive", strict_directive)),
    ("other-records-end-a-group", without_other_records),
    ("agent-prefix", (protego_rules._RuleSet, "applies_to", exact_agent_match)),
    ("extra-line-breaks", lambda body: re.sub(r"[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]", " ", body)),
    ("non-ascii-white-space", lambda body: re.sub(r"[\xa0\u1680\u2000-\u200a\u202f\u205f\u3000]", "\ue000", body)),
    ("index-html", (protego_rules._RuleSet, "allow", plain_rule("allow"))),
    ("absolute-url-pattern", (protego_rules, "_quote_pattern",
                              lambda p: "\x00" if p.startswith(("https://", "http://")) else ORIGINAL["_quote_pattern"](p))),
    ("raw-non-ascii-url", (protego_rules, "_quote_path", our_quoting)),
]


def classify(body: str, url: str, agent: str, ours: bool) -> str:
    patched = []
    try:
        for name, change in STEPS:
            if callable(change):
                body = change(body)
            else:
                owner, attr, replacement = change
                patched.append((owner, attr, getattr(owner, attr)))
                ORIGINAL.setdefault(attr, getattr(owner, attr))
                setattr(owner, attr, replacement)
            if Protego.parse(body).can_fetch(url, agent) == ours:
                return name
        return "unexplained"
    finally:
        for owner, attr, original in reversed(patched):
            setattr(owner, attr, original)


def disagreements(data: Path, prov: str) -> None:
    robots = {p.name: p for p in sorted((data / "robots").iterdir())}
    checks = []
    with open(data / "udhr.jsonl", encoding="utf-8") as f:
        for line in f:
            url = json.loads(line)["url"]
            host = url.split("/")[2]
            if host in robots:
                checks += [(host, agent, url) for agent in AGENTS]
    batch = "".join(json.dumps({"robots": str(robots[h]), "agent": a, "url": u}) + "\n" for h, a, u in checks)
    answers = subprocess.run([prov, "explain", "robots", "--batch"], input=batch, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    bodies, parsed, classes = {}, {}, Counter()
    for (host, agent, url), answer in zip(checks, answers, strict=True):
        if host not in parsed:
            bodies[host] = robots[host].read_bytes().decode("utf-8", errors="replace")
            parsed[host] = Protego.parse(bodies[host])
        ours, theirs = json.loads(answer)["allowed"], parsed[host].can_fetch(url, agent)
        if ours != theirs:
            cls = classify(bodies[host], url, agent, ours)
            classes[cls] += 1
            print(json.dumps({"host": host, "agent": agent, "url": url, "ours": ours, "protego": theirs, "class": cls}))
    print(f"{len(checks)} checks, {sum(classes.values())} differ: {dict(classes.most_common())}", file=sys.stderr)


def main() -> None:
    if sys.argv[1] == "--check-fixture":
        check_fixture(Path(sys.argv[2]))
    if sys.argv[1] == "--disagreements":
        disagreements(Path(sys.argv[2]), sys.argv[3])
        return
    data, runs = Path(sys.argv[1]), int(sys.argv[2])
    bodies = {p.name: p.read_bytes().decode("utf-8", errors="replace") for p in sorted((data / "robots").iterdir())}
    urls = []
    with open(data / "udhr.jsonl", encoding="utf-8") as f:
        for line in f:
            url = json.loads(line)["url"]
            urls.append((url.split("/")[2], url))
    best_parse = best_check = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        parsed = {h: Protego.parse(b) for h, b in bodies.items()}
        best_parse = min(best_parse, time.perf_counter() - t)
        t = time.perf_counter()
        disallowed = 0
        checks = 0
        for host, url in urls:
            rp = parsed.get(host)
            if rp is None:
                continue
            for agent in AGENTS:
                checks += 1
                if not rp.can_fetch(url, agent):
                    disallowed += 1
        best_check = min(best_check, time.perf_counter() - t)
    print(json.dumps({"parse_s": best_parse, "check_s": best_check, "checks": checks, "disallowed": disallowed}))


if __name__ == "__main__":
    main()
