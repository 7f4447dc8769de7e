"""How fit time and memory grow with the number of rows: 10k, 100k and 1M synthetic rows x 50.

Each size runs in a fresh process: a float32 ``(n, 50)`` array (and a binary target from a few of
its columns) is made, then ``TabNetClassifier`` (defaults, ``max_epochs=1``, ``batch_size=1024``
so that every size runs the same step, validation split and early stopping as the defaults
choose, one thread) is fitted once. Reported per size:

* seconds of the training epoch (from ``history_``) and rows per second;
* the whole ``fit`` wall time, and its CPU time per row (CPU time hardly depends on what else
  runs on a shared machine, so linearity is judged on it);
* memory: the peak resident set of the process minus its resident set after imports
  (``fit``'s own working memory *plus the data itself*), as a multiple of the data's size.

Epoch time should grow linearly (constant rows/s) and the 1M-row peak stay under 2.5x the data.

Usage::

    python benchmarks/bench_scaling.py                    # writes the README section
    python benchmarks/bench_scaling.py --sizes 10000 100000 --no-write
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results" / "scaling.jsonl"
SECTION = "## Scaling with the number of rows"
N_FEATURES = 50


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def worker(n: int, threads: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from tabsparse import TabNetClassifier

    torch.set_num_threads(threads)
    base = rss_mb()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, N_FEATURES), dtype=np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] - 0.5 * X[:, 3] > 0).astype(np.int64)
    data_mb = (X.nbytes + y.nbytes) / 1e6
    # batch_size pinned: "auto" would take 512-row batches for the 10k-row table
    clf = TabNetClassifier(max_epochs=1, batch_size=1024, random_state=0, device="cpu")
    t0, c0 = time.perf_counter(), time.process_time()
    clf.fit(X, y)
    fit_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    epoch_s = clf.history_[0]["seconds"]
    n_train = n - (max(1, round(n * 0.1)) if "val_loss" in clf.history_[0] else 0)
    return {
        "rows": n,
        "train_rows": n_train,
        "threads": threads,
        "epoch_s": epoch_s,
        "rows_per_s": n_train / epoch_s,
        "fit_s": fit_s,
        "fit_cpu_s": cpu_s,
        "cpu_us_per_row": cpu_s / n * 1e6,
        "data_mb": data_mb,
        "rss_base_mb": base,
        "rss_peak_mb": peak,
        "peak_over_data": (peak - base) / data_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads)))
        return
    sys.path.insert(0, str(HERE))
    from _readme import cpu_model, load_average, write_section

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONWARNINGS="ignore")
    records = []
    load_before = load_average()
    for n in args.sizes:
        cmd = [sys.executable, __file__, "--worker", str(n), "--threads", str(args.threads)]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        records.append(rec)
        print(json.dumps(rec), flush=True)
    if args.no_write:
        print(render(records, "(not stored)", "(not stored)"))
        return
    import torch

    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = (
        f"{cpu_model()}, {args.threads} thread(s), torch {torch.__version__}; one-minute load "
        f"average {load_before} before and {load_average()} after (shared machine)"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as f:
        for rec in records:
            f.write(json.dumps({"date": stamp, "machine": machine, **rec}) + "\n")
    write_section(README, SECTION, render(records, stamp, machine))


def render(records: list[dict[str, Any]], stamp: str, machine: str) -> str:
    """The README section body for one run's ``records``."""
    rows = [
        f"| {r['rows']:,} | {r['epoch_s']:.1f} | {r['rows_per_s']:,.0f} | {r['fit_s']:.1f} | "
        f"{r['cpu_us_per_row']:.1f} | {r['data_mb']:,.0f} | "
        f"{r['rss_peak_mb'] - r['rss_base_mb']:,.0f} | {r['peak_over_data']:.2f}x |"
        for r in records
    ]
    rates = [r["cpu_us_per_row"] for r in records if r["rows"] >= 100_000] or [
        r["cpu_us_per_row"] for r in records
    ]
    biggest = records[-1]
    return "\n".join(
        [
            f"`python benchmarks/bench_scaling.py` — {stamp}; machine: {machine}.",
            "",
            f"Synthetic float32 rows x {N_FEATURES} features, `TabNetClassifier` defaults with "
            "`max_epochs=1` and `batch_size=1024`, one fresh process per size. *Fit memory* is "
            "the peak resident set minus the resident set after imports, so it includes the data "
            "itself.",
            "",
            "| rows | epoch (s) | rows/s | fit (s) | fit CPU (µs/row) | data (MB) "
            "| fit memory (MB) | memory / data |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"- Fit CPU time per row from 100k rows up varies by {max(rates) / min(rates):.2f}x "
            "(1.00x = time exactly linear in the rows).",
            f"- Peak memory for {biggest['rows']:,} rows: {biggest['peak_over_data']:.2f}x the "
            "data (target < 2.5x).",
            "",
        ]
    )


def readme_section(path: Path = RESULTS) -> str:
    """The section body from the latest run stored in ``path`` (no fits)."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            runs.setdefault(record["date"], []).append(record)
    stamp = max(runs)
    records = sorted(runs[stamp], key=lambda r: r["rows"])
    machine = records[0].get("machine", "not recorded in `results/scaling.jsonl`")
    return render(records, stamp, machine)


if __name__ == "__main__":
    main()
