"""How many training steps, at which learning rate, the column selector a fit learns needs, and
what it costs next to the fit: the measurement behind ``SELECTOR_STEPS`` and ``SELECTOR_LR``
(``tabsparse/estimators/_explaining.py``) and issue 45's goals (the default
``explain(X).selected`` at TPR >= 95 / FDR <= 10 on Syn4-6, TPR >= 90 / FDR <= 15 with ten extra
noise columns; the explanation learned during fit at most 25% of the fit's time).

For Syn4, Syn5 and Syn6 (``explain_metrics.make_syn``, data seed 0, 10,000 training and 10,000
test rows), each as it is and with ten extra columns of independent standard-normal noise
(``n1`` .. ``n10``, never relevant; drawn from their own seed so the eleven Syn columns are
the same rows):

1. ``TabNetClassifier(random_state=3)`` with the library's defaults (seed 3: a fit the
   benchmark's tables never used): its process CPU seconds (selector included), test AUC and
   the TPR / FDR of its own ``explain(X_test).selected``;
2. the core's ``tabsparse.training.selection.fit_selector`` trained against that fitted
   network as the fit trains it (the same budget, batch, and ``SELECTOR_ROWS`` training rows),
   for each learning rate of ``--lr`` and each number of steps of ``--n-iter``, with the
   selector seeds of ``--selector-seeds``: its CPU seconds, their ratio to the fit's, and the
   TPR / FDR of its selection (probability >= 0.5) of the test rows against the truth, scored
   as ``bench_explain.py`` scores them (``explain_metrics.tpr_fdr``).

Everything runs on one CPU thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``); the
times are process CPU seconds (``time.process_time()``), which a shared machine disturbs less
than wall time. Rows go to ``results/selector_budget.json``; the table to the
``## Selector budget`` section of ``benchmarks/README.md``::

    python benchmarks/selector_budget.py
    python benchmarks/selector_budget.py --tables Syn5 --noise-tables --n-iter 50 --no-write
    python benchmarks/selector_budget.py --render   # the section from the stored JSON
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import datetime as _dt
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from _readme import cpu_model, load_average, write_section
from explain_metrics import N_SYN_FEATURES, SYN, make_syn, tpr_fdr
from sklearn.metrics import roc_auc_score

import tabsparse
from tabsparse import TabNetClassifier
from tabsparse.estimators import _explaining as chosen
from tabsparse.training.selection import SELECTION_BUDGET, fit_selector, selection_probabilities

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results" / "selector_budget.json"
SECTION = "## Selector budget"
N_TRAIN = N_TEST = 10_000
N_NOISE = 10
FIT_SEED = 3
SELECTOR_SEED = 0
GOALS = {0: (95.0, 10.0), N_NOISE: (90.0, 15.0)}  # extra columns -> (min TPR, max FDR)


def git_commit() -> str:
    """The working tree's commit, ``+dirty`` where ``tabsparse/`` has uncommitted changes."""

    def git(*args: str) -> str:
        got = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True)
        return got.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "?"
    return head + ("+dirty" if git("status", "--porcelain", "--", "../tabsparse") else "")


def table(name: str, noise: int) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, np.ndarray, Any]:
    """Training rows, labels, test rows, labels and the test rows' relevance (data seed 0),
    with ``noise`` extra standard-normal columns that no label depends on."""
    X, y, rel = make_syn(name, N_TRAIN + N_TEST, seed=0)
    cols = [f"x{j + 1}" for j in range(N_SYN_FEATURES)]
    if noise:
        rng = np.random.default_rng([0, SYN.index(name), 1_000])
        X = np.hstack([X, rng.standard_normal((len(X), noise))])
        rel = np.hstack([rel, np.zeros((len(X), noise), dtype=bool)])
        cols += [f"n{j + 1}" for j in range(noise)]
    frame = pd.DataFrame(X, columns=cols)
    return (
        frame.iloc[:N_TRAIN].reset_index(drop=True),
        y[:N_TRAIN],
        frame.iloc[N_TRAIN:].reset_index(drop=True),
        y[N_TRAIN:],
        rel[N_TRAIN:],
    )


def cpu_time(fn: Callable[[], Any], repeats: int = 1) -> tuple[float, Any]:
    """The least process CPU seconds of ``repeats`` calls of ``fn``, and its last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def run(name: str, noise: int, n_iters: list[int], lrs: list[float], seeds: list[int]) -> list:
    Xtr, ytr, Xte, yte, rel = table(name, noise)
    head: dict[str, Any] = {"table": name, "noise_columns": noise}
    model = TabNetClassifier(random_state=FIT_SEED, device="cpu")
    fit_s, est = cpu_time(lambda: model.fit(Xtr, ytr))
    own_tpr, own_fdr = tpr_fdr(est.explain(Xte).selected.astype(float), rel)
    head |= {
        "fit_cpu_s": round(fit_s, 2),
        "epochs": int(est.n_iter_),
        "auc": float(roc_auc_score(yte, est.predict_proba(Xte)[:, 1])),
        "fit_tpr": own_tpr,
        "fit_fdr": own_fdr,
    }
    print(json.dumps(head), flush=True)
    data = est._tensor_data(est._encode(Xtr), None, None, est.device_)
    test = est._tensor_data(est._encode(Xte), None, None, est.device_)
    idx = np.sort(np.random.default_rng(0).choice(len(data), chosen.SELECTOR_ROWS, replace=False))
    pool = data.take(torch.from_numpy(idx))
    columns = est._input_columns()
    rows = []
    for lr in lrs:
        for k in n_iters:
            for seed in seeds:
                sel_s, net = cpu_time(
                    lambda k=k, lr=lr, seed=seed: fit_selector(
                        est.network_,
                        pool,
                        columns,
                        budget=SELECTION_BUDGET,
                        n_iter=k,
                        generator=torch.Generator().manual_seed(seed),
                        batch_size=chosen.SELECTOR_BATCH,
                        lr=lr,
                    )
                )
                selected = selection_probabilities(est.network_, net, test).numpy() >= 0.5
                tpr, fdr = tpr_fdr(selected.astype(float), rel)
                row = {
                    **head,
                    "lr": lr,
                    "n_iter": k,
                    "selector_seed": seed,
                    "selector_cpu_s": round(sel_s, 2),
                    "ratio_to_fit": sel_s / fit_s,
                    "tpr": tpr,
                    "fdr": fdr,
                    "n_selected": float(selected.sum(1).mean()),
                }
                rows.append(row)
                print(
                    json.dumps(
                        {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
                    )
                )
    return rows


def _cells(rows: list[dict]) -> str:
    """Mean TPR / FDR (and the worst of each) over the selector seeds of ``rows``."""
    tpr, fdr = [r["tpr"] for r in rows], [r["fdr"] for r in rows]
    return f"{np.mean(tpr):.1f} / {np.mean(fdr):.1f} (worst {min(tpr):.1f} / {max(fdr):.1f})"


def meets(rows: list[dict]) -> bool:
    """Whether every seed of one setting on one table meets the goal (False for none run)."""
    if not rows:
        return False
    tpr_min, fdr_max = GOALS[rows[0]["noise_columns"]]
    return all(r["tpr"] >= tpr_min and r["fdr"] <= fdr_max for r in rows)


def render(meta: dict, rows: list[dict]) -> str:
    lines = [
        f"Machine: {meta['machine']}. tabsparse commit {meta['commit']}. Generated by "
        f"`{meta['command']}` (`benchmarks/selector_budget.py`).",
        "",
        f"Syn4-6 (data seed 0, {N_TRAIN:,} training and {N_TEST:,} test rows), as they are and "
        f"with {N_NOISE} extra independent standard-normal columns (never relevant). The model: "
        f"`TabNetClassifier(random_state={FIT_SEED})`, the defaults (a seed the benchmark's "
        "tables never used); *fit*: its CPU seconds (its own selector included) and the TPR / "
        "FDR % of its `explain(X_test).selected`. Then selectors trained against the same "
        "network as the fit trains them (budget, batch and rows), by learning rate and steps: "
        "TPR / FDR % of their selection of the test rows (mean over the selector seeds, and the "
        "worst), and *ratio*: a selector's CPU seconds over the fit's. The process CPU seconds "
        "of one thread (the machine was shared with other jobs, so wall time would say little).",
        "",
    ]
    keys = sorted({(r["lr"], r["n_iter"]) for r in rows})
    lines += [
        "| table | extra columns | fit CPU s | AUC | fit TPR / FDR % | "
        + " | ".join(f"lr {lr:g}, {k} steps" for lr, k in keys)
        + " |",
        "|---|---:|---:|---:|---|" + "---|" * len(keys),
    ]
    tables = list(dict.fromkeys((r["table"], r["noise_columns"]) for r in rows))
    for name, noise in tables:
        mine = [r for r in rows if (r["table"], r["noise_columns"]) == (name, noise)]
        h = mine[0]
        cells = [
            name,
            str(noise),
            f"{h['fit_cpu_s']:.1f}",
            f"{h['auc']:.3f}",
            f"{h['fit_tpr']:.1f} / {h['fit_fdr']:.1f}",
        ]
        for key in keys:
            got = [r for r in mine if (r["lr"], r["n_iter"]) == key]
            ratio = np.mean([r["ratio_to_fit"] for r in got]) if got else float("nan")
            cells.append(f"{_cells(got)}, ratio {ratio:.2f}" if got else "")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Settings whose every seed meets issue 45's goal on every table run:", ""]
    for key in keys:
        ok = sum(
            meets(
                [
                    r
                    for r in rows
                    if (r["table"], r["noise_columns"], r["lr"], r["n_iter"]) == t + key
                ]
            )
            for t in tables
        )
        lines.append(f"- lr {key[0]:g}, {key[1]} steps: {ok} of {len(tables)} tables")
    lines += [
        "",
        f"The library's choice: {meta['steps']} steps at lr {meta['lr']:g} (at most "
        f"{meta['share']:.0%} of the rows the fit trained on).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="*", default=["Syn4", "Syn5", "Syn6"])
    parser.add_argument(
        "--noise-tables", nargs="*", default=["Syn4", "Syn5", "Syn6"], help="with noise columns"
    )
    parser.add_argument("--n-iter", nargs="+", type=int, default=[25, 50, 100, 150])
    parser.add_argument("--lr", nargs="+", type=float, default=[1e-3, 1e-2])
    parser.add_argument("--selector-seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--no-write", action="store_true", help="store nothing")
    parser.add_argument("--render", action="store_true", help="the README from --out only")
    args = parser.parse_args(argv)
    if args.render:
        stored = json.loads(args.out.read_text())
        write_section(args.readme, SECTION, render(stored, stored["rows"]))
        return
    torch.set_num_threads(1)
    load = load_average()
    meta = {
        "commit": git_commit(),
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "date": _dt.date.today().isoformat(),
        "command": " ".join(["python", "benchmarks/selector_budget.py", *sys.argv[1:]]),
        "steps": chosen.SELECTOR_STEPS,
        "lr": chosen.SELECTOR_LR,
        "share": chosen.SELECTOR_SHARE,
        "machine": f"CPU: {cpu_model()}, 1 thread (torch and OpenMP); torch "
        f"{torch.__version__}, Python {platform.python_version()}; {_dt.date.today()}"
        + (f"; load average {load:.2f} at start" if load is not None else ""),
    }
    print(f"tabsparse from {Path(tabsparse.__file__).parent}; {meta['machine']}", flush=True)
    rows: list[dict] = []
    jobs = [(n, 0) for n in args.tables] + [(n, N_NOISE) for n in args.noise_tables]
    for name, noise in jobs:
        rows += run(name, noise, args.n_iter, args.lr, args.selector_seeds)
        if not args.no_write:  # after each table, so a cut-off run keeps what it made
            args.out.parent.mkdir(exist_ok=True)
            args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    body = render(meta, rows)
    print(body)
    if not args.no_write:
        write_section(args.readme, SECTION, body)
        print(f"wrote {args.out} and section {SECTION!r} of {args.readme}")


if __name__ == "__main__":
    main()
