"""``calib extract`` on one 50 MB single-line Python file: peak memory and time, with the caps and without.

Run: ``python benchmarks/extract_large.py [--megabytes 50] [--uncapped]``. The file is one line,
``x = [1, 1, 1, ...]``, the shape of a minified or generated data file. Each setting runs
``python -m calib extract FILE --json`` in a child process; its peak resident memory comes from
``resource.getrusage(RUSAGE_CHILDREN)`` read in a fresh helper process per run (the value is the
maximum over that helper's children), its time from the wall clock, the seconds calib itself reports
and what it dropped from its JSON.

Settings: ``default`` (--max-file-bytes 1000000: the file is dropped as too_large, never read past the
cap), ``line_cap`` (--max-file-bytes raised above the file's size: read and decoded, dropped as
long_line before any parse). ``--uncapped`` adds both caps raised to 10^12, which parses the file with
``ast`` as calib did before the caps (16.8 GB and 100 s measured on a 50 MB file): run it only on a
machine with that much memory to spare.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_HELPER = textwrap.dedent("""
    import json, resource, subprocess, sys, time
    started = time.perf_counter()
    proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    wall = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"rc": proc.returncode, "wall_s": wall, "peak_mib": peak_kib / 1024,
                      "stdout": proc.stdout, "stderr": proc.stderr[-500:]}))
""")


def measure(args: list[str]) -> dict:
    """Run ``python -m calib ARGS`` under the helper; its exit code, wall time, peak memory and output."""
    helper = subprocess.run([sys.executable, "-c", _HELPER, sys.executable, "-m", "calib", *args],
                            capture_output=True, text=True, check=True)
    return json.loads(helper.stdout)


def main() -> None:
    """Print one line per setting and one JSON object with every figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--uncapped", action="store_true", help="also run with both caps at 10^12 (tens of GB)")
    options = parser.parse_args()
    settings = {"default": [], "line_cap": ["--max-file-bytes", str(options.megabytes * 2_000_000)]}
    if options.uncapped:
        settings["uncapped"] = ["--max-file-bytes", str(10**12), "--max-line-chars", str(10**12)]
    baseline = measure(["--version"])  # the interpreter and calib's imports, the floor of every figure
    figures = {"file_bytes": 0, "baseline": {"wall_s": round(baseline["wall_s"], 2),
                                             "peak_mib": round(baseline["peak_mib"], 1)}}
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "one_line.py"
        items = (options.megabytes * 1_000_000 - 6) // 3
        started = time.perf_counter()
        file.write_text("x = [" + "1, " * items + "]\n")
        figures["file_bytes"] = file.stat().st_size
        figures["write_s"] = round(time.perf_counter() - started, 2)
        for name, extra in settings.items():
            run = measure(["extract", str(file), "--json", *extra])
            record = json.loads(run["stdout"]) if run["rc"] == 0 else {"error": run["stderr"]}
            figures[name] = {"rc": run["rc"], "wall_s": round(run["wall_s"], 2), "peak_mib": round(run["peak_mib"], 1),
                             "calib_seconds": record.get("seconds"), "dropped": record.get("dropped"),
                             "dropped_files": list(record.get("dropped_files", {}).values())}
            print(f"{name}: exit {run['rc']}, {run['wall_s']:.2f} s wall ({record.get('seconds')} s in extract), "
                  f"peak {run['peak_mib']:.0f} MiB, dropped {record.get('dropped')}", flush=True)
    print(f"baseline (calib --version): {baseline['wall_s']:.2f} s, peak {baseline['peak_mib']:.0f} MiB")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
