#!/usr/bin/env python3
"""The Protego 0.7.0 side of the robots benchmark (crates/prov-prep/benches/robots_vs_protego.rs).

Parses every robots.txt of the main job's snapshot and checks every document URL against
its host's rules for each agent, exactly the work the Rust side does, on one core. Prints
one JSON object: {"parse_s", "check_s", "checks", "disallowed"} (best of N runs).

With `--check-fixture FILE` (crates/prov-prep/src/robots/protego-disagreements.json), checks
instead that Protego still gives the answer the fixture notes for each case, and exits 1 if not.
"""

import json
import sys
import time
from pathlib import Path

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


def main() -> None:
    if sys.argv[1] == "--check-fixture":
        check_fixture(Path(sys.argv[2]))
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
