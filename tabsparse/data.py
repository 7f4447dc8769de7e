"""Conversion of raw tables into the two arrays the network consumes.

:class:`TableEncoder` turns a table -- a pandas DataFrame as it comes, a 2-D numpy
array or a list of rows -- into an :class:`EncodedTable`: a float32 block of
numeric columns and an int64 block of category codes. It learns what it needs
(column kinds, category vocabularies, numeric statistics) with :meth:`fit`, or
chunk by chunk with :meth:`partial_fit` for data larger than memory, and its
state round-trips through JSON (:meth:`TableEncoder.to_dict` /
:meth:`TableEncoder.from_dict`) so that a non-Python consumer can encode rows
from the stored specification. This module depends on numpy and pandas only.

Encoding
--------
* ``EncodedTable.numeric``: float32, C-contiguous, one column per numeric
  feature in original column order. Missing values stay NaN (the network
  handles them); values are neither scaled nor shifted here, the statistics
  are only recorded. ``inf`` never appears: infinite values, and finite
  values beyond the float32 range (about 3.4e38), raise ``ValueError``
  naming the column, at fit and at transform.
* ``EncodedTable.codes``: int64, C-contiguous, one column per categorical
  feature. ``0`` means missing, ``1`` means a value not seen during fitting,
  ``k + 2`` means the ``k``-th entry of that column's vocabulary, so a
  column needs ``len(vocabulary) + 2`` embedding rows (``cardinalities``).

Column kinds (``categorical_features``)
---------------------------------------
* ``"from_dtype"`` (default). DataFrame columns: numeric for numpy
  int/uint/float/bool dtypes of any width and the pandas nullable ``Int*``,
  ``UInt*``, ``Float*`` and ``boolean`` dtypes (``<NA>`` becomes NaN);
  categorical for ``category``, ``object`` and string dtypes (``string``
  and pandas' default ``str``). Numpy arrays and lists of rows: a numeric
  array is all numeric. In an object or string array each column is
  inspected: it is numeric when all its non-missing values are numbers
  (int, float or bool; a column with no values at all also counts as
  numeric), otherwise categorical. Strings that look like numbers ("1.5")
  are strings and make the column categorical.
* ``None`` or an empty list: every column is numeric.
* A list of column names (DataFrame input only; compared with the names as
  strings, see ``feature_names``), a list of integer positions (negative
  positions count from the end) or a boolean mask of length ``n_features``:
  the listed columns are categorical, all others numeric. Integers are always
  positions, even for a DataFrame with integer column names.
* A column treated as numeric whose dtype is not numeric (object, string,
  category) is converted with :func:`pandas.to_numeric`, so numeric strings
  such as ``"1.5"`` are accepted and bools count as 0/1; any other value
  raises ``ValueError`` naming the column and an example value.
* datetime, timedelta, period, interval, complex and bytes columns raise
  ``TypeError``; convert them to numeric features (timestamps, parts,
  durations in seconds, ...) or to strings first.

Categorical values
------------------
* Vocabularies hold JSON-able Python scalars of three kinds: bool, number
  (``int``, or ``float`` when not integral; integral floats are stored as
  ints, so ``1.0`` and ``1`` are the same category) and ``str``. NaN, None,
  ``pd.NA`` and ``NaT`` are missing and never enter a vocabulary; ``inf``
  raises ``ValueError``. Values of any other type raise ``TypeError`` at fit.
* Within one column values of different kinds are different categories:
  ``"1"``, ``1`` and ``True`` are three categories when all three occur in
  the fitted data. Mixed object columns are allowed.
* Order: bools, then numbers, then strings, each sorted by value. This is
  deterministic and identical for :meth:`fit` and any sequence of
  :meth:`partial_fit` calls over the same rows.
* A ``category`` dtype contributes *all* its declared categories, observed or
  not (in the order above, not the dtype's order): the dtype is the user's
  declaration of the possible values, and the vocabulary then does not depend
  on which rows were sampled.
* At transform the dtype may differ from fit (category at fit and object at
  transform, ints at fit and floats at transform, ...). Values are matched
  by value, and where a value's kind is absent from the vocabulary it is
  converted when that is unambiguous:

  - bool and number follow Python equality (``True == 1``, ``False == 0``)
    unless the vocabulary holds both bools and numbers, in which case the
    kinds stay strictly apart;
  - a vocabulary of only strings receives numbers as their canonical text
    (``7`` and ``7.0`` match ``"7"``, ``2.5`` matches ``"2.5"``);
  - a vocabulary of only numbers receives strings parsed as numbers
    (``"7"`` and ``"7.0"`` match ``7``).

  Anything else that is not in the vocabulary gets code 1 (unseen), never an
  error, except ``inf``.

Columns and names
-----------------
* ``feature_names`` are the column names as strings, or ``x0, x1, ...`` for
  input without names. ``has_feature_names`` follows scikit-learn: true only
  for a DataFrame whose column names are all strings. Duplicated names
  (after conversion to ``str``) raise ``ValueError``.
* Fitted with feature names, a DataFrame is matched by column name (any
  order; missing or unexpected columns raise ``ValueError``). In every other
  case columns are taken by position and their number must match.

Statistics and streaming
------------------------
* ``numeric_mean`` / ``numeric_std`` are the mean and population standard
  deviation (ddof=0) in float64 of the values as encoded (after the float32
  cast), ignoring NaN. A column that is constant or has no values gets
  ``std = 1.0``; one with no values gets ``mean = 0.0``.
* Statistics are accumulated per block of rows (count, mean, sum of squared
  deviations, min, max) and merged with Chan et al.'s parallel update, so
  :meth:`partial_fit` over any chunking agrees with :meth:`fit` on the
  concatenation to rounding error.
* Kinds are decided on the first chunk. A later chunk in which a column
  would get another kind raises ``ValueError``, except when the column is
  entirely missing in that chunk or when a categorical column of an object
  array happens to hold only numbers. Fix the kinds with an explicit
  ``categorical_features`` to stream data whose dtypes vary.

Performance
-----------
Work is vectorised per column: numeric columns are copied into the output in
cache-sized row blocks, categorical columns are mapped with pandas hash
tables (``Index.get_indexer``). The only per-value Python loops are for
object columns holding several kinds of values (say ints and strings): at
fit, and at transform for the values not found directly or when the
vocabulary holds both bools and numbers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, cast

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

__all__ = [
    "CODE_MISSING",
    "CODE_OFFSET",
    "CODE_UNSEEN",
    "EncodedTable",
    "EncoderNotFittedError",
    "TableEncoder",
    "describe_columns",
]

CODE_MISSING = 0
"""Code of a missing categorical value."""
CODE_UNSEEN = 1
"""Code of a categorical value that was not seen during fitting."""
CODE_OFFSET = 2
"""Code of the first vocabulary entry; entry ``k`` gets ``k + CODE_OFFSET``."""

STATE_VERSION = 1
_STATE_FORMAT = "tabsparse.TableEncoder"

Category: TypeAlias = bool | int | float | str
"""A vocabulary entry: a JSON-able Python scalar."""

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_INT64_LIMIT = 2.0**63
_BLOCK_ROWS = 4096  # rows copied at a time into the output blocks
_STATS_ROWS = 65536  # rows per block of the statistics computation

# Kind ranks, used as the first element of the vocabulary sort key.
_RANK_BOOL = 0
_RANK_NUMBER = 1
_RANK_STR = 2
_TYPE_NAMES = ("bool", "int", "float", "str")

_UNSUPPORTED_HINTS = {
    "datetime": "convert them to numbers first, e.g. timestamps with .astype('int64') "
    "or parts such as .dt.year / .dt.dayofweek",
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
_INFERRED_SINGLE_KIND = {"string", "boolean", "integer", "floating", "mixed-integer-float", "empty"}
# infer_dtype results for object values that are all numbers (bools count as 0/1).
_INFERRED_NUMBERS = {"integer", "floating", "mixed-integer-float", "decimal", "boolean", "empty"}


class EncoderNotFittedError(ValueError, AttributeError):
    """Raised when a :class:`TableEncoder` is used before it was fitted."""


# --------------------------------------------------------------------------------------
# EncodedTable
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncodedTable:
    """A table encoded for the network.

    Parameters
    ----------
    numeric : numpy.ndarray
        float32 array of shape ``(n, n_numeric)``, C-contiguous. NaN marks a
        missing value; ``inf`` never occurs.
    codes : numpy.ndarray
        int64 array of shape ``(n, n_categorical)``, C-contiguous. ``0`` is
        missing, ``1`` is unseen at fit, ``k + 2`` is vocabulary entry ``k``.

    Raises
    ------
    TypeError
        If an array is not a numpy array of the required dtype.
    ValueError
        If an array is not 2-D and C-contiguous, or the row counts differ.

    Notes
    -----
    Equality is identity (``eq=False``): comparing arrays element-wise has no
    single truth value.
    """

    numeric: np.ndarray
    codes: np.ndarray

    def __post_init__(self) -> None:
        for field, dtype in (("numeric", np.float32), ("codes", np.int64)):
            arr = getattr(self, field)
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype:
                got = arr.dtype if isinstance(arr, np.ndarray) else type(arr).__name__
                raise TypeError(f"EncodedTable.{field} must be a {dtype.__name__} array, got {got}")
            if arr.ndim != 2:
                raise ValueError(f"EncodedTable.{field} must be 2-D, got shape {arr.shape}")
            if not arr.flags.c_contiguous:
                raise ValueError(f"EncodedTable.{field} must be C-contiguous")
        if self.numeric.shape[0] != self.codes.shape[0]:
            raise ValueError(
                "EncodedTable.numeric and EncodedTable.codes must have the same number of rows, "
                f"got {self.numeric.shape[0]} and {self.codes.shape[0]}"
            )

    def __len__(self) -> int:
        """Return the number of rows."""
        return int(self.numeric.shape[0])

    @property
    def n_numeric(self) -> int:
        """Number of numeric columns."""
        return int(self.numeric.shape[1])

    @property
    def n_categorical(self) -> int:
        """Number of categorical columns."""
        return int(self.codes.shape[1])

    def take(self, idx: Any) -> EncodedTable:
        """Return a subset of rows.

        Parameters
        ----------
        idx : slice, int, array-like of int or array-like of bool
            Rows to keep, as accepted by numpy indexing along the first axis.
            A single integer keeps that row as a table of one row.

        Returns
        -------
        EncodedTable
            The selected rows; arrays are C-contiguous (copies unless ``idx``
            is a slice).
        """
        if not isinstance(idx, slice):
            idx = np.asarray(idx)
            if idx.ndim == 0:
                idx = idx.reshape(1)
            if idx.ndim != 1:
                raise ValueError(f"take expects a 1-D index, got shape {idx.shape}")
        return EncodedTable(
            np.ascontiguousarray(self.numeric[idx]), np.ascontiguousarray(self.codes[idx])
        )


# --------------------------------------------------------------------------------------
# Input normalisation
# --------------------------------------------------------------------------------------


@dataclass
class _Table:
    """A validated 2-D input: a DataFrame or a 2-D numpy array."""

    frame: pd.DataFrame | None
    array: np.ndarray | None
    n_rows: int
    n_cols: int
    names: list[str]
    has_names: bool

    def column(self, j: int) -> pd.Series | np.ndarray:
        if self.frame is not None:
            return self.frame.iloc[:, j]
        assert self.array is not None
        return self.array[:, j]


def _is_scipy_sparse(X: object) -> bool:
    module = type(X).__module__ or ""
    return module.startswith("scipy.sparse") or (hasattr(X, "tocsr") and hasattr(X, "nnz"))


def _as_table(X: object) -> _Table:
    """Validate ``X`` and wrap it as a :class:`_Table` without copying data."""
    if _is_scipy_sparse(X):
        raise TypeError(
            "A sparse matrix was passed, but dense input is required; "
            "convert it with X.toarray() (or pass a DataFrame)."
        )
    if isinstance(X, pd.Series):
        raise ValueError(
            "Expected a 2-D table (DataFrame, 2-D array or list of rows), got a pandas Series "
            f"of shape {X.shape}; use series.to_frame() for a single column."
        )
    if isinstance(X, pd.DataFrame):
        names = [str(c) for c in X.columns]
        _check_unique(names)
        has_names = len(names) > 0 and all(isinstance(c, str) for c in X.columns)
        table = _Table(X, None, int(X.shape[0]), int(X.shape[1]), names, has_names)
    else:
        arr = _as_array(X)
        n_rows, n_cols = (int(s) for s in arr.shape)
        names = [f"x{j}" for j in range(n_cols)]
        table = _Table(None, arr, n_rows, n_cols, names, False)
    if table.n_cols == 0:
        raise ValueError(
            f"Expected a 2-D table with at least 1 column, got 0 columns "
            f"(shape ({table.n_rows}, 0))."
        )
    return table


def _as_array(X: object) -> np.ndarray:
    if isinstance(X, np.ndarray):
        arr = X
    else:
        try:
            arr = np.asarray(X)
        except ValueError as exc:  # ragged rows
            raise ValueError(
                f"Expected a 2-D table (DataFrame, 2-D array or list of rows); "
                f"could not convert the input to an array: {exc}"
            ) from exc
        if arr.dtype.kind in "USO":
            # Keep the Python types of mixed rows (np.asarray turns 1 into "1").
            arr = np.asarray(X, dtype=object)
    if arr.ndim != 2:
        raise ValueError(
            "Expected a 2-D table (DataFrame, 2-D array or list of rows), "
            f"got an input of shape {arr.shape}."
        )
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return arr


def _check_unique(names: list[str]) -> None:
    seen: set[str] = set()
    dups: list[str] = []
    for name in names:
        if name in seen and name not in dups:
            dups.append(name)
        seen.add(name)
    if dups:
        raise ValueError(f"X has duplicated column names: {dups}; column names must be unique.")


# --------------------------------------------------------------------------------------
# Columns
# --------------------------------------------------------------------------------------

_Form = Literal["bool", "int", "float", "object", "category"]


@dataclass
class _Col:
    """One input column in a normalised form.

    ``values`` is a numpy array: bool, int64/other ints, float, object, or for
    ``form == "category"`` the integer codes (-1 = missing) into ``categories``.
    ``missing`` is an extra missing mask for pandas nullable dtypes.
    """

    name: str
    form: _Form
    values: np.ndarray
    missing: np.ndarray | None = None
    categories: _Col | None = None

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


def _col_from_array(values: np.ndarray, name: str) -> _Col:
    kind = values.dtype.kind
    if kind == "b":
        return _Col(name, "bool", values)
    if kind in "iu":
        return _Col(name, "int", values)
    if kind == "f":
        if values.dtype.itemsize < 4:
            values = values.astype(np.float32)
        return _Col(name, "float", values)
    if kind == "O":
        return _Col(name, "object", values)
    if kind in "US":
        return _Col(name, "object", values.astype(object))
    if kind == "M":
        raise _unsupported(name, "datetime", values.dtype)
    if kind == "m":
        raise _unsupported(name, "timedelta", values.dtype)
    if kind == "c":
        raise _unsupported(name, "complex", values.dtype)
    raise TypeError(f"Column {name!r} has unsupported dtype {values.dtype}.")


def _col_from_series(s: pd.Series, name: str) -> _Col:
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = np.asarray(s.cat.codes.to_numpy(), dtype=np.int64)
        categories = _col_from_series(pd.Series(s.cat.categories), name)
        if categories.form == "category":  # pragma: no cover - pandas forbids this
            raise TypeError(f"Column {name!r} has nested categorical dtype.")
        return _Col(name, "category", codes, categories=categories)
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
        return _Col(name, "bool", s.to_numpy(dtype=bool, na_value=False), missing)
    if pd.api.types.is_integer_dtype(dtype):
        missing = np.asarray(s.isna().to_numpy(), dtype=bool)
        try:
            return _Col(name, "int", s.to_numpy(dtype=np.int64, na_value=0), missing)
        except (OverflowError, TypeError, ValueError):  # e.g. UInt64 beyond int64
            return _Col(name, "float", s.to_numpy(dtype=np.float64, na_value=np.nan), missing)
    if pd.api.types.is_float_dtype(dtype):
        missing = np.asarray(s.isna().to_numpy(), dtype=bool)
        return _Col(name, "float", s.to_numpy(dtype=np.float64, na_value=np.nan), missing)
    # string dtypes and any other extension type: plain Python objects
    return _Col(name, "object", s.to_numpy(dtype=object))


def _column(table: _Table, j: int, name: str) -> _Col:
    col = table.column(j)
    if isinstance(col, pd.Series):
        return _col_from_series(col, name)
    return _col_from_array(col, name)


def _check_object_types(values: np.ndarray, name: str) -> str:
    """Return ``infer_dtype`` of object values, raising for unsupported kinds."""
    inferred = str(infer_dtype(values, skipna=True))
    what = _INFERRED_UNSUPPORTED.get(inferred)
    if what is not None:
        raise _unsupported(name, what, values.dtype)
    return inferred


# --------------------------------------------------------------------------------------
# Numeric columns
# --------------------------------------------------------------------------------------


def _numeric_values(col: _Col) -> np.ndarray:
    """Return the column as a 1-D numeric array (NaN = missing), without copy if possible."""
    if col.form == "category":
        assert col.categories is not None
        cats = _numeric_values(col.categories).astype(np.float64)
        out = cats[np.maximum(col.values, 0)] if cats.size else np.zeros(col.values.shape)
        out[col.values < 0] = np.nan
        return out
    if col.form == "object":
        values = col.values
        _check_object_types(values, col.name)
        try:
            parsed = pd.to_numeric(values, errors="coerce")
            out = np.asarray(parsed, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"Column {col.name!r} is numeric but could not be converted to numbers: {exc}"
            ) from exc
        bad = np.isnan(out) & ~np.asarray(pd.isna(values), dtype=bool)
        if bad.any():
            example = values[np.flatnonzero(bad)[0]]
            raise ValueError(
                f"Column {col.name!r} is numeric but contains non-numeric values such as "
                f"{example!r}; list it in categorical_features or convert it to numbers."
            )
        return out
    if col.missing is not None and col.missing.any():
        out = col.values.astype(np.float64)
        out[col.missing] = np.nan
        return out
    return col.values


def _fill_columns(out: np.ndarray, sources: Sequence[np.ndarray], check_inf: bool = False) -> bool:
    """Copy 1-D ``sources`` into the columns of C-ordered ``out``, block of rows by block.

    Returns whether ``check_inf`` was requested and ``out`` received an infinite value
    (tested while each block is still in cache).
    """
    n = out.shape[0]
    found = False
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, _BLOCK_ROWS):
            stop = min(n, start + _BLOCK_ROWS)
            block = out[start:stop]
            for j, src in enumerate(sources):
                block[:, j] = src[start:stop]
            if check_inf and not found:
                found = bool(np.isinf(block).any())
    return found


def _check_finite_block(block: np.ndarray, sources: Sequence[np.ndarray], names: list[str]) -> None:
    """Raise for infinite values in the float32 ``block`` naming the column and the cause."""
    if block.size == 0 or not np.isinf(block).any():
        return
    bad = np.flatnonzero(np.isinf(block).any(axis=0))
    j = int(bad[0])
    src = np.asarray(sources[j])
    if src.dtype.kind == "f" and np.isinf(src).any():
        raise ValueError(
            f"Column {names[j]!r} contains infinite values (inf or -inf); replace them, "
            "e.g. with NaN to mark them missing."
        )
    with np.errstate(invalid="ignore"):
        example = src[np.abs(src.astype(np.float64)) > _FLOAT32_MAX]
    shown = f" such as {example[0]!r}" if example.size else ""
    raise ValueError(
        f"Column {names[j]!r} contains values beyond the float32 range (|x| > 3.4e38){shown}; "
        "rescale the column."
    )


def _block_stats(block: np.ndarray) -> tuple[np.ndarray, ...]:
    """Count, mean, M2, min and max per column of ``block`` ignoring NaN, in float64."""
    k = block.shape[1]
    acc = _empty_stats(k)
    for start in range(0, block.shape[0], _STATS_ROWS):
        x = block[start : start + _STATS_ROWS].astype(np.float64)
        nan = np.isnan(x)
        count = (x.shape[0] - nan.sum(axis=0)).astype(np.float64)
        x[nan] = 0.0
        safe = np.maximum(count, 1.0)
        mean = x.sum(axis=0) / safe
        dev = x - mean
        dev[nan] = 0.0
        m2 = np.einsum("ij,ij->j", dev, dev)
        x[nan] = np.inf
        lo = x.min(axis=0)
        x[nan] = -np.inf
        hi = x.max(axis=0)
        acc = _merge_stats(acc, (count, mean, m2, lo, hi))
    return acc


def _empty_stats(k: int) -> tuple[np.ndarray, ...]:
    return (
        np.zeros(k),
        np.zeros(k),
        np.zeros(k),
        np.full(k, np.inf),
        np.full(k, -np.inf),
    )


def _merge_stats(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Chan et al.'s parallel merge of (count, mean, M2, min, max)."""
    na, ma, m2a, loa, hia = a
    nb, mb, m2b, lob, hib = b
    n = na + nb
    safe = np.maximum(n, 1.0)
    delta = mb - ma
    mean = np.where(n > 0, ma + delta * (nb / safe), 0.0)
    m2 = m2a + m2b + delta * delta * (na * nb / safe)
    return n, mean, m2, np.minimum(loa, lob), np.maximum(hia, hib)


# --------------------------------------------------------------------------------------
# Categorical columns
# --------------------------------------------------------------------------------------

_Group = tuple[str, np.ndarray, np.ndarray]  # (kind, row positions, typed values)


def _canonical_float(v: float) -> int | float:
    return int(v) if v.is_integer() and abs(v) < _INT64_LIMIT else float(v)


def _value_key(v: Category) -> tuple[int, Category]:
    if isinstance(v, bool):
        return (_RANK_BOOL, v)
    if isinstance(v, str):
        return (_RANK_STR, v)
    return (_RANK_NUMBER, v)


def _type_name(v: Category) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return "str"


def _raise_inf(name: str) -> None:
    raise ValueError(
        f"Column {name!r} contains infinite values (inf or -inf); replace them, "
        "e.g. with NaN to mark them missing."
    )


def _split_object(values: np.ndarray) -> tuple[list[_Group], np.ndarray]:
    """Split non-missing object values by kind.

    Returns the groups ``(kind, positions, typed values)`` with kind ``"bool"``,
    ``"int"``, ``"float"`` or ``"str"``, and the positions of values of any
    other type.
    """
    n = values.shape[0]
    everything = np.arange(n)
    inferred = str(infer_dtype(values, skipna=False))
    if inferred == "empty" or n == 0:
        return [], np.zeros(0, dtype=np.intp)
    if inferred == "string":
        return [("str", everything, values)], np.zeros(0, dtype=np.intp)
    if inferred == "boolean":
        return [("bool", everything, values.astype(bool))], np.zeros(0, dtype=np.intp)
    if inferred == "integer":
        try:
            return [("int", everything, values.astype(np.int64))], np.zeros(0, dtype=np.intp)
        except OverflowError:
            pass
    if inferred in ("integer", "floating", "mixed-integer-float", "decimal"):
        try:
            return [("float", everything, values.astype(np.float64))], np.zeros(0, dtype=np.intp)
        except (OverflowError, TypeError, ValueError):
            pass
    # Several kinds of values: classify them one by one.
    tags = np.fromiter((_tag(v) for v in values), dtype=np.int8, count=n)
    groups: list[_Group] = []
    for tag, kind in ((1, "bool"), (2, "int"), (3, "float"), (4, "str")):
        pos = np.flatnonzero(tags == tag)
        if pos.size:
            sub = values[pos]
            typed: np.ndarray
            if kind == "bool":
                typed = sub.astype(bool)
            elif kind == "int":
                try:
                    typed = sub.astype(np.int64)
                except OverflowError:
                    kind, typed = "float", sub.astype(np.float64)
            elif kind == "float":
                typed = sub.astype(np.float64)
            else:
                typed = sub
            groups.append((kind, pos, typed))
    return groups, np.flatnonzero(tags == 0)


def _tag(v: object) -> int:
    if isinstance(v, (bool, np.bool_)):
        return 1
    if isinstance(v, numbers.Integral):
        return 2
    if isinstance(v, numbers.Real):
        return 3
    if isinstance(v, str):
        return 4
    return 0


def _vocab_update(keys: set[tuple[int, Category]], col: _Col) -> None:
    """Add the distinct non-missing values of ``col`` to the set of vocabulary keys."""
    if col.form == "category":
        assert col.categories is not None
        _vocab_update(keys, col.categories)
        return
    if col.form == "object":
        inferred = _check_object_types(col.values, col.name)
        if inferred in _INFERRED_SINGLE_KIND:
            # pd.unique is exact here: no bools next to numbers (True == 1 in Python).
            present = np.asarray(pd.unique(col.values), dtype=object)
        else:
            present = col.values
        present = present[~np.asarray(pd.isna(present), dtype=bool)]
        groups, others = _split_object(present)
        if others.size:
            example = present[others[0]]
            raise TypeError(
                f"Column {col.name!r} contains a value of type {type(example).__name__} "
                f"({example!r}), which cannot be a category: each cell's argument must be a "
                "string or a number (str, int, float or bool). Convert the column (e.g. with "
                ".astype(str)) first."
            )
    else:
        missing = col.missing_mask()
        values = col.values[~missing] if missing.any() else col.values
        groups = [(col.form, np.zeros(0, dtype=np.intp), values)]
    for kind, _, typed in groups:
        if kind == "str":
            keys.update((_RANK_STR, str(v)) for v in pd.unique(typed))
        elif kind == "bool":
            keys.update((_RANK_BOOL, bool(v)) for v in np.unique(typed))
        elif kind == "int":
            keys.update((_RANK_NUMBER, int(v)) for v in pd.unique(typed))
        else:
            if np.isinf(typed).any():
                _raise_inf(col.name)
            keys.update((_RANK_NUMBER, _canonical_float(float(v))) for v in np.unique(typed))


class _Lookup:
    """Vectorised mapping of column values to codes for one vocabulary."""

    def __init__(self, vocab: Sequence[Category]) -> None:
        self.size = len(vocab)
        self.bool_codes = np.full(2, CODE_UNSEEN, dtype=np.int64)
        nums: list[tuple[int | float, int]] = []
        strs: list[tuple[str, int]] = []
        for i, v in enumerate(vocab):
            if isinstance(v, bool):
                self.bool_codes[int(v)] = i + CODE_OFFSET
            elif isinstance(v, str):
                strs.append((v, i + CODE_OFFSET))
            else:
                nums.append((v, i + CODE_OFFSET))
        self.has_bool = bool((self.bool_codes != CODE_UNSEEN).any())
        self.has_num = bool(nums)
        self.has_str = bool(strs)
        self.num_int = all(isinstance(v, int) and abs(v) < _INT64_LIMIT for v, _ in nums)
        num_values = np.array(
            [v for v, _ in nums], dtype=np.int64 if self.num_int else np.float64
        ).reshape(-1)
        self.num_index = pd.Index(num_values)
        self.num_codes = np.array([c for _, c in nums], dtype=np.int64)
        self.str_index = pd.Index(np.array([v for v, _ in strs], dtype=object), dtype=object)
        self.str_codes = np.array([c for _, c in strs], dtype=np.int64)
        # Python equality lookup is exact unless bools and numbers share the vocabulary.
        self.obj_index: pd.Index | None = None
        if not (self.has_bool and self.has_num):
            self.obj_index = pd.Index(np.array(list(vocab), dtype=object), dtype=object)

    @staticmethod
    def _index(index: pd.Index, codes: np.ndarray, values: np.ndarray) -> np.ndarray:
        if codes.size == 0 or values.size == 0:
            return np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)
        pos = np.asarray(cast(Any, index).get_indexer(_as_index(values)))
        return np.where(pos >= 0, codes[pos], CODE_UNSEEN)

    def lookup_bool(self, values: np.ndarray) -> np.ndarray:
        if self.has_bool:
            return self.bool_codes[values.astype(np.intp)]
        if self.has_num:
            return self.lookup_number(np.asarray(values, dtype=np.int64))
        return np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)

    def lookup_number(self, values: np.ndarray) -> np.ndarray:
        """Codes of numbers (no NaN expected; NaN gives unseen)."""
        n = values.shape[0]
        if self.has_num:
            if not self.num_int:
                return self._index(self.num_index, self.num_codes, values.astype(np.float64))
            if values.dtype.kind in "iu":
                if values.dtype == np.uint64:
                    big = values > np.iinfo(np.int64).max
                    codes = self._index(self.num_index, self.num_codes, values.astype(np.int64))
                    codes[big] = CODE_UNSEEN
                    return codes
                return self._index(self.num_index, self.num_codes, values.astype(np.int64))
            v = values.astype(np.float64)
            with np.errstate(invalid="ignore"):
                integral = np.isfinite(v) & (np.floor(v) == v) & (np.abs(v) < _INT64_LIMIT)
            codes = self._index(
                self.num_index, self.num_codes, np.where(integral, v, 0.0).astype(np.int64)
            )
            codes[~integral] = CODE_UNSEEN
            return codes
        if self.has_bool:
            codes = np.full(n, CODE_UNSEEN, dtype=np.int64)
            codes[values == 0] = self.bool_codes[0]
            codes[values == 1] = self.bool_codes[1]
            return codes
        if self.has_str:
            return self._index(self.str_index, self.str_codes, _number_text(values))
        return np.full(n, CODE_UNSEEN, dtype=np.int64)

    def lookup_str(self, values: np.ndarray) -> np.ndarray:
        if self.has_str:
            return self._index(self.str_index, self.str_codes, values)
        if self.has_num and not self.has_bool:
            parsed = np.asarray(pd.to_numeric(values, errors="coerce"), dtype=np.float64)
            codes = self.lookup_number(np.where(np.isfinite(parsed), parsed, np.nan))
            codes[~np.isfinite(parsed)] = CODE_UNSEEN
            return codes
        return np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)

    def lookup_exact(self, values: np.ndarray, name: str) -> np.ndarray:
        """Codes of object values, classified by kind."""
        codes = np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)
        missing = np.asarray(pd.isna(values), dtype=bool)
        codes[missing] = CODE_MISSING
        present = np.flatnonzero(~missing)
        groups, _ = _split_object(values[present])
        for kind, pos, typed in groups:
            if kind == "str":
                sub = self.lookup_str(typed)
            elif kind == "bool":
                sub = self.lookup_bool(typed)
            else:
                if kind == "float" and np.isinf(typed).any():
                    _raise_inf(name)
                sub = self.lookup_number(typed)
            codes[present[pos]] = sub
        return codes

    def encode(self, col: _Col) -> np.ndarray:
        """Codes of a whole column (missing -> 0, unseen -> 1)."""
        if col.form == "category":
            assert col.categories is not None
            mapped = self.encode(col.categories)
            if mapped.size == 0:
                return np.zeros(col.values.shape[0], dtype=np.int64)
            codes = mapped[np.maximum(col.values, 0)]
            codes[col.values < 0] = CODE_MISSING
            return codes
        if col.form == "object":
            values = col.values
            if self.obj_index is None:
                codes = self.lookup_exact(values, col.name)
            else:
                try:
                    target = _as_index(values)
                    pos = np.asarray(cast(Any, self.obj_index).get_indexer(target), dtype=np.int64)
                except TypeError:  # unhashable values: classify them one by one
                    pos = np.full(values.shape[0], -1, dtype=np.int64)
                codes = pos + CODE_OFFSET
                rest = np.flatnonzero(pos < 0)
                if rest.size:
                    codes[rest] = self.lookup_exact(values[rest], col.name)
        elif col.form == "bool":
            codes = self.lookup_bool(col.values)
        elif col.form == "int":
            codes = self.lookup_number(col.values)
        else:
            values = col.values
            if np.isinf(values).any():
                _raise_inf(col.name)
            codes = self.lookup_number(values)
            codes[np.isnan(values)] = CODE_MISSING
        if col.missing is not None:
            codes[col.missing] = CODE_MISSING
        return codes


def _as_index(values: np.ndarray) -> pd.Index:
    """Wrap an array as an Index without copying it or inferring another dtype."""
    return pd.Index(values, dtype=values.dtype, copy=False)


def _number_text(values: np.ndarray) -> np.ndarray:
    """Canonical text of numbers: integral values without a decimal point."""
    if values.dtype.kind in "iu":
        return values.astype(str).astype(object)
    v = values.astype(np.float64)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(v) & (np.floor(v) == v) & (np.abs(v) < _INT64_LIMIT)
    text = v.astype(str).astype(object)
    if integral.any():
        text[integral] = v[integral].astype(np.int64).astype(str).astype(object)
    return text


# --------------------------------------------------------------------------------------
# TableEncoder
# --------------------------------------------------------------------------------------


def _resolve_categorical(spec: object, table: _Table) -> list[int] | None:
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
                f"X has columns: {_short_list(table.names)}."
            )
        return sorted({position[v] for v in items})
    raise ValueError(
        f"categorical_features must be {expected}; got a list mixing types: {items[:10]}."
    )


def _short_list(names: list[str], limit: int = 20) -> str:
    if len(names) <= limit:
        return str(names)
    return str(names[:limit])[:-1] + f", ... ({len(names) - limit} more)]"


def _infer_kind(col: _Col, from_frame: bool) -> tuple[str, bool]:
    """Kind under "from_dtype" and whether it was decided by inspecting values."""
    if col.form in ("bool", "int", "float"):
        return "numeric", False
    if col.form == "category" or from_frame:
        return "categorical", False
    inferred = _check_object_types(col.values, col.name)
    return ("numeric" if inferred in _INFERRED_NUMBERS else "categorical"), True


def _json_scalar(v: object) -> object:
    if isinstance(v, np.generic):
        return v.item()
    return v


class TableEncoder:
    """Encode raw tables into numeric and categorical-code arrays.

    Parameters
    ----------
    categorical_features : "from_dtype", None, list of str, list of int or array of bool, \
default="from_dtype"
        Which columns are categorical. ``"from_dtype"`` decides from the
        dtypes (see the module documentation); ``None`` or an empty list makes
        every column numeric; names (DataFrame input only), positions or a
        boolean mask of length ``n_features`` list the categorical columns,
        all others being numeric.

    Attributes
    ----------
    feature_names : list of str
        Column names as strings (``"x0", "x1", ...`` for input without names).
    has_feature_names : bool
        Whether the fitted input was a DataFrame whose column names are all strings.
    n_features : int
        Number of input columns.
    kinds : list of str
        ``"numeric"`` or ``"categorical"`` per input column.
    numeric_columns, categorical_columns : list of int
        Positions of the numeric / categorical input columns, i.e. the input
        column of each column of ``EncodedTable.numeric`` / ``EncodedTable.codes``.
    categories : list of list
        Vocabulary per categorical column (bools, then numbers, then strings,
        each sorted).
    cardinalities : list of int
        ``len(vocabulary) + 2`` per categorical column.
    numeric_mean, numeric_std : numpy.ndarray
        float64 mean and population standard deviation per numeric column,
        ignoring NaN; ``std`` is 1.0 for constant or empty columns, ``mean``
        is 0.0 for empty columns.
    numeric_min, numeric_max : numpy.ndarray
        float64 extremes per numeric column (NaN when the column had no values).
    numeric_missing : numpy.ndarray
        bool per numeric column: whether it had missing values.
    n_rows_seen : int
        Number of rows fitted.
    """

    feature_names: list[str]
    has_feature_names: bool
    n_features: int
    kinds: list[str]
    numeric_columns: list[int]
    categorical_columns: list[int]
    categories: list[list[Category]]
    cardinalities: list[int]
    numeric_mean: np.ndarray
    numeric_std: np.ndarray
    numeric_min: np.ndarray
    numeric_max: np.ndarray
    numeric_missing: np.ndarray
    n_rows_seen: int

    _FITTED_ATTRIBUTES: ClassVar[tuple[str, ...]] = (
        "feature_names",
        "has_feature_names",
        "n_features",
        "kinds",
        "numeric_columns",
        "categorical_columns",
        "categories",
        "cardinalities",
        "numeric_mean",
        "numeric_std",
        "numeric_min",
        "numeric_max",
        "numeric_missing",
        "n_rows_seen",
    )

    def __init__(self, *, categorical_features: object = "from_dtype") -> None:
        self.categorical_features = categorical_features
        self._reset()

    def __repr__(self) -> str:
        return f"TableEncoder(categorical_features={self.categorical_features!r})"

    # ---- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        for attr in self._FITTED_ATTRIBUTES:
            self.__dict__.pop(attr, None)
        self._vocab_keys: list[set[tuple[int, Category]]] = []
        self._stats: tuple[np.ndarray, ...] = _empty_stats(0)
        self._lookups: list[_Lookup] | None = None

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` or :meth:`partial_fit` has been called."""
        return "kinds" in self.__dict__

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise EncoderNotFittedError(
                "This TableEncoder is not fitted yet; call fit or partial_fit first."
            )

    def _finalize(self) -> None:
        self.categories = [[v for _, v in sorted(keys)] for keys in self._vocab_keys]
        self.cardinalities = [len(c) + CODE_OFFSET for c in self.categories]
        count, mean, m2, lo, hi = self._stats
        has = count > 0
        self.numeric_mean = np.where(has, mean, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            std = np.sqrt(m2 / np.maximum(count, 1.0))
        constant = ~has | (lo >= hi) | ~np.isfinite(std) | (std <= 0.0)
        self.numeric_std = np.where(constant, 1.0, std)
        self.numeric_min = np.where(has, lo, np.nan)
        self.numeric_max = np.where(has, hi, np.nan)
        self.numeric_missing = count < self.n_rows_seen
        self._lookups = None

    def _get_lookups(self) -> list[_Lookup]:
        if self._lookups is None:
            self._lookups = [_Lookup(vocab) for vocab in self.categories]
        return self._lookups

    # ---- fitting -------------------------------------------------------------------

    def fit(self, X: object) -> TableEncoder:
        """Learn column kinds, vocabularies and numeric statistics from ``X``.

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            The training table (at least one row and one column).

        Returns
        -------
        TableEncoder
            ``self``.

        Raises
        ------
        ValueError
            For malformed input (not 2-D, no rows or columns, duplicated
            names, bad ``categorical_features``, infinite or out-of-range
            values, non-numeric values in a numeric column).
        TypeError
            For sparse matrices and datetime-like, complex or bytes columns.
        """
        self._reset()
        self._fit_table(_as_table(X))
        return self

    def partial_fit(self, X: object) -> TableEncoder:
        """Update the encoder with one chunk of rows.

        The first call decides the columns and their kinds; later calls must
        have the same columns (matched as in :meth:`transform`) and kinds.
        Any sequence of chunks gives the same state as :meth:`fit` on their
        concatenation (statistics to rounding error).

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            A chunk. Chunks with 0 rows are accepted once the encoder is fitted.

        Returns
        -------
        TableEncoder
            ``self``.

        Raises
        ------
        ValueError
            As :meth:`fit`, and when a chunk's columns or column kinds differ
            from the first chunk.
        TypeError
            As :meth:`fit`.
        """
        self._fit_table(_as_table(X))
        return self

    def fit_transform(self, X: object) -> EncodedTable:
        """Fit on ``X`` and return its encoding.

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            The training table.

        Returns
        -------
        EncodedTable
            Same as ``fit(X).transform(X)``.
        """
        self._reset()
        table = _as_table(X)
        numeric, cols = self._fit_table(table)
        return EncodedTable(numeric, self._encode_codes(cols, table.n_rows))

    def _fit_table(self, table: _Table) -> tuple[np.ndarray, list[_Col]]:
        if self.is_fitted:
            return self._update(table)
        if table.n_rows == 0:
            raise ValueError(
                f"Found 0 rows (shape {(0, table.n_cols)}); at least 1 row is required to fit."
            )
        try:
            self._init_schema(table)
            return self._update(table)
        except BaseException:
            self._reset()  # a failed first fit leaves the encoder unfitted
            raise

    def _update(self, table: _Table) -> tuple[np.ndarray, list[_Col]]:
        """Add one chunk to the fitted state; the state is unchanged if this raises."""
        positions = self._match_columns(table)
        cols = [
            _column(table, p, name) for p, name in zip(positions, self.feature_names, strict=True)
        ]
        self._check_kinds(table, cols)
        numeric = self._encode_numeric(table, positions, cols)
        chunk_stats = _block_stats(numeric)
        chunk_keys: list[set[tuple[int, Category]]] = []
        for j in self.categorical_columns:
            keys: set[tuple[int, Category]] = set()
            _vocab_update(keys, cols[j])
            chunk_keys.append(keys)
        for keys, new in zip(self._vocab_keys, chunk_keys, strict=True):
            keys.update(new)
        self._stats = _merge_stats(self._stats, chunk_stats)
        self.n_rows_seen += table.n_rows
        self._finalize()
        return numeric, cols

    def _init_schema(self, table: _Table) -> None:
        cols = [_column(table, j, name) for j, name in enumerate(table.names)]
        declared = _resolve_categorical(self.categorical_features, table)
        if declared is None:
            kinds = [_infer_kind(col, table.frame is not None)[0] for col in cols]
        else:
            chosen = set(declared)
            kinds = ["categorical" if j in chosen else "numeric" for j in range(table.n_cols)]
        self.feature_names = list(table.names)
        self.has_feature_names = table.has_names
        self.n_features = table.n_cols
        self.kinds = kinds
        self.numeric_columns = [j for j, k in enumerate(kinds) if k == "numeric"]
        self.categorical_columns = [j for j, k in enumerate(kinds) if k == "categorical"]
        self.n_rows_seen = 0
        self._vocab_keys = [set() for _ in self.categorical_columns]
        self._stats = _empty_stats(len(self.numeric_columns))

    def _check_kinds(self, table: _Table, cols: list[_Col]) -> None:
        if self.n_rows_seen == 0 or not isinstance(self.categorical_features, str):
            return  # explicit kinds cannot change; empty chunks carry no kinds
        for col, kind in zip(cols, self.kinds, strict=True):
            new_kind, by_value = _infer_kind(col, table.frame is not None)
            if new_kind == kind or (by_value and kind == "categorical"):
                continue
            if col.missing_mask().all():
                continue
            raise ValueError(
                f"partial_fit: column {col.name!r} would be {new_kind} in this chunk but was "
                f"{kind} in the first chunk; column kinds are decided on the first chunk. "
                "Convert the chunk's dtypes or pass categorical_features explicitly."
            )

    # ---- transforming --------------------------------------------------------------

    def transform(self, X: object) -> EncodedTable:
        """Encode ``X`` with the fitted state.

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            A table with the fitted columns (by name for a DataFrame when the
            encoder was fitted with feature names, otherwise by position).
            Zero rows are allowed.

        Returns
        -------
        EncodedTable
            The numeric block and the category codes.

        Raises
        ------
        EncoderNotFittedError
            If the encoder is not fitted.
        ValueError
            For mismatched columns, infinite or out-of-range values and
            non-numeric values in numeric columns.
        TypeError
            For sparse matrices and datetime-like or complex columns.
        """
        self._check_fitted()
        table = _as_table(X)
        positions = self._match_columns(table)
        cols = [
            _column(table, p, name) for p, name in zip(positions, self.feature_names, strict=True)
        ]
        numeric = self._encode_numeric(table, positions, cols)
        return EncodedTable(numeric, self._encode_codes(cols, table.n_rows))

    def _match_columns(self, table: _Table) -> list[int]:
        """Position in ``table`` of each fitted column."""
        if self.has_feature_names and table.frame is not None:
            position = {name: j for j, name in enumerate(table.names)}
            missing = [name for name in self.feature_names if name not in position]
            fitted = set(self.feature_names)
            unexpected = [name for name in table.names if name not in fitted]
            if missing or unexpected:
                parts = []
                if missing:
                    parts.append(f"missing columns: {_short_list(missing)}")
                if unexpected:
                    parts.append(f"unexpected columns: {_short_list(unexpected)}")
                raise ValueError(
                    "The columns of X do not match those seen at fit; " + "; ".join(parts) + "."
                )
            return [position[name] for name in self.feature_names]
        if table.n_cols != self.n_features:
            raise ValueError(
                f"X has {table.n_cols} features, but the encoder was fitted with "
                f"{self.n_features} features."
            )
        return list(range(self.n_features))

    def _encode_numeric(self, table: _Table, positions: list[int], cols: list[_Col]) -> np.ndarray:
        names = [self.feature_names[j] for j in self.numeric_columns]
        arr = table.array
        if (
            arr is not None
            and arr.dtype.kind in "biuf"
            and len(self.numeric_columns) == table.n_cols
            and positions == list(range(table.n_cols))
        ):
            with np.errstate(over="ignore"):
                out = np.asarray(arr, dtype=np.float32, order="C")
            if np.shares_memory(out, arr):  # float32 C-ordered input: no copy of a large table,
                out = out.view()  # but a read-only view, so the caller's array stays untouched
                out.flags.writeable = False
            if arr.dtype.kind == "f" and arr.dtype.itemsize > 4:
                _check_finite_block(out, [arr[:, j] for j in range(arr.shape[1])], names)
            elif arr.dtype.kind == "f":
                _check_finite_block(out, [out[:, j] for j in range(out.shape[1])], names)
            return out
        sources = [_numeric_values(cols[j]) for j in self.numeric_columns]
        out = np.empty((table.n_rows, len(sources)), dtype=np.float32)
        check = any(src.dtype.kind == "f" for src in sources)
        if _fill_columns(out, sources, check_inf=check):
            _check_finite_block(out, sources, names)
        return out

    def _encode_codes(self, cols: list[_Col], n: int) -> np.ndarray:
        lookups = self._get_lookups()
        sources = [lookups[k].encode(cols[j]) for k, j in enumerate(self.categorical_columns)]
        out = np.empty((n, len(sources)), dtype=np.int64)
        _fill_columns(out, sources)
        return out

    # ---- serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return the fitted state as JSON-serialisable plain Python data.

        Returns
        -------
        dict
            Holds ``"format"``, ``"version"``, the constructor parameter, the
            column description, the vocabularies with the type of each entry
            (``"bool"``, ``"int"``, ``"float"`` or ``"str"``) and the numeric
            statistics (``null`` where undefined). ``json.dumps`` accepts it.

        Raises
        ------
        EncoderNotFittedError
            If the encoder is not fitted.
        """
        self._check_fitted()
        spec = self.categorical_features
        if isinstance(spec, (np.ndarray, pd.Index, pd.Series)):
            spec = np.asarray(spec).tolist()
        elif isinstance(spec, (tuple, set, frozenset)):
            spec = list(spec)
        if isinstance(spec, list):
            spec = [_json_scalar(v) for v in spec]
        count, _, m2, _, _ = self._stats

        def floats(a: np.ndarray) -> list[float | None]:
            return [float(v) if np.isfinite(v) else None for v in a]

        return {
            "format": _STATE_FORMAT,
            "version": STATE_VERSION,
            "categorical_features": spec,
            "feature_names": list(self.feature_names),
            "has_feature_names": bool(self.has_feature_names),
            "n_features": int(self.n_features),
            "kinds": list(self.kinds),
            "numeric_columns": list(self.numeric_columns),
            "categorical_columns": list(self.categorical_columns),
            "categories": [list(c) for c in self.categories],
            "category_types": [[_type_name(v) for v in c] for c in self.categories],
            "cardinalities": list(self.cardinalities),
            "codes": {"missing": CODE_MISSING, "unseen": CODE_UNSEEN, "offset": CODE_OFFSET},
            "numeric_mean": floats(self.numeric_mean),
            "numeric_std": floats(self.numeric_std),
            "numeric_min": floats(self.numeric_min),
            "numeric_max": floats(self.numeric_max),
            "numeric_missing": [bool(v) for v in self.numeric_missing],
            "numeric_count": [int(v) for v in count],
            "numeric_m2": floats(m2),
            "n_rows_seen": int(self.n_rows_seen),
        }

    @classmethod
    def from_dict(cls, d: object) -> TableEncoder:
        """Rebuild a fitted encoder from :meth:`to_dict` output.

        Parameters
        ----------
        d : dict
            State as returned by :meth:`to_dict`, possibly after a JSON round trip.

        Returns
        -------
        TableEncoder
            A fitted encoder whose transforms equal the original's; it can
            continue with :meth:`partial_fit`.

        Raises
        ------
        ValueError
            If the state is malformed or inconsistent; the message starts with
            ``"Invalid TableEncoder state"``.
        """
        return _state_from_dict(cls, d)


# --------------------------------------------------------------------------------------
# from_dict validation
# --------------------------------------------------------------------------------------


def _bad_state(detail: str) -> ValueError:
    return ValueError(f"Invalid TableEncoder state: {detail}")


def _get(d: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in d:
        raise _bad_state(f"missing key {key!r}")
    value = d[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad_state(f"{key!r} must be {what}, got {type(value).__name__}")
    return value


def _list_of(
    d: dict[str, Any], key: str, length: int, check: Any, what: str, allow_none: bool = False
) -> list[Any]:
    values = _get(d, key, list, "a list")
    if len(values) != length:
        raise _bad_state(f"{key!r} must have {length} entries, got {len(values)}")
    for v in values:
        if v is None and allow_none:
            continue
        if not check(v):
            raise _bad_state(f"{key!r} must contain {what}, got {v!r}")
    return list(values)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_finite_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_category(v: object, type_name: object, where: str) -> Category:
    if type_name not in _TYPE_NAMES:
        raise _bad_state(f"{where}: unknown category type {type_name!r}")
    ok = (
        (type_name == "bool" and isinstance(v, bool))
        or (type_name == "int" and _is_int(v))
        or (
            type_name == "float"
            and isinstance(v, float)
            and math.isfinite(v)
            and not (v.is_integer() and abs(v) < _INT64_LIMIT)
        )
        or (type_name == "str" and isinstance(v, str))
    )
    if not ok:
        raise _bad_state(f"{where}: value {v!r} is not a valid {type_name} category")
    assert isinstance(v, (bool, int, float, str))
    return v


def _state_from_dict(cls: type[TableEncoder], d: object) -> TableEncoder:
    if not isinstance(d, dict):
        raise _bad_state(f"expected a dict, got {type(d).__name__}")
    if d.get("format") != _STATE_FORMAT:
        raise _bad_state(f"'format' must be {_STATE_FORMAT!r}, got {d.get('format')!r}")
    version = _get(d, "version", int, "an integer")
    if version != STATE_VERSION:
        raise _bad_state(f"unsupported version {version} (this library reads {STATE_VERSION})")
    n = _get(d, "n_features", int, "an integer")
    if n < 1:
        raise _bad_state(f"'n_features' must be at least 1, got {n}")
    names = _list_of(d, "feature_names", n, lambda v: isinstance(v, str), "strings")
    if len(set(names)) != n:
        raise _bad_state("'feature_names' contains duplicates")
    has_names = _get(d, "has_feature_names", bool, "a bool")
    kinds = _list_of(
        d, "kinds", n, lambda v: v in ("numeric", "categorical"), "'numeric' or 'categorical'"
    )
    num_cols = [j for j, k in enumerate(kinds) if k == "numeric"]
    cat_cols = [j for j, k in enumerate(kinds) if k == "categorical"]
    for key, expected in (("numeric_columns", num_cols), ("categorical_columns", cat_cols)):
        if _get(d, key, list, "a list") != expected:
            raise _bad_state(f"{key!r} does not match 'kinds' (expected {expected})")
    n_cat = len(cat_cols)
    raw_cats = _list_of(d, "categories", n_cat, lambda v: isinstance(v, list), "lists")
    raw_types = _list_of(d, "category_types", n_cat, lambda v: isinstance(v, list), "lists")
    categories: list[list[Category]] = []
    vocab_keys: list[set[tuple[int, Category]]] = []
    for k, (values, types) in enumerate(zip(raw_cats, raw_types, strict=True)):
        where = f"categories of column {names[cat_cols[k]]!r}"
        if len(values) != len(types):
            raise _bad_state(f"{where}: {len(values)} values but {len(types)} types")
        vocab = [_check_category(v, t, where) for v, t in zip(values, types, strict=True)]
        keys = [_value_key(v) for v in vocab]
        if len(set(keys)) != len(keys):
            raise _bad_state(f"{where}: duplicated values")
        if keys != sorted(keys):
            raise _bad_state(f"{where}: values are not in canonical order")
        categories.append(vocab)
        vocab_keys.append(set(keys))
    cards = _list_of(d, "cardinalities", n_cat, _is_int, "integers")
    if cards != [len(c) + CODE_OFFSET for c in categories]:
        raise _bad_state("'cardinalities' must be len(categories) + 2 per column")
    codes = d.get("codes")
    if codes != {"missing": CODE_MISSING, "unseen": CODE_UNSEEN, "offset": CODE_OFFSET}:
        raise _bad_state(f"unsupported 'codes' convention {codes!r}")
    n_rows = _get(d, "n_rows_seen", int, "an integer")
    if n_rows < 1:
        raise _bad_state(f"'n_rows_seen' must be at least 1, got {n_rows}")
    n_num = len(num_cols)
    count = _list_of(d, "numeric_count", n_num, lambda v: _is_int(v) and 0 <= v <= n_rows, "ints")
    m2 = _list_of(d, "numeric_m2", n_num, lambda v: _is_finite_number(v) and v >= 0, "numbers >= 0")
    mean = _list_of(d, "numeric_mean", n_num, _is_finite_number, "finite numbers")
    std = _list_of(d, "numeric_std", n_num, lambda v: _is_finite_number(v) and v > 0, "numbers > 0")
    lo = _list_of(d, "numeric_min", n_num, _is_finite_number, "finite numbers", allow_none=True)
    hi = _list_of(d, "numeric_max", n_num, _is_finite_number, "finite numbers", allow_none=True)
    missing = _list_of(d, "numeric_missing", n_num, lambda v: isinstance(v, bool), "bools")
    for j in range(n_num):
        where = f"statistics of column {names[num_cols[j]]!r}"
        if (count[j] == 0) != (lo[j] is None) or (count[j] == 0) != (hi[j] is None):
            raise _bad_state(f"{where}: min/max must be null exactly when the count is 0")
        if lo[j] is not None and hi[j] is not None and lo[j] > hi[j]:
            raise _bad_state(f"{where}: min > max")
        if missing[j] != (count[j] < n_rows):
            raise _bad_state(f"{where}: 'numeric_missing' disagrees with the count")

    enc = cls(categorical_features=d.get("categorical_features", "from_dtype"))
    enc.feature_names = names
    enc.has_feature_names = has_names
    enc.n_features = n
    enc.kinds = kinds
    enc.numeric_columns = num_cols
    enc.categorical_columns = cat_cols
    enc.n_rows_seen = n_rows
    enc._vocab_keys = vocab_keys
    enc._stats = (
        np.asarray(count, dtype=np.float64),
        np.asarray(mean, dtype=np.float64),
        np.asarray(m2, dtype=np.float64),
        np.array([np.inf if v is None else v for v in lo], dtype=np.float64),
        np.array([-np.inf if v is None else v for v in hi], dtype=np.float64),
    )
    enc._finalize()
    # Keep the stored std (it is what consumers of the JSON spec use).
    enc.numeric_std = np.asarray(std, dtype=np.float64).reshape(-1)
    return enc


# --------------------------------------------------------------------------------------
# Display
# --------------------------------------------------------------------------------------


def describe_columns(enc: TableEncoder) -> list[tuple[str, str, int]]:
    """Describe the columns of a fitted encoder.

    Parameters
    ----------
    enc : TableEncoder
        A fitted encoder.

    Returns
    -------
    list of (str, str, int)
        ``(name, kind, n_categories)`` per input column in original order,
        ``n_categories`` being the vocabulary size of a categorical column
        (without the missing/unseen slots) and 0 for a numeric one.
    """
    enc._check_fitted()
    sizes = dict(zip(enc.categorical_columns, (len(c) for c in enc.categories), strict=True))
    return [
        (name, kind, sizes.get(j, 0))
        for j, (name, kind) in enumerate(zip(enc.feature_names, enc.kinds, strict=True))
    ]
