"""Throughput of textual near-duplicate search (``calib.dedup.minhash``) on 100,000 real functions.

The functions are every function or method of 3 to 200 lines (``ast``) in the standard library, then in
site-packages (files in name order, files over 300 kB skipped, exact repeats dropped). When they run out
before ``--n``, the rest are seeded perturbations of them (about 5 % of the tokens replaced), which also
plants near-duplicates to find.

It prints, in memory and, when ``redis-server`` is on PATH, in a Redis started for the run on 127.0.0.1:

- signatures per second (:class:`MinHasher`: ``hashvalues`` and ``signatures``; target >= 2,000/s);
- inserts per second (:meth:`TextualIndex.add`, signatures included) and the memory the index takes
  (resident growth of this process in memory; ``used_memory`` of the server with Redis);
- queries per second (:meth:`TextualIndex.query` of ``--queries`` corpus functions, themselves left out,
  with exact verification), with the LSH candidates and the verified near-duplicates per query.

Then the band-table pipeline (:mod:`calib.dedup.bands`) on the same functions, written first as 4 Parquet shards
(``id``, ``text``): building the band table (functions/s, signatures included, and its bytes on disk per
function) and searching it for the same queries (queries/s, every candidate's text read back from the shards and
verified), with Polars streaming in this process and on a Ray cluster (the build with Ray Data, the search as Ray
tasks): ``--ray-address HOST:PORT``,
or else a local head started for the run (``tests/_ray.py``: ``ray start --head`` on 127.0.0.1 with
``--ray-cpus`` CPUs, stopped at the end); ``--no-ray`` skips it. Before timing, the benchmark connects to the
cluster once and warms it up (a 2,000-function table built and searched: the workers start and import calib; its
seconds are printed), so the figures are the steady state. Each search's pairs are checked against the in-memory
index's (``same pairs: True``).

    python benchmarks/dedup.py [--n 100000] [--queries 10000] [--seed 0] [--no-redis] [--no-ray]
                               [--ray-address HOST:PORT] [--ray-cpus 2]
"""

from __future__ import annotations

import argparse
import ast
import random
import resource
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from calib.dedup.minhash import MinHasher, TextualIndex, code_tokens

MAX_FILE_BYTES = 300_000
ROOT = Path(__file__).resolve().parents[1]
SHARDS = 4


def _python_files() -> Iterator[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    purelib = Path(sysconfig.get_paths()["purelib"])
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" not in path.parts and "test" not in path.parts:
            yield path
    for path in sorted(purelib.rglob("*.py")):
        yield path


def real_functions(n: int) -> list[str]:
    """Up to ``n`` distinct function sources of 3 to 200 lines."""
    seen: dict[str, None] = {}
    for path in _python_files():
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            continue
        lines = source.splitlines(keepends=True)
        for node in ast.walk(tree):
            function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if function and 3 <= node.end_lineno - node.lineno + 1 <= 200:
                seen.setdefault("".join(lines[node.lineno - 1:node.end_lineno]), None)
                if len(seen) >= n:
                    return list(seen)
    return list(seen)


def corpus(n: int, seed: int) -> tuple[list[str], int]:
    """``n`` functions: the real ones, then perturbed copies; and how many are real."""
    texts = real_functions(n)
    real = len(texts)
    rng = random.Random(seed)
    while len(texts) < n:
        tokens = code_tokens(texts[rng.randrange(real)])
        texts.append(" ".join(f"z{rng.randrange(10**6)}" if rng.random() < 0.05 else t for t in tokens))
    return texts, real


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _redis_server(folder: str) -> tuple[subprocess.Popen, str]:
    import redis

    port = _free_port()
    process = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--dir", folder],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            return process, f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"redis-server on port {port} did not answer PING") from None
            time.sleep(0.05)


def _rate(label: str, count: int, seconds: float, unit: str) -> None:
    print(f"  {label:<34} {count / seconds:>10,.0f} {unit}/s   ({count:,} in {seconds:.1f} s)", flush=True)


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


def bench_index(label: str, keys: list[str], texts: list[str], queries: list[int],
                storage: str | None) -> list[tuple[str, str, float]]:
    """The index's figures; returns its verified pairs (query key, corpus key, Jaccard) in query order."""
    print(f"{label}:", flush=True)
    index = TextualIndex(storage=storage, prefix="bench")
    rss = _rss_mb()
    start = time.perf_counter()
    index.add(keys, texts)
    _rate("inserts (signatures included)", len(keys), time.perf_counter() - start, "functions")
    if storage is None:
        memory = f"this process +{_rss_mb() - rss:,.0f} MB (resident)"
    else:
        import redis

        memory = f"redis-server {redis.Redis.from_url(storage).info('memory')['used_memory'] / 2**20:,.0f} MB"
    print(f"  memory of the index: {memory}", flush=True)
    asked = [texts[i] for i in queries]
    excluded = [keys[i] for i in queries]
    start = time.perf_counter()
    candidates = index.candidates(asked, exclude=excluded)
    _rate("LSH candidates only", len(queries), time.perf_counter() - start, "queries")
    start = time.perf_counter()
    found = index.query(asked, exclude=excluded)
    _rate("queries (verified)", len(queries), time.perf_counter() - start, "queries")
    n_candidates = sum(map(len, candidates))
    n_found = sum(map(len, found))
    print(f"  per query: {n_candidates / len(queries):.2f} candidates, {n_found / len(queries):.2f} near-duplicates "
          f"(Jaccard >= {index.threshold}); {sum(1 for f in found if f) / len(queries):.1%} of queries have one; "
          f"bands {index.bands}", flush=True)
    start = time.perf_counter()
    index.clear()
    print(f"  clear: {time.perf_counter() - start:.1f} s", flush=True)
    return [(q, key, value) for q, matches in zip(excluded, found) for key, value in matches]


def write_shards(keys: list[str], texts: list[str], folder: Path, quiet: bool = False) -> list[Path]:
    import polars as pl

    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    size = -(-len(keys) // SHARDS)
    paths = []
    for n in range(SHARDS):
        paths.append(folder / f"shard-{n}.parquet")
        pl.DataFrame({"id": keys[n * size:(n + 1) * size], "text": texts[n * size:(n + 1) * size]}) \
            .write_parquet(paths[-1])
    megabytes = sum(p.stat().st_size for p in paths) / 2**20
    if not quiet:
        print(f"corpus shards: {SHARDS} Parquet files (id, text), {megabytes:,.0f} MB, written in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    return paths


def bench_bands(label: str, shards: list[Path], folder: Path, keys: list[str], texts: list[str], queries: list[int],
                expected: list[tuple[str, str, float]], ray_address: str | None) -> None:
    from calib.dedup.bands import build_band_table

    print(f"{label}:", flush=True)
    start = time.perf_counter()
    table = build_band_table(shards, folder, ray_address=ray_address)
    _rate("band table (signatures included)", table.functions, time.perf_counter() - start, "functions")
    size = table.bytes
    print(f"  on disk: {size['total'] / table.functions:,.0f} bytes per function (bands "
          f"{size['bands'] / table.functions:,.0f}, ids {size['ids'] / table.functions:,.0f}); "
          f"{size['total'] / 2**20:,.1f} MB, {table.manifest['band_rows']:,} band rows", flush=True)
    asked = [texts[i] for i in queries]
    excluded = [keys[i] for i in queries]
    start = time.perf_counter()
    found = table.search(excluded, asked, ray_address=ray_address)
    _rate("queries (verified)", len(queries), time.perf_counter() - start, "queries")
    print(f"  per query: {found.height / len(queries):.2f} near-duplicates; same pairs as the in-memory index: "
          f"{found.rows() == expected}", flush=True)


def bench_pipeline(args: argparse.Namespace, keys: list[str], texts: list[str], queries: list[int],
                   expected: list[tuple[str, str, float]]) -> None:
    with tempfile.TemporaryDirectory(prefix="calib-bands-") as tmp:
        folder = Path(tmp)
        shards = write_shards(keys, texts, folder)
        bench_bands("band table, Polars streaming in this process", shards, folder / "polars", keys, texts, queries,
                    expected, None)
        if args.no_ray:
            return
        cluster = None
        address = args.ray_address
        if address is None:
            sys.path.insert(0, str(ROOT))
            from tests._ray import start_cluster

            start = time.perf_counter()
            cluster = start_cluster(cpus=args.ray_cpus)
            address = cluster.address
            print(f"local Ray head on {address} ({args.ray_cpus} CPUs) started in {time.perf_counter() - start:.1f} s",
                  flush=True)
        from calib.dedup.bands import build_band_table
        from calib.scale import connect, disconnect

        try:
            start = time.perf_counter()
            connected = connect(address)
            print(f"connected to {address} in {time.perf_counter() - start:.1f} s", flush=True)
            try:
                start = time.perf_counter()
                warm = write_shards(keys[:2000], texts[:2000], folder / "warm", quiet=True)
                build_band_table(warm, folder / "warm" / "table", ray_address=address, batch_rows=500) \
                    .search(keys[:200], texts[:200], ray_address=address)
                print(f"warm-up on the cluster (workers start and import calib; 2,000 functions, 200 queries): "
                      f"{time.perf_counter() - start:.1f} s", flush=True)
                bench_bands(f"band table, Ray on {address}", shards, folder / "ray", keys, texts, queries,
                            expected, address)
            finally:
                disconnect(connected)
        finally:
            if cluster is not None:
                cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="corpus functions (default 100,000)")
    parser.add_argument("--queries", type=int, default=10_000, help="functions queried (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis-backed index")
    parser.add_argument("--no-ray", action="store_true", help="skip the band table's Ray Data engine")
    parser.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                        help="a running Ray cluster (default: a local head started for the run)")
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local head (default 2)")
    args = parser.parse_args()

    start = time.perf_counter()
    texts, real = corpus(args.n, args.seed)
    lines = sorted(t.count("\n") + 1 for t in texts)
    print(f"corpus: {len(texts):,} functions ({real:,} real, {len(texts) - real:,} perturbed copies), "
          f"median {lines[len(lines) // 2]} lines, built in {time.perf_counter() - start:.0f} s", flush=True)
    keys = [f"f{i}" for i in range(len(texts))]
    queries = random.Random(args.seed).sample(range(len(texts)), min(args.queries, len(texts)))

    hasher = MinHasher()
    print("MinHasher (num_perm=128, shingle_size=5):", flush=True)
    start = time.perf_counter()
    hasher.hashvalues(texts)
    _rate("hashvalues, cold token cache", len(texts), time.perf_counter() - start, "functions")
    start = time.perf_counter()
    hasher.hashvalues(texts)
    _rate("hashvalues, warm token cache", len(texts), time.perf_counter() - start, "functions")
    start = time.perf_counter()
    hasher.signatures(texts)
    _rate("signatures (LeanMinHash objects)", len(texts), time.perf_counter() - start, "functions")
    typical = [t for t in texts if 10 <= t.count("\n") + 1 <= 50]
    start = time.perf_counter()
    hasher.hashvalues(typical)
    _rate("hashvalues, 10-50-line functions", len(typical), time.perf_counter() - start, "functions")

    expected = bench_index("in-memory index (threshold 0.4)", keys, texts, queries, None)
    bench_pipeline(args, keys, texts, queries, expected)
    if args.no_redis:
        return
    if shutil.which("redis-server") is None:
        print("Redis-backed index: skipped (redis-server is not on PATH)")
        return
    with tempfile.TemporaryDirectory() as folder:
        process, url = _redis_server(folder)
        try:
            bench_index(f"Redis-backed index ({url})", keys, texts, queries, url)
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    sys.exit(main())
