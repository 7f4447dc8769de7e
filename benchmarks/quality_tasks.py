"""The quality benchmark's setup: its tasks, models, caps and fixed train/test splits.

``bench_quality.py`` (and ``bench_paired.py``, ``bench_explain.py``, ``bench_attributions.py``)
fit on these: every dataset of ``../shared/datasets`` (or ``$TABSPARSE_DATASETS``) gets one
fixed task (:data:`TASKS`), one fixed split (:func:`load_split`: the official one where the
data has one, else 80/20 with seed 0, stratified for classification) and caps on the training
and test rows (a seeded random subsample).
"""

from __future__ import annotations

import os

# every process of the benchmarks fits on one thread (the workers inherit it): set before
# numpy/torch/lightgbm load their pools, as ``bench_quality.py`` does first of all
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from quality_refs import REFERENCES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATASETS = Path(os.environ.get("TABSPARSE_DATASETS", ROOT.parent / "shared" / "datasets"))
MODELS = ("tabsparse", "hgb", "lightgbm", "pytorch-tabnet")
GBMS = ("hgb", "lightgbm")
ALL_MODELS = MODELS + REFERENCES
GBDTS = ("hgb", "lightgbm", "xgboost", "catboost")  # "the best GBDT" of the references section
NEURAL = ("tabsparse", "pytorch-tabnet", "realmlp", "tabm")  # fitted once per seed with --seeds
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
