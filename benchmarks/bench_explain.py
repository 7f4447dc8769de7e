"""Are the masks right and steady? Selection quality, stability across seeds and faithfulness.

Three measurements of tabsparse's explanations (``explain(X).importances`` per row,
``feature_importances_`` overall), each beside a reference:

1. **Syn1-Syn6** (INVASE's synthetic tables, also in the TabNet paper; generator and
   definitions in ``explain_metrics.py``): 11 Gaussian features, labels from a logistic model
   of a known subset, in Syn4-6 switched per row by x11. 10,000 training and 10,000 test rows
   (data seed 0). Per row the *selected* set is the features with importance > 0
   (sparsemax gives exact zeros; pytorch-tabnet's ``explain`` matrix under the same rule).
   TPR = share of the row's relevant features selected, FDR = share of the selected features
   that are irrelevant (0 for a row that selects nothing), both averaged over the test rows in %;
   mask AUC = ROC AUC of all (row, feature) importances against relevance; switch rate = share
   of rows whose selected set contains x11. Models: tabsparse ``TabNetClassifier`` defaults
   (``random_state`` 0..N-1) and pytorch-tabnet 4.1 ``TabNetClassifier(verbose=0, seed=s)`` with
   a 10% ``eval_set`` (as in ``bench_quality.py``). The same tabsparse fits are also explained
   by ``explain_effects`` (8 stratified draws from the test rows; selected: share >= 5%) and
   by a learned selector (``fit_selector`` on the training rows with its defaults, then
   ``explain`` of the test rows; selected: probability >= 0.5; ``selector_residual`` is the
   mean of ``Selection.residual``). And groups of three refits explained together
   (``tabsparse-refits`` rows, ``--syn-refit-groups`` groups with seeds ``3g, 3g + 1, 3g + 2``:
   ``refit_importances(...).fit_selector`` on the training rows, each refit's selector seeded
   with its seed, then ``RefitSelector.explain`` of the test rows with ``random_state=3g``;
   ``spread`` is the mean of ``Selection.probabilities_std``; faithfulness is scored on the
   refits' mean probabilities).
2. **Stability** on real tables (``bench_quality.py``'s tasks, splits and caps): three fits that
   differ only in the seed; the mean over the three pairs of the top-5 overlap (0..5) and of
   the Spearman correlation of all importances, for tabsparse's ``feature_importances_``
   (training rows), the mean of ``explain`` on held-out rows (up to 8,192 test rows) and
   scikit-learn's ``permutation_importance`` of the tabsparse model; beside LightGBM gain
   importances (bagged: ``subsample=0.8, subsample_freq=1, colsample_bytree=0.8``, so that the
   seed matters; and plain defaults, which do not depend on it) and the permutation importance
   of a ``HistGradientBoosting`` model; and the means over the held-out rows of
   ``explain_effects`` and of a selector trained on up to 10,000 training rows. Permutation
   importance: ``n_repeats=5`` on 2,000 test
   rows, ROC AUC (binary), one-vs-rest AUC (multi-class) or RMSE (regression). And the mean of
   three refits (``tabsparse.refit_importances``, seeds ``3s, 3s + 1, 3s + 2`` for the
   benchmark's seed ``s``: nine fits, three means compared as above; ``--refit-jobs`` runs the
   refits in parallel, whose CPU time is then not counted), and the same refits' selectors
   (``RefitImportances.fit_selector`` on up to 10,000 training rows, each seeded with its
   refit's seed; ``RefitSelector.explain`` of the held-out rows with ``random_state=3s``,
   its ``global_importances``).
3. **Faithfulness**: each test row's top-k features by its own importances (k = 1, 2, 3; ties
   broken at random) are replaced by draws from their marginal (the same column of random test
   rows), the model rescored, and the drop compared with replacing k random features of each
   row. Scores: ROC AUC (classification, drop in points) or RMSE (regression, rise in %).

Each fit appends one JSON row of statistics to ``benchmarks/results/explain.jsonl`` as soon as
it is done. ``--reuse`` takes stored rows instead of refitting; tabsparse rows are matched on the
hash of all its resolved parameters, so a change of defaults refits only tabsparse. One process,
one thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``); fit times are process CPU
seconds. ``--code DIR`` imports tabsparse from a checkout at ``DIR`` (e.g. a commit checked out
with ``git worktree``) instead of this working tree, and records that checkout's commit.

Usage::

    python benchmarks/bench_explain.py                      # everything, writes the README
    python benchmarks/bench_explain.py --reuse --parts syn  # refit what is not stored
    python benchmarks/bench_explain.py --quick              # a smoke run; stores nothing
    python benchmarks/bench_explain.py --reuse --code /tmp/today  # tabsparse of that checkout
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import contextlib
import datetime as _dt
import io
import json
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _readme import cpu_model, load_average, write_section
from bench_quality import (
    TASK_BY_NAME,
    TEST_CAP,
    TRAIN_CAP,
    _codes_frame,
    _completed,
    git_commit,
    load_split,
    params_hash,
    resolved_tabsparse_params,
    with_auto_resolved,
)
from explain_metrics import (
    BRANCHES,
    N_SYN_FEATURES,
    PAPER_AUC,
    SWITCH,
    SYN,
    SYN_TEST,
    SYN_TRAIN,
    bayes_auc,
    faithfulness,
    make_syn,
    mask_auc,
    mean_pairwise,
    score_drop,
    selection_figures,
    selection_rate,
    top_k,
    tpr_fdr,
)

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results" / "explain.jsonl"
SECTION = "## Explanations: are the masks right and steady?"


# ---- models --------------------------------------------------------------------------------
def _scorer(
    kind: str, est: Any, classes: Sequence[Any] | None = None
) -> Callable[[Any, Any], float]:
    """``score(X, y)``: ROC AUC (binary), macro one-vs-rest AUC (multi-class) or RMSE."""
    from sklearn.metrics import roc_auc_score

    def score(X: Any, y: Any) -> float:
        if kind == "regression":
            pred = np.asarray(est.predict(X), float).ravel()
            return float(np.sqrt(np.mean((np.asarray(y, float) - pred) ** 2)))
        proba = est.predict_proba(X)
        labels = list(est.classes_ if classes is None else classes)
        if kind == "binary":
            return float(roc_auc_score(np.asarray(y) == labels[1], proba[:, 1]))
        return float(roc_auc_score(y, proba, multi_class="ovr", labels=labels))

    return score


def perm_scoring(kind: str) -> str:
    return {"binary": "roc_auc", "multiclass": "roc_auc_ovr"}.get(
        kind, "neg_root_mean_squared_error"
    )


#: tabsparse parameters of every fit (``--params``; the defaults when empty)
TABSPARSE_PARAMS: dict[str, Any] = {}


def fit_tabsparse(kind: str, X: Any, y: Any, seed: int, params: dict[str, Any]) -> tuple[Any, dict]:
    from tabsparse import TabNetClassifier, TabNetRegressor

    params = {**TABSPARSE_PARAMS, **params}
    cls = TabNetRegressor if kind == "regression" else TabNetClassifier
    est = cls(random_state=seed, device="cpu", **params)
    t0 = time.process_time()
    est.fit(X, y)
    info = {
        "fit_cpu_s": round(time.process_time() - t0, 2),
        "epochs": int(est.n_iter_),
        "n_members_": int(getattr(est, "n_members_", 1)),
    }
    info["tabsparse_params"] = resolved_tabsparse_params(kind, params, seed)
    info["params_hash"] = params_hash(info["tabsparse_params"])
    return est, info


def fit_pytorch_tabnet(
    X: np.ndarray, y: np.ndarray, seed: int, cat_idxs: list[int], cat_dims: list[int]
) -> tuple[Any, dict]:
    """pytorch-tabnet 4.1 classifier with defaults and a 10% stratified eval_set."""
    from pytorch_tabnet.tab_model import TabNetClassifier as PTC
    from sklearn.model_selection import train_test_split

    fit_idx, val_idx = train_test_split(
        np.arange(len(y)), test_size=0.1, random_state=seed, stratify=y
    )
    est = PTC(cat_idxs=cat_idxs, cat_dims=cat_dims, verbose=0, seed=seed)
    t0 = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        est.fit(
            X[fit_idx],
            y[fit_idx],
            eval_set=[(X[val_idx], y[val_idx])],
            compute_importance=False,
        )
    return est, {
        "fit_cpu_s": round(time.process_time() - t0, 2),
        "epochs": len(est.history["loss"]),
    }


def run_syn(name: str, model: str, seed: int, n_train: int, n_test: int) -> dict[str, Any]:
    """Fit one model on one Syn table and measure its masks on the test rows."""
    X, y, rel = make_syn(name, n_train + n_test)
    Xtr, ytr, Xte, yte, rel_te = X[:n_train], y[:n_train], X[n_train:], y[n_train:], rel[n_train:]
    if model.startswith("tabsparse"):
        cols = [f"x{j + 1}" for j in range(N_SYN_FEATURES)]
        Xtr_, Xte_ = pd.DataFrame(Xtr, columns=cols), pd.DataFrame(Xte, columns=cols)
    if model == "tabsparse-refits":
        return run_syn_refits(Xtr_, ytr, Xte_, yte, rel_te, seed)
    if model == "tabsparse":
        est, info = fit_tabsparse("binary", Xtr_, ytr, seed, {})
        imp = est.explain(Xte_).importances
    else:
        Xtr_, Xte_ = Xtr.astype(np.float32), Xte.astype(np.float32)
        est, info = fit_pytorch_tabnet(Xtr_, ytr, seed, [], [])
        imp = np.asarray(est.explain(Xte_)[0])
    score = _scorer("binary", est)
    tpr, fdr = tpr_fdr(imp, rel_te)
    out = {
        **info,
        "auc": score(Xte_, yte),
        "tpr": tpr,
        "fdr": fdr,
        "mask_auc": mask_auc(imp, rel_te),
        "switch_rate": selection_rate(imp, SWITCH),
        "n_selected": float((imp > 0).sum(1).mean()),
        "faithfulness": faithfulness(lambda Z: score(Z, yte), Xte_, imp, seed),
    }
    if model == "tabsparse":  # the same fit's own selection (its column selector)
        t0 = time.process_time()
        sel = _Selection.of(est.explain(Xte_))
        out |= {
            "selected_by_fit": True,
            "selector_explain_cpu_s": round(time.process_time() - t0, 2),
            **{f"selector_{k}": v for k, v in selection_figures(sel, rel_te).items()},
            "selector_faithfulness": faithfulness(
                lambda Z: score(Z, yte), Xte_, sel.importances, seed
            ),
        }
    return out


#: what a stored tabsparse row must hold to be reused (rows from before the fit learned its
#: column selector lack it)
EFFECT_KEYS = {
    ("syn", "tabsparse"): ("selector_mask_auc", "selected_by_fit"),
    ("real", "tabsparse"): ("selector_faithfulness", "selected_by_fit"),
    ("syn", "tabsparse-refits"): ("mask_auc", "selected_by_fit"),
    ("real", "tabsparse-refits"): ("selector_held_out", "selected_by_fit"),
}


class _Selection:
    """Per-row selection probabilities (the mean over fits, with their spread over the fits
    where there are several) in the shape the figures read: ``selected``, ``importances``
    (shares of the row's probabilities), ``residual`` (not measured: NaN)."""

    def __init__(self, probabilities: np.ndarray, spread: np.ndarray | None = None) -> None:
        p = np.asarray(probabilities, dtype=np.float64)
        self.probabilities, self.probabilities_std = p, spread
        self.selected = p >= 0.5
        total = p.sum(axis=1, keepdims=True)
        self.importances = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
        self.residual = np.full(len(p), np.nan)

    @classmethod
    def of(cls, explanation: Any) -> _Selection:
        return cls(explanation.selection_probabilities)

    def global_importances(self) -> tuple[np.ndarray, np.ndarray]:
        mean = self.importances.mean(axis=0)
        return mean / mean.sum(), self.importances.std(axis=0, ddof=1)


class _RefitSelection:
    """The refits' own selections averaged over the refits."""

    def __init__(self, estimators: Sequence[Any]) -> None:
        self.estimators = list(estimators)

    def explain(self, X: Any, random_state: Any = None) -> _Selection:
        each = np.stack([e.explain(X).selection_probabilities for e in self.estimators])
        return _Selection(each.mean(axis=0), each.std(axis=0, ddof=1))


def effect_rows(rows: list[dict[str, Any]], prefix: str = "effects_") -> list[dict[str, Any]]:
    """tabsparse rows with the figures of another explanation of the same fit (``prefix``:
    ``effects_`` for ``explain_effects``, ``selector_`` for ``fit_selector``) in the places of
    the masks' (Syn: selection and faithfulness; real tables: faithfulness); rows without them
    are left out."""
    syn = ("tpr", "fdr", "mask_auc", "switch_rate", "n_selected", "faithfulness")
    out = []
    for r in rows:
        keys = syn if f"{prefix}tpr" in r else ("faithfulness",)
        if all(f"{prefix}{k}" in r for k in keys):
            out.append({**r, **{k: r[f"{prefix}{k}"] for k in keys}})
    return out


def _sample(n: int, cap: int) -> np.ndarray:
    """A fixed (seed 0) sorted sample of at most ``cap`` of ``n`` rows."""
    if n <= cap:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, cap, replace=False))


HELD_OUT_ROWS, PERM_ROWS, FAITH_ROWS, PERM_REPEATS = 8192, 2000, 5000, 5


def run_real(name: str, model: str, seed: int) -> dict[str, Any]:
    """Fit one model on one real table; its global importances (and, for tabsparse, its score,
    held-out importances, permutation importance and faithfulness)."""
    from sklearn.inspection import permutation_importance

    kind = TASK_BY_NAME[name].kind
    s = load_split(name, TRAIN_CAP, TEST_CAP)
    perm = _sample(len(s.y_test), PERM_ROWS)
    perm_kw = dict(n_repeats=PERM_REPEATS, random_state=seed, scoring=perm_scoring(kind), n_jobs=1)
    if model.startswith("tabsparse"):
        held = s.X_test.iloc[_sample(len(s.y_test), HELD_OUT_ROWS)].reset_index(drop=True)
    if model == "tabsparse-refits":
        return run_refits(kind, s.X_train, s.y_train, held, seed)
    if model == "tabsparse":
        est, info = fit_tabsparse(kind, s.X_train, s.y_train, seed, {})
        faith = _sample(len(s.y_test), FAITH_ROWS)
        Xf, yf = s.X_test.iloc[faith].reset_index(drop=True), s.y_test.iloc[faith]
        score = _scorer(kind, est)
        pi = permutation_importance(est, s.X_test.iloc[perm], s.y_test.iloc[perm], **perm_kw)
        return {
            **info,
            "score": score(s.X_test, s.y_test),
            "train_rows": [float(v) for v in est.feature_importances_],
            "held_out": [float(v) for v in est.explain(held).importances.mean(0)],
            "selected_by_fit": True,
            "permutation": [float(v) for v in pi.importances_mean],
            "faithfulness": faithfulness(
                lambda Z: score(Z, yf), Xf, est.explain(Xf).importances, seed
            ),
            **_real_selector(est, s.X_train, held, Xf, lambda Z: score(Z, yf), seed),
        }
    t0 = time.process_time()
    if model.startswith("lightgbm"):
        import lightgbm as lgb

        cls = lgb.LGBMRegressor if kind == "regression" else lgb.LGBMClassifier
        bag = (
            dict(subsample=0.8, subsample_freq=1, colsample_bytree=0.8) if "bagged" in model else {}
        )
        est = cls(n_jobs=1, verbose=-1, random_state=seed, importance_type="gain", **bag)
        est.fit(s.X_train, s.y_train)
        out = {"gain": [float(v) for v in est.feature_importances_]}
    elif model == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier as HGBC
        from sklearn.ensemble import HistGradientBoostingRegressor as HGBR

        est = (HGBR if kind == "regression" else HGBC)(
            categorical_features="from_dtype", random_state=seed
        )
        est.fit(_codes_frame(s.X_train, 255), s.y_train)
        Xp = _codes_frame(s.X_test.iloc[perm], 255)
        pi = permutation_importance(est, Xp, s.y_test.iloc[perm], **perm_kw)
        out = {"permutation": [float(v) for v in pi.importances_mean]}
    else:
        raise ValueError(model)
    return {"fit_cpu_s": round(time.process_time() - t0, 2), **out}


def _real_selector(
    est: Any, X_train: Any, held: Any, Xf: Any, score: Callable[[Any], float], seed: int
) -> dict[str, Any]:
    """A real table's fit explained by its learned selector (trained on a sample of the
    training rows): the mean shares on the held-out rows, the residual and faithfulness."""
    sel = _Selection.of(est.explain(held))
    return {
        "selector_held_out": [float(v) for v in sel.global_importances()[0]],
        "selector_n_selected": float(sel.selected.sum(1).mean()),
        "selector_residual": float(sel.residual.mean()),
        "selector_faithfulness": faithfulness(
            score, Xf, _Selection.of(est.explain(Xf)).importances, seed
        ),
    }


REFITS = 3  # fits averaged by one "tabsparse-refits" row
REFIT_JOBS = [1]  # parallel refits (``--refit-jobs``)


def _refit(kind: str, X: Any, y: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """``REFITS`` refits with seeds ``REFITS * seed + i`` (``tabsparse.refit_importances``)
    and what a stored row records of them."""
    from tabsparse import TabNetClassifier, TabNetRegressor, refit_importances

    cls = TabNetRegressor if kind == "regression" else TabNetClassifier
    first = REFITS * seed
    est = cls(random_state=first, device="cpu", **TABSPARSE_PARAMS)
    t0 = time.process_time()
    got = refit_importances(est, X, y, seeds=REFITS, n_jobs=REFIT_JOBS[0])
    info: dict[str, Any] = {
        "seeds": got.seeds,
        "tabsparse_params": resolved_tabsparse_params(kind, TABSPARSE_PARAMS, first),
    }
    info["params_hash"] = params_hash(info["tabsparse_params"])
    if REFIT_JOBS[0] == 1:  # with workers the process's CPU time misses the fits
        info["fit_cpu_s"] = round(time.process_time() - t0, 2)
    return got, info


def run_refits(kind: str, X: Any, y: Any, held: Any, seed: int) -> dict[str, Any]:
    """The mean importances of ``REFITS`` refits with seeds ``REFITS * seed + i``, and their
    selectors' (``RefitImportances.fit_selector`` on a sample of the training rows, each
    seeded with its refit's seed) mean on the held-out rows."""
    got, info = _refit(kind, X, y, seed)
    selector, timing = _refit_selector(got, X)
    sel = selector.explain(held, random_state=REFITS * seed)
    return {
        **info,
        **timing,
        "train_rows": [float(v) for v in got.feature_importances_],
        "per_fit": got.per_fit.tolist(),
        "refit_agreement": got.agreement(5),
        "selector_held_out": [float(v) for v in sel.global_importances()[0]],
        "selector_n_selected": float(sel.selected.sum(1).mean()),
        "selector_spread": float(sel.probabilities_std.mean()),
    }


def _refit_selector(got: Any, X: Any) -> tuple[Any, dict[str, Any]]:
    """The refits' selectors (``RefitImportances.fit_selector`` on ``X``, each seeded with its
    refit's seed) and what a row records of them: their count and CPU time."""
    return _RefitSelection(got.estimators), {"selected_by_fit": True}


class _MeanOfFits:
    """The refits' mean predicted probabilities, as one classifier (what faithfulness scores)."""

    def __init__(self, estimators: Sequence[Any]) -> None:
        self.estimators, self.classes_ = list(estimators), estimators[0].classes_

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.mean([est.predict_proba(X) for est in self.estimators], axis=0)


def run_syn_refits(
    Xtr: Any, ytr: Any, Xte: Any, yte: Any, rel_te: np.ndarray, seed: int
) -> dict[str, Any]:
    """A group of ``REFITS`` refits (seeds ``REFITS * seed + i``) of a Syn table explained
    together: ``RefitImportances.fit_selector`` (each refit's selector seeded with its seed),
    ``explain`` of the test rows; test AUC of each refit, faithfulness to their mean."""
    got, info = _refit("binary", Xtr, ytr, seed)
    selector, timing = _refit_selector(got, Xtr)
    sel = selector.explain(Xte, random_state=REFITS * seed)
    aucs = [_scorer("binary", est)(Xte, yte) for est in got.estimators]
    score = _scorer("binary", _MeanOfFits(got.estimators))
    return {
        **info,
        "auc": float(np.mean(aucs)),
        "aucs": aucs,
        "mean_auc": score(Xte, yte),
        **timing,
        **selection_figures(sel, rel_te),
        "spread": float(sel.probabilities_std.mean()),
        "faithfulness": faithfulness(lambda Z: score(Z, yte), Xte, sel.importances, REFITS * seed),
    }


# ---- results store -------------------------------------------------------------------------
def load_rows(path: Path = RESULTS) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def config_key(part: str, n_train: int = SYN_TRAIN, n_test: int = SYN_TEST) -> str:
    """What besides the model's own parameters a stored row depends on."""
    if part == "syn":
        return f"syn {n_train}/{n_test} data-seed 0"
    return (
        f"caps {TRAIN_CAP}/{TEST_CAP}; held-out {HELD_OUT_ROWS}; perm {PERM_ROWS}x{PERM_REPEATS}; "
        f"faith {FAITH_ROWS}"
    )


def find_row(
    rows: list[dict[str, Any]],
    key: dict[str, Any],
    want: dict[str, str] | None,
    n_rows: int | None = None,
    kind: str | None = None,
) -> dict[str, Any] | None:
    """The latest stored row with the same part, table, model, seed and config and, for
    tabsparse, the same resolved parameters ``want`` (parameters added since a row was stored
    count at their no-op values, and the architecture's "auto" values as what a fit on
    ``n_rows`` rows of a ``kind`` target resolves them to:
    ``bench_quality.with_auto_resolved``)."""
    target = None if want is None else with_auto_resolved(want, n_rows, kind=kind)
    for row in reversed(rows):
        if not all(row.get(k) == v for k, v in key.items()):
            continue
        if target is None:
            return row
        params = row.get("tabsparse_params")
        fitted = row.get("n_members_")
        if params is None:
            continue
        if any(k not in row for k in EFFECT_KEYS.get((key["part"], key["model"]), ())):
            continue
        if with_auto_resolved(_completed(params), n_rows, fitted, kind) == target:
            return row
    return None


def fit_rows(part: str, name: str, n_train: int) -> int:
    """Training rows of a job's fit (what ``n_members="auto"`` is resolved on)."""
    if part == "syn":
        return n_train
    if name not in _FIT_ROWS:
        _FIT_ROWS[name] = len(load_split(name, TRAIN_CAP, TEST_CAP).y_train)
    return _FIT_ROWS[name]


_FIT_ROWS: dict[str, int] = {}


# ---- report --------------------------------------------------------------------------------
def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([r[key] for r in rows])) if rows else float("nan")


def _faith_cells(rows: list[dict[str, Any]], kind: str) -> list[str]:
    cells = []
    for k in (1, 2, 3):
        top = np.mean([score_drop(r["faithfulness"], f"top{k}", kind) for r in rows])
        rnd = np.mean([score_drop(r["faithfulness"], f"rand{k}", kind) for r in rows])
        cells.append(f"{top:.1f} / {rnd:.1f}")
    return cells


def render_syn(
    got: dict[tuple[str, str], list[dict[str, Any]]],
    candidates: Sequence[str] = ("tabsparse", "pytorch-tabnet"),
) -> str:
    models = [m for m in candidates if any(k[1] == m for k in got)]
    lines = [
        "| table | Bayes AUC | paper's TabNet AUC | "
        + " | ".join(f"{m} AUC | TPR / FDR % | mask AUC | switch % | selected" for m in models)
        + " |",
        "|---|---:|---:|" + "---:|---|---:|---:|---:|" * len(models),
    ]
    for name in SYN:
        cells = [name, f"{bayes_auc(name):.3f}", f"{PAPER_AUC[name]:.3f}"]
        for m in models:
            rows = got.get((name, m), [])
            if not rows:
                cells += ["", "", "", "", ""]
                continue
            aucs = [r["auc"] for r in rows]
            cells += [
                f"{np.mean(aucs):.3f} ({min(aucs):.3f}-{max(aucs):.3f}, {len(rows)})",
                f"{_mean(rows, 'tpr'):.0f} / {_mean(rows, 'fdr'):.0f}",
                f"{_mean(rows, 'mask_auc'):.3f}",
                f"{_mean(rows, 'switch_rate'):.0f}" if name in BRANCHES else "",
                f"{_mean(rows, 'n_selected'):.1f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    summary = []
    for m in models:
        per = [got[(n, m)] for n in SYN if got.get((n, m))]
        if len(per) == len(SYN):
            beats = sum(_mean(got[(n, m)], "auc") >= PAPER_AUC[n] for n in SYN)
            summary.append(
                f"{m}: mean mask AUC {np.mean([_mean(r, 'mask_auc') for r in per]):.3f}, "
                f"test AUC at least the paper's on {beats} of 6"
            )
    return "\n".join(lines) + ("\n\n" + "; ".join(summary) + "." if summary else "")


STABILITY_COLUMNS = (
    ("tabsparse", "train_rows", "tabsparse `feature_importances_` (training rows)"),
    ("tabsparse", "held_out", "tabsparse `explain` on held-out rows"),
    ("tabsparse", "effects_held_out", "tabsparse `explain_effects` on held-out rows"),
    ("tabsparse", "selector_held_out", "tabsparse `fit_selector` on held-out rows"),
    ("tabsparse", "permutation", "permutation importance of tabsparse"),
    ("tabsparse-refits", "train_rows", "tabsparse, mean of 3 refits"),
    ("tabsparse-refits", "selector_held_out", "tabsparse `fit_selector` across 3 refits"),
    ("lightgbm-bagged", "gain", "LightGBM gain, bagged"),
    ("lightgbm", "gain", "LightGBM gain, defaults"),
    ("hgb", "permutation", "permutation importance of HGB"),
)


def render_real(got: dict[tuple[str, str], list[dict[str, Any]]], tables: list[str]) -> str:
    head = [c[2] for c in STABILITY_COLUMNS]
    lines = [
        "| table | columns | " + " | ".join(head) + " | tabsparse held-out vs HGB permutation |",
        "|---|---:|" + "---|" * (len(head) + 1),
    ]
    for name in tables:
        cells = [name, ""]
        for model, field, _ in STABILITY_COLUMNS:
            rows = [r for r in got.get((name, model), []) if field in r]
            if rows:
                cells[1] = str(len(rows[0][field]))
            ov, rho = mean_pairwise([r[field] for r in rows])
            cells.append(f"{ov:.1f} / {rho:.2f} ({len(rows)})" if len(rows) > 1 else "")
        ts, hgb = got.get((name, "tabsparse"), []), got.get((name, "hgb"), [])
        agree = [len(top_k(a["held_out"]) & top_k(b["permutation"])) for a in ts for b in hgb]
        cells.append(f"{np.mean(agree):.1f}" if agree else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


TOPK_COLUMNS = (
    ("tabsparse", "train_rows", "tabsparse, training rows"),
    ("tabsparse", "held_out", "tabsparse, held-out rows"),
    ("tabsparse", "effects_held_out", "tabsparse effects, held-out rows"),
    ("tabsparse", "selector_held_out", "tabsparse selector, held-out rows"),
    ("tabsparse", "permutation", "tabsparse permutation"),
    ("tabsparse-refits", "train_rows", "tabsparse, mean of 3 refits"),
    ("tabsparse-refits", "selector_held_out", "tabsparse selector across 3 refits"),
    ("lightgbm-bagged", "gain", "LightGBM gain, bagged"),
    ("hgb", "permutation", "HGB permutation"),
)


def render_topk(got: dict[tuple[str, str], list[dict[str, Any]]], tables: list[str]) -> str:
    """Mean pairwise overlap of the top 1, 3 and 5 across seeds, per importance."""
    lines = [
        "| table | " + " | ".join(c[2] for c in TOPK_COLUMNS) + " |",
        "|---|" + "---|" * len(TOPK_COLUMNS),
    ]
    for name in tables:
        cells = [name]
        for model, field, _ in TOPK_COLUMNS:
            vectors = [r[field] for r in got.get((name, model), []) if field in r]
            parts = [mean_pairwise(vectors, k)[0] for k in (1, 3, 5)]
            cells.append(" / ".join(f"{v:.1f}" for v in parts) if len(vectors) > 1 else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_faith(
    syn: dict[tuple[str, str], list[dict[str, Any]]],
    real: dict[tuple[str, str], list[dict[str, Any]]],
) -> str:
    lines = [
        "| table | model | metric | score | k=1: top / random | k=2 | k=3 |",
        "|---|---|---|---:|---|---|---|",
    ]
    for (name, model), rows in list(syn.items()) + list(real.items()):
        if model not in ("tabsparse", EFFECTS, SELECTOR, REFIT_SELECTOR, "pytorch-tabnet"):
            continue
        if not rows:
            continue
        kind = "binary" if name in SYN else TASK_BY_NAME[name].kind
        metric = "RMSE, % rise" if kind == "regression" else "AUC, points lost"
        base = np.mean([r["faithfulness"]["base"] for r in rows])
        fmt = f"{base:.4g}" if kind == "regression" else f"{base:.3f}"
        lines.append(
            f"| {name} | {model} | {metric} | {fmt} | "
            + " | ".join(_faith_cells(rows, kind))
            + " |"
        )
    return "\n".join(lines)


def render(
    syn: dict[tuple[str, str], list[dict[str, Any]]],
    real: dict[tuple[str, str], list[dict[str, Any]]],
    tables: list[str],
) -> str:
    import lightgbm
    import sklearn
    import torch

    ts = [
        r for rows in list(syn.values()) + list(real.values()) for r in rows if "params_hash" in r
    ]
    # one hash per estimator: the resolved parameters less the seed
    hashes = sorted(
        {
            params_hash({k: v for k, v in r["tabsparse_params"].items() if k != "random_state"})
            for r in ts
        }
    )
    commits = sorted({r.get("commit", "?") for r in ts})
    effects, selector = _derived(syn, EFFECTS, "effects_"), _derived(syn, SELECTOR, "selector_")
    refit_sel = {
        (name, REFIT_SELECTOR): rows
        for (name, model), rows in syn.items()
        if model == "tabsparse-refits" and rows
    }
    real_derived = {**_derived(real, EFFECTS, "effects_"), **_derived(real, SELECTOR, "selector_")}
    load = load_average()
    busy = f"; load average {load:.2f} when written" if load is not None else ""
    cpu = {
        m: sum(
            r.get("fit_cpu_s", 0.0)
            for k, rows in {**syn, **real}.items()
            if k[1] == m
            for r in rows
        )
        for m in ("tabsparse", "pytorch-tabnet")
    }
    return "\n".join(
        [
            f"Machine: {cpu_model()}, {os.cpu_count()} logical cores, one process on one thread; "
            f"torch {torch.__version__}, scikit-learn {sklearn.__version__}, LightGBM "
            f"{lightgbm.__version__}. Written {_dt.date.today().isoformat()} from tabsparse rows "
            f"of commit {', '.join(commits)} (resolved parameters less the seed: hash "
            f"{', '.join(hashes)}, classifier and regressor defaults){busy}. "
            f"Fit CPU time: tabsparse {cpu['tabsparse']:.0f} s, pytorch-tabnet "
            f"{cpu['pytorch-tabnet']:.0f} s. Definitions and settings: the docstring of "
            "`bench_explain.py`; what it means for a user: [docs/trust.md](../docs/trust.md).",
        ]
        + (["", SYN_INTRO, "", render_syn(syn)] if syn else [])
        + (["", EFFECTS_INTRO, "", render_syn(effects, [EFFECTS])] if effects else [])
        + (["", SELECTOR_INTRO, "", render_syn(selector, [SELECTOR])] if selector else [])
        + (
            [
                "",
                REFIT_SELECTOR_INTRO,
                "",
                render_syn(refit_sel, [REFIT_SELECTOR]),
                "",
                spread(refit_sel),
            ]
            if refit_sel
            else []
        )
        + (["", STABILITY_INTRO, "", render_real(real, tables)] if real else [])
        + (["", TOPK_INTRO, "", render_topk(real, tables)] if real else [])
        + [
            "",
            FAITH_INTRO,
            "",
            render_faith({**syn, **effects, **selector, **refit_sel}, {**real, **real_derived}),
        ]
    )


def _derived(
    got: dict[tuple[str, str], list[dict[str, Any]]], label: str, prefix: str
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The tabsparse rows of ``got`` as rows of the explanation ``label`` (:func:`effect_rows`)."""
    return {
        (name, label): mapped
        for (name, model), rows in got.items()
        if model == "tabsparse" and (mapped := effect_rows(rows, prefix))
    }


EFFECTS = "tabsparse `explain_effects`"
EFFECTS_INTRO = (
    f"**{EFFECTS}**: the same tabsparse fits explained by how far each column moves each row's "
    "prediction when replaced by marginal draws (8 draws from the test rows); *selected*: "
    "features whose share of the row's effects is at least 5% (`Effects.selected`). Same goals."
)

SELECTOR = "tabsparse `fit_selector`"
SELECTOR_INTRO = (
    f"**{SELECTOR}**: the same tabsparse fits explained by a learned per-row selector "
    "(`fit_selector` on the 10,000 training rows, its defaults: budget 0.02, 2,400 steps), "
    "trained to keep each row's prediction while the unselected columns are drawn from those "
    "rows; *selected*: probability >= 0.5 (`Selection.selected`). Same goals."
)

REFIT_SELECTOR = "tabsparse `fit_selector` across 3 refits"
REFIT_SELECTOR_INTRO = (
    f"**{REFIT_SELECTOR}**: groups of three refits (seeds 0-2 and 3-5; "
    "`refit_importances(est, X, y, seeds=3).fit_selector(X)`, one selector per refit with its "
    "defaults) explained together by `RefitSelector.explain` of the test rows: the refits' mean "
    "probabilities, *selected* where the mean is >= 0.5. AUC: the mean test AUC of a group's "
    "refits (range and number over the groups). Same goals."
)


def spread(got: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """One line: per table, the mean over rows and groups of the selection probabilities'
    standard deviation over the refits (``Selection.probabilities_std``)."""
    cells = [f"{name} {_mean(rows, 'spread'):.3f}" for (name, _), rows in got.items()]
    return (
        "Spread over the refits (mean standard deviation of a probability): "
        + ", ".join(cells)
        + "."
    )


SYN_INTRO = (
    "**Syn1-Syn6** (10,000 training / 10,000 test rows; means over seeds, AUC with its range and "
    "the number of seeds; *selected*: features per row with importance > 0; *switch*: rows "
    "selecting x11). Issue 24's goals: Syn4-6 TPR >= 95 with FDR <= 10, mean mask AUC >= 0.95, "
    "test AUC at least the paper's on 6 of 6."
)
STABILITY_INTRO = (
    "**Stability across seeds** (random_state 0, 1, 2 on the same split; each cell: mean top-5 "
    "overlap of the three pairs, 0-5 / mean Spearman correlation of all importances (number of "
    "fits)). LightGBM with defaults does not use its seed (identical fits); the bagged LightGBM is "
    "the fair reference. Last column: top-5 overlap of tabsparse's held-out importances with "
    "HGB's permutation importance (mean over the 3x3 pairs). *Mean of 3 refits*: "
    "`tabsparse.refit_importances` with seeds 0-2, 3-5 and 6-8, the three means compared "
    "pairwise (nine fits). *`fit_selector` across 3 refits*: the same refits with a selector "
    "each (up to 10,000 training rows), the mean selection shares of each group's "
    "`RefitSelector.explain` on the held-out rows compared pairwise. Goal: 4 of 5 shared on "
    "average."
)
TOPK_INTRO = (
    "The same fits, the first places only: mean overlap across the seed pairs of the top 1 "
    "(0-1), top 3 (0-3) and top 5 (0-5)."
)
FAITH_INTRO = (
    "**Faithfulness** (each test row's top-k features by its own importances replaced by "
    f"marginal draws, against k random features; real tables: up to {FAITH_ROWS} test rows). A "
    "faithful explanation loses much more than random."
)


# ---- main ----------------------------------------------------------------------------------
REAL_TABLES = [
    "adult",
    "bank_marketing",
    "california_housing",
    "credit_card_default_taiwan",
    "telco_churn",
]
REAL_MODELS = ("tabsparse", "tabsparse-refits", "lightgbm-bagged", "lightgbm", "hgb")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="*", default=["syn", "real"], choices=["syn", "real"])
    parser.add_argument("--syn", nargs="*", default=list(SYN), choices=SYN)
    parser.add_argument("--tables", nargs="*", default=REAL_TABLES, help="real tables")
    parser.add_argument("--seeds", type=int, default=3, help="tabsparse (and real-table) seeds")
    parser.add_argument("--ptn-seeds", type=int, default=3, help="pytorch-tabnet seeds on Syn")
    parser.add_argument("--reuse", action="store_true", help="take stored rows where they match")
    parser.add_argument("--no-write", action="store_true", help="do not touch the README")
    parser.add_argument(
        "--fresh",
        nargs="*",
        default=[],
        help="models measured again where rows are stored (e.g. tabsparse on another machine)",
    )
    parser.add_argument("--code", type=Path, help="import tabsparse from this checkout")
    parser.add_argument(
        "--quick", action="store_true", help="2,000 Syn rows, 1 seed, telco only; stores nothing"
    )
    parser.add_argument(
        "--params", type=json.loads, default={}, help="JSON dict of tabsparse parameters"
    )
    parser.add_argument(
        "--refit-jobs", type=int, default=1, help="parallel refits of tabsparse-refits rows"
    )
    parser.add_argument(
        "--syn-refit-groups",
        type=int,
        default=2,
        help="groups of three Syn refits explained together (seeds 0-2, 3-5, ...)",
    )
    args = parser.parse_args(argv)
    TABSPARSE_PARAMS.update(args.params)
    REFIT_JOBS[0] = args.refit_jobs
    commit = git_commit()
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
        head = subprocess.run(
            ["git", "-C", str(args.code), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        )
        commit = f"{head.stdout.strip() or '?'} (checkout {args.code})"
    import torch

    import tabsparse

    print(f"tabsparse from {Path(tabsparse.__file__).parent}, commit {commit}", flush=True)

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    n_train = n_test = 2000 if args.quick else SYN_TRAIN
    if args.quick:
        args.seeds, args.ptn_seeds, args.tables, args.no_write = 1, 1, ["telco_churn"], True
        args.syn_refit_groups = 1
    stored = load_rows() if args.reuse else []
    syn: dict[tuple[str, str], list[dict[str, Any]]] = {}
    real: dict[tuple[str, str], list[dict[str, Any]]] = {}
    jobs: list[tuple[str, str, str, int]] = []
    if "syn" in args.parts:
        jobs += [(n, "tabsparse", "syn", s) for s in range(args.seeds) for n in args.syn]
        jobs += [(n, "pytorch-tabnet", "syn", s) for s in range(args.ptn_seeds) for n in args.syn]
        jobs += [
            (n, "tabsparse-refits", "syn", g)
            for g in range(args.syn_refit_groups)
            for n in args.syn
        ]
    if "real" in args.parts:
        jobs += [
            (t, m, "real", s) for t in args.tables for m in REAL_MODELS for s in range(args.seeds)
        ]
    for name, model, part, seed in jobs:
        kind = "binary" if part == "syn" else TASK_BY_NAME[name].kind
        key = {
            "part": part,
            "table": name,
            "model": model,
            "seed": seed,
            "config": config_key(part, n_train, n_test),
        }
        want, n_rows = None, None
        if model.startswith("tabsparse"):
            first = REFITS * seed if model == "tabsparse-refits" else seed
            want = resolved_tabsparse_params(kind, TABSPARSE_PARAMS, first)
            n_rows = fit_rows(part, name, n_train)
        row = None if model in args.fresh else find_row(stored, key, want, n_rows, kind)
        if row is None:
            t0 = time.perf_counter()
            out = (
                run_syn(name, model, seed, n_train, n_test)
                if part == "syn"
                else run_real(name, model, seed)
            )
            row = {**key, **out, "wall_s": round(time.perf_counter() - t0, 1), "commit": commit}
            row["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            if not args.quick:
                RESULTS.parent.mkdir(parents=True, exist_ok=True)
                with RESULTS.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
            note = f"fit {row.get('fit_cpu_s', 0):.0f} s CPU, {row['wall_s']:.0f} s wall"
        else:
            note = "stored"
        (syn if part == "syn" else real).setdefault((name, model), []).append(row)
        print(f"{part:4s} {name:28s} {model:16s} seed {seed}: {note}", flush=True)
    body = render(syn, real, [t for t in args.tables if "real" in args.parts])
    print("\n" + body)
    if not args.no_write:
        write_section(README, SECTION, body)
        print(f"wrote {SECTION!r} in {README}")


if __name__ == "__main__":
    main()
