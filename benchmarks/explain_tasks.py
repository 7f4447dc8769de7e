"""The fits of the explanation benchmark (``bench_explain.py``) and the store of their rows.

One job is one fit: ``(part, table, model, seed)`` with ``part`` one of

- ``syn``: Syn1-Syn6 (``explain_metrics.make_syn``, data seed 0), 10,000 training and 10,000
  test rows;
- ``syn-noise``: Syn4-Syn6 with :data:`N_NOISE` pure-noise columns appended
  (``explain_metrics.make_syn_noise``), same rows;
- ``real``: a real table of the quality benchmark (``quality_tasks.load_split``, its split and
  caps).

``model`` is ``tabsparse`` (``TabNetClassifier(random_state=seed)`` / ``TabNetRegressor``:
the defaults, only the seed set) or ``pytorch-tabnet`` (4.1, ``TabNetClassifier(verbose=0,
seed=seed)`` with a 10% stratified ``eval_set``, as in the quality benchmark).

Every finished job appends one JSON row to :data:`RESULTS` at once, so a killed run keeps what
finished and a rerun fits only what is missing (:func:`done_keys`).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import contextlib
import datetime as _dt
import io
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _readme import cpu_model
from explain_metrics import (
    N_SYN_FEATURES,
    SWITCH,
    SYN_TEST,
    SYN_TRAIN,
    make_syn,
    make_syn_noise,
    mask_auc,
    selection_rate,
    tpr_fdr,
)
from quality_store import git_commit
from quality_tasks import TASK_BY_NAME, TEST_CAP, TRAIN_CAP, load_split

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "explain_selected.jsonl"
#: where the pytorch-tabnet rows of the plain Syn tables were stored by the earlier benchmark
OLD_RESULTS = HERE / "results" / "explain.jsonl"
OLD_SYN_CONFIG = "syn 10000/10000 data-seed 0"
N_NOISE = 10
NOISE_TABLES = ("Syn4", "Syn5", "Syn6")
HELD_OUT_ROWS = 8192  # real tables: rows whose mean selection is a global importance
TIMING_ROWS = 10_000  # rows of the explain / predict_proba timing
TIMING_REPEATS = 3


# ---- store ---------------------------------------------------------------------------------
def job_key(row: dict[str, Any]) -> tuple[str, str, str, int]:
    return (row["part"], row["table"], row["model"], int(row["seed"]))


def load_rows(path: Path = RESULTS) -> list[dict[str, Any]]:
    """The stored rows (none where the file does not exist; a torn last line is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            if line.strip():
                rows.append(json.loads(line))
    return rows


def done_keys(rows: list[dict[str, Any]]) -> set[tuple[str, str, str, int]]:
    return {job_key(r) for r in rows}


def append_row(row: dict[str, Any], path: Path = RESULTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def machine() -> dict[str, Any]:
    """What a row records of the machine and the code it ran on."""
    import sklearn
    import torch

    return {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "sklearn": sklearn.__version__,
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def stored_pytorch_tabnet(path: Path = OLD_RESULTS) -> list[dict[str, Any]]:
    """The earlier benchmark's pytorch-tabnet rows of the plain Syn tables (same data, split and
    mask rule: a feature is selected where its ``explain`` importance is > 0) as rows of this
    one."""
    out = []
    for r in load_rows(path):
        if (r.get("part"), r.get("model"), r.get("config")) != (
            "syn",
            "pytorch-tabnet",
            OLD_SYN_CONFIG,
        ):
            continue
        out.append(
            {
                "part": "syn",
                "table": r["table"],
                "model": "pytorch-tabnet",
                "seed": int(r["seed"]),
                "auc": r["auc"],
                "masks_tpr": r["tpr"],
                "masks_fdr": r["fdr"],
                "masks_switch_rate": r.get("switch_rate"),
                "fit_cpu_s": r.get("fit_cpu_s"),
                "commit": r.get("commit"),
                "date": r.get("date"),
                "source": f"{path.name} (stored by the earlier benchmark)",
            }
        )
    return out


# ---- timing --------------------------------------------------------------------------------
class SelectorTimer:
    """While active (``with SelectorTimer() as t:``), every call of the estimators'
    ``_learn_selector`` (the column selector learned at the end of a fit) is timed:
    ``t.cpu_s`` / ``t.wall_s`` sum its process CPU and wall seconds, ``t.calls`` counts them.
    ``owner`` is the class whose method is wrapped (tabsparse's ``Explaining`` by default)."""

    def __init__(self, owner: Any = None) -> None:
        if owner is None:
            from tabsparse.estimators._explaining import Explaining

            owner = Explaining
        self.owner = owner
        self.cpu_s = self.wall_s = 0.0
        self.calls = 0

    def __enter__(self) -> SelectorTimer:
        original = self.owner.__dict__["_learn_selector"]
        self._original = original

        def timed(est: Any, *args: Any, **kwargs: Any) -> Any:
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                return original(est, *args, **kwargs)
            finally:
                self.cpu_s += time.process_time() - c0
                self.wall_s += time.perf_counter() - w0
                self.calls += 1

        self.owner._learn_selector = timed
        return self

    def __exit__(self, *exc: object) -> None:
        self.owner._learn_selector = self._original


def interleaved(
    calls: dict[str, Callable[[], Any]], repeats: int = TIMING_REPEATS
) -> dict[str, dict[str, float]]:
    """Each callable run ``repeats`` times, taking turns; per name the median process CPU and
    wall seconds."""
    cpu: dict[str, list[float]] = {k: [] for k in calls}
    wall: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {
        k: {"cpu_s": statistics.median(cpu[k]), "wall_s": statistics.median(wall[k])} for k in calls
    }


def explain_cost(est: Any, X: Any) -> dict[str, Any]:
    """``explain(X)`` against ``predict_proba(X)`` (or ``predict``) of the same rows, interleaved,
    medians of :data:`TIMING_REPEATS`."""
    predict = est.predict_proba if hasattr(est, "predict_proba") else est.predict
    t = interleaved({"explain": lambda: est.explain(X), "predict": lambda: predict(X)})
    return {
        "timing_rows": len(X),
        "explain_cpu_s": round(t["explain"]["cpu_s"], 4),
        "predict_cpu_s": round(t["predict"]["cpu_s"], 4),
        "explain_wall_s": round(t["explain"]["wall_s"], 4),
        "predict_wall_s": round(t["predict"]["wall_s"], 4),
    }


# ---- fits ----------------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def fit_tabsparse(kind: str, X: Any, y: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """The estimator with its defaults (only ``random_state``), fitted and timed; the time of
    its ``_learn_selector`` within the fit beside it."""
    from tabsparse import TabNetClassifier, TabNetRegressor

    cls = TabNetRegressor if kind == "regression" else TabNetClassifier
    est = cls(random_state=seed)
    with _quiet(), SelectorTimer() as timer:
        c0, w0 = time.process_time(), time.perf_counter()
        est.fit(X, y)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return est, {
        "fit_cpu_s": round(cpu, 3),
        "fit_wall_s": round(wall, 3),
        "selector_cpu_s": round(timer.cpu_s, 3),
        "selector_wall_s": round(timer.wall_s, 3),
        "selector_calls": timer.calls,
        "has_selector": getattr(est, "selector_", None) is not None,
        "epochs": int(getattr(est, "n_iter_", 0)),
    }


def fit_pytorch_tabnet(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[Any, dict[str, Any]]:
    """pytorch-tabnet 4.1 classifier with its defaults and a 10% stratified eval_set."""
    from pytorch_tabnet.tab_model import TabNetClassifier as PTC
    from sklearn.model_selection import train_test_split

    fit_idx, val_idx = train_test_split(
        np.arange(len(y)), test_size=0.1, random_state=seed, stratify=y
    )
    est = PTC(verbose=0, seed=seed)
    c0 = time.process_time()
    with _quiet(), contextlib.redirect_stdout(io.StringIO()):
        est.fit(
            X[fit_idx],
            y[fit_idx],
            eval_set=[(X[val_idx], y[val_idx])],
            compute_importance=False,
        )
    return est, {
        "fit_cpu_s": round(time.process_time() - c0, 3),
        "epochs": len(est.history["loss"]),
    }


def syn_data(part: str, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = SYN_TRAIN + SYN_TEST
    if part == "syn-noise":
        return make_syn_noise(name, n, N_NOISE)
    return make_syn(name, n)


def selection_row(prefix: str, chosen: np.ndarray, relevant: np.ndarray) -> dict[str, float]:
    """TPR / FDR (%), the share of rows choosing the switch x11 and columns per row of a
    boolean (or importance > 0) per-row choice of columns."""
    tpr, fdr = tpr_fdr(chosen, relevant)
    return {
        f"{prefix}_tpr": tpr,
        f"{prefix}_fdr": fdr,
        f"{prefix}_switch_rate": selection_rate(np.asarray(chosen, float), SWITCH),
        f"{prefix}_per_row": float((np.asarray(chosen) > 0).sum(1).mean()),
    }


def run_syn(part: str, name: str, model: str, seed: int) -> dict[str, Any]:
    """One fit on one Syn table and its explanations of the 10,000 test rows against the truth:
    ``selected`` (``explain(X).selected``) and ``masks`` (``explain(X).importances > 0``)."""
    from sklearn.metrics import roc_auc_score

    X, y, rel = syn_data(part, name)
    Xtr, ytr, Xte, yte, rel_te = (
        X[:SYN_TRAIN],
        y[:SYN_TRAIN],
        X[SYN_TRAIN:],
        y[SYN_TRAIN:],
        rel[SYN_TRAIN:],
    )
    if model == "pytorch-tabnet":
        est, info = fit_pytorch_tabnet(Xtr.astype(np.float32), ytr, seed)
        Xte32 = Xte.astype(np.float32)
        imp = np.asarray(est.explain(Xte32)[0])
        auc = roc_auc_score(yte, est.predict_proba(Xte32)[:, 1])
        return {**info, "auc": float(auc), **selection_row("masks", imp > 0, rel_te)}
    cols = [f"x{j + 1}" for j in range(X.shape[1])]
    Xtr_, Xte_ = pd.DataFrame(Xtr, columns=cols), pd.DataFrame(Xte, columns=cols)
    est, info = fit_tabsparse("binary", Xtr_, ytr, seed)
    e = est.explain(Xte_)
    out = {
        **info,
        "auc": float(roc_auc_score(yte, est.predict_proba(Xte_)[:, 1])),
        **selection_row("selected", np.asarray(e.selected, bool), rel_te),
        **selection_row("masks", np.asarray(e.importances) > 0, rel_te),
        "selected_prob_auc": mask_auc(np.asarray(e.selection_probabilities), rel_te),
        "n_columns": X.shape[1],
        "n_base_columns": N_SYN_FEATURES,
    }
    if part == "syn":
        out |= explain_cost(est, Xte_)
    return out


def run_real(name: str, seed: int) -> dict[str, Any]:
    """One tabsparse fit on one real table: its global importances (``feature_importances_``,
    and the mean of ``explain(X).selection_probabilities`` over up to :data:`HELD_OUT_ROWS`
    test rows), its test score and, on tables with at least :data:`TIMING_ROWS` test rows, the
    cost of ``explain``."""
    from sklearn.metrics import roc_auc_score

    kind = TASK_BY_NAME[name].kind
    s = load_split(name, TRAIN_CAP, TEST_CAP)
    est, info = fit_tabsparse(kind, s.X_train, s.y_train, seed)
    held = s.X_test.iloc[: min(len(s.X_test), HELD_OUT_ROWS)]
    e = est.explain(held)  # a model without a selector: the share of rows selecting a column
    chosen = e.selected if e.selection_probabilities is None else e.selection_probabilities
    probs = np.asarray(chosen, float).mean(0)
    if kind == "regression":
        pred = np.asarray(est.predict(s.X_test), float).ravel()
        score = float(np.sqrt(np.mean((np.asarray(s.y_test, float) - pred) ** 2)))
        metric = "rmse"
    else:
        proba = est.predict_proba(s.X_test)
        labels = list(est.classes_)
        if kind == "binary":
            score = float(roc_auc_score(np.asarray(s.y_test) == labels[1], proba[:, 1]))
        else:
            score = float(roc_auc_score(s.y_test, proba, multi_class="ovr", labels=labels))
        metric = "auc"
    out = {
        **info,
        "kind": kind,
        "metric": metric,
        "score": score,
        "columns": [str(c) for c in s.X_train.columns],
        "feature_importances": [float(v) for v in est.feature_importances_],
        "held_out_selection": [float(v) for v in probs],
        "train_rows": len(s.X_train),
    }
    if len(s.X_test) >= TIMING_ROWS:
        out |= explain_cost(est, s.X_test.iloc[:TIMING_ROWS])
    return out


def run_job(part: str, table: str, model: str, seed: int) -> dict[str, Any]:
    """One job's row (its key, its figures, the machine and the commit)."""
    w0 = time.perf_counter()
    figures = run_real(table, seed) if part == "real" else run_syn(part, table, model, seed)
    return {
        "part": part,
        "table": table,
        "model": model,
        "seed": seed,
        **figures,
        "job_wall_s": round(time.perf_counter() - w0, 2),
        **machine(),
    }
