"""Does self-supervised pretraining help with few labels? TabNetPretrainer vs training from scratch.

For each dataset and seed: a random train/test split; :class:`tabsparse.TabNetPretrainer` is fitted
on *all* training rows without their labels; then for each label fraction (1% and 10% of the
training rows, drawn per seed, stratified) a classifier is fitted on those labelled rows only, once
from scratch and once with ``pretrained=`` (same parameters, same rows, same seed). Test-set
accuracy and ROC AUC (one-vs-rest for multi-class) are reported as mean ± sd over the seeds. The
table is printed and written to the ``## Self-supervised pretraining`` section of
``benchmarks/README.md``.

Datasets are read from ``$TABSPARSE_DATASETS`` (default ``../shared/datasets``), as in the tests.

Usage::

    python benchmarks/bench_pretraining.py                 # 1 thread, writes the README
    python benchmarks/bench_pretraining.py --seeds 1 --no-write
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from _readme import cpu_model, load_average, write_section
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabsparse import TabNetClassifier, TabNetPretrainer

README = Path(__file__).resolve().parent / "README.md"
RESULTS = Path(__file__).resolve().parent / "results" / "pretraining.json"
SECTION = "## Self-supervised pretraining"
DATASETS = Path(
    os.environ.get(
        "TABSPARSE_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets"
    )
)


@dataclass(frozen=True)
class Task:
    name: str
    target: str
    n_train: int  # training rows (pretraining uses all of them, unlabelled)
    n_test: int
    pretrain_batch: int  # small enough for a few hundred optimiser steps
    pretrain_epochs: int
    drop: tuple[str, ...] = ("split",)


TASKS = {
    "higgs_lightgbm_sample": Task("higgs_lightgbm_sample", "label", 5000, 2500, 256, 30),
    "covtype_50k_sample": Task("covtype_50k_sample", "Cover_Type", 20000, 10000, 512, 15),
}

ARCH: dict[str, Any] = {"n_d": 16, "n_a": 16, "n_steps": 3, "device": "cpu"}
PRETRAIN: dict[str, Any] = {"learning_rate": 0.02, "n_iter_no_change": 10}
SUPERVISED: dict[str, Any] = {
    "batch_size": 256,
    "max_epochs": 100,
    "learning_rate": 0.02,
    "early_stopping": True,
    "validation_fraction": 0.2,
    "n_iter_no_change": 15,
}


def load(task: Task) -> tuple[pd.DataFrame, np.ndarray]:
    path = DATASETS / task.name / f"{task.name}.csv.gz"
    if not path.exists():
        raise SystemExit(f"dataset {task.name!r} not found at {path} (set TABSPARSE_DATASETS)")
    frame = pd.read_csv(path)
    y = frame.pop(task.target).to_numpy()
    return frame.drop(columns=[c for c in task.drop if c in frame.columns]), y


def scores(model: TabNetClassifier, X: pd.DataFrame, y: np.ndarray) -> dict[str, float]:
    proba = model.predict_proba(X)
    if proba.shape[1] == 2:
        auc = roc_auc_score(y, proba[:, 1])
    else:  # test rows of classes the few labels never showed cannot be scored by AUC
        keep = np.isin(y, model.classes_)
        present = np.isin(model.classes_, np.unique(y[keep]))
        p = proba[keep][:, present]
        p = p / p.sum(axis=1, keepdims=True)
        auc = roc_auc_score(y[keep], p, multi_class="ovr", labels=model.classes_[present])
    return {"accuracy": accuracy_score(y, model.classes_[proba.argmax(axis=1)]), "auc": auc}


def run_task(
    task: Task, seeds: list[int], fractions: list[float], pretrain_epochs: int | None
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    X, y = load(task)
    rows: list[dict[str, Any]] = []
    seconds = {"pretrain": 0.0, "supervised": 0.0}
    for seed in seeds:
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, train_size=task.n_train, test_size=task.n_test, random_state=seed, stratify=y
        )
        tic = time.perf_counter()
        pre = TabNetPretrainer(
            **ARCH,
            **PRETRAIN,
            batch_size=task.pretrain_batch,
            max_epochs=pretrain_epochs or task.pretrain_epochs,
            early_stopping=True,
            random_state=seed,
        ).fit(X_train)
        seconds["pretrain"] += time.perf_counter() - tic
        hist = pre.history_
        print(
            f"{task.name} seed {seed}: pretrained {len(hist)} epochs, val_loss "
            f"{hist[0]['val_loss']:.3f} -> {min(r['val_loss'] for r in hist):.3f} "
            f"({time.perf_counter() - tic:.0f} s)",
            flush=True,
        )
        for fraction in fractions:
            n_labels = max(20, round(fraction * len(y_train)))
            labelled, _ = train_test_split(
                np.arange(len(y_train)), train_size=n_labels, random_state=seed, stratify=y_train
            )
            X_lab, y_lab = X_train.iloc[labelled], y_train[labelled]
            for start in ("scratch", "pretrained"):
                tic = time.perf_counter()
                model = TabNetClassifier(
                    **ARCH,
                    **SUPERVISED,
                    random_state=seed,
                    pretrained=pre if start == "pretrained" else None,
                ).fit(X_lab, y_lab)
                seconds["supervised"] += time.perf_counter() - tic
                row = {
                    "dataset": task.name,
                    "seed": seed,
                    "fraction": fraction,
                    "n_labels": n_labels,
                    "start": start,
                    "epochs": len(model.history_),
                    "pre_first": hist[0]["val_loss"],
                    "pre_best": min(r["val_loss"] for r in hist),
                    **scores(model, X_test, y_test),
                }
                rows.append(row)
                print(
                    f"  {fraction:.0%} ({n_labels} labels) {start:>10}: "
                    f"accuracy {row['accuracy']:.4f}  AUC {row['auc']:.4f}  "
                    f"({row['epochs']} epochs, {time.perf_counter() - tic:.1f} s)",
                    flush=True,
                )
    return rows, seconds


def mean_sd(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def render(
    rows: list[dict[str, Any]],
    seconds: dict[str, dict[str, float]],
    machine: str,
    seeds: list[int],
) -> str:
    frame = pd.DataFrame(rows)
    val_losses = {
        d: f"{g.pre_first.mean():.3f} -> {g.pre_best.mean():.3f}"
        for d, g in frame.groupby("dataset", sort=False)
    }
    lines = [
        f"Machine: {machine}.",
        "",
        "Few labels: a `TabNetPretrainer` is fitted on all training rows without labels, then a "
        "`TabNetClassifier` on 1% or 10% of the training rows (stratified), from scratch and "
        "with `pretrained=` (identical parameters, rows and seed). Test accuracy and ROC AUC "
        f"(one-vs-rest for multi-class), mean ± sd over {len(seeds)} seeds (each seed: its own "
        "split, label sample and pretraining). "
        f"Architecture {ARCH['n_d']}/{ARCH['n_a']}/{ARCH['n_steps']} (n_d/n_a/n_steps); "
        "pretraining on 90% of the training rows (10% for early stopping), ratio 0.2, "
        + ", ".join(
            f"{t.name}: batch {t.pretrain_batch}, at most {t.pretrain_epochs} epochs"
            for t in TASKS.values()
        )
        + f"; supervised: batch {SUPERVISED['batch_size']}, at most "
        f"{SUPERVISED['max_epochs']} epochs, early stopping on 20% of the labelled rows. "
        "Generated by `python benchmarks/bench_pretraining.py`.",
        "",
        "`val_loss` is the pretraining validation loss (1 = as good as guessing the column "
        "mean), first epoch -> best.",
        "",
        "| dataset | train rows | labels | pretraining val_loss | accuracy scratch | "
        "accuracy pretrained | AUC scratch | AUC pretrained | AUC gain (pretrained - scratch) | "
        "seeds where pretrained is better (accuracy, AUC) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (dataset, fraction), group in frame.groupby(["dataset", "fraction"], sort=False):
        scratch = group[group.start == "scratch"].sort_values("seed")
        tuned = group[group.start == "pretrained"].sort_values("seed")
        gain = (tuned["auc"].to_numpy() - scratch["auc"].to_numpy()).tolist()
        wins_acc = int((tuned["accuracy"].to_numpy() > scratch["accuracy"].to_numpy()).sum())
        wins_auc = sum(g > 0 for g in gain)
        lines.append(
            f"| {dataset} | {TASKS[dataset].n_train} | {fraction:.0%} "
            f"({int(group.n_labels.iloc[0])}) | {val_losses[dataset]} | "
            f"{mean_sd(scratch.accuracy.tolist())} | "
            f"{mean_sd(tuned.accuracy.tolist())} | {mean_sd(scratch.auc.tolist())} | "
            f"{mean_sd(tuned.auc.tolist())} | {mean_sd(gain)} | "
            f"{wins_acc} / {len(gain)}, {wins_auc} / {len(gain)} |"
        )
    lines.append("")
    lines.append(
        "Time (s): "
        + "; ".join(
            f"{d}: pretraining {s['pretrain']:.0f}, supervised fits {s['supervised']:.0f}"
            for d, s in seconds.items()
        )
        + "."
    )
    return "\n".join(lines) + "\n"


def readme_section(path: Path = RESULTS) -> str:
    """The section body from the stored results (no fits)."""
    saved = json.loads(path.read_text())
    seeds = sorted({r["seed"] for r in saved["rows"]})
    return render(saved["rows"], saved["seconds"], saved["machine"], seeds)


def machine_line(threads: int) -> str:
    today = _dt.date.today().isoformat()
    load = load_average()
    busy = f"; load average {load:.2f} at start" if load is not None else ""
    return (
        f"CPU: {cpu_model()}, {threads} thread(s); torch {torch.__version__}; "
        f"Python {platform.python_version()}; {today}{busy}"
    )


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(TASKS), help="comma separated names")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    parser.add_argument("--fractions", default="0.01,0.1", help="label fractions")
    parser.add_argument("--pretrain-epochs", type=int, default=None, help="override per task")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--no-write", action="store_true", help="do not write README / results")
    parser.add_argument(
        "--render-only", action="store_true", help="re-render the README from the results file"
    )
    parser.add_argument("--readme", type=Path, default=README, help="markdown file to update")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    seeds = list(range(args.seeds))
    fractions = [float(f) for f in args.fractions.split(",")]
    if args.render_only:
        saved = json.loads(RESULTS.read_text())
        rows, seconds, line = saved["rows"], saved["seconds"], saved["machine"]
        seeds = sorted({r["seed"] for r in rows})
    else:
        line = machine_line(torch.get_num_threads())
        print(line, flush=True)
        rows = []
        seconds = {}
        for name in args.datasets.split(","):
            task_rows, seconds[name] = run_task(TASKS[name], seeds, fractions, args.pretrain_epochs)
            rows.extend(task_rows)
        if not args.no_write:
            RESULTS.parent.mkdir(exist_ok=True)
            saved = {"machine": line, "seconds": seconds, "rows": rows}
            RESULTS.write_text(json.dumps(saved, indent=1) + "\n")
    body = render(rows, seconds, line, seeds)
    print()
    print(body)
    if not args.no_write:
        write_section(args.readme, SECTION, body)
        print(f"wrote section {SECTION!r} of {args.readme}")


if __name__ == "__main__":
    main()
