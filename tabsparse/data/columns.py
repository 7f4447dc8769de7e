"""Column kinds: one input column in a normalised form (:class:`Column`) and its kind.

A column is read from a DataFrame or an array into a numpy form (bool, int, float, object or
category codes with a missing mask), unsupported dtypes (datetime, timedelta, period, interval,
complex, bytes) are refused with a hint, and the kind (numeric or categorical) is decided from
the dtype, from the values of an object array, or from ``categorical_features``
(see :mod:`tabsparse.data` for the rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from tabsparse.data.tables import Table, short_list

_UNSUPPORTED_HINTS = {
    "datetime": "convert them to numbers first, e.g. timestamps with .astype('int64') "
    "or parts such as .dt.year / .dt.dayofweek, or pass datetime_features='expand'",
    "timedelta": "convert them to numbers first, e.g. durations with .dt.total_seconds()",
    "period": "convert them to numbers first, e.g. with .dt.to_timestamp().astype('int64')",
    "interval": "convert them to numbers first, e.g. their bounds or midpoints "
    "(.array.left, .array.right, .array.mid)",
    "complex": "convert them to real numbers first, e.g. real and imaginary parts "
    "(np.real, np.imag) or magnitudes",
    "bytes": "decode them to str first, e.g. with .str.decode('utf-8')",
}
_INFERRED_UNSUPPORTED = {
    "datetime": "datetime",
    "datetime64": "datetime",
    "date": "datetime",
    "time": "datetime",
    "timedelta": "timedelta",
    "timedelta64": "timedelta",
    "period": "period",
    "interval": "interval",
    "complex": "complex",
    "bytes": "bytes",
}
# infer_dtype results for object values holding a single kind of value.
INFERRED_SINGLE_KIND = {"string", "boolean", "integer", "floating", "mixed-integer-float", "empty"}
# infer_dtype results for object values that are all numbers (bools count as 0/1).
_INFERRED_NUMBERS = {"integer", "floating", "mixed-integer-float", "decimal", "boolean", "empty"}


_Form = Literal["bool", "int", "float", "object", "category"]


@dataclass
class Column:
    """One input column in a normalised form.

    ``values`` is a numpy array: bool, int64/other ints, float, object, or for
    ``form == "category"`` the integer codes (-1 = missing) into ``categories``.
    ``missing`` is an extra missing mask for pandas nullable dtypes.
    """

    name: str
    form: _Form
    values: np.ndarray
    missing: np.ndarray | None = None
    categories: Column | None = None

    def missing_mask(self) -> np.ndarray:
        if self.form == "category":
            mask = self.values < 0
        elif self.form == "float":
            mask = np.isnan(self.values)
        elif self.form == "object":
            mask = np.asarray(pd.isna(self.values), dtype=bool)
        else:
            mask = np.zeros(self.values.shape[0], dtype=bool)
        if self.missing is not None:
            mask = mask | self.missing
        return mask


def _unsupported(name: str, what: str, dtype: object) -> TypeError:
    return TypeError(
        f"Column {name!r} has {what} values (dtype {dtype}), which are not supported; "
        f"{_UNSUPPORTED_HINTS[what]}."
    )


def _col_from_array(values: np.ndarray, name: str) -> Column:
    kind = values.dtype.kind
    if kind == "b":
        return Column(name, "bool", values)
    if kind in "iu":
        return Column(name, "int", values)
    if kind == "f":
        if values.dtype.itemsize < 4:
            values = values.astype(np.float32)
        return Column(name, "float", values)
    if kind == "O":
        return Column(name, "object", values)
    if kind in "US":
        return Column(name, "object", values.astype(object))
    if kind == "M":
        raise _unsupported(name, "datetime", values.dtype)
    if kind == "m":
        raise _unsupported(name, "timedelta", values.dtype)
    if kind == "c":
        raise _unsupported(name, "complex", values.dtype)
    raise TypeError(f"Column {name!r} has unsupported dtype {values.dtype}.")


def _col_from_series(s: pd.Series, name: str) -> Column:
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = np.asarray(s.cat.codes.to_numpy(), dtype=np.int64)
        categories = _col_from_series(pd.Series(s.cat.categories), name)
        if categories.form == "category":  # pragma: no cover - pandas forbids this
            raise TypeError(f"Column {name!r} has nested categorical dtype.")
        return Column(name, "category", codes, categories=categories)
    if isinstance(dtype, pd.SparseDtype):
        return _col_from_series(cast(Any, s).sparse.to_dense(), name)
    if isinstance(dtype, np.dtype):
        return _col_from_array(s.to_numpy(), name)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        raise _unsupported(name, "datetime", dtype)
    if pd.api.types.is_timedelta64_dtype(dtype):
        raise _unsupported(name, "timedelta", dtype)
    if isinstance(dtype, pd.PeriodDtype):
        raise _unsupported(name, "period", dtype)
    if isinstance(dtype, pd.IntervalDtype):
        raise _unsupported(name, "interval", dtype)
    if pd.api.types.is_complex_dtype(dtype):
        raise _unsupported(name, "complex", dtype)
    if pd.api.types.is_bool_dtype(dtype):
        missing = np.asarray(s.isna().to_numpy(), dtype=bool)
        return Column(name, "bool", s.to_numpy(dtype=bool, na_value=False), missing)
    if pd.api.types.is_integer_dtype(dtype):
        missing = np.asarray(s.isna().to_numpy(), dtype=bool)
        try:
            return Column(name, "int", s.to_numpy(dtype=np.int64, na_value=0), missing)
        except (OverflowError, TypeError, ValueError):  # e.g. UInt64 beyond int64
            return Column(name, "float", s.to_numpy(dtype=np.float64, na_value=np.nan), missing)
    if pd.api.types.is_float_dtype(dtype):
        missing = np.asarray(s.isna().to_numpy(), dtype=bool)
        return Column(name, "float", s.to_numpy(dtype=np.float64, na_value=np.nan), missing)
    # string dtypes and any other extension type: plain Python objects
    return Column(name, "object", s.to_numpy(dtype=object))


def read_column(table: Table, j: int, name: str) -> Column:
    col = table.column(j)
    if isinstance(col, pd.Series):
        return _col_from_series(col, name)
    return _col_from_array(col, name)


def check_object_types(values: np.ndarray, name: str) -> str:
    """Return ``infer_dtype`` of object values, raising for unsupported kinds."""
    inferred = str(infer_dtype(values, skipna=True))
    what = _INFERRED_UNSUPPORTED.get(inferred)
    if what is not None:
        raise _unsupported(name, what, values.dtype)
    return inferred


def infer_kind(col: Column, from_frame: bool) -> tuple[str, bool]:
    """Kind under "from_dtype" and whether it was decided by inspecting values."""
    if col.form in ("bool", "int", "float"):
        return "numeric", False
    if col.form == "category" or from_frame:
        return "categorical", False
    inferred = check_object_types(col.values, col.name)
    return ("numeric" if inferred in _INFERRED_NUMBERS else "categorical"), True


def resolve_categorical(spec: object, table: Table) -> list[int] | None:
    """Positions of categorical columns, or None for "from_dtype"."""
    n = table.n_cols
    expected = (
        "'from_dtype', None, a list of column names, a list of column indices "
        "or a boolean mask of length n_features"
    )
    if isinstance(spec, str):
        if spec == "from_dtype":
            return None
        raise ValueError(
            f"categorical_features must be {expected}; got the string {spec!r} "
            f"(to select a single column pass a list, e.g. [{spec!r}])."
        )
    if spec is None:
        return []
    if isinstance(spec, (np.ndarray, pd.Index, pd.Series)):
        items: list[Any] = list(np.asarray(spec).tolist())
    elif isinstance(spec, (list, tuple, set, frozenset)):
        items = list(spec)
    else:
        raise ValueError(f"categorical_features must be {expected}; got {spec!r}.")
    if not items:
        return []
    if all(isinstance(v, (bool, np.bool_)) for v in items):
        if len(items) != n:
            raise ValueError(
                f"categorical_features is a boolean mask of length {len(items)}, "
                f"but X has {n} features."
            )
        return [j for j, v in enumerate(items) if v]
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        out: list[int] = []
        for v in items:
            i = int(v)
            if not -n <= i < n:
                raise ValueError(
                    f"categorical_features index {i} is out of range for X with {n} features "
                    f"(expected -{n} <= index < {n})."
                )
            out.append(i % n)
        return sorted(set(out))
    if all(isinstance(v, str) for v in items):
        if table.frame is None:
            raise ValueError(
                f"categorical_features contains column names {items[:10]}, but X is not a "
                "DataFrame and has no column names; pass column indices or a boolean mask."
            )
        position = {name: j for j, name in enumerate(table.names)}
        unknown = [v for v in items if v not in position]
        if unknown:
            raise ValueError(
                f"categorical_features contains unknown column names: {unknown}; "
                f"X has columns: {short_list(table.names)}."
            )
        return sorted({position[v] for v in items})
    raise ValueError(
        f"categorical_features must be {expected}; got a list mixing types: {items[:10]}."
    )
