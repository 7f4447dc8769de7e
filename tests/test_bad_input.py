"""Bad and awkward input: each case has a decided behaviour, checked here.

Either the input is handled correctly, or a ValueError / TypeError whose message names the column,
the value or the parameter — never a raw IndexError / KeyError / RuntimeError from deep inside.
The caller's arrays and DataFrames are never modified.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from tabsparse import TabNetClassifier, TabNetRegressor

SMALL = {"max_epochs": 2, "n_d": 4, "n_a": 4, "n_steps": 2, "random_state": 0, "device": "cpu"}


def frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "num": rng.normal(size=n),
            "cat": pd.Categorical(rng.choice(["a", "b", "c"], n)),
            "obj": rng.choice(["x", "y"], n).astype(object),
        }
    )


def labels(n: int = 60) -> np.ndarray:
    return np.array(["no", "yes"] * (n // 2) + ["no"] * (n % 2), dtype=object)


@pytest.fixture(scope="module")
def fitted() -> TabNetClassifier:
    return TabNetClassifier(**SMALL).fit(frame(), labels())


def with_column(name: str, values: Any) -> pd.DataFrame:
    df = frame()
    df[name] = values
    return df


def polars_frame(n: int = 60) -> Any:
    """A polars frame with the dtypes issue 25 names: categorical, enum, string, boolean, null."""
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(0)
    return pl.DataFrame(
        {
            "num": rng.normal(size=n),
            "cat": pl.Series(rng.choice(["a", "b"], n)).cast(pl.Categorical),
            "enum": pl.Series(rng.choice(["lo", "hi"], n)).cast(pl.Enum(["lo", "hi"])),
            "text": pl.Series([None, "p", "q"] * (n // 3)),
            "flag": pl.Series([True, None, False] * (n // 3)),
            "nothing": pl.Series([None] * n, dtype=pl.Null),
        }
    )


REG: dict[str, Any] = {"regressor": True}
"""Fit keyword of a case that fits a TabNetRegressor."""
PARAMS = (
    "categorical_features",
    "datetime_features",
    "loss",
    "quantile",
    "power",
    "scoring",
)
"""Keys of a case's fit keywords that are constructor parameters."""


N = 60
ONES = np.ones(N)
OBJECTIVE_CASES: list[tuple[str, np.ndarray, dict[str, Any], str]] = [
    # (case, y, constructor and fit parameters, the exact error message)
    (
        "negative y for loss='poisson'",
        np.r_[1.0, 2.0, 0.0, -1.5, np.ones(N - 4)],
        {"loss": "poisson"},
        "y must be >= 0 for loss='poisson', got -1.5 (row 3)",
    ),
    (
        "negative y for loss='tweedie'",
        np.r_[-1.0, np.ones(N - 1)],
        {"loss": "tweedie"},
        "y must be >= 0 for loss='tweedie' with power=1.5, got -1.0 (row 0)",
    ),
    (
        "zero y for loss='tweedie' with power >= 2",
        np.r_[0.0, np.ones(N - 1)],
        {"loss": "tweedie", "power": 2.5},
        "y must be > 0 for loss='tweedie' with power=2.5, got 0.0 (row 0)",
    ),
    (
        "zero y for loss='gamma'",
        np.r_[np.ones(N - 1), 0.0],
        {"loss": "gamma"},
        "y must be > 0 for loss='gamma', got 0.0 (row 59)",
    ),
    (
        "negative y in one column of a 2-D y for loss='gamma'",
        np.c_[ONES, np.r_[-2.0, np.ones(N - 1)]],
        {"loss": "gamma"},
        "y must be > 0 for loss='gamma', got -2.0 (row 0, column 1)",
    ),
    (
        "negative y_val for loss='poisson'",
        ONES,
        {"loss": "poisson", "X_val": frame(10), "y_val": -np.ones(10)},
        "y_val must be >= 0 for loss='poisson', got -1.0 (row 0)",
    ),
    (
        "quantile above 1",
        ONES,
        {"loss": "quantile", "quantile": 1.5},
        "The 'quantile' parameter of TabNetRegressor must be a float in the range (0.0, 1.0), "
        "an array-like or None. Got 1.5 instead.",
    ),
    (
        "quantile sequence reaching 1",
        ONES,
        {"loss": "quantile", "quantile": [0.1, 1.0]},
        "quantile=[0.1, 1.0]: every quantile must be a float in (0, 1)",
    ),
    (
        "non-increasing quantile sequence",
        ONES,
        {"loss": "quantile", "quantile": [0.9, 0.1]},
        "quantile=[0.9, 0.1] must be a non-empty, strictly increasing sequence",
    ),
    (
        "repeated quantile",
        ONES,
        {"loss": "quantile", "quantile": [0.5, 0.5]},
        "quantile=[0.5, 0.5] must be a non-empty, strictly increasing sequence",
    ),
    (
        "loss='quantile' without quantile",
        ONES,
        {"loss": "quantile"},
        "loss='quantile' needs quantile=: a float in (0, 1), or an increasing sequence of them "
        "for several quantiles at once",
    ),
    (
        "tweedie power below 1",
        ONES,
        {"loss": "tweedie", "power": 0.5},
        "The 'power' parameter of TabNetRegressor must be a float in the range [1.0, inf). "
        "Got 0.5 instead.",
    ),
    (
        "unknown loss",
        ONES,
        {"loss": "logcosh"},
        "The 'loss' parameter of TabNetRegressor must be a str among",
    ),
    (
        "several quantiles with a 2-D y",
        np.c_[np.arange(N), np.arange(N)],
        {"loss": "quantile", "quantile": [0.1, 0.9]},
        "y must be 1-D for several quantiles ([0.1, 0.9]), got 2 outputs; fit one model per output",
    ),
    (
        "several quantiles with a scorer name",
        np.arange(N, dtype=float),
        {"loss": "quantile", "quantile": [0.1, 0.9], "scoring": "r2"},
        "scoring='r2' cannot score several quantiles (predict returns one column per quantile); "
        "use scoring='loss', the mean pinball loss over them",
    ),
]
FIT_CASES: list[tuple[str, Callable[[], tuple[Any, Any, dict[str, Any]]], Any]] = [
    # (case, () -> (X, y, fit kwargs), None for "fits fine" or (exception, message regex))
    (
        "nan in numeric X",
        lambda: (with_column("num", [np.nan] * 5 + [1.0] * 55), labels(), {}),
        None,
    ),
    (
        "nan in categorical X",
        lambda: (with_column("obj", [None] * 5 + ["x"] * 55), labels(), {}),
        None,
    ),
    (
        "inf in numeric X",
        lambda: (with_column("num", [np.inf] + [1.0] * 59), labels(), {}),
        (ValueError, "num"),
    ),
    (
        "-inf in numeric X",
        lambda: (with_column("num", [-np.inf] + [1.0] * 59), labels(), {}),
        (ValueError, "num"),
    ),
    (
        "inf in categorical X",
        lambda: (with_column("obj", [np.inf] + ["x"] * 59), labels(), {}),
        (ValueError, "obj"),
    ),
    ("nan in y", lambda: (frame(), np.r_[np.nan, np.ones(59)], {}), (ValueError, "NaN")),
    (
        "inf in y (regressor)",
        lambda: (frame(), np.r_[np.inf, np.ones(59)], {"regressor": True}),
        (ValueError, "infinity"),
    ),
    ("empty X", lambda: (frame().iloc[:0], labels()[:0], {}), (ValueError, "0 sample")),
    ("no columns", lambda: (frame()[[]], labels(), {}), (ValueError, "0 feature")),
    ("single row", lambda: (frame().iloc[:1], np.array([1.5]), {"regressor": True}), None),
    (
        "single class",
        lambda: (frame(), np.array(["no"] * N), {}),
        (ValueError, "only one class: 'no'"),
    ),
    ("1-D X", lambda: (np.arange(60.0), labels(), {}), (ValueError, "Expected 2D array")),
    ("3-D X", lambda: (np.zeros((60, 2, 2)), labels(), {}), (ValueError, "dim 3")),
    ("length mismatch", lambda: (frame(), labels()[:50], {}), (ValueError, "60 rows but y has 50")),
    ("constant column", lambda: (with_column("num", 3.0), labels(), {}), None),
    ("all-NaN column", lambda: (with_column("num", np.nan), labels(), {}), None),
    (
        "values around 1e30",
        lambda: (with_column("num", np.linspace(-1e30, 1e30, N)), labels(), {}),
        None,
    ),
    (
        "values beyond float32",
        lambda: (with_column("num", [1e300] * N), labels(), {}),
        (ValueError, "num"),
    ),
    (
        "numbers stored as strings",
        lambda: (with_column("obj", [str(i) for i in range(N)]), labels(), {}),
        None,
    ),
    (
        "mixed-type object column",
        lambda: (with_column("obj", [1, "a", 2.5] * 20), labels(), {}),
        None,
    ),
    (
        "datetime column",
        lambda: (with_column("num", pd.date_range("2020", periods=N)), labels(), {}),
        (TypeError, "num"),
    ),
    (
        "timedelta column",
        lambda: (with_column("num", pd.to_timedelta(np.arange(N), "s")), labels(), {}),
        (TypeError, "num"),
    ),
    (
        "nullable Int64",
        lambda: (with_column("num", pd.array([1, None] * 30, dtype="Int64")), labels(), {}),
        None,
    ),
    (
        "nullable boolean",
        lambda: (with_column("num", pd.array([True, None] * 30, dtype="boolean")), labels(), {}),
        None,
    ),
    (
        "string dtype",
        lambda: (with_column("obj", pd.array(["p", None] * 30, dtype="string")), labels(), {}),
        None,
    ),
    ("list of lists", lambda: (frame()[["num"]].to_numpy().tolist(), labels().tolist(), {}), None),
    # scipy sparse input is encoded block of rows by block (issue 25 item 6)
    ("scipy sparse", lambda: (sp.csr_matrix(np.ones((N, 3))), labels(), {}), None),
    ("scipy sparse, COO", lambda: (sp.coo_matrix(np.eye(N, 3)), labels(), {}), None),
    (
        "scipy sparse of complex numbers",
        lambda: (sp.csr_matrix(np.ones((N, 2)) * 1j), labels(), {}),
        (ValueError, "Complex data not supported"),
    ),
    (
        "scipy sparse with inf",
        lambda: (sp.csr_matrix(np.r_[np.inf, np.ones(N - 1)].reshape(-1, 1)), labels(), {}),
        (ValueError, "Column 'x0' contains infinite values"),
    ),
    (
        "scipy sparse with categorical_features",
        lambda: (sp.csr_matrix(np.ones((N, 2))), labels(), {"categorical_features": [0]}),
        (ValueError, "numeric columns only; categorical_features"),
    ),
    (
        "sparse X_val for a sparse fit, wrong width",
        lambda: (
            sp.csr_matrix(np.ones((N, 2))),
            labels(),
            {"X_val": sp.csr_matrix(np.ones((10, 3))), "y_val": labels(10)},
        ),
        (ValueError, "X_val has 3 features, but TabNetClassifier is expecting 2"),
    ),
    # tables of other libraries (issue 25 item 1)
    (
        "polars LazyFrame",
        lambda: (pytest.importorskip("polars").from_pandas(frame()).lazy(), labels(), {}),
        (TypeError, r"lazy frame .*X\.collect\(\)"),
    ),
    (
        "polars Series as X",
        lambda: (pytest.importorskip("polars").Series("a", np.ones(N)), labels(), {}),
        (ValueError, r"\.to_frame\(\)"),
    ),
    (
        "pyarrow Table",
        lambda: (pytest.importorskip("pyarrow").Table.from_pandas(frame()), labels(), {}),
        None,
    ),
    # datetime columns (issue 25 item 8)
    (
        "datetime column without datetime_features='expand'",
        lambda: (with_column("when", pd.date_range("2020", periods=N)), labels(), {}),
        (TypeError, "Column 'when' has datetime values.*datetime_features='expand'"),
    ),
    (
        "datetime column with datetime_features='expand'",
        lambda: (
            with_column("when", pd.date_range("2020", periods=N)),
            labels(),
            {"datetime_features": "expand"},
        ),
        None,
    ),
    (
        "datetime_features not an option",
        lambda: (frame(), labels(), {"datetime_features": "parts"}),
        (ValueError, "'datetime_features' parameter .* 'parts'"),
    ),
    (
        "polars frame with Categorical, Enum, string, boolean and null columns",
        lambda: (polars_frame(), labels(), {}),
        None,
    ),
    (
        "polars datetime column without datetime_features='expand'",
        lambda: (
            pytest.importorskip("polars").from_pandas(
                with_column("when", pd.date_range("2020", periods=N))
            ),
            labels(),
            {},
        ),
        (TypeError, "Column 'when' has datetime values.*datetime_features='expand'"),
    ),
    (
        "pyarrow RecordBatch",
        lambda: (pytest.importorskip("pyarrow").RecordBatch.from_pandas(frame()), labels(), {}),
        None,
    ),
    (
        "pyarrow Array as X",
        lambda: (pytest.importorskip("pyarrow").array(np.ones(N)), labels(), {}),
        (ValueError, r"\.to_frame\(\)"),
    ),
    # regression objectives (issue 25 item 7): the exact messages, in OBJECTIVE_CASES below
    *(
        (case, lambda y=y, params=params: (frame(), y, REG | params), (ValueError, re.escape(msg)))
        for case, y, params, msg in OBJECTIVE_CASES
    ),
    # extreme targets and tiny columns (issue 25 items 3 and 4): fit, finite predictions
    ("regression target around 1e300", lambda: (frame(), np.linspace(1, 2, N) * 1e300, REG), None),
    (
        "regression target around 1e-300",
        lambda: (frame(), np.linspace(1, 2, N) * 1e-300, REG),
        None,
    ),
    (
        "numeric column around 1e-20",
        lambda: (with_column("num", np.linspace(-1, 1, N) * 1e-20), labels(), {}),
        None,
    ),
    (
        "duplicated column names",
        lambda: (pd.concat([frame(), frame()[["num"]]], axis=1), labels(), {}),
        (ValueError, "num"),
    ),
    (
        "dict in a cell",
        lambda: (with_column("obj", [{"a": 1}] * N), labels(), {}),
        (TypeError, "obj"),
    ),
    (
        "negative sample weight",
        lambda: (frame(), labels(), {"sample_weight": -np.ones(N)}),
        (ValueError, "(?i)negative"),
    ),
    (
        "nan sample weight",
        lambda: (frame(), labels(), {"sample_weight": np.r_[np.nan, np.ones(59)]}),
        (ValueError, "NaN"),
    ),
    (
        "sample weight wrong length",
        lambda: (frame(), labels(), {"sample_weight": np.ones(5)}),
        (ValueError, r"\(5,\)"),
    ),
    (
        "all-zero sample weight",
        lambda: (frame(), labels(), {"sample_weight": np.zeros(N)}),
        (ValueError, "non-zero"),
    ),
    (
        "2-D sample weight",
        lambda: (frame(), labels(), {"sample_weight": np.ones((N, 2))}),
        (ValueError, "1-D"),
    ),
    (
        "unseen label in y_val",
        lambda: (
            frame(),
            labels(),
            {"X_val": frame(10), "y_val": np.array(["maybe"] * 10, dtype=object)},
        ),
        (ValueError, r"^y_val contains labels not seen in training: \['maybe'\]"),
    ),
    (
        "X_val without y_val",
        lambda: (frame(), labels(), {"X_val": frame(10)}),
        (ValueError, "X_val and y_val"),
    ),
    (
        "X_val with other columns",
        lambda: (frame(), labels(), {"X_val": frame(10).drop(columns="cat"), "y_val": labels(10)}),
        (ValueError, "cat"),
    ),
    ("y is None", lambda: (frame(), None, {}), (ValueError, "requires y")),
    (
        "continuous y for a classifier",
        lambda: (frame(), np.linspace(0, 1, N), {}),
        (ValueError, "Unknown label type"),
    ),
    (
        "string y for a regressor",
        lambda: (frame(), labels(), {"regressor": True}),
        (ValueError, "could not convert|numeric"),
    ),
]


@pytest.mark.parametrize(("case", "make", "expected"), FIT_CASES, ids=[c[0] for c in FIT_CASES])
def test_fit_bad_input(case: str, make: Callable[[], Any], expected: Any) -> None:
    X, y, kwargs = make()
    kwargs = dict(kwargs)
    params = {k: kwargs.pop(k) for k in PARAMS if k in kwargs}
    regressor = kwargs.pop("regressor", False)
    est = (TabNetRegressor if regressor else TabNetClassifier)(**SMALL, **params)
    X_before = copy.deepcopy(X)
    if expected is None:
        est.fit(X, y, **kwargs)
        assert np.isfinite(
            est.predict_proba(X) if hasattr(est, "classes_") else est.predict(X)
        ).all()
    else:
        error, message = expected
        with pytest.raises(error, match=message):
            est.fit(X, y, **kwargs)
    assert_unchanged(X_before, X)


def assert_unchanged(before: Any, after: Any) -> None:
    if isinstance(before, pd.DataFrame):
        pd.testing.assert_frame_equal(before, after)
    elif isinstance(before, np.ndarray):
        np.testing.assert_array_equal(before, after)
        assert before.dtype == after.dtype


PREDICT_CASES: list[tuple[str, Callable[[], Any], Any]] = [
    ("missing column", lambda: frame().drop(columns="cat"), (ValueError, "cat")),
    ("renamed column", lambda: frame().rename(columns={"num": "number"}), (ValueError, "num")),
    ("extra column", lambda: with_column("extra", 1.0), (ValueError, "extra")),
    ("reordered columns", lambda: frame()[["obj", "num", "cat"]], None),
    (
        "wrong number of features (array)",
        lambda: np.zeros((5, 4)),
        (ValueError, "X has 4 features, but TabNetClassifier is expecting 3"),
    ),
    ("unseen categories", lambda: with_column("cat", pd.Categorical(["zzz"] * N)), None),
    ("unseen object values and NaN", lambda: with_column("obj", [None, "new"] * 30), None),
    ("inf at predict", lambda: with_column("num", np.inf), (ValueError, "num")),
    ("1-D X at predict", lambda: np.zeros(3), (ValueError, "Reshape your data")),
    ("empty X at predict", lambda: frame().iloc[:0], (ValueError, "0 sample")),
    (
        "datetime at predict",
        lambda: with_column("num", pd.date_range("2020", periods=N)),
        (TypeError, "num"),
    ),
    ("numbers as strings at predict", lambda: with_column("num", ["1.5"] * N), None),
    (
        "scipy sparse for a model with categorical columns",
        lambda: sp.csr_matrix(np.ones((5, 3))),
        (ValueError, "A sparse matrix has numeric columns only"),
    ),
    (
        "polars frame missing a column",
        lambda: pytest.importorskip("polars").from_pandas(frame().drop(columns="cat")),
        (ValueError, "cat"),
    ),
    (
        "polars frame, reordered",
        lambda: pytest.importorskip("polars").from_pandas(frame()[["obj", "num", "cat"]]),
        None,
    ),
    (
        "pyarrow Table, reordered",
        lambda: pytest.importorskip("pyarrow").Table.from_pandas(frame()[["cat", "obj", "num"]]),
        None,
    ),
    (
        "pyarrow RecordBatch missing a column",
        lambda: pytest.importorskip("pyarrow").RecordBatch.from_pandas(frame()[["num", "cat"]]),
        (ValueError, "obj"),
    ),
    (
        "polars LazyFrame at predict",
        lambda: pytest.importorskip("polars").from_pandas(frame()).lazy(),
        (TypeError, "collect"),
    ),
]


@pytest.mark.parametrize("method", ["predict", "predict_proba", "explain"])
@pytest.mark.parametrize(
    ("case", "make", "expected"), PREDICT_CASES, ids=[c[0] for c in PREDICT_CASES]
)
def test_predict_bad_input(
    fitted: TabNetClassifier, method: str, case: str, make: Callable[[], Any], expected: Any
) -> None:
    X = make()
    X_before = copy.deepcopy(X)
    call = getattr(fitted, method)
    if expected is None:
        out = call(X)
        arr = out.importances if method == "explain" else np.asarray(out)
        assert len(arr) == len(X)
    else:
        error, message = expected
        with pytest.raises(error, match=message):
            call(X)
    assert_unchanged(X_before, X)


def test_parameter_errors_name_parameter_and_value() -> None:
    X, y = frame(), labels()
    for name, value in [("n_steps", -1), ("gamma", 0.5), ("virtual_batch_size", 0)]:
        with pytest.raises(ValueError, match=re.escape(f"'{name}' parameter")) as info:
            TabNetClassifier(**{**SMALL, name: value}).fit(X, y)
        assert str(value) in str(info.value)


def test_y_val_with_an_unseen_class_names_y_val() -> None:
    X, y = frame(), labels()
    with pytest.raises(ValueError) as info:
        TabNetClassifier(**SMALL).fit(X, y, X_val=frame(10), y_val=np.array(["maybe"] * 10))
    message = str(info.value)
    assert message.startswith("y_val contains labels not seen in training: ['maybe']")
    assert "first fitted" not in message
    multi = np.stack([labels(), labels()[::-1]], axis=1)
    bad = multi[:10].copy()
    bad[0, 1] = "huge"
    with pytest.raises(ValueError, match=r"^column 1 of y_val contains .*'huge'") as info:
        TabNetClassifier(**SMALL).fit(X, multi, X_val=frame(10), y_val=bad)
    assert "first fitted" not in str(info.value)
