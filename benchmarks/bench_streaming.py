"""Training from disk: one epoch on an N x 50 float32 memmap, peak RSS and rows/s.

Usage: python benchmarks/bench_streaming.py [--rows 10000000] [--dir /tmp] [--mode disk|memory]

Each mode runs in its own process (peak RSS is per process). ``disk`` writes the table to a file
(if absent), passes a read-only ``numpy.memmap`` to ``fit`` and reports the peak resident memory
of the whole process (``ru_maxrss``) next to the file size; ``memory`` fits the same rows loaded in
RAM, for the throughput comparison. Results are appended to ``benchmarks/results/streaming.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

COLS = 50


def make_file(path: Path, rows: int) -> None:
    if path.exists() and path.stat().st_size == rows * COLS * 4:
        return
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        for start in range(0, rows, 1_000_000):
            n = min(1_000_000, rows - start)
            rng.normal(size=(n, COLS)).astype(np.float32).tofile(f)


def _cpu() -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from _readme import cpu_model

    return cpu_model()


def run(mode: str, rows: int, folder: Path, threads: int) -> dict[str, object]:
    from tabsparse import TabNetRegressor
    from tabsparse.streaming import DiskRows

    torch.set_num_threads(threads)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    path = folder / f"tabsparse_bench_{rows}x{COLS}.f32"
    make_file(path, rows)
    disk = DiskRows(np.memmap(path, dtype=np.float32, mode="r", shape=(rows, COLS)))
    y = np.empty(rows, dtype=np.float32)
    for start, stop in disk.blocks(1_000_000):  # the target from two columns, read in chunks
        block = disk.read(start, stop)
        y[start:stop] = block[:, 0] - 0.5 * block[:, 1]
    X = np.memmap(path, dtype=np.float32, mode="r", shape=(rows, COLS))
    if mode == "memory":
        X = np.array(X)
    reg = TabNetRegressor(max_epochs=1, early_stopping=False, batch_size=4096, random_state=0)
    tic = time.perf_counter()
    reg.fit(X, y)
    seconds = time.perf_counter() - tic
    epoch = reg.history_[0]["seconds"]
    return {
        "mode": mode,
        "rows": rows,
        "file_gb": rows * COLS * 4 / 1e9,
        "fit_seconds": round(seconds, 1),
        "epoch_seconds": round(epoch, 1),
        "rows_per_second": round(rows / epoch),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3),
        "rss_after_imports_gb": round(baseline, 3),
        "threads": threads,
        "torch": torch.__version__,
        "machine": _cpu(),
        "date": time.strftime("%Y-%m-%d"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--mode", choices=["disk", "memory", "both"], default="both")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.mode, args.rows, Path(args.dir), args.threads)))
        return
    modes = ["disk", "memory"] if args.mode == "both" else [args.mode]
    out = Path(__file__).parent / "results" / "streaming.jsonl"
    out.parent.mkdir(exist_ok=True)
    for mode in modes:
        cmd = [sys.executable, __file__, "--child", "--mode", mode, "--rows", str(args.rows)]
        cmd += ["--dir", args.dir, "--threads", str(args.threads)]
        line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        result = json.loads(line.splitlines()[-1])
        print(json.dumps(result))
        with open(out, "a") as f:
            f.write(json.dumps(result) + "\n")


RESULTS = Path(__file__).parent / "results" / "streaming.jsonl"
LABEL = {"disk": "`numpy.memmap` on disk (streamed)", "memory": "the same rows in memory"}


def readme_section(path: Path = RESULTS) -> str:
    """The README section body from the latest stored row of each mode (no fits)."""
    latest: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            latest[row["mode"]] = row
    rows = [latest[m] for m in ("disk", "memory") if m in latest]
    first = rows[0]
    lines = [
        f"`python benchmarks/bench_streaming.py --rows {first['rows']}` — {first['date']}; "
        f"machine: {first['machine']}, {first['threads']} torch thread(s), torch "
        f"{first['torch']} (rows in `benchmarks/results/streaming.jsonl`).",
        "",
        "One epoch of `TabNetRegressor(max_epochs=1, early_stopping=False, batch_size=4096)` on "
        f"a {first['rows']:,} x {COLS} float32 table ({first['file_gb']:.1f} GB), each mode in "
        "its own process:",
        "",
        "| mode | epoch s | rows/s | peak RSS (whole process) | RSS after imports |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {LABEL[r['mode']]} | {r['epoch_seconds']:.1f} | {r['rows_per_second']:,} | "
            f"{r['peak_rss_gb']:.2f} GB | {r['rss_after_imports_gb']:.2f} GB |"
        )
    if len(rows) == 2:
        ratio = rows[0]["rows_per_second"] / rows[1]["rows_per_second"]
        lines += [
            "",
            f"Streamed / in-memory throughput: {ratio:.2f}x; the streamed process peaks at "
            f"{rows[0]['peak_rss_gb'] / rows[0]['file_gb']:.2f}x the table's size on disk.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
