"""Checks of ``fit_selector`` beyond ``bench_explain.py`` (quality round 25), on fits of the Syn
tables with seeds of your choice (3, 4, 5: fits the benchmark's table never saw, to decide about
the selector without choosing on the benchmark's own fits):

- ``one``: the default selector (TPR / FDR / mask AUC against the tables' truth, and its
  objective on the test rows, ``ColumnSelector.loss``);
- ``three``: ``n_selectors=3`` (the first of its three is ``one``'s selector: same seed);
- ``start``: one selector whose output layer starts with every column kept (p = 0.95), an
  experiment (not a library option) made by patching ``SelectorNet.reset_parameters``;
- ``long``: one selector trained ``n_iter=6000`` steps instead of 2,400;
- ``refits`` (``--refit-groups 0,1,2 3,4,5``): the fits of a group of seeds explained together,
  ``RefitImportances.fit_selector``'s way (each fit's selector seeded with its seed, their
  probabilities averaged over the fits, ``RefitSelector.explain``);
- ``rule``: the fitted model's own one-column rule, no selector: column ``j`` of a row counts
  where replacing it alone (8 draws from the training rows) moves the log-odds by at least
  ``2 * budget`` of the mean change of a whole replacement: how many of the truth's columns the
  fit itself uses where a selector of that budget would keep them.

Rows go to ``results/selector_holdout.jsonl`` (one per table, seed and variant). Fits are cached
in ``--models`` (joblib) so variants can be added later without refitting::

    python benchmarks/selector_holdout.py --tables Syn4 Syn5 Syn6 --seeds 3 4 5 \\
        --variants one three start long rule --models /tmp/syn_fits
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import torch
from explain_metrics import N_SYN_FEATURES, make_syn, selection_figures, tpr_fdr
from sklearn.metrics import roc_auc_score

from tabsparse import RefitSelector, TabNetClassifier
from tabsparse.training.selection import SELECTION_BUDGET, SelectorNet

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "selector_holdout.jsonl"
COLUMNS = [f"x{j + 1}" for j in range(N_SYN_FEATURES)]
VARIANTS = ("one", "three", "start", "long", "rule")
START_LOGIT = 3.0  # ``start``: sigmoid(3) = 0.95


@contextlib.contextmanager
def every_column_kept_at_start(logit: float = START_LOGIT) -> Iterator[None]:
    """Selectors built inside start with their output layer's bias at ``logit``."""
    original = SelectorNet.reset_parameters

    def reset(self: SelectorNet, generator: torch.Generator) -> None:
        original(self, generator)
        with torch.no_grad():
            self.layers[-1].bias.fill_(logit)

    SelectorNet.reset_parameters = reset  # type: ignore[method-assign]
    try:
        yield
    finally:
        SelectorNet.reset_parameters = original  # type: ignore[method-assign]


def fitted(name: str, seed: int, Xtr: pd.DataFrame, ytr: np.ndarray, models: Path) -> Any:
    """The bench's tabsparse fit of ``name`` with ``seed`` (defaults), from the cache if there."""
    path = models / f"{name}_{seed}.pkl"
    if path.exists():
        return joblib.load(path)
    est = TabNetClassifier(random_state=seed, device="cpu").fit(Xtr, ytr)
    models.mkdir(parents=True, exist_ok=True)
    joblib.dump(est, path)
    return est


def selector_row(selector: Any, Xte: pd.DataFrame, rel: np.ndarray, seed: int) -> dict:
    sel = selector.explain(Xte, random_state=seed)
    return {**selection_figures(sel, rel), "loss": selector.loss(Xte)}


def log_odds(est: Any, X: pd.DataFrame) -> np.ndarray:
    p = est.predict_proba(X)[:, 1].clip(1e-7, 1 - 1e-7)
    return np.log(p / (1 - p))


def one_column_rule(est: Any, Xtr: pd.DataFrame, Xte: pd.DataFrame, rel: np.ndarray) -> dict:
    """TPR / FDR of "column j counts where replacing it alone moves the log-odds by at least
    ``2 * budget`` of a whole replacement's mean change" (module docstring)."""
    rng = np.random.default_rng(0)
    base = log_odds(est, Xte)
    train = Xtr.to_numpy()
    whole = train[
        rng.integers(0, len(train), (len(Xte), N_SYN_FEATURES)), np.arange(N_SYN_FEATURES)
    ]
    scale = np.abs(log_odds(est, pd.DataFrame(whole, columns=COLUMNS)) - base).mean()
    moves = np.zeros((len(Xte), N_SYN_FEATURES))
    for j, col in enumerate(COLUMNS):
        for _ in range(8):
            Z = Xte.copy()
            Z[col] = train[rng.integers(0, len(train), len(Z)), j]
            moves[:, j] += np.abs(log_odds(est, Z) - base) / 8 / scale
    counted = moves >= 2 * SELECTION_BUDGET
    tpr, fdr = tpr_fdr(np.where(counted, moves, 0.0), rel)
    return {"tpr": tpr, "fdr": fdr, "n_selected": float(counted.sum(1).mean())}


def run(name: str, seed: int, variants: list[str], models: Path) -> Iterator[dict]:
    X, y, rel = make_syn(name, 20_000)
    Xtr = pd.DataFrame(X[:10_000], columns=COLUMNS)
    Xte = pd.DataFrame(X[10_000:], columns=COLUMNS)
    rel_te = rel[10_000:]
    est = fitted(name, seed, Xtr, y[:10_000], models)
    head = {
        "table": name,
        "seed": seed,
        "auc": roc_auc_score(y[10_000:], est.predict_proba(Xte)[:, 1]),
    }
    for variant in variants:
        t0 = time.process_time()
        if variant == "rule":
            row = one_column_rule(est, Xtr, Xte, rel_te)
        else:
            kw: dict[str, Any] = {"random_state": seed}
            kw |= {"three": {"n_selectors": 3}, "long": {"n_iter": 6000}}.get(variant, {})
            with every_column_kept_at_start() if variant == "start" else contextlib.nullcontext():
                selector = est.fit_selector(Xtr, **kw)
            row = selector_row(selector, Xte, rel_te, seed)
        yield {**head, "variant": variant, **row, "cpu_s": round(time.process_time() - t0, 1)}


def run_refits(name: str, seeds: list[int], models: Path) -> dict:
    """The fits of ``seeds`` on ``name``, their selectors averaged (``RefitSelector``)."""
    X, y, rel = make_syn(name, 20_000)
    Xtr = pd.DataFrame(X[:10_000], columns=COLUMNS)
    Xte = pd.DataFrame(X[10_000:], columns=COLUMNS)
    fits = [fitted(name, seed, Xtr, y[:10_000], models) for seed in seeds]
    t0 = time.process_time()
    selector = RefitSelector(
        [est.fit_selector(Xtr, random_state=seed) for est, seed in zip(fits, seeds, strict=True)]
    )
    sel = selector.explain(Xte, random_state=seeds[0])
    aucs = [roc_auc_score(y[10_000:], est.predict_proba(Xte)[:, 1]) for est in fits]
    return {
        "table": name,
        "seed": ",".join(map(str, seeds)),
        "auc": aucs,
        "variant": "refits",
        **selection_figures(sel, rel[10_000:]),
        "spread": float(sel.probabilities_std.mean()),
        "cpu_s": round(time.process_time() - t0, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=["Syn4", "Syn5", "Syn6"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[3, 4, 5])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument(
        "--refit-groups", nargs="*", default=[], help="groups of seeds such as 0,1,2 (refits)"
    )
    parser.add_argument("--models", type=Path, default=Path("syn_fits"), help="fit cache")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.tables:
        if args.refit_groups:  # the groups only
            groups = [[int(s) for s in group.split(",")] for group in args.refit_groups]
            rows: Iterator[dict] = (run_refits(name, seeds, args.models) for seeds in groups)
        else:
            rows = (
                row for seed in args.seeds for row in run(name, seed, args.variants, args.models)
            )
        for row in rows:
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
            print(json.dumps(shown), flush=True)


if __name__ == "__main__":
    main()
