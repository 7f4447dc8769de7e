"""The quality benchmark's model runners: fit and score one model on one task.

:func:`run_model` runs in a worker process of ``bench_quality.py`` (or ``bench_paired.py``), one
model at a time on one thread: tabsparse, HistGradientBoosting, LightGBM and pytorch-tabnet
here, the strongest references through ``quality_refs.fit_reference``; :func:`score` gives the
metrics of a row.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from quality_refs import REFERENCES, fit_reference, limit_cpu, save_predictions
from quality_store import RESULTS
from quality_tasks import NEURAL, SEED, TASK_BY_NAME, Split, Task, load_split


# ---- models --------------------------------------------------------------------------------
def _codes_frame(X: pd.DataFrame, max_levels: int | None = None) -> pd.DataFrame:
    """Categories with more than ``max_levels`` levels (all if None) -> float codes, NaN kept."""
    X = X.copy()
    for col in X.columns:
        if isinstance(X[col].dtype, pd.CategoricalDtype) and (
            max_levels is None or len(X[col].cat.categories) > max_levels
        ):
            codes = X[col].cat.codes.astype(float)
            X[col] = codes.where(codes >= 0)
    return X


def fit_hgb(task: Task, s: Split, params: dict[str, Any]) -> tuple[Any, pd.DataFrame]:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = (
        HistGradientBoostingRegressor
        if task.kind == "regression"
        else HistGradientBoostingClassifier
    )
    return cls(categorical_features="from_dtype", random_state=SEED, **params), _codes_frame(
        s.X_test, 255
    )


def fit_lightgbm(task: Task, s: Split, params: dict[str, Any]) -> tuple[Any, pd.DataFrame]:
    import lightgbm as lgb

    cls = lgb.LGBMRegressor if task.kind == "regression" else lgb.LGBMClassifier
    return cls(n_jobs=1, verbose=-1, random_state=SEED, **params), s.X_test


def _tabnet_arrays(s: Split) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """pytorch-tabnet input: ordinal codes (NaN -> its own level), numeric NaN -> train mean."""
    cat_idxs, cat_dims = [], []
    train, test = s.X_train.copy(), s.X_test.copy()
    for i, col in enumerate(train.columns):
        if isinstance(train[col].dtype, pd.CategoricalDtype):
            n_levels = len(train[col].cat.categories)
            for frame in (train, test):
                codes = frame[col].cat.codes.to_numpy().astype(np.int64)
                frame[col] = np.where(codes < 0, n_levels, codes)
            cat_idxs.append(i)
            cat_dims.append(n_levels + 1)
        else:
            mean = float(pd.to_numeric(train[col], errors="coerce").astype(float).mean())
            mean = 0.0 if math.isnan(mean) else mean
            for frame in (train, test):
                frame[col] = frame[col].astype(float).fillna(mean)
    return (
        train.to_numpy(dtype=np.float32),
        test.to_numpy(dtype=np.float32),
        cat_idxs,
        cat_dims,
    )


def _timer() -> tuple[float, float]:
    """(wall, CPU) seconds: the CPU time is this worker process's (all its threads)."""
    return time.perf_counter(), time.process_time()


def run_model(
    name: str,
    model: str,
    params: dict[str, Any],
    train_cap: int,
    test_cap: int,
    seed: int = SEED,
    predictions: bool = False,
    predictions_to: str | None = None,
    cpu_limit: float | None = None,
) -> dict[str, Any]:
    """Fit and score one model on one task (runs in a worker process).

    ``seed`` is the neural models' ``random_state`` (initialisation, batch order and the 10%
    early-stopping holdout); the train/test split and the caps never depend on it. With
    ``predictions`` the record also holds the test rows' predictions (``"predictions"``, a
    numpy array) and targets (``"y_test"``, the split's Series) for ``bench_paired.py`` to pair,
    so that it need not load the split again; neither is stored. ``predictions_to`` is a path
    where the predictions are stored (``quality_refs.save_predictions``); ``cpu_limit`` ends
    the worker after that many CPU seconds of fitting and predicting."""
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    task = TASK_BY_NAME[name]
    s = load_split(name, train_cap, test_cap)
    record: dict[str, Any] = {"dataset": name, "model": model, "kind": task.kind}
    if model in NEURAL:
        record["seed"] = seed
    extra: dict[str, Any] = {}
    if cpu_limit is not None:
        limit_cpu(cpu_limit)
    if model in REFERENCES:
        with contextlib.redirect_stdout(io.StringIO()):
            pred, proba, classes, times = fit_reference(
                model, task.kind, s.X_train, s.y_train, s.X_test, seed, params, _timer
            )
        fit_s, fit_cpu_s, predict_s = times["fit_s"], times["fit_cpu_s"], times["predict_s"]
    elif model == "pytorch-tabnet":
        from pytorch_tabnet.tab_model import TabNetClassifier as PTC
        from pytorch_tabnet.tab_model import TabNetRegressor as PTR
        from sklearn.model_selection import train_test_split

        Xtr, Xte, cat_idxs, cat_dims = _tabnet_arrays(s)
        ytr = s.y_train.to_numpy()
        strat = (
            ytr if task.kind != "regression" and pd.Series(ytr).value_counts().min() >= 2 else None
        )
        fit_idx, val_idx = train_test_split(
            np.arange(len(ytr)), test_size=0.1, random_state=seed, stratify=strat
        )
        cls = PTR if task.kind == "regression" else PTC
        est = cls(cat_idxs=cat_idxs, cat_dims=cat_dims, verbose=0, seed=seed, **params)
        yfit = ytr.reshape(-1, 1) if task.kind == "regression" else ytr
        t0, c0 = _timer()
        with contextlib.redirect_stdout(io.StringIO()):  # its "Early stopping occurred" line
            est.fit(
                Xtr[fit_idx],
                yfit[fit_idx],
                eval_set=[(Xtr[val_idx], yfit[val_idx])],
                compute_importance=False,
            )
        t1, c1 = _timer()
        fit_s, fit_cpu_s = t1 - t0, c1 - c0
        extra["epochs"] = len(est.history["loss"])
        t0 = time.perf_counter()
        if task.kind == "regression":
            pred = est.predict(Xte).ravel()
            proba = None
        else:
            proba = est.predict_proba(Xte)
            pred = np.asarray(est.classes_)[proba.argmax(1)]
        predict_s = time.perf_counter() - t0
        classes = list(map(str, est.classes_)) if task.kind != "regression" else []
    else:
        X_train = s.X_train
        if model == "tabsparse":
            from tabsparse import TabNetClassifier, TabNetRegressor

            est = (TabNetRegressor if task.kind == "regression" else TabNetClassifier)(
                random_state=seed, device="cpu", **params
            )
            X_test = s.X_test
            full = {k: v for k, v in est.get_params().items() if k not in ("verbose", "callbacks")}
            record["tabsparse_params"] = {k: repr(v) for k, v in sorted(full.items())}
        elif model == "hgb":
            est, X_test = fit_hgb(task, s, params)
            X_train = _codes_frame(X_train, 255)
        elif model == "lightgbm":
            est, X_test = fit_lightgbm(task, s, params)
        else:
            raise ValueError(model)
        t0, c0 = _timer()
        est.fit(X_train, s.y_train)
        t1, c1 = _timer()
        fit_s, fit_cpu_s = t1 - t0, c1 - c0
        if model == "tabsparse":
            extra["epochs"] = int(est.n_iter_)
            extra["best_epoch"] = int(est.best_iteration_) + 1
            extra["n_members_"] = int(getattr(est, "n_members_", 1))
        elif model == "hgb":
            extra["iterations"] = int(est.n_iter_)
        t0 = time.perf_counter()
        if task.kind == "regression":
            pred, proba = est.predict(X_test), None
        else:
            proba = est.predict_proba(X_test)
            pred = np.asarray(est.classes_)[proba.argmax(1)]
        predict_s = time.perf_counter() - t0
        classes = list(map(str, est.classes_)) if task.kind != "regression" else []
    if cpu_limit is not None:
        limit_cpu(None)
    record.update(score(task, s.y_test, pred, proba, classes))
    record.update(
        fit_s=round(fit_s, 3),
        fit_cpu_s=round(fit_cpu_s, 3),
        predict_s=round(predict_s, 3),
        **extra,
    )
    if predictions:
        record.update(predictions=np.asarray(pred), y_test=s.y_test)
    if predictions_to is not None:
        save_predictions(Path(predictions_to), task.kind, s.y_test, pred, proba, classes)
        to = Path(predictions_to)
        record["predictions_file"] = str(
            to.relative_to(RESULTS.parent) if to.is_relative_to(RESULTS.parent) else to
        )
    record.update(n_train=len(s.y_train), n_test=len(s.y_test), n_train_full=s.n_train_full)
    return record


def score(
    task: Task, y_test: pd.Series, pred: np.ndarray, proba: np.ndarray | None, classes: list[str]
) -> dict[str, Any]:
    """Accuracy and ROC AUC, or RMSE and R2."""
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score

    if task.kind == "regression":
        y = y_test.to_numpy(dtype=float)
        pred = np.asarray(pred, dtype=float)
        return {"rmse": float(np.sqrt(np.mean((y - pred) ** 2))), "r2": float(r2_score(y, pred))}
    y = y_test.astype(str).to_numpy()
    out: dict[str, Any] = {"accuracy": float(accuracy_score(y, np.asarray(pred).astype(str)))}
    assert proba is not None
    column = {c: i for i, c in enumerate(classes)}
    if task.kind == "binary":
        positive = sorted(set(y) | set(classes))[-1]  # the later label in sorted order
        p = proba[:, column[positive]] if positive in column else np.zeros(len(y))
        out["auc"] = float(roc_auc_score(y == positive, p))
    else:  # macro one-vs-rest over the classes present in the test set
        aucs = []
        for c in sorted(set(y)):
            p = proba[:, column[c]] if c in column else np.zeros(len(y))
            if 0 < (y == c).sum() < len(y):
                aucs.append(roc_auc_score(y == c, p))
        out["auc"] = float(np.mean(aucs))
    return out
