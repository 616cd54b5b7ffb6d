#!/usr/bin/env python3
"""The datatrove 0.10.1 side of the PII benchmark (crates/prov-pii/benches/pii_vs_datatrove.rs).

Runs datatrove's PIIFormatter (e-mail and IP redaction, its defaults) over every document of
a JSON Lines corpus (gzip-compressed when its name ends in .gz: the shared PII bench corpus,
or the synthetic corpus) on one core, best of N, and prints one JSON object:
{"seconds", "documents", "bytes"} (bytes of UTF-8 text).
"""

import gzip
import json
import sys
import time

from datatrove.pipeline.formatters import PIIFormatter


def main() -> None:
    corpus, runs = sys.argv[1], int(sys.argv[2])
    opener = gzip.open if corpus.endswith(".gz") else open
    with opener(corpus, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    formatter = PIIFormatter()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        for text in texts:
            formatter.format(text)
        best = min(best, time.perf_counter() - t)
    size = sum(len(t.encode("utf-8")) for t in texts)
    print(json.dumps({"seconds": best, "documents": len(texts), "bytes": size}))


if __name__ == "__main__":
    main()
