#!/usr/bin/env python3
"""The datatrove 0.10.1 side of the MinHash dedup benchmark (scripts/bench-dedup).

Runs datatrove's four MinHash deduplication steps, as its own example pipeline does
(signatures, buckets, clusters, filter), over a folder of JSON Lines files on one core
(`LocalPipelineExecutor`, one worker), with the same LSH settings as Provenant's `dedup`
defaults: 5-word shingles, 14 buckets of 8 hashes (the FineWeb settings). Prints one JSON
object: {"seconds", "steps": {name: seconds}, "documents", "bytes", "kept"} (bytes of UTF-8
text; `kept` counts the documents the filter step wrote).

Usage: bench_dedup_datatrove.py CORPUS_DIR WORK_DIR
"""

import json
import os
import sys
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

from bench_corpus import count_lines, documents_and_text_bytes


def run(name, pipeline, logs, tasks=1):
    start = time.perf_counter()
    LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1, logging_dir=os.path.join(logs, name)).run()
    return time.perf_counter() - start


def main() -> None:
    corpus, work = sys.argv[1], sys.argv[2]
    config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
    sigs, buckets, remove, out, logs = (os.path.join(work, d) for d in ("sigs", "buckets", "remove", "out", "logs"))
    reader = lambda: JsonlReader(corpus, glob_pattern="*.jsonl", text_key="text", id_key="id")  # noqa: E731
    steps = {
        "signatures": run("signatures", [reader(), MinhashDedupSignature(output_folder=sigs, config=config)], logs),
        # One task per bucket, as datatrove's example; one worker runs them one after another.
        "buckets": run(
            "buckets",
            [MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=config)],
            logs,
            tasks=config.num_buckets,
        ),
        "clusters": run("clusters", [MinhashDedupCluster(input_folder=buckets, output_folder=remove, config=config)], logs),
        "filter": run(
            "filter",
            [reader(), MinhashDedupFilter(input_folder=remove), JsonlWriter(out, compression=None)],
            logs,
        ),
    }
    documents, size = documents_and_text_bytes(corpus)
    kept = count_lines(out)
    print(json.dumps({"seconds": sum(steps.values()), "steps": steps, "documents": documents, "bytes": size, "kept": kept}))


if __name__ == "__main__":
    main()
