"""Quality of tabsparse's defaults against gradient boosting and pytorch-tabnet on real tables.

Every dataset of ``../shared/datasets`` (or ``$TABSPARSE_DATASETS``) gets one fixed task (see
``TASKS`` below and the README section this script writes), one fixed train/test split (the
official one where the data has one, else 80/20 with seed 0, stratified for classification) and
caps on the training and test rows (a seeded random subsample) so that the whole run stays near
30 minutes on 2 cores. Four models are fitted with their own defaults:

- ``tabsparse``: ``TabNetClassifier/TabNetRegressor(random_state=0)`` on the DataFrame as it is
  (plus ``--tabsparse-params`` when screening other defaults);
- ``hgb``: ``HistGradientBoosting*(categorical_features="from_dtype", random_state=0)``
  (categorical columns with more than 255 levels, which HGB refuses, enter as ordinal codes);
- ``lightgbm``: ``LGBM*(n_jobs=1, verbose=-1, random_state=0)``, pandas categories native;
- ``pytorch-tabnet``: pytorch-tabnet 4.1 ``TabNet*(verbose=0)`` as its README shows it: ordinal
  codes of the categorical columns (vocabulary of the whole file, NaN its own level) with
  ``cat_idxs``/``cat_dims``, numeric NaN replaced by the training mean, float32 numpy input,
  ``eval_set`` = a 10% split (seed 0, stratified for classification) of the training rows for its
  default early stopping (``max_epochs=100, patience=10``), ``compute_importance=False``;
- ``xgboost``, ``catboost``, ``realmlp`` (pytabkit's RealMLP-TD) and ``tabm`` (pytabkit's TabM-D):
  the strongest references, with their libraries' defaults on one thread (``quality_refs.py``
  says how; they need the ``bench`` extra, and are fitted only when ``--models`` names them).

With ``--seeds N`` the two neural networks are fitted with ``random_state`` 0..N-1 on the same
split (the seed sets their initialisation, batch order and early-stopping holdout) and the table
shows the means over the seeds with their range; single-seed differences of a point are common
on the small tables. The gradient-boosted models are fitted once.

Each worker process runs one model at a time on one thread (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``, LightGBM ``n_jobs=1``), so the fit times are single-thread times.
Fit times are stored as wall seconds (``fit_s``) and the worker's CPU seconds (``fit_cpu_s``,
``time.process_time``; the fair figure on a loaded machine). ``--fit-cpu-limit S`` ends a fit
after S CPU seconds (the worker is restarted; the fit is noted in
``results/quality_timeouts.jsonl`` and skipped by later ``--reuse`` runs with the same limit).
With ``--predictions`` every fit also stores its test predictions under
``results/predictions/`` (see ``quality_refs.py``) for ``bench_paired.py --a M --b M``; with
``--reuse`` a seed-0 row without its prediction file is refitted (the reference models always
store theirs). One JSON record per dataset x model x parameter variant is appended to
``benchmarks/results/quality.jsonl``; ``--reuse`` takes rows from there instead of refitting (the
reference models need not be rerun when tabsparse changes; tabsparse rows are matched by the
hash of all of its resolved parameters, so a changed default is a new variant).

Usage::

    python benchmarks/bench_quality.py                         # everything, writes the README
    python benchmarks/bench_quality.py --reuse                 # refit only what is not stored
    python benchmarks/bench_quality.py --models tabsparse --reuse \\
        --tabsparse-params '{"batch_size": 4096}' --no-write   # screen a candidate default
    python benchmarks/bench_quality.py --datasets adult letter --train-cap 20000
    python benchmarks/bench_quality.py --seeds 3 --reuse   # neural models: mean over 3 seeds
    # the strongest references, one worker, cheap tables first, 15 CPU minutes per fit at most
    python benchmarks/bench_quality.py --reuse --predictions --workers 1 --small-first \\
        --fit-cpu-limit 900 --models tabsparse hgb lightgbm xgboost catboost realmlp tabm
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy/torch/lightgbm load their pools
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import concurrent.futures as cf
import contextlib
import datetime as _dt
import hashlib
import io
import json
import math
import multiprocessing as mp
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _readme import cpu_model, load_average, write_section
from quality_refs import REFERENCES, fit_reference, limit_cpu, prediction_path, save_predictions
from quality_refs import variant as variant_tag

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

README = Path(__file__).resolve().parent / "README.md"
RESULTS = Path(__file__).resolve().parent / "results" / "quality.jsonl"
SECTION = "## Quality against gradient boosting and pytorch-tabnet"
DATASETS = Path(os.environ.get("TABSPARSE_DATASETS", ROOT.parent / "shared" / "datasets"))
MODELS = ("tabsparse", "hgb", "lightgbm", "pytorch-tabnet")
GBMS = ("hgb", "lightgbm")
ALL_MODELS = MODELS + REFERENCES
GBDTS = ("hgb", "lightgbm", "xgboost", "catboost")  # "the best GBDT" of the references section
NEURAL = ("tabsparse", "pytorch-tabnet", "realmlp", "tabm")  # fitted once per seed with --seeds
TIMEOUTS = Path(__file__).resolve().parent / "results" / "quality_timeouts.jsonl"
TRAIN_CAP = 50_000
TEST_CAP = 20_000
SEED = 0


# ---- tasks ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One fixed learning task on one dataset file."""

    dataset: str
    kind: str  # "binary", "multiclass" or "regression"
    target: str
    description: str
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None  # drops, target transform
    split: str = "random"  # "column" (a `split` column), "rows:<n_train>" or "random"
    skip: str | None = None


def _drop_na_target(df: pd.DataFrame, target: str) -> pd.DataFrame:
    return df[df[target].notna()].reset_index(drop=True)


def _log_target(target: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def prepare(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        df[target] = np.log(df[target].astype(float))
        return df

    return prepare


def _kdd(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["label"] = np.where(df["label"] == "normal", "normal", "attack")
    return df


def _diabetes(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["encounter_id", "patient_nbr"])


def _flights(df: pd.DataFrame) -> pd.DataFrame:
    leaks = ["dep_time", "dep_delay", "arr_time", "air_time", "time_hour"]
    return _drop_na_target(df.drop(columns=leaks), "arr_delay")


def _poker(df: pd.DataFrame) -> pd.DataFrame:
    df = _drop_na_target(df, "hand")
    df["hand"] = df["hand"].astype(int)
    return df


TASKS: list[Task] = [
    Task("adult", "binary", "income", "income >50K; official UCI train/test split", None, "column"),
    Task(
        "ames_housing",
        "regression",
        "Sale_Price",
        "log(Sale_Price) (metrics on the log scale)",
        _log_target("Sale_Price"),
    ),
    Task("bank_marketing", "binary", "y", "y (term deposit); all 16 columns incl. `duration`"),
    Task("california_housing", "regression", "median_house_value", "median_house_value (raw $)"),
    Task("covtype_50k_sample", "multiclass", "Cover_Type", "7 cover types"),
    Task(
        "credit_card_default_taiwan", "binary", "default_payment_next_month", "default next month"
    ),
    Task(
        "diabetes130_readmission",
        "multiclass",
        "readmitted",
        "readmitted, 3 classes (NO / >30 / <30); ids dropped; split by row, not by patient",
        _diabetes,
    ),
    Task(
        "diamonds",
        "regression",
        "price",
        "log(price) (metrics on the log scale)",
        _log_target("price"),
    ),
    Task("electricity", "binary", "class", "price up/down; random split of the time-ordered rows"),
    Task(
        "higgs_lightgbm_sample",
        "binary",
        "label",
        "signal/background; official 7000/500 split",
        None,
        "column",
    ),
    Task(
        "kddcup99_10pct",
        "binary",
        "label",
        "normal vs attack (10 of the 23 attack types have < 30 rows: too few for a "
        "stratified, capped split)",
        _kdd,
    ),
    Task(
        "letter",
        "multiclass",
        "lettr",
        "26 letters; usual split (first 16,000 rows train)",
        None,
        "rows:16000",
    ),
    Task("mushroom", "binary", "class", "edible/poisonous"),
    Task(
        "nycflights13_flights",
        "regression",
        "arr_delay",
        "arr_delay (minutes); dropped dep_time, dep_delay, arr_time, air_time (leak it) and "
        "time_hour (a timestamp string); cancelled flights (NaN target) dropped",
        _flights,
    ),
    Task(
        "poker_hand_train",
        "multiclass",
        "hand",
        "10 hands; the 1 row with NaN target dropped",
        _poker,
    ),
    Task(
        "shuttle",
        "multiclass",
        "Class",
        "7 classes; official split (first 43,500 rows train)",
        None,
        "rows:43500",
    ),
    Task("telco_churn", "binary", "churn", "churn yes/no"),
    Task(
        "yeast", "multilabel", "Class1", "multi-label", skip="multi-label: benchmarked separately"
    ),
]
TASK_BY_NAME = {t.dataset: t for t in TASKS}


@dataclass
class Split:
    X_train: pd.DataFrame
    y_train: pd.Series
    X_test: pd.DataFrame
    y_test: pd.Series
    n_train_full: int
    n_test_full: int


def _categorise(X: pd.DataFrame, full: pd.DataFrame) -> pd.DataFrame:
    """Non-numeric columns become pandas categories with the whole file's vocabulary."""
    X = X.copy()
    for col in X.columns:
        if not pd.api.types.is_numeric_dtype(X[col]) and not pd.api.types.is_bool_dtype(X[col]):
            levels = sorted(full[col].dropna().astype(str).unique())
            X[col] = pd.Categorical(
                X[col].astype("object").where(X[col].notna()), categories=levels
            )
    return X


@lru_cache(maxsize=2)
def load_split(name: str, train_cap: int, test_cap: int) -> Split:
    """The fixed, capped split of one task (cached per process)."""
    task = TASK_BY_NAME[name]
    df = pd.read_csv(DATASETS / name / f"{name}.csv.gz")
    if task.prepare is not None:
        df = task.prepare(df)
    df = df.reset_index(drop=True)
    y = df[task.target]
    X = df.drop(columns=[task.target] + (["split"] if "split" in df.columns else []))
    X = _categorise(X, df)
    if task.kind != "regression":
        y = y.astype(str)
    if task.split == "column":
        is_train = (df["split"] == "train").to_numpy()
        train_idx, test_idx = np.flatnonzero(is_train), np.flatnonzero(~is_train)
    elif task.split.startswith("rows:"):
        n_train = int(task.split.split(":")[1])
        train_idx, test_idx = np.arange(n_train), np.arange(n_train, len(df))
    else:
        from sklearn.model_selection import train_test_split

        strat = y if task.kind != "regression" and y.value_counts().min() >= 2 else None
        train_idx, test_idx = train_test_split(
            np.arange(len(df)), test_size=0.2, random_state=SEED, stratify=strat
        )
        train_idx, test_idx = np.sort(train_idx), np.sort(test_idx)
    rng = np.random.default_rng(SEED)
    n_train_full, n_test_full = len(train_idx), len(test_idx)
    if len(train_idx) > train_cap:
        train_idx = np.sort(rng.choice(train_idx, train_cap, replace=False))
    if len(test_idx) > test_cap:
        test_idx = np.sort(rng.choice(test_idx, test_cap, replace=False))
    return Split(
        X.iloc[train_idx].reset_index(drop=True),
        y.iloc[train_idx].reset_index(drop=True),
        X.iloc[test_idx].reset_index(drop=True),
        y.iloc[test_idx].reset_index(drop=True),
        n_train_full,
        n_test_full,
    )


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


# ---- results store -------------------------------------------------------------------------
def git_commit(root: Path = ROOT) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "tabsparse"],
            cwd=root,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def params_hash(record_params: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(record_params, sort_keys=True).encode()).hexdigest()[:10]


def load_results() -> list[dict[str, Any]]:
    if not RESULTS.exists():
        return []
    return [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]


# tabsparse parameters added after rows were stored, with the value that matches what those rows
# did (their behaviour before the parameter existed); ``compile="auto"`` never compiles on the
# CPU this benchmark fits on, so rows from before it match the eager step it keeps; no table
# here has a datetime column, so ``datetime_features="error"`` changes nothing on them
ADDED_PARAMS = {
    "ema_decay": "None",
    "compile": "'auto'",
    "datetime_features": "'error'",
    "beta_2": "0.999",
    "numeric_embedding": "None",
    "numeric_embedding_dim": "8",
    "n_members": "1",
    "first_mask": "'per_row'",
    "column_revival": "0",
    "column_pruning": "False",
}
#: the classifier's later parameters
ADDED_CLASSIFIER_PARAMS = {"label_smoothing": "0.0"}


# the regressor's later parameters (its loss was the squared error before ``loss`` existed)
ADDED_REGRESSOR_PARAMS = {
    "loss": "'squared_error'",
    "huber_delta": "1.0",
    "power": "1.5",
    "quantile": "None",
}


def _completed(record_params: dict[str, str]) -> dict[str, str]:
    """A stored row's tabsparse parameters with the later-added ones filled in (a row without
    ``class_weight`` is a regressor's)."""
    if "class_weight" in record_params:
        return {**ADDED_PARAMS, **ADDED_CLASSIFIER_PARAMS, **record_params}
    return {**ADDED_PARAMS, **ADDED_REGRESSOR_PARAMS, **record_params}


def with_auto_resolved(
    record_params: dict[str, str],
    n_rows: int | None,
    fitted: int | None = None,
    kind: str | None = None,
) -> dict[str, str]:
    """``record_params`` with the architecture's "auto" values replaced by what a fit resolves
    them to (``tabsparse.estimators._auto``), so that a row fitted with the value written out
    matches one fitted with "auto", and rows from before a parameter existed match "auto" where
    it resolves to the old behaviour. ``n_members``: ``fitted`` (the ``n_members_`` a stored row
    recorded) when given, else what a fit on ``n_rows`` rows resolves it to today. With the
    task's ``kind``, also ``numeric_embedding`` (periodic for binary and regression targets)
    and then ``first_mask`` and ``cat_emb_dim`` (the benchmarks never start from a pretrainer;
    without a shared sparsemax first mask ``column_revival`` and ``column_pruning`` do nothing
    and read as 0 and False), and with ``n_rows`` ``learning_rate`` (from the training batch
    and whether the fit validates)."""
    from tabsparse.estimators import _auto

    out = dict(record_params)
    if out.get("n_members") == repr("auto"):
        if fitted is None and n_rows is not None:
            fitted = _auto.auto_members(n_rows)  # the benchmarks' targets are one column each
        if fitted is not None:
            out["n_members"] = repr(fitted)
    if kind is None:
        return out
    if out.get("numeric_embedding") == repr("auto"):
        suits = kind in ("binary", "regression")  # the estimators' ``_periodic_suits``
        out["numeric_embedding"] = repr(_auto.auto_numeric_embedding(suits))
    members = out.get("n_members", "1")
    embedding = None if out.get("numeric_embedding") == "None" else "periodic"
    if out.get("first_mask") == repr("auto") and members.isdigit():
        out["first_mask"] = repr(_auto.auto_first_mask(int(members), embedding))
    if out.get("first_mask") == repr("per_row") or out.get("mask_type") == repr("entmax"):
        # no shared sparsemax first mask: the column edits do nothing (nn/shared_mask.py)
        out.update(column_revival="0", column_pruning="False")
    if out.get("cat_emb_dim") == repr("auto"):
        numeric_dim = int(out.get("numeric_embedding_dim", "8"))
        wide = kind == "regression"  # the estimators' ``_wide_categories_suit``
        out["cat_emb_dim"] = repr(_auto.auto_cat_emb_dim(wide, embedding, numeric_dim))
    if out.get("learning_rate") == repr("auto") and n_rows is not None:
        out["learning_rate"] = repr(_auto_learning_rate(out, n_rows, kind))
    return out


def _auto_learning_rate(params: dict[str, str], n_rows: int, kind: str) -> float:
    """What ``learning_rate="auto"`` resolves to for a fit with the (repr'd) ``params`` on
    ``n_rows`` rows of a ``kind`` target, as the estimators resolve it (``_auto``): whether the
    fit validates (``early_stopping``, ``validation_fraction``; a binary target from 100
    held-out rows, the others from 500), and its training batch."""
    from tabsparse.estimators import _auto
    from tabsparse.estimators._base import AUTO_EARLY_STOPPING_ROWS
    from tabsparse.estimators.classifier import AUTO_EARLY_STOPPING_ROWS_BINARY
    from tabsparse.training import auto_batch_size

    stopping = params.get("early_stopping", repr("auto"))
    fraction = float(params.get("validation_fraction", "0.1"))
    if stopping == repr("auto"):
        fewest = AUTO_EARLY_STOPPING_ROWS_BINARY if kind == "binary" else AUTO_EARLY_STOPPING_ROWS
        validating = n_rows * fraction >= fewest
    else:
        validating = stopping == "True"
    n_train = n_rows - max(1, round(n_rows * fraction)) if validating else n_rows
    vbs = int(params.get("virtual_batch_size", "128"))
    batch = params.get("batch_size", repr("auto"))
    size = auto_batch_size(n_train, vbs) if batch == repr("auto") else int(batch)
    return _auto.auto_learning_rate(size, validating)


def resolved_tabsparse_params(
    kind: str, params: dict[str, Any], seed: int = SEED
) -> dict[str, str]:
    """The full parameter set a tabsparse row is matched on (defaults resolved now)."""
    from tabsparse import TabNetClassifier, TabNetRegressor

    est = (TabNetRegressor if kind == "regression" else TabNetClassifier)(
        random_state=seed, device="cpu", **params
    )
    full = {k: v for k, v in est.get_params().items() if k not in ("verbose", "callbacks")}
    return {k: repr(v) for k, v in sorted(full.items())}


def _stored_predictions(row: dict[str, Any], path: Path) -> bool:
    """Whether the prediction file recorded on ``row`` exists beside ``path`` (a row matched
    through a parameter added after its fit carries the older tag in its file name)."""
    recorded = row.get("predictions_file")
    return bool(recorded) and (path.parent / Path(recorded).name).exists()


def _uncapped(row: dict[str, Any], caps: tuple[int, int]) -> bool:
    """Whether neither the row's caps nor ``caps`` cut its data (the same fit either way)."""
    return (
        row["n_train"] == row["n_train_full"] <= caps[0]
        and row["n_test"] < row["test_cap"]
        and row["n_test"] <= caps[1]
    )


def find_stored(
    rows: list[dict[str, Any]],
    name: str,
    model: str,
    params: dict[str, Any],
    caps: tuple[int, int],
    seed: int = SEED,
) -> dict[str, Any] | None:
    """The latest stored row for this dataset, model, variant, caps and seed (rows written
    before ``--seeds`` existed are seed 0)."""
    kind = TASK_BY_NAME[name].kind
    want = resolved_tabsparse_params(kind, params, seed) if model == "tabsparse" else None
    for row in reversed(rows):
        if (row["dataset"], row["model"]) != (name, model):
            continue
        if model in NEURAL and row.get("seed", SEED) != seed:
            continue
        if (row.get("train_cap"), row.get("test_cap")) != caps and not _uncapped(row, caps):
            continue
        if model == "tabsparse":
            n = row.get("n_train")
            stored = with_auto_resolved(
                _completed(row.get("tabsparse_params", {})), n, row.get("n_members_"), kind
            )
            if stored != with_auto_resolved(want, n, kind=kind):
                continue
        elif row.get("params", {}) != params:
            continue
        return row
    return None


def stored_seeds(
    rows: list[dict[str, Any]], name: str, model: str, params: dict[str, Any], caps: tuple[int, int]
) -> list[dict[str, Any]]:
    """The latest stored row of every seed of this dataset, model, variant and caps."""
    seeds = sorted(
        {r.get("seed", SEED) for r in rows if (r["dataset"], r["model"]) == (name, model)}
    )
    found = (find_stored(rows, name, model, params, caps, seed) for seed in seeds)
    return [r for r in found if r is not None]


METRICS = ("accuracy", "auc", "rmse", "r2", "fit_s", "fit_cpu_s", "predict_s", "epochs")


def mean_over_seeds(seed_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row whose metrics (and fit seconds, epochs) are the means over ``seed_rows``; with
    ``n_seeds`` and ``spread`` (max - min of the primary metric) added."""
    if len(seed_rows) == 1:
        return {**seed_rows[0], "n_seeds": 1, "spread": 0.0}
    out = dict(seed_rows[-1])
    for key in METRICS:
        values = [r[key] for r in seed_rows if key in r]
        if values:
            out[key] = float(np.mean(values))
    firsts = [primary(r) for r in seed_rows]
    out.update(
        n_seeds=len(seed_rows),
        spread=float(max(firsts) - min(firsts)),
        seeds=[r.get("seed", SEED) for r in seed_rows],
        per_seed=firsts,
        per_seed_metrics={
            k: [r[k] for r in seed_rows] for k in ("accuracy", "auc", "rmse") if k in out
        },
    )
    return out


# ---- report --------------------------------------------------------------------------------
def primary(row: dict[str, Any]) -> float:
    return row["rmse"] if row["kind"] == "regression" else row["accuracy"]


def checks(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The two "must reach" checks for one dataset (rows by model)."""
    ts, pt = rows.get("tabsparse"), rows.get("pytorch-tabnet")
    gbm = [rows[m] for m in GBMS if m in rows]
    out: dict[str, Any] = {"vs_tabnet": None, "vs_gbm": None, "gap": None}
    if ts is None:
        return out
    reg = ts["kind"] == "regression"
    if pt is not None:
        out["vs_tabnet"] = primary(ts) <= primary(pt) if reg else primary(ts) >= primary(pt)
    if gbm:
        if reg:
            best = min(primary(r) for r in gbm)
            out["gap"] = primary(ts) / best - 1.0  # relative RMSE excess
            out["vs_gbm"] = out["gap"] <= 0.03
        else:
            best = max(primary(r) for r in gbm)
            out["gap"] = best - primary(ts)  # accuracy points (as a fraction) behind
            out["vs_gbm"] = out["gap"] <= 0.01
    return out


def summary(by_dataset: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Counts of the checks and mean gaps of the tabsparse rows."""
    met_t = met_g = n_t = n_g = 0
    cls_gaps, reg_gaps, fit = [], [], 0.0
    for rows in by_dataset.values():
        c = checks(rows)
        if c["vs_tabnet"] is not None:
            n_t += 1
            met_t += bool(c["vs_tabnet"])
        if c["vs_gbm"] is not None:
            n_g += 1
            met_g += bool(c["vs_gbm"])
            (reg_gaps if rows["tabsparse"]["kind"] == "regression" else cls_gaps).append(c["gap"])
        if "tabsparse" in rows:
            fit += rows["tabsparse"]["fit_s"]
    return {
        "vs_tabnet": (met_t, n_t),
        "vs_gbm": (met_g, n_g),
        "mean_acc_gap": float(np.mean(cls_gaps)) if cls_gaps else float("nan"),
        "mean_rmse_excess": float(np.mean(reg_gaps)) if reg_gaps else float("nan"),
        "tabsparse_fit_s": fit,  # with several seeds: the mean fit time of each dataset
    }


def _fmt_metric(row: dict[str, Any] | None) -> str:
    if row is None:
        return "—"
    if row["kind"] == "regression":
        cell = f"{row['rmse']:.4g} / {row['r2']:.3f}"
        spread = f"{row.get('spread', 0.0):.3g}"
    else:
        cell = f"{row['accuracy']:.4f} / {row['auc']:.4f}"
        spread = f"{row.get('spread', 0.0):.4f}"
    if row.get("n_seeds", 1) > 1:
        cell += f" (±{spread} over {row['n_seeds']})"
    return cell


def _fmt_epochs(row: dict[str, Any] | None) -> str:
    return "—" if row is None else f"{row['epochs']:.0f}"


def _fmt_time(row: dict[str, Any] | None) -> str:
    return "—" if row is None else f"{row['fit_s']:.1f}"


def render(
    by_dataset: dict[str, dict[str, dict[str, Any]]],
    caps: tuple[int, int],
    workers: int,
    variant: dict[str, Any],
    notes: str,
    caveat: str = "",
    seeds: int = 1,
) -> str:
    """The README section body."""
    load = load_average()
    busy = f"; load average {load:.2f} at the start" if load is not None else ""
    import lightgbm
    import sklearn
    import torch

    try:
        from importlib.metadata import version

        ptv = version("pytorch-tabnet")
    except Exception:  # pragma: no cover
        ptv = "?"
    ts_rows = [r["tabsparse"] for r in by_dataset.values() if "tabsparse" in r]
    commits = sorted({r.get("commit", "?") for r in ts_rows})
    lines = [
        f"Machine: CPU: {cpu_model()}, {os.cpu_count()} logical cores; {workers} worker "
        f"process{'es' if workers != 1 else ''}, "
        f"**each model fitted on 1 thread** (fit times are single-thread seconds); torch "
        f"{torch.__version__}, scikit-learn {sklearn.__version__}, "
        f"LightGBM {lightgbm.__version__}, pytorch-tabnet {ptv}, "
        f"Python {platform.python_version()}; {_dt.date.today().isoformat()}{busy}. "
        f"tabsparse at commit {', '.join(commits)}"
        + (f", parameters {json.dumps(variant)}" if variant else " with its defaults")
        + ". Generated by `python benchmarks/bench_quality.py` (rows in "
        "`benchmarks/results/quality.jsonl`). Each row keeps the fit time of the run that made "
        "it (with `--reuse` the reference rows may come from an earlier run than the tabsparse "
        "rows, and the load average above is the one at rendering)." + caveat,
        "",
        "Each model runs with its own defaults on one fixed split per "
        "dataset: the official split where the data has one, otherwise 80/20 with seed 0 "
        "(stratified for classification). "
        + (
            f"The two neural networks (tabsparse and pytorch-tabnet) are fitted with "
            f"`random_state` 0 to {seeds - 1} where the rows were stored (the seed sets their "
            "initialisation, the batch order and the 10% early-stopping holdout; the split "
            "stays the same): their cells show the **mean over the seeds** and, in brackets, "
            "the range (max − min) of the accuracy or RMSE and the number of seeds; a cell "
            "without brackets is seed 0 alone. The checks compare the means. The "
            "gradient-boosted models are fitted once with `random_state=0`. "
            if seeds > 1
            else "Every model is fitted once with `random_state=0`. "
        )
        + f"Training rows are capped at {caps[0]:,} and test rows "
        f"at {caps[1]:,} (a seeded random subsample; `n train` shows the cap where it applied). "
        'tabsparse gets the DataFrame as it is (its `early_stopping="auto"` holds out 10% of the '
        'training rows itself from 5,000 rows on, and `batch_size="auto"` takes smaller batches '
        "below 16,384 training rows); HistGradientBoosting gets "
        '`categorical_features="from_dtype"` (columns with more than 255 levels, which it '
        "refuses, as ordinal codes); LightGBM `n_jobs=1, verbose=-1` with native pandas "
        "categories; pytorch-tabnet 4.1 its README recipe: ordinal codes of the categorical "
        "columns with `cat_idxs`/`cat_dims` (NaN its own level), numeric NaN set to the training "
        "mean, and `eval_set` = a 10% split of the training rows for its default early stopping "
        "(`max_epochs=100, patience=10`; `compute_importance=False`). Cells: accuracy / ROC AUC "
        "(binary: the positive class; multiclass: macro one-vs-rest over the classes in the test "
        "set) or RMSE / R2; fit seconds below.",
        "",
        "Checks (issue 4): **T** = tabsparse at least as good as pytorch-tabnet (accuracy, or "
        "RMSE); **G** = tabsparse within 1 accuracy point (or 3% RMSE) of the better gradient-"
        "boosted model; `gap` = accuracy points behind that model, or % RMSE above it.",
        "",
        "| dataset | task | n train | n test | tabsparse | HGB | LightGBM | pytorch-tabnet "
        "| T | G | gap |",
        "|---|---|---:|---:|---|---|---|---|:-:|:-:|---:|",
    ]
    yes = {True: "yes", False: "**no**", None: "—"}
    for name, rows in by_dataset.items():
        task = TASK_BY_NAME[name]
        any_row = next(iter(rows.values()))
        n_train = f"{any_row['n_train']:,}"
        if any_row["n_train_full"] > any_row["n_train"]:
            n_train += f" (of {any_row['n_train_full']:,})"
        c = checks(rows)
        gap = "—"
        if c["gap"] is not None:
            gap = (
                f"{100 * c['gap']:+.1f}%" if task.kind == "regression" else f"{100 * c['gap']:+.2f}"
            )
        cells = [_fmt_metric(rows.get(m)) for m in MODELS]
        lines.append(
            f"| {name} | {task.kind} | {n_train} | {any_row['n_test']:,} | "
            + " | ".join(cells)
            + f" | {yes[c['vs_tabnet']]} | {yes[c['vs_gbm']]} | {gap} |"
        )
    lines += [
        "",
        "Fit seconds (1 thread):",
        "",
        "| dataset | tabsparse | HGB | LightGBM | pytorch-tabnet | tabsparse epochs "
        "| pytorch-tabnet epochs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in by_dataset.items():
        ts, pt = rows.get("tabsparse"), rows.get("pytorch-tabnet")
        lines.append(
            f"| {name} | "
            + " | ".join(_fmt_time(rows.get(m)) for m in MODELS)
            + f" | {_fmt_epochs(ts)} | {_fmt_epochs(pt)} |"
        )
    tot = {m: sum(r[m]["fit_s"] for r in by_dataset.values() if m in r) for m in MODELS}
    lines.append("| **total** | " + " | ".join(f"**{tot[m]:.0f}**" for m in MODELS) + " | | |")
    s = summary(by_dataset)
    mt, nt = s["vs_tabnet"]
    mg, ng = s["vs_gbm"]
    lines += [
        "",
        f"**Summary.** T (at least as good as pytorch-tabnet): {mt} of {nt} datasets "
        f"({'met' if mt == nt else 'not met'}: required on every dataset). "
        f"G (within 1 point / 3% of the best GBM): {mg} of {ng} "
        f"({'met' if 2 * mg >= ng else 'not met'}: required on at least half). Mean gap to the "
        f"best GBM: {100 * s['mean_acc_gap']:.2f} accuracy points (classification), "
        f"{100 * s['mean_rmse_excess']:.1f}% RMSE (regression).",
        "",
        "Tasks: "
        + "; ".join(f"**{t.dataset}**: {t.description}" for t in TASKS if t.dataset in by_dataset)
        + ".",
    ]
    skipped = [t for t in TASKS if t.skip]
    if skipped:
        lines.append("Not here: " + "; ".join(f"{t.dataset} ({t.skip})" for t in skipped) + ".")
    if notes:
        lines += ["", notes.strip()]
    return "\n".join(lines)


NOTES_FILE = Path(__file__).resolve().parent / "results" / "quality_defaults.md"


def variants(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """Every stored tabsparse variant (by caps and parameters) scored against the reference rows
    stored for the same caps: one summary per variant, in the order first run."""
    current = {k: resolved_tabsparse_params(k, {}) for k in ("binary", "regression")}
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    labels: dict[tuple[Any, ...], str] = {}
    for row in rows:
        if row["model"] != "tabsparse" or row["dataset"] not in names:
            continue
        kind = "regression" if row["kind"] == "regression" else "binary"
        diff = sorted(
            f"{k}={v}"
            for k, v in _completed(row["tabsparse_params"]).items()
            if k in current[kind]
            and current[kind][k] != v
            and k not in ("class_weight", "random_state")
        )
        label = row.get("label", "")
        key = (row["train_cap"], row["test_cap"], ", ".join(diff) or "current defaults", label)
        per_seed = groups.setdefault(key, {}).setdefault(row["dataset"], {})
        per_seed[row.get("seed", SEED)] = row  # the latest row of each seed wins
        labels[key] = label
    out = []
    for key, ts_rows in groups.items():
        caps = (key[0], key[1])
        by_dataset: dict[str, dict[str, dict[str, Any]]] = {}
        for name, ts in ts_rows.items():
            by_dataset[name] = {"tabsparse": mean_over_seeds(list(ts.values()))}
            for m in ("hgb", "lightgbm", "pytorch-tabnet"):
                refs = stored_seeds(rows, name, m, {}, caps)
                if refs:  # pytorch-tabnet: the mean over its stored seeds
                    by_dataset[name][m] = mean_over_seeds(refs)
        out.append(
            {
                "caps": caps,
                "params": key[2],
                "label": labels[key],
                "n": len(ts_rows),
                "by_dataset": by_dataset,
                **summary(by_dataset),
            }
        )
    return out


def render_variants(found: list[dict[str, Any]]) -> str:
    """Markdown table of :func:`variants`."""
    lines = [
        "| run | train / test cap | tabsparse parameters (vs. the current defaults) | datasets "
        "| seeds | T | G | mean acc gap (pts) | mean RMSE excess | tabsparse fit s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in found:
        mt, nt = v["vs_tabnet"]
        mg, ng = v["vs_gbm"]
        n_seeds = sorted({r["tabsparse"].get("n_seeds", 1) for r in v["by_dataset"].values()})
        lines.append(
            f"| {v['label']} | {v['caps'][0]:,} / {v['caps'][1]:,} | {v['params']} | {v['n']} | "
            f"{'–'.join(map(str, n_seeds))} | "
            f"{f'{mt}/{nt}' if nt else '—'} | {mg}/{ng} | {100 * v['mean_acc_gap']:.2f} | "
            f"{100 * v['mean_rmse_excess']:.1f}% | {v['tabsparse_fit_s']:.0f} |"
        )
    return "\n".join(lines)


# ---- main ----------------------------------------------------------------------------------
def _import_from(folder: str) -> None:
    """Worker initialiser: ``import tabsparse`` finds the checkout at ``folder`` first."""
    sys.path.insert(0, folder)


def _timed_out(caps: tuple[int, int], limit: float | None) -> set[tuple[str, str, str, int]]:
    """(dataset, model, variant, seed) of the fits stored as ended by a CPU limit <= ``limit``."""
    if limit is None or not TIMEOUTS.exists():
        return set()
    out = set()
    for line in TIMEOUTS.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if (r["train_cap"], r["test_cap"]) == caps and r["cpu_limit"] <= limit:
                out.add((r["dataset"], r["model"], r.get("variant", ""), r["seed"]))
    return out


Job = tuple[str, str, dict[str, Any], int, str | None]  # dataset, model, params, seed, npz path


def execute(
    jobs: list[Job],
    caps: tuple[int, int],
    workers: int,
    cpu_limit: float | None,
    tabsparse_from: str | None,
) -> Any:
    """Run the jobs in spawned worker processes; yields ``(job, record or exception)``.

    With ``cpu_limit`` the jobs run one at a time in the given order, and a fit that runs out of
    CPU time ends its worker (a fresh one takes the next job): its exception is a
    ``TimeoutError``."""
    ctx = mp.get_context("spawn")
    init = {"initializer": _import_from, "initargs": (tabsparse_from,)} if tabsparse_from else {}

    def submit(pool: cf.ProcessPoolExecutor, job: Job) -> cf.Future:
        n, m, p, seed, path = job
        return pool.submit(run_model, n, m, p, *caps, seed, False, path, cpu_limit)

    if cpu_limit is None:
        with cf.ProcessPoolExecutor(workers, mp_context=ctx, **init) as pool:
            futures = {submit(pool, job): job for job in jobs}
            for fut in cf.as_completed(futures):
                try:
                    yield futures[fut], fut.result()
                except Exception as exc:  # keep the other results
                    yield futures[fut], exc
        return
    pool: cf.ProcessPoolExecutor | None = None
    try:
        for job in jobs:
            if pool is None:
                pool = cf.ProcessPoolExecutor(1, mp_context=ctx, **init)
            started = time.perf_counter()
            try:
                yield job, submit(pool, job).result()
            except cf.process.BrokenProcessPool:
                pool.shutdown()
                pool = None
                # one thread cannot spend more CPU seconds than wall seconds: a worker that
                # ended sooner was killed for another reason
                if time.perf_counter() - started >= cpu_limit:
                    yield job, TimeoutError(f"worker ended: over {cpu_limit:.0f} CPU s")
                else:
                    yield job, RuntimeError("the worker process ended before its CPU limit")
            except Exception as exc:
                yield job, exc
    finally:
        if pool is not None:
            pool.shutdown()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", help="names (default: all found)")
    parser.add_argument(
        "--models",
        nargs="*",
        default=list(MODELS),
        choices=ALL_MODELS,
        help=f"models to fit (default: {' '.join(MODELS)}); the others' stored rows are shown",
    )
    parser.add_argument(
        "--tabsparse-params",
        default="{}",
        help="JSON dict (or a list of dicts: several variants in one pool) of tabsparse parameters",
    )
    parser.add_argument(
        "--reuse", action="store_true", help="take stored rows instead of refitting"
    )
    parser.add_argument("--train-cap", type=int, default=TRAIN_CAP)
    parser.add_argument("--test-cap", type=int, default=TEST_CAP)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="do not touch the README")
    parser.add_argument("--label", default="", help="free text stored with the tabsparse rows")
    parser.add_argument(
        "--variants", action="store_true", help="only print the stored tabsparse variants"
    )
    parser.add_argument("--caveat", default="", help="a sentence about the machine's load")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="fit tabsparse and pytorch-tabnet with random_state 0..N-1 (same split); "
        "the table shows the mean over the seeds",
    )
    parser.add_argument(
        "--predictions",
        action="store_true",
        help="store every fit's test predictions (results/predictions/); with --reuse, refit "
        "seed-0 rows whose predictions are not stored",
    )
    parser.add_argument(
        "--fit-cpu-limit",
        type=float,
        help="end a fit after this many CPU seconds (runs the fits one at a time)",
    )
    parser.add_argument(
        "--small-first",
        action="store_true",
        help="table by table from the cheapest (tabsparse's stored fit time) up: the "
        "gradient-boosted models and tabsparse; then RealMLP; then TabM; then pytorch-tabnet",
    )
    parser.add_argument(
        "--tabsparse-from",
        type=Path,
        help="import tabsparse from this checkout (e.g. /tmp/today) in every process",
    )
    parser.add_argument(
        "--best-only",
        action="store_true",
        help="write only the section on the best tabular models (not the pytorch-tabnet one)",
    )
    args = parser.parse_args(argv)
    tabsparse_from = str(args.tabsparse_from.resolve()) if args.tabsparse_from else None
    if tabsparse_from:
        sys.path.insert(0, tabsparse_from)
    ts_given = json.loads(args.tabsparse_params)
    # a list screens several variants in one pool (the table shows the first)
    ts_variants = ts_given if isinstance(ts_given, list) else [ts_given]
    ts_params = {k: v for k, v in ts_variants[0].items() if k != "_datasets"}
    caps = (args.train_cap, args.test_cap)

    names = []
    for task in TASKS:
        if args.datasets and task.dataset not in args.datasets:
            continue
        if task.skip:
            print(f"skip {task.dataset}: {task.skip}")
            continue
        if not (DATASETS / task.dataset / f"{task.dataset}.csv.gz").exists():
            print(f"skip {task.dataset}: not found under {DATASETS}")
            continue
        names.append(task.dataset)

    stored = load_results()
    if args.variants:
        found = variants(stored, names)
        print(render_variants(found))
        for v in found:
            print(f"\n{v['caps']} {v['params']}")
            for n, rows in v["by_dataset"].items():
                c = checks(rows)
                gap = "—" if c["gap"] is None else f"{100 * c['gap']:+.2f}"
                print(f"  {n:28s} {_fmt_metric(rows['tabsparse']):18s} gap {gap}")
        return
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds} must be >= 1")
    commit = git_commit(Path(tabsparse_from) if tabsparse_from else ROOT)
    timed_out = _timed_out(caps, args.fit_cpu_limit)
    # the rows of the table: dataset -> model -> seed -> row (GBMs: seed 0 only)
    by_seed: dict[str, dict[str, dict[int, dict[str, Any]]]] = {n: {} for n in names}
    jobs: list[Job] = []
    for n in names:
        kind = TASK_BY_NAME[n].kind
        for m in ALL_MODELS:
            run_it = m in args.models
            for k, given in enumerate(ts_variants if m == "tabsparse" else [{}]):
                only = given.get("_datasets")  # screening: this variant on these datasets only
                if only is not None and n not in only:
                    continue
                params = {key: v for key, v in given.items() if key != "_datasets"}
                if m == "tabsparse":
                    tag = variant_tag(resolved_tabsparse_params(kind, params))
                else:
                    tag = variant_tag(params) if params else ""
                for seed in range(args.seeds) if m in NEURAL else [SEED]:
                    path = prediction_path(n, m, seed, tag)
                    save = run_it and (args.predictions or m in REFERENCES)
                    stored_row = (
                        find_stored(stored, n, m, params, caps, seed)
                        if (args.reuse or not run_it)
                        else None
                    )
                    if (
                        stored_row is not None
                        and run_it
                        and save
                        and seed == SEED
                        and not path.exists()
                        and not _stored_predictions(stored_row, path)
                    ):
                        stored_row = None  # refit for the predictions
                    if stored_row is not None and k == 0:
                        by_seed[n].setdefault(m, {})[seed] = stored_row
                    elif stored_row is None and run_it:
                        if (n, m, tag, seed) in timed_out:
                            print(f"skip {n} {m} seed {seed}: over the CPU limit before")
                            continue
                        jobs.append((n, m, params, seed, str(path) if save else None))
    size = {n: (DATASETS / n / f"{n}.csv.gz").stat().st_size for n in names}
    if args.small_first:
        # a table's cost: tabsparse's stored fit seconds there (else its file size)
        cost = {}
        for n in names:
            fits = [r["fit_s"] for r in stored if (r["dataset"], r["model"]) == (n, "tabsparse")]
            cost[n] = float(np.median(fits)) if fits else size[n] / 1e4
        tier = {**dict.fromkeys((*GBDTS, "tabsparse"), 0), "realmlp": 1, "tabm": 2}
        order = {m: i for i, m in enumerate(ALL_MODELS)}
        jobs.sort(key=lambda j: (tier.get(j[1], 2), cost[j[0]], order[j[1]], j[3]))
    else:  # longest first: the neural networks on the biggest training sets
        jobs.sort(key=lambda j: (j[1] in GBMS or j[1] in GBDTS, -size[j[0]], j[3]))
    workers = 1 if args.fit_cpu_limit is not None else args.workers
    print(
        f"{len(jobs)} fits on {workers} workers; "
        f"{sum(len(per) for v in by_seed.values() for per in v.values())} reused"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for (n, m, p, seed, path), rec in execute(
        jobs, caps, workers, args.fit_cpu_limit, tabsparse_from
    ):
        if isinstance(rec, Exception):
            print(f"FAILED {n} {m} seed {seed}: {type(rec).__name__}: {rec}", flush=True)
            if isinstance(rec, TimeoutError):
                tag = Path(path).stem.rsplit("-seed", 1)[0][len(m) + 1 :] if path else ""
                note = {"dataset": n, "model": m, "variant": tag, "seed": seed}
                note.update(cpu_limit=args.fit_cpu_limit, train_cap=caps[0], test_cap=caps[1])
                note.update(time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
                with TIMEOUTS.open("a") as fh:
                    fh.write(json.dumps(note) + "\n")
            continue
        rec.update(
            params=p,
            train_cap=caps[0],
            test_cap=caps[1],
            commit=commit,
            time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        )
        if m == "tabsparse":
            rec["params_hash"] = params_hash(rec["tabsparse_params"])
            rec["label"] = args.label
        with RESULTS.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        if p == ts_params or m != "tabsparse":
            by_seed[n].setdefault(m, {})[seed] = rec
        metric = (
            f"rmse {rec['rmse']:.4g}"
            if "rmse" in rec
            else f"acc {rec['accuracy']:.4f} auc {rec['auc']:.4f}"
        )
        tag = f"{m} s{seed}" if m in NEURAL else m
        print(
            f"{n:28s} {tag:18s} {metric}  fit {rec['fit_s']:.1f}s ({rec['fit_cpu_s']:.1f} CPU s)",
            flush=True,
        )

    by_dataset = {
        n: {m: mean_over_seeds([per[s] for s in sorted(per)]) for m, per in by_seed[n].items()}
        for n in names
        if by_seed[n]
    }
    print()
    for n, rows in by_dataset.items():
        c = checks(rows)
        cells = "  ".join(f"{m}={_fmt_metric(rows.get(m))}" for m in ALL_MODELS if m in rows)
        print(f"{n:28s} {cells}  T={c['vs_tabnet']} G={c['vs_gbm']}")
    s = summary(by_dataset)
    print(
        f"\nT {s['vs_tabnet'][0]}/{s['vs_tabnet'][1]}  G {s['vs_gbm'][0]}/{s['vs_gbm'][1]}  "
        f"mean acc gap {100 * s['mean_acc_gap']:.2f} pts  "
        f"mean rmse excess {100 * s['mean_rmse_excess']:.1f}%  "
        f"tabsparse fit {s['tabsparse_fit_s']:.0f}s"
    )
    if not args.no_write and not args.best_only:
        notes = NOTES_FILE.read_text() if NOTES_FILE.exists() else ""
        table = render_variants(variants(load_results(), names))
        notes = notes.replace("<!-- variants -->", table)
        write_section(
            README,
            SECTION,
            render(
                by_dataset,
                caps,
                args.workers,
                ts_params,
                notes,
                caveat=args.caveat and " " + args.caveat,
                seeds=args.seeds,
            ),
        )
        print(f"wrote {SECTION!r} in {README}")
    if not args.no_write:
        if any(m in rows for rows in by_dataset.values() for m in REFERENCES):
            import quality_best

            ts_tag = {
                k: variant_tag(resolved_tabsparse_params(k, ts_params))
                for k in ("binary", "multiclass", "regression")
            }
            body = quality_best.render(by_dataset, caps, ts_tag, commit)
            write_section(README, quality_best.SECTION, body)
            print(f"wrote {quality_best.SECTION!r} in {README}")


if __name__ == "__main__":
    main()
