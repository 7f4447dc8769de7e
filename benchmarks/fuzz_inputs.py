"""Property-based fuzzing of input handling: generated DataFrames through the encoder and the
estimators.

Each example is a small pandas DataFrame of mixed columns -- floats (with NaN, inf, 1e300,
1e-300, -0.0), ints (int64 near its limits, uint64 beyond them), bools, nullable ``Int64`` /
``Float64`` / ``boolean``, object strings, ``category`` columns, object columns mixing kinds
(bools, large ints, floats, strings, None, NaN, NaT, and cells of types that cannot be
categories), datetimes naive and time-zone aware -- fitted with ``datetime_features`` "expand" or
"error", and a second frame of the same columns to transform or predict (new values, so unseen
categories and other time zones; sometimes a column of another kind, missing or all missing).

Every example must end in one of two ways:

* **fitted**: fit and transform (or predict) succeed, and the output has the declared shape and
  values: an :class:`~tabsparse.data.EncodedTable` of float32 numbers that are finite or NaN and
  int64 codes within each column's cardinality; an estimator's predictions finite, one per row;
* **refused**: an exception raised by tabsparse (its type's module is ``tabsparse.*``), or a
  ``ValueError`` / ``TypeError`` whose message names one of the frame's columns (``'c0'``).

Anything else **escaped**: an exception whose type's module is ``pandas``, ``numpy``, ``torch``,
``scipy`` or ``pyarrow``; any ``KeyError``, ``IndexError``, ``AttributeError``,
``AssertionError``, ``ZeroDivisionError``, ``OverflowError``, ``RecursionError`` or ``NameError``
that tabsparse did not define; a ``ValueError`` / ``TypeError`` that names no column; any other
exception; or a result of the wrong shape or with non-finite values ("bad output").

Most examples fit a :class:`~tabsparse.data.TableEncoder` directly (cheap); a share
(``--estimator-share``) fit a tiny :class:`~tabsparse.TabNetRegressor` or
:class:`~tabsparse.TabNetClassifier` (one epoch) and predict. ``tests/test_input_properties.py``
runs a fast slice of the same strategy in the suite; this script runs thousands::

    OMP_NUM_THREADS=1 python benchmarks/fuzz_inputs.py --examples 5000

It prints a summary and writes ``benchmarks/results/fuzz_inputs.json`` (counts: examples,
fitted, refused, escaped; the escaped exceptions with an example each).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ESCAPE_MODULES = ("pandas", "numpy", "torch", "scipy", "pyarrow")
"""An exception whose type comes from one of these packages escaped."""
ESCAPE_TYPES: tuple[type[BaseException], ...] = (
    KeyError,
    IndexError,
    AttributeError,
    AssertionError,
    ZeroDivisionError,
    OverflowError,
    RecursionError,
    NameError,
)
"""Built-in exceptions that are bugs whenever tabsparse did not define the type."""

RESULTS = Path(__file__).resolve().parent / "results" / "fuzz_inputs.json"

ZONES = ("UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York")
FLOATS = (0.0, -0.0, 1.0, -2.5, 1e-300, -1e-300, 5e-324, 3e38, -3e38, np.nan)
OUT_OF_RANGE = (1e300, -1e300, 1e39, np.inf, -np.inf)
"""Refused in numeric columns (beyond float32, or infinite): in one float column in five."""
INTS = (0, 1, -1, 7, 2**31, 2**53 + 1, 2**62, np.iinfo(np.int64).max, np.iinfo(np.int64).min)
STRINGS = ("a", "b", "B", "", " ", "11 - 23%", "11-23%", "é", "1", "1.5", "2024-03-01", "nan")
MIXED = (
    None,
    np.nan,
    pd.NaT,
    pd.NA,
    True,
    False,
    0,
    1,
    7.5,
    2**60,
    2**60 + 1,
    2**70,
    -(2**63),
    1e300,
    "a",
    "1",
    np.int64(3),
    np.float32(0.5),
    np.bool_(True),
)
BIG_INTS = (True, 2**60, 2**60 + 1, 2**53, 2**53 + 1, 7.5, None)
"""Ints that one float64 cannot tell apart, next to bools, floats and strings."""
ODD_CELLS = (b"x", (1, 2), [1], {"a": 1}, 1 + 2j, dt.timedelta(1), object())
FORMS = (
    "float",
    "float32",
    "int",
    "uint64",
    "bool",
    "Int64",
    "Float64",
    "boolean",
    "string",
    "object_str",
    "category",
    "category_int",
    "mixed",
    "big_ints",
    "naive",
    "aware",
    "zones",
    "dates",
    "dt_str",
    "sparse",
    "all_missing",
)
RARE_FORMS = ("timedelta", "period", "odd")
"""Forms always refused (by name): drawn for about one column in forty."""


# ---- generated tables ----------------------------------------------------------------------


def _column(draw: Any, form: str, n: int) -> pd.Series:
    """A column of ``n`` values of ``form``."""
    if form in ("float", "float32"):
        finite = st.floats(-1e30, 1e30, allow_nan=False, width=64)
        pool = FLOATS + OUT_OF_RANGE if draw(st.sampled_from((True,) + (False,) * 4)) else FLOATS
        values = draw(st.lists(st.one_of(st.sampled_from(pool), finite), min_size=n, max_size=n))
        arr = np.array(values, dtype=np.float64)
        if form == "float32":
            with np.errstate(over="ignore"):
                arr = arr.astype(np.float32)
        return pd.Series(arr)
    if form == "int":
        return pd.Series(np.array(draw(_pick(INTS, n)), dtype=np.int64))
    if form == "uint64":
        big = (0, 1, 2**63, 2**64 - 1, 12345)
        return pd.Series(np.array(draw(_pick(big, n)), dtype=np.uint64))
    if form == "bool":
        return pd.Series(np.array(draw(_pick((True, False), n)), dtype=bool))
    if form == "Int64":
        return pd.Series(pd.array(draw(_pick((1, -5, 2**62, None), n)), dtype="Int64"))
    if form == "Float64":
        return pd.Series(pd.array(draw(_pick((0.5, -1e300, 1e-300, None), n)), dtype="Float64"))
    if form == "boolean":
        return pd.Series(pd.array(draw(_pick((True, False, None), n)), dtype="boolean"))
    if form == "string":
        return pd.Series(pd.array(draw(_pick((*STRINGS, None), n)), dtype="string"))
    if form == "object_str":
        text = st.text(max_size=4)
        return pd.Series(
            draw(
                st.lists(
                    st.one_of(st.sampled_from(STRINGS), text, st.none()), min_size=n, max_size=n
                )
            ),
            dtype=object,
        )
    if form == "category":
        cats = draw(st.lists(st.sampled_from(STRINGS), min_size=1, max_size=4, unique=True))
        return pd.Series(pd.Categorical(draw(_pick((*cats, None), n)), categories=cats))
    if form == "category_int":
        cats = draw(
            st.lists(
                st.sampled_from((0, 1, 5, 2**60, 2**60 + 1)), min_size=1, max_size=4, unique=True
            )
        )
        return pd.Series(pd.Categorical(draw(_pick((*cats, None), n)), categories=cats))
    if form in ("mixed", "big_ints"):  # a few kinds, so that they meet in one column
        values = MIXED if form == "mixed" else BIG_INTS
        pool = draw(st.lists(st.sampled_from(values), min_size=1, max_size=5, unique_by=repr))
        return pd.Series(draw(_pick(tuple(pool), n)), dtype=object)
    if form == "odd":
        values = draw(_pick((*MIXED[:8], *ODD_CELLS), n))
        return pd.Series(values, dtype=object)
    if form in ("naive", "aware"):
        stamps = draw(
            st.lists(
                st.one_of(
                    st.none(),
                    st.datetimes(
                        min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2200, 1, 1)
                    ),
                ),
                min_size=n,
                max_size=n,
            )
        )
        s = pd.Series(pd.to_datetime(pd.Series(stamps, dtype=object)), dtype="datetime64[ns]")
        if form == "aware":
            s = s.dt.tz_localize(draw(st.sampled_from(ZONES)), ambiguous="NaT", nonexistent="NaT")
        if draw(st.booleans()):
            s = s.astype(object)  # Timestamps in an object column
        return s
    if form == "zones":  # Timestamps of several zones in one object column
        stamps = [
            None if draw(st.booleans()) and i else pd.Timestamp("2024-03-01 12:00", tz=z)
            for i, z in enumerate(draw(_pick(ZONES, n)))
        ]
        return pd.Series(stamps, dtype=object)
    if form == "dates":
        days = draw(_pick((dt.date(2024, 1, 1), dt.date(1999, 12, 31), None), n))
        return pd.Series(days, dtype=object)
    if form == "dt_str":
        return pd.Series(draw(_pick((pd.Timestamp("2024-01-01"), "2024-01-02", None), n)))
    if form == "timedelta":
        return pd.Series(pd.to_timedelta(draw(_pick((1, 2, None), n)), unit="s"))
    if form == "period":
        return pd.Series(pd.period_range("2024-01", periods=n, freq="M"))
    if form == "sparse":
        return pd.Series(pd.arrays.SparseArray(draw(_pick((0.0, 1.5, np.nan), n))))
    missing = draw(st.sampled_from((None, np.nan, pd.NaT, pd.NA)))
    dtype = draw(st.sampled_from((object, "float64")))
    if dtype == "float64":
        return pd.Series(np.full(n, np.nan))
    return pd.Series([missing] * n, dtype=object)


def _pick(values: tuple[Any, ...], n: int) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.sampled_from(values), min_size=n, max_size=n)


def _form() -> st.SearchStrategy[str]:
    return st.sampled_from(FORMS * 6 + RARE_FORMS)


@dataclass
class Example:
    """One generated case: the fit frame, the frame to transform, and how to fit."""

    X: pd.DataFrame
    X_new: pd.DataFrame
    forms: list[str]
    datetime_features: str
    estimator: str | None  # None: the encoder alone; "regressor" or "classifier"
    y: np.ndarray = field(default_factory=lambda: np.zeros(0))


@st.composite
def examples(draw: Any, estimator_share: float = 0.1, max_rows: int = 12) -> Example:
    """An :class:`Example` (see the module documentation)."""
    use_estimator = draw(st.floats(0.0, 1.0)) < estimator_share
    n = draw(st.integers(4 if use_estimator else 1, max_rows))
    n_new = draw(st.integers(1, max_rows))
    n_cols = draw(st.integers(1, 4))
    forms = draw(st.lists(_form(), min_size=n_cols, max_size=n_cols))
    names: list[Any] = [f"c{j}" for j in range(n_cols)]
    if draw(st.floats(0, 1)) < 0.1:
        names = list(range(n_cols))  # integer column names: matched by position
    X = pd.DataFrame(
        {name: _column(draw, form, n) for name, form in zip(names, forms, strict=True)}
    )
    new = {}
    for name, form in zip(names, forms, strict=True):
        other = draw(_form()) if draw(st.integers(0, 99)) < 15 else form
        new[name] = _column(draw, other, n_new)
    X_new = pd.DataFrame(new)
    if draw(st.booleans()):
        X_new = X_new[list(reversed(names))]  # matched by name
    datetime_features = "expand" if draw(st.floats(0, 1)) < 0.8 else "error"
    kind = None
    y = np.zeros(0)
    if use_estimator:
        kind = draw(st.sampled_from(("regressor", "classifier")))
        if kind == "regressor":  # targets of any magnitude, sometimes constant
            y = np.array(draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n)))
            y = y * draw(st.sampled_from((1.0, 1e300, 1e-300)))
            if draw(st.sampled_from((True, False, False, False))):
                y = np.full(n, y[0])
        else:
            y = np.array([i % 2 for i in range(n)])
    return Example(X, X_new, forms, datetime_features, kind, y)


# ---- running one example -------------------------------------------------------------------


def names_a_column(message: str, names: list[str]) -> bool:
    """Whether ``message`` names one of the columns as ``'name'`` (or a part ``'name__...'``)."""
    return any(re.search(rf"'{re.escape(n)}(?:__\w+)?'", message) for n in names)


def classify(exc: BaseException, names: list[str]) -> str:
    """``"refused"`` or ``"escaped"`` for an exception of a fit or a transform."""
    module = type(exc).__module__
    if module.split(".")[0] == "tabsparse":
        return "refused"
    if module.split(".")[0] in ESCAPE_MODULES or isinstance(exc, ESCAPE_TYPES):
        return "escaped"
    if isinstance(exc, (ValueError, TypeError)) and names_a_column(str(exc), names):
        return "refused"
    return "escaped"


def _check_fitted_codes(enc: Any, out: Any, X: pd.DataFrame) -> str | None:
    """What is wrong with the codes of the fitted frame itself, or None: none of its values is
    unseen, and distinct ints of an object column get distinct codes."""
    if (out.codes == 1).any():
        return "a value of the fitted frame encoded as unseen"
    for k, j in enumerate(enc.categorical_columns):
        name = enc.feature_names[j]
        column = X[name] if name in X.columns else X.iloc[:, j]
        if column.dtype != object:
            continue
        ints: dict[int, int] = {}
        for value, code in zip(column.tolist(), out.codes[:, k].tolist(), strict=True):
            if isinstance(value, int) and not isinstance(value, bool):
                ints.setdefault(value, code)
        if len(set(ints.values())) != len(ints):
            return f"distinct ints of column {name!r} share a code"
    return None


def _check_encoded(enc: Any, out: Any, n: int) -> str | None:
    """What is wrong with an encoder's output, or None."""
    if out.numeric.dtype != np.float32 or out.numeric.shape != (n, len(enc.numeric_columns)):
        return f"numeric block {out.numeric.dtype} {out.numeric.shape}"
    if np.isinf(out.numeric).any():
        return "inf in the numeric block"
    if out.codes.dtype != np.int64 or out.codes.shape != (n, len(enc.categorical_columns)):
        return f"codes {out.codes.dtype} {out.codes.shape}"
    cards = np.asarray(enc.cardinalities, dtype=np.int64)
    if out.codes.size and ((out.codes < 0).any() or (out.codes >= cards).any()):
        return "a code outside its column's cardinality"
    return None


TINY = {"n_d": 4, "n_a": 4, "n_steps": 1, "max_epochs": 1, "batch_size": 8, "random_state": 0}


def run_example(ex: Example) -> tuple[str, str]:
    """``(outcome, detail)``: outcome ``"fitted"``, ``"refused"``, ``"escaped"`` or
    ``"bad_output"``; the detail names the exception (type, message, innermost frame) or the
    problem with the output."""
    from tabsparse import TabNetClassifier, TabNetRegressor
    from tabsparse.data import TableEncoder

    names = [str(c) for c in ex.X.columns]
    if not all(isinstance(c, str) for c in ex.X.columns):
        names += [f"x{j}" for j in range(ex.X.shape[1])]  # positional names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if ex.estimator is None:
                enc = TableEncoder(datetime_features=ex.datetime_features)
                out = enc.fit_transform(ex.X)
                problem = _check_encoded(enc, out, len(ex.X))
                if problem is None and enc.input_names == enc.feature_names:
                    problem = _check_fitted_codes(enc, out, ex.X)
                if problem is None:
                    out = enc.transform(ex.X_new)
                    problem = _check_encoded(enc, out, len(ex.X_new))
            else:
                cls = TabNetRegressor if ex.estimator == "regressor" else TabNetClassifier
                model = cls(**TINY, datetime_features=ex.datetime_features, device="cpu")
                model.fit(ex.X, ex.y)
                pred = np.asarray(model.predict(ex.X_new))
                problem = None
                if pred.shape != (len(ex.X_new),):
                    problem = f"predictions of shape {pred.shape}"
                elif ex.estimator == "regressor" and not np.isfinite(pred).all():
                    problem = "non-finite predictions"
                elif ex.estimator == "regressor" and np.unique(ex.y).size == 1:
                    if not (pred == ex.y[0]).all():
                        problem = "a constant target not predicted exactly"
        except Exception as exc:
            outcome = classify(exc, names)
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            return outcome, f"{type(exc).__module__}.{type(exc).__name__} at {where}: {exc}"
    if problem is not None:
        return "bad_output", problem
    return "fitted", ""


def describe(ex: Example) -> dict[str, Any]:
    """A JSON-able description of an example, enough to rebuild it by hand."""

    def frame(df: pd.DataFrame) -> dict[str, Any]:
        return {
            str(c): {"dtype": str(df[c].dtype), "values": [repr(v) for v in df[c].tolist()]}
            for c in df.columns
        }

    return {
        "forms": ex.forms,
        "datetime_features": ex.datetime_features,
        "estimator": ex.estimator,
        "X": frame(ex.X),
        "X_new": frame(ex.X_new),
    }


# ---- the benchmark -------------------------------------------------------------------------


def fuzz(n_examples: int, estimator_share: float, seed: int) -> dict[str, Any]:
    """Run ``n_examples`` generated examples and count their outcomes."""
    counts: Counter[str] = Counter()
    paths: Counter[str] = Counter()
    failures: dict[str, dict[str, Any]] = {}
    refusals: Counter[str] = Counter()

    @settings(
        max_examples=n_examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(examples(estimator_share=estimator_share))
    def one(ex: Example) -> None:
        outcome, detail = run_example(ex)
        counts[outcome] += 1
        paths[ex.estimator or "encoder"] += 1
        if outcome == "refused":
            message = detail.split(": ", 1)[1]
            refusals[re.sub(r"'[^']*'|\d+(\.\d+)?", "_", message)[:90]] += 1
        if outcome in ("escaped", "bad_output"):
            key = re.sub(r"\d+", "N", detail.split(": ")[0]) if outcome == "escaped" else detail
            failures.setdefault(key, {"count": 0, "detail": detail, "example": describe(ex)})
            failures[key]["count"] += 1

    start = time.perf_counter()
    one._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    one()
    total = sum(counts.values())
    return {
        "examples": total,
        "fitted": counts["fitted"],
        "refused": counts["refused"],
        "escaped": counts["escaped"] + counts["bad_output"],
        "bad_output": counts["bad_output"],
        "paths": dict(paths),
        "seconds": round(time.perf_counter() - start, 1),
        "seed": seed,
        "estimator_share": estimator_share,
        "failures": failures,
        "refusals": dict(refusals.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--estimator-share", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = fuzz(args.examples, args.estimator_share, args.seed)
    print(
        f"{result['examples']} examples in {result['seconds']} s "
        f"(encoder {result['paths'].get('encoder', 0)}, regressor "
        f"{result['paths'].get('regressor', 0)}, classifier "
        f"{result['paths'].get('classifier', 0)}): fitted {result['fitted']}, refused with a "
        f"named error {result['refused']}, escaped {result['escaped']}"
    )
    for key, failure in result["failures"].items():
        print(f"  {failure['count']:5d}  {key}\n         {failure['detail'][:300]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=repr) + "\n")
    return 0 if result["escaped"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
