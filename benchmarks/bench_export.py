"""Benchmark serving throughput: onnxruntime and torch.export vs the estimator's predict_proba.

A ``TabNetClassifier`` with the default architecture (n_d = n_a = 16, 3 steps) is fitted briefly
on a synthetic table of 12 numeric and 4 categorical columns (with missing values) and exported
to ONNX and to ``torch.export``. Throughput (rows per second) is measured on CPU for batches of
1, 64 and 4096 rows, with one thread and with the libraries' default thread counts:

* ``onnxruntime``: ``InferenceSession.run`` on the encoded arrays (``numeric``, ``codes``);
* ``torch.export``: the loaded program's ``module()`` on the same arrays, under ``no_grad``;
* ``predict_proba``: the estimator on the DataFrame, which includes encoding the table;
* ``encode only``: ``encoder_.transform`` of the DataFrame, the part of ``predict_proba``
  that the exported models leave to the caller.

Every cell is the median of several timed repeats, each long enough (>= ``--min-time``) to be
measured reliably; the implementations are interleaved. The table is printed and written to the
``## Export`` section of ``benchmarks/README.md`` (other sections are left untouched).

Usage::

    python benchmarks/bench_export.py               # writes the README section
    python benchmarks/bench_export.py --no-write --repeats 3
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from _readme import cpu_model, load_average, write_section

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabsparse import TabNetClassifier
from tabsparse.export import export_model

README = Path(__file__).resolve().parent / "README.md"
SECTION = "## Export"
RESULTS = Path(__file__).resolve().parent / "results" / "export.json"
BATCHES = (1, 64, 4096)
IMPLEMENTATIONS = ("onnxruntime", "torch.export", "predict_proba", "encode only")
DEFAULT_TORCH_THREADS = torch.get_num_threads()


def make_table(n: int, seed: int) -> pd.DataFrame:
    """Synthetic table: 12 numeric columns (10% missing) and 4 categorical ones (5% missing)."""
    rng = np.random.default_rng(seed)
    data: dict[str, Any] = {}
    for j in range(12):
        col = rng.normal(size=n) * (j + 1)
        col[rng.random(n) < 0.1] = np.nan
        data[f"num{j}"] = col
    for j, size in enumerate((3, 8, 20, 50)):
        values = np.array([f"c{j}_{k}" for k in range(size)] + [None], dtype=object)
        p = np.r_[np.full(size, 0.95 / size), 0.05]
        data[f"cat{j}"] = pd.Series(rng.choice(values, n, p=p), dtype=object)
    return pd.DataFrame(data)


def make_target(X: pd.DataFrame) -> np.ndarray:
    """Three classes from a few columns."""
    score = X["num0"].fillna(0) + 0.3 * X["num3"].fillna(0) + (X["cat0"] == "c0_1")
    return np.digitize(score, np.nanquantile(score, [1 / 3, 2 / 3]))


def versions() -> str:
    """Versions of the libraries involved."""
    import onnx
    import onnxruntime

    from tabsparse import __version__

    return (
        f"tabsparse {__version__}, torch {torch.__version__}, onnxruntime "
        f"{onnxruntime.__version__}, onnx {onnx.__version__}, numpy {np.__version__}, "
        f"pandas {pd.__version__}, Python {platform.python_version()}"
    )


def rows_per_second(fn: Callable[[], object], rows: int, min_time: float) -> float:
    """Rows per second of ``fn`` over enough calls to last at least ``min_time`` seconds."""
    fn()  # warm-up
    calls = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time:
            return rows * calls / elapsed
        calls = max(calls * 2, int(calls * min_time / max(elapsed, 1e-9)) + 1)


def session(path: Path, threads: int) -> Any:
    """An onnxruntime CPU session with ``threads`` intra-op threads (0: its default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if threads == 1:
        options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def bench(
    clf: TabNetClassifier,
    X: pd.DataFrame,
    onnx_path: Path,
    torch_path: Path,
    threads: int,
    repeats: int,
    min_time: float,
) -> dict[tuple[int, str], float]:
    """Median rows/s per (batch size, implementation) with ``threads`` threads (0: default)."""
    torch.set_num_threads(threads if threads > 0 else DEFAULT_TORCH_THREADS)
    sess = session(onnx_path, threads)
    program = torch.export.load(str(torch_path)).module()
    samples: dict[tuple[int, str], list[float]] = {
        (b, name): [] for b in BATCHES for name in IMPLEMENTATIONS
    }
    for batch in BATCHES:
        frame = X.iloc[:batch]
        enc = clf.encoder_.transform(frame)
        feeds = {"numeric": enc.numeric, "codes": enc.codes}
        numeric_t, codes_t = torch.from_numpy(enc.numeric), torch.from_numpy(enc.codes)

        def run_program(
            numeric_t: torch.Tensor = numeric_t, codes_t: torch.Tensor = codes_t
        ) -> Any:
            with torch.no_grad():
                return program(numeric_t, codes_t)

        fns: dict[str, Callable[[], object]] = {
            "onnxruntime": lambda feeds=feeds: sess.run(None, feeds),
            "torch.export": run_program,
            "predict_proba": lambda frame=frame: clf.predict_proba(frame),
            "encode only": lambda frame=frame: clf.encoder_.transform(frame),
        }
        for _ in range(repeats):
            for name, fn in fns.items():
                samples[(batch, name)].append(rows_per_second(fn, batch, min_time))
    return {key: statistics.median(vals) for key, vals in samples.items()}


def caveat(load: float | None) -> str | None:
    """A warning for the README when other processes loaded the machine, else None."""
    cores = os.cpu_count() or 1
    if load is None or load <= 0.5 * cores:
        return None
    return (
        f"**Caveat:** load average {load:.2f} on {cores} logical cores: other processes "
        "competed for the CPU, so every number is noisy and the multi-thread rows (`default`) "
        "are pessimistic: each operation waits for its slowest thread, and PyTorch runs "
        "hundreds of small operations per call (onnxruntime fewer, with less overhead each). "
        "Re-run `python benchmarks/bench_export.py` on an idle machine for reference numbers."
    )


def render(
    results: dict[str, dict[tuple[int, str], float]],
    machine: str,
    repeats: int,
    model: str,
    note: str | None = None,
) -> str:
    """Markdown text of the section (without the heading)."""
    lines = [
        f"Machine: {machine}.",
        "",
        *([note, ""] if note else []),
        f"Model: {model}. Rows per second (higher is better), median of {repeats} interleaved "
        "repeats. `onnxruntime` and `torch.export` run the exported graph on the encoded arrays "
        "(`numeric`, `codes`); `predict_proba` is the estimator on the DataFrame, encoding "
        "included; `encode only` is `encoder_.transform` of the DataFrame, the part a server "
        "does itself in front of an exported model (see `docs/deployment.md`). Generated by "
        "`python benchmarks/bench_export.py`. Single rows: the exported torch program, like the "
        "estimator, runs its few hundred operations one by one through PyTorch's dispatcher "
        "(milliseconds per call); onnxruntime's per-operation cost is far lower.",
        "",
        "| threads | batch | " + " | ".join(IMPLEMENTATIONS) + " | onnxruntime / predict_proba |",
        "|---|---:|" + "---:|" * len(IMPLEMENTATIONS) + "---:|",
    ]
    for label, res in results.items():
        for batch in BATCHES:
            cells = [f"{res[(batch, name)]:,.0f}" for name in IMPLEMENTATIONS]
            ratio = res[(batch, "onnxruntime")] / res[(batch, "predict_proba")]
            lines.append(f"| {label} | {batch} | " + " | ".join(cells) + f" | {ratio:.1f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    parser.add_argument(
        "--min-time", type=float, default=0.2, help="seconds per timed repeat (default 0.2)"
    )
    parser.add_argument("--rows", type=int, default=5000, help="training rows (default 5000)")
    parser.add_argument("--no-write", action="store_true", help="do not update the README")
    parser.add_argument("--readme", type=Path, default=README, help="markdown file to update")
    args = parser.parse_args(argv)

    X = make_table(max(args.rows, max(BATCHES)), seed=0)
    y = make_target(X)
    clf = TabNetClassifier(max_epochs=3, random_state=0, device="cpu")
    clf.fit(X.iloc[: args.rows], y[: args.rows])
    model = (
        f"TabNetClassifier(n_d=16, n_a=16, n_steps=3), {X.shape[1]} columns "
        f"(12 numeric, 4 categorical), {len(clf.classes_)} classes"
    )
    default_ort = os.cpu_count() or 1
    load = load_average()
    busy = f"; load average {load:.2f} at start" if load is not None else ""
    machine = (
        f"CPU: {cpu_model()}, {os.cpu_count()} logical cores; threads: 1, or the defaults "
        f"(torch {DEFAULT_TORCH_THREADS}, onnxruntime one per physical core, at most "
        f"{default_ort}); {versions()}; {_dt.date.today().isoformat()}{busy}"
    )
    print(machine, flush=True)
    results: dict[str, dict[tuple[int, str], float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = export_model(clf, Path(tmp) / "model.onnx", "onnx")
        torch_path = export_model(clf, Path(tmp) / "model.pt2", "torch")
        for label, threads in (("1", 1), ("default", 0)):
            res = bench(clf, X, onnx_path, torch_path, threads, args.repeats, args.min_time)
            results[label] = res
            for batch in BATCHES:
                summary = "  ".join(f"{n} {res[(batch, n)]:,.0f}" for n in IMPLEMENTATIONS)
                print(f"threads {label}, batch {batch}: {summary} rows/s", flush=True)
    body = render(results, machine, args.repeats, model, caveat(load))
    print()
    print(body)
    if not args.no_write:
        stored = {"machine": machine, "repeats": args.repeats, "model": model}
        stored["note"] = caveat(load)
        stored["results"] = {
            label: [[batch, name, value] for (batch, name), value in res.items()]
            for label, res in results.items()
        }
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(stored, indent=1) + "\n")
        write_section(args.readme, SECTION, body)
        print(f"wrote {RESULTS} and section {SECTION!r} of {args.readme}")


def readme_section(path: Path | None = None) -> str:
    """The section body from the stored run (no fits)."""
    stored = json.loads((path or RESULTS).read_text())
    results = {
        label: {(int(batch), name): value for batch, name, value in rows}
        for label, rows in stored["results"].items()
    }
    return render(results, stored["machine"], stored["repeats"], stored["model"], stored["note"])


if __name__ == "__main__":
    main()
