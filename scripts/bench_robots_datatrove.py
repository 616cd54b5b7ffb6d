#!/usr/bin/env python3
"""The datatrove 0.10.1 side of the robots stage benchmark (scripts/bench-robots).

What a datatrove user writes to do the `robots` stage's work: a pipeline of `JsonlReader`, a
filter that checks each document's URL against its host's robots.txt with Protego 0.7.0 for
the 14 Apertus agents (removed when any agent is disallowed), and `JsonlWriter` for the kept
documents, with an exclusion writer for the removed ones (Provenant's stage writes a ledger
row for every document). One task, one worker (`LocalPipelineExecutor`), uncompressed output.
Each host's robots.txt is read and parsed once, on its first document, as a datatrove filter
would cache it; a host without a file in the snapshot keeps its documents.

Prints one JSON object: {"seconds", "documents", "bytes", "kept", "removed"}
(bytes of UTF-8 text).

Usage: bench_robots_datatrove.py CORPUS_DIR ROBOTS_DIR WORK_DIR
"""

import json
import os
import sys
import time
from urllib.parse import urlsplit

from datatrove.data import Document
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from protego import Protego

from bench_corpus import count_lines, documents_and_text_bytes

# The agents of the Apertus robots filter, as the `robots` stage's default lists them.
AGENTS = ["AI2Bot", "Applebot-Extended", "Bytespider", "CCBot", "CCBot/2.0", "CCBot/1.0", "ClaudeBot",
          "cohere-training-data-crawler", "Diffbot", "Meta-ExternalAgent", "Google-Extended", "GPTBot",
          "PanguBot", "*"]


class RobotsTxtFilter(BaseFilter):
    """Removes a document when its host's robots.txt disallows its URL for any listed agent."""

    name = "robots.txt"

    def __init__(self, snapshot: str, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.snapshot = snapshot
        self.parsers: dict[str, Protego | None] = {}

    def parser(self, host: str):
        if host not in self.parsers:
            path = os.path.join(self.snapshot, host)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    self.parsers[host] = Protego.parse(f.read().decode("utf-8", errors="replace"))
            else:
                self.parsers[host] = None
        return self.parsers[host]

    def filter(self, doc: Document):
        url = doc.metadata.get("url")
        host = urlsplit(url).hostname if url else None
        rp = self.parser(host.rstrip(".")) if host else None
        if rp is None:
            return True
        for agent in AGENTS:
            if not rp.can_fetch(url, agent):
                return False, "disallowed"
        return True


def main() -> None:
    corpus, robots, work = sys.argv[1], sys.argv[2], sys.argv[3]
    kept_dir, removed_dir = os.path.join(work, "kept"), os.path.join(work, "removed")
    robots_filter = RobotsTxtFilter(robots, exclusion_writer=JsonlWriter(removed_dir, compression=None))
    pipeline = [
        JsonlReader(corpus, glob_pattern="*.jsonl", text_key="text", id_key="id"),
        robots_filter,
        JsonlWriter(kept_dir, compression=None),
    ]
    start = time.perf_counter()
    LocalPipelineExecutor(pipeline=pipeline, tasks=1, workers=1, logging_dir=os.path.join(work, "logs")).run()
    seconds = time.perf_counter() - start
    documents, size = documents_and_text_bytes(corpus)
    print(json.dumps({"seconds": seconds, "documents": documents, "bytes": size, "kept": count_lines(kept_dir),
                      "removed": count_lines(removed_dir)}))


if __name__ == "__main__":
    main()
