"""Benchmark multi-label TabNetClassifier (sparsemax and BCE losses) on the yeast data set.

Yeast (Elisseeff & Weston 2002, the MULAN version): 2,417 genes, 103 numeric features,
14 labels ``Class1`` .. ``Class14`` (4.2 labels per row on average). The file has no official
train/test split column, so the rows are split 80/20 with a permutation from seed 0 (a ``split``
column with values "train" / "test", if present, would be used instead).

Compared, on the same split:

* ``TabNetClassifier(multilabel_loss="sparsemax")`` and ``(multilabel_loss="bce")``, 3 seeds
  each (mean and standard deviation over seeds);
* ``MultiOutputClassifier(HistGradientBoostingClassifier())`` from scikit-learn, one binary
  model per label (deterministic: early stopping is off below 10,000 rows);
* the trivial baseline that predicts the most frequent training label set for every row.

Metrics on the test rows: micro-F1, samples-F1, Hamming loss, label ranking average precision
(LRAP, from ``predict_proba``), the fraction of exact-zero scores, and the fit time. Everything
runs on one CPU thread. The table is printed and written to the ``## Multi-label (yeast)``
section of ``benchmarks/README.md`` (other sections are left untouched); every run's metrics go
to ``benchmarks/results/multilabel.json``.

Usage::

    python benchmarks/bench_multilabel.py               # writes the README section
    python benchmarks/bench_multilabel.py --no-write --seeds 1
    TABSPARSE_DATASETS=/data python benchmarks/bench_multilabel.py
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn
import torch
from _readme import cpu_model, load_average, write_section
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import f1_score, hamming_loss, label_ranking_average_precision_score
from sklearn.multioutput import MultiOutputClassifier
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabsparse import TabNetClassifier

README = Path(__file__).resolve().parent / "README.md"
SECTION = "## Multi-label (yeast)"
RESULTS = Path(__file__).resolve().parent / "results" / "multilabel.json"
DATASETS = Path(
    os.environ.get(
        "TABSPARSE_DATASETS", Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    )
)
TABNET = {"max_epochs": 40, "batch_size": 256, "device": "cpu"}
METRICS = ("micro-F1", "samples-F1", "Hamming loss", "LRAP", "exact zeros", "fit s")


def load_yeast() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """Train/test features and label matrices, and how the split was made."""
    path = DATASETS / "yeast" / "yeast.csv.gz"
    if not path.exists():
        raise SystemExit(f"yeast not found at {path}; set TABSPARSE_DATASETS")
    data = pd.read_csv(path)
    labels = [c for c in data.columns if c.startswith("Class")]
    if "split" in data.columns:
        train = (data["split"] == "train").to_numpy()
        how = "the file's `split` column"
        data = data.drop(columns="split")
    else:
        perm = np.random.default_rng(0).permutation(len(data))
        train = np.zeros(len(data), dtype=bool)
        train[perm[: int(0.8 * len(data))]] = True
        how = "no official split in the file: 80/20 by a permutation from seed 0"
    X = data.drop(columns=labels).to_numpy(np.float32)
    Y = data[labels].to_numpy(np.int64)
    return X[train], Y[train], X[~train], Y[~train], how


def scores(Y: np.ndarray, pred: np.ndarray, proba: np.ndarray, seconds: float) -> dict[str, float]:
    """The metrics of one fitted model on the test rows."""
    return {
        "micro-F1": f1_score(Y, pred, average="micro"),
        "samples-F1": f1_score(Y, pred, average="samples", zero_division=0.0),
        "Hamming loss": hamming_loss(Y, pred),
        "LRAP": label_ranking_average_precision_score(Y, proba),
        "exact zeros": float((proba == 0).mean()),
        "fit s": seconds,
    }


def run_tabnet(loss: str, seed: int, data: tuple[np.ndarray, ...]) -> dict[str, float]:
    X, Y, Xt, Yt = data
    start = time.perf_counter()
    clf = TabNetClassifier(multilabel_loss=loss, random_state=seed, **TABNET).fit(X, Y)
    seconds = time.perf_counter() - start
    return scores(Yt, clf.predict(Xt), clf.predict_proba(Xt), seconds)


def run_hgb(data: tuple[np.ndarray, ...]) -> dict[str, float]:
    X, Y, Xt, Yt = data
    start = time.perf_counter()
    clf = MultiOutputClassifier(HistGradientBoostingClassifier(random_state=0)).fit(X, Y)
    seconds = time.perf_counter() - start
    proba = np.column_stack([p[:, 1] for p in clf.predict_proba(Xt)])
    return scores(Yt, clf.predict(Xt), proba, seconds)


def run_trivial(data: tuple[np.ndarray, ...]) -> dict[str, float]:
    _, Y, _, Yt = data
    sets, counts = np.unique(Y, axis=0, return_counts=True)
    pred = np.tile(sets[counts.argmax()], (len(Yt), 1))
    return scores(Yt, pred, pred.astype(float), 0.0)


def summarise(runs: list[dict[str, float]]) -> dict[str, tuple[float, float]]:
    """Mean and standard deviation of each metric over runs (0 for a single run)."""
    out = {}
    for m in METRICS:
        values = [r[m] for r in runs]
        out[m] = (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)
    return out


def cell(metric: str, mean: float, std: float, n: int) -> str:
    fmt: Callable[[float], str] = (lambda v: f"{v:.1f}") if metric == "fit s" else "{:.3f}".format
    return fmt(mean) + (f" ± {fmt(std)}" if n > 1 else "")


def render(
    results: dict[str, tuple[dict[str, tuple[float, float]], int]], machine: str, how: str
) -> str:
    lines = [
        f"Machine: {machine}.",
        "",
        "Yeast (2,417 rows, 103 numeric features, 14 labels; 4.2 labels per row on average); "
        f"split: {how}. TabNetClassifier({', '.join(f'{k}={v}' for k, v in TABNET.items())}), "
        "otherwise defaults, mean ± standard deviation over the seeds shown; "
        "MultiOutputClassifier(HistGradientBoostingClassifier()) with defaults (one model "
        "per label); the trivial baseline predicts the most frequent training label set. "
        "LRAP is computed from `predict_proba` (for the baseline from its 0/1 prediction); "
        "`exact zeros` is the fraction of `predict_proba` entries that are exactly 0. "
        "Generated by `python benchmarks/bench_multilabel.py`.",
        "",
        "| model | runs | " + " | ".join(METRICS) + " |",
        "|---|---:|" + "---:|" * len(METRICS),
    ]
    for name, (summary, n) in results.items():
        cells = [cell(m, *summary[m], n) for m in METRICS]
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    best = max(results, key=lambda name: results[name][0]["micro-F1"][0])
    lines += [
        "",
        f"Best micro-F1: {best}. Only the sparsemax loss gives exact zeros (labels ruled out "
        "for that row); sigmoid and tree scores never reach 0 (the baseline's are its 0/1 "
        "prediction). `predict` keeps a label when its probability is at least 0.5; for the "
        "sparsemax loss that probability is the sparsemax score times the mean number of "
        "labels per training row (see the user guide, 'Multi-label and multi-task'). Times "
        "are one thread on a shared machine: compare them within this table only.",
    ]
    return "\n".join(lines) + "\n"


def readme_section(path: Path = RESULTS) -> str:
    """The section body from the stored runs (no fits)."""
    saved = json.loads(path.read_text())
    results = {name: (summarise(r), len(r)) for name, r in saved["runs"].items()}
    return render(results, saved["machine"], saved["split"])


def machine_line() -> str:
    load = load_average()
    busy = f"; load average {load:.2f} at start" if load is not None else ""
    return (
        f"CPU: {cpu_model()}, 1 thread (torch and OpenMP); torch {torch.__version__}, "
        f"scikit-learn {sklearn.__version__}, Python {platform.python_version()}; "
        f"{_dt.date.today().isoformat()}{busy}"
    )


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="TabNet seeds (default 3)")
    parser.add_argument("--no-write", action="store_true", help="do not update the README")
    parser.add_argument("--readme", type=Path, default=README, help="markdown file to update")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    X, Y, Xt, Yt, how = load_yeast()
    data = (X, Y, Xt, Yt)
    machine = machine_line()
    print(machine, flush=True)
    print(f"train {X.shape}, test {Xt.shape}; {how}", flush=True)
    runs: dict[str, list[dict[str, float]]] = {}
    for loss in ("sparsemax", "bce"):
        name = f'TabNetClassifier(multilabel_loss="{loss}")'
        runs[name] = []
        for seed in range(args.seeds):
            runs[name].append(run_tabnet(loss, seed, data))
            print(f"{name} seed {seed}: {runs[name][-1]}", flush=True)
    with threadpool_limits(1):  # HistGradientBoosting's OpenMP threads
        runs["MultiOutputClassifier(HistGradientBoostingClassifier())"] = [run_hgb(data)]
    runs["most frequent label set"] = [run_trivial(data)]
    results = {name: (summarise(r), len(r)) for name, r in runs.items()}
    body = render(results, machine, how)
    print(body)
    if not args.no_write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({"machine": machine, "split": how, "runs": runs}, indent=1))
        write_section(args.readme, SECTION, body)
        print(f"wrote section {SECTION!r} of {args.readme}")


if __name__ == "__main__":
    main()
