"""The strongest reference models of the quality benchmark and the store of test predictions.

``bench_quality.py`` fits these with their libraries' defaults on one thread (the ``bench`` extra:
``pip install -e ".[bench]"``):

- ``xgboost``: ``XGB*(n_jobs=1, random_state=0, enable_categorical=True, tree_method="hist")``
  on the DataFrame with its pandas categories;
- ``catboost``: ``CatBoost*(thread_count=1, random_seed=0, verbose=0)`` with the categorical
  columns as ``cat_features`` (strings; a missing value is its own level, ``"nan"``);
- ``realmlp``: pytabkit's ``RealMLP_TD_*`` and ``tabm``: pytabkit's ``TabM_D_*`` (``device="cpu",
  n_threads=1, random_state=seed``), pandas categories as they are, numeric NaN set to the
  training mean (as in the pytorch-tabnet recipe).

Class labels go to every library as the integer codes of the sorted training labels. Every fit
returns ``(pred, proba, classes)`` in the form ``quality_fits.score`` takes.

The prediction store keeps every model's test predictions so that ``bench_paired.py`` can pair any
two models on the same test rows without refitting: ``results/predictions/<dataset>/`` holds
``y_test.npz`` (the targets, once per dataset) and ``<model>[-<variant>]-seed<k>.npz`` with
``proba`` (binary: the positive class, float32; multi-class: every class, float16, with the
predicted class index in ``pred``) or ``pred`` (regression: float32 values), ``classes`` and
``y_sha`` (a fingerprint of the targets they were scored against).
"""

from __future__ import annotations

import hashlib
import json
import math
import resource
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PREDICTIONS = Path(__file__).resolve().parent / "results" / "predictions"
REFERENCES = ("xgboost", "catboost", "realmlp", "tabm")
SEED = 0


# ---- inputs ---------------------------------------------------------------------------------
def _numeric_bools(X: pd.DataFrame) -> pd.DataFrame:
    X = X.copy()
    for col in X.columns:
        if pd.api.types.is_bool_dtype(X[col]):
            X[col] = X[col].astype(float)
    return X


def _catboost_frame(X: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Categorical columns as strings (NaN -> the level ``"nan"``), the rest as they are."""
    X = _numeric_bools(X)
    cats = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)]
    for col in cats:
        X[col] = X[col].astype("object").where(X[col].notna(), "nan").astype(str)
    return X, cats


def _mean_imputed(train: pd.DataFrame, test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Numeric NaN -> the training column's mean (0 where the column is all NaN)."""
    train, test = _numeric_bools(train), _numeric_bools(test)
    for col in train.columns:
        if isinstance(train[col].dtype, pd.CategoricalDtype):
            continue
        mean = float(train[col].astype(float).mean())
        mean = 0.0 if math.isnan(mean) else mean
        train[col] = train[col].astype(float).fillna(mean)
        test[col] = test[col].astype(float).fillna(mean)
    return train, test


# ---- fitting --------------------------------------------------------------------------------
def make_estimator(model: str, kind: str, seed: int, params: dict[str, Any]) -> Any:
    """The reference estimator with its library defaults on one thread."""
    reg = kind == "regression"
    if model == "xgboost":
        import xgboost as xgb

        cls = xgb.XGBRegressor if reg else xgb.XGBClassifier
        return cls(
            n_jobs=1,
            random_state=seed,
            enable_categorical=True,
            tree_method="hist",
            **params,
        )
    if model == "catboost":
        import catboost as cb

        cls = cb.CatBoostRegressor if reg else cb.CatBoostClassifier
        return cls(thread_count=1, random_seed=seed, verbose=0, allow_writing_files=False, **params)
    if model in ("realmlp", "tabm"):
        from pytabkit import (
            RealMLP_TD_Classifier,
            RealMLP_TD_Regressor,
            TabM_D_Classifier,
            TabM_D_Regressor,
        )

        pair = (
            (RealMLP_TD_Regressor, RealMLP_TD_Classifier)
            if model == "realmlp"
            else (TabM_D_Regressor, TabM_D_Classifier)
        )
        cls = pair[0] if reg else pair[1]
        return cls(device="cpu", n_threads=1, random_state=seed, verbosity=0, **params)
    raise ValueError(f"unknown reference model {model!r}")


def fit_reference(
    model: str,
    kind: str,
    X_train: pd.DataFrame,
    y_train: pd.Series,
    X_test: pd.DataFrame,
    seed: int,
    params: dict[str, Any],
    timer: Any,
) -> tuple[np.ndarray, np.ndarray | None, list[str], dict[str, float]]:
    """Fit one reference and predict the test rows: ``(pred, proba, classes, times)``.

    ``timer()`` returns ``(wall, cpu)`` seconds; ``times`` holds the fit's and the prediction's
    wall and CPU seconds."""
    est = make_estimator(model, kind, seed, params)
    fit_kw: dict[str, Any] = {}
    if model == "catboost":
        X_train, cats = _catboost_frame(X_train)
        X_test, _ = _catboost_frame(X_test)
        fit_kw["cat_features"] = cats
    elif model == "xgboost":
        X_train, X_test = _numeric_bools(X_train), _numeric_bools(X_test)
    else:
        X_train, X_test = _mean_imputed(X_train, X_test)
    classes: list[str] = []
    if kind == "regression":
        y = y_train.to_numpy(dtype=float)
    else:
        classes = sorted(y_train.astype(str).unique())
        y = pd.Categorical(y_train.astype(str), categories=classes).codes.astype(np.int64)
    w0, c0 = timer()
    est.fit(X_train, y, **fit_kw)
    w1, c1 = timer()
    if kind == "regression":
        pred, proba = np.asarray(est.predict(X_test), dtype=float).ravel(), None
    else:
        raw = np.asarray(est.predict_proba(X_test), dtype=float)
        # columns in the order of the estimator's classes_ (integer codes of ``classes``)
        order = [int(c) for c in np.asarray(est.classes_).ravel()]
        proba = np.zeros((len(X_test), len(classes)))
        proba[:, order] = raw
        pred = np.asarray(classes)[proba.argmax(1)]
    w2, _ = timer()
    times = {"fit_s": w1 - w0, "fit_cpu_s": c1 - c0, "predict_s": w2 - w1}
    return pred, proba, classes, times


# ---- a CPU-time limit per fit ---------------------------------------------------------------
def limit_cpu(seconds: float | None) -> None:
    """Let this process run ``seconds`` more CPU seconds (SIGXCPU ends it after that); None
    lifts the limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if seconds is None:
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(used.ru_utime + used.ru_stime + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


# ---- the prediction store -------------------------------------------------------------------
def variant(params: dict[str, Any]) -> str:
    """A short hash of a parameter set (the seed left out): the variant in a file name."""
    rest = {k: v for k, v in params.items() if k != "random_state"}
    return hashlib.sha1(json.dumps(rest, sort_keys=True).encode()).hexdigest()[:8]


def prediction_path(dataset: str, model: str, seed: int, tag: str = "") -> Path:
    """``predictions/<dataset>/<model>[-<tag>]-seed<k>.npz``."""
    name = f"{model}-{tag}" if tag else model
    return PREDICTIONS / dataset / f"{name}-seed{seed}.npz"


def y_fingerprint(kind: str, y: pd.Series) -> str:
    values = y.to_numpy(dtype=float) if kind == "regression" else y.astype(str).to_numpy()
    return hashlib.sha1("\n".join(map(repr, values.tolist())).encode()).hexdigest()[:12]


def save_predictions(
    path: Path,
    kind: str,
    y_test: pd.Series,
    pred: np.ndarray,
    proba: np.ndarray | None,
    classes: list[str],
) -> None:
    """Store one model's test predictions (and, once per dataset, the targets)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fp = y_fingerprint(kind, y_test)
    y_file = path.parent / "y_test.npz"
    if not y_file.exists() or str(np.load(y_file)["y_sha"]) != fp:
        if kind == "regression":
            np.savez_compressed(y_file, y=y_test.to_numpy(dtype=float), y_sha=fp)
        else:
            labels = np.asarray(sorted(y_test.astype(str).unique()))
            codes = pd.Categorical(y_test.astype(str), categories=labels).codes
            np.savez_compressed(y_file, y_codes=codes.astype(np.int16), labels=labels, y_sha=fp)
    out: dict[str, Any] = {"y_sha": fp, "kind": kind}
    if kind == "regression":
        out["pred"] = np.asarray(pred, dtype=np.float32)
    else:
        assert proba is not None
        out["classes"] = np.asarray(classes)
        if kind == "binary":
            positive = sorted(set(y_test.astype(str)) | set(classes))[-1]
            col = classes.index(positive) if positive in classes else None
            p = proba[:, col] if col is not None else np.zeros(len(y_test))
            out["proba"] = np.asarray(p, dtype=np.float32)
            out["positive"] = positive
        else:
            out["proba"] = np.asarray(proba, dtype=np.float16)
        index = {c: i for i, c in enumerate(classes)}
        out["pred"] = np.asarray([index[str(p)] for p in pred], dtype=np.int16)
    np.savez_compressed(path, **out)


def load_predictions(path: Path) -> dict[str, Any]:
    """One stored prediction file with its dataset's targets: ``y`` (floats, or label strings),
    ``pred`` (values, or predicted label strings), ``score`` (binary: the positive class's
    probability) and ``kind``."""
    with np.load(path, allow_pickle=False) as f:
        data = {k: f[k] for k in f.files}
    with np.load(path.parent / "y_test.npz", allow_pickle=False) as f:
        ys = {k: f[k] for k in f.files}
    if str(ys["y_sha"]) != str(data["y_sha"]):
        raise ValueError(f"{path} was scored on other test rows than {path.parent}/y_test.npz")
    kind = str(data["kind"])
    out: dict[str, Any] = {"kind": kind, "y_sha": str(data["y_sha"])}
    if kind == "regression":
        out.update(y=ys["y"].astype(float), pred=data["pred"].astype(float))
        return out
    y = ys["labels"][ys["y_codes"]]
    classes = data["classes"]
    out.update(y=y.astype(str), pred=classes[data["pred"]].astype(str))
    if kind == "binary":
        out.update(score=data["proba"].astype(float), positive=str(data["positive"]))
    return out
