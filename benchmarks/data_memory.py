"""Peak resident memory and throughput of reading a large JSONL corpus with ``iter_documents``.

Generates a JSONL corpus of Python snippets (default 2 GB) in a temporary directory, reads every
document, prints the document count, the peak resident memory (VmHWM) and the throughput, and deletes
the corpus. Target: peak RSS under 1 GB for 2 GB, i.e. memory bounded by the row, not the corpus.

    python benchmarks/data_memory.py --size-gb 2
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from calib.data.sources import CorpusSpec, iter_documents

SNIPPET = '''import os


class Store{i}:
    """A small key-value store backed by a directory."""

    def __init__(self, root):
        self.root = root

    def get(self, key, default=None):
        path = os.path.join(self.root, key)
        if not os.path.exists(path):
            return default
        with open(path) as handle:
            return handle.read()

    def put(self, key, value):
        with open(os.path.join(self.root, key), "w") as handle:
            handle.write(value)
        return {i}
'''


def generate(path: Path, size_bytes: int) -> int:
    """Write about ``size_bytes`` of JSONL by repeating one ~1 MB block; return the bytes written."""
    rows = [
        json.dumps({"content": SNIPPET.format(i=i), "path": f"pkg/store_{i}.py", "repo": "org/bench", "license": "mit"})
        for i in range(1000)
    ]
    block = ("\n".join(rows) + "\n").encode()
    written = 0
    with open(path, "wb") as out:
        while written < size_bytes:
            out.write(block)
            written += len(block)
    return written


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (VmHWM; ru_maxrss where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0, help="corpus size in GB (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="calib-data-memory-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        started = time.perf_counter()
        size = generate(corpus, int(args.size_gb * 1e9))
        generated = time.perf_counter() - started
        rss_before = peak_rss_bytes()
        started = time.perf_counter()
        documents = characters = 0
        for document in iter_documents(CorpusSpec(paths=(str(corpus),))):
            documents += 1
            characters += len(document.text or "")
        seconds = time.perf_counter() - started
        peak = peak_rss_bytes()
    print(f"corpus: {size / 1e9:.2f} GB JSONL, generated in {generated:.1f} s")
    print(f"documents: {documents:,} ({characters / 1e9:.2f} G characters of code)")
    print(f"read: {seconds:.1f} s, {size / 1e6 / seconds:.0f} MB/s, {documents / seconds:,.0f} documents/s")
    print(f"peak RSS: {peak / 2**20:.0f} MiB (before reading: {rss_before / 2**20:.0f} MiB); target < 1024 MiB")
    print("within target" if peak < 2**30 else "OVER TARGET")


if __name__ == "__main__":
    main()
