"""What the datatrove sides of the stage benchmarks count of a corpus (a folder of JSON Lines
files with a `text` field): its documents and the UTF-8 bytes of their text, so that each
benchmark prints MB/s over the same bytes."""

import json
import os


def documents_and_text_bytes(corpus: str) -> tuple[int, int]:
    documents = size = 0
    for name in sorted(os.listdir(corpus)):
        with open(os.path.join(corpus, name), encoding="utf-8") as f:
            for line in f:
                documents += 1
                size += len(json.loads(line)["text"].encode("utf-8"))
    return documents, size


def count_lines(folder: str) -> int:
    """The lines (documents) of the files a writer left in `folder`; 0 when it wrote none."""
    n = 0
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name), "rb") as f:
            n += sum(1 for _ in f)
    return n
