"""DataFrames from other libraries: polars, pyarrow and anything speaking an Arrow protocol.

:func:`as_pandas` is the one place where a table that is not a pandas DataFrame or an array
becomes one: a polars ``DataFrame``, a pyarrow ``Table`` or ``RecordBatch``, and any object with
the Arrow PyCapsule interface (``__arrow_c_stream__`` / ``__arrow_c_array__``: duckdb, ibis,
...) or the dataframe-interchange protocol (``__dataframe__``). The conversion is pyarrow's own
(``pyarrow.table`` over the capsule, ``pyarrow.interchange.from_dataframe``, then
``Table.to_pandas``), so there is no per-library code here, and the result is encoded exactly as
the equivalent pandas frame would be:

* column names are kept (Arrow names are strings, so the model records ``feature_names_in_``
  and matches columns by name, in any order, like a pandas frame);
* dictionary columns (polars ``Categorical`` / ``Enum``) become pandas ``category`` with their
  dictionary as the declared categories;
* string columns become pandas strings (categorical);
* boolean and integer columns become pandas' nullable ``boolean`` / ``Int*`` / ``UInt*``
  dtypes, so a null stays missing and the column stays numeric (pyarrow's default would turn
  a boolean column with nulls into an object column, and an integer one into floats);
* a column of Arrow type ``null`` (no values at all) becomes an object column of ``None``, as
  in pandas; temporal, decimal and nested columns reach the encoder's usual errors.

A polars ``LazyFrame`` (or any lazy frame with ``collect()``) is refused with a ``TypeError``
asking for ``.collect()``: materialising a query plan is the caller's decision, and a model
would otherwise run it again at every ``predict``.

pyarrow is imported only when such a table arrives; it is not needed for pandas or numpy input.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def _is_foreign_frame(X: object) -> bool:
    """Whether ``X`` offers a table through an Arrow or interchange protocol."""
    return any(
        hasattr(X, attr) for attr in ("__arrow_c_stream__", "__arrow_c_array__", "__dataframe__")
    )


def _is_lazy_frame(X: object) -> bool:
    kind = type(X)
    return (
        kind.__name__ == "LazyFrame" or kind.__module__.startswith("polars.lazyframe")
    ) and callable(getattr(X, "collect", None))


def as_pandas(X: Any) -> Any:
    """Return ``X`` as a pandas DataFrame when it is a table from another library.

    Parameters
    ----------
    X : object
        Any input. pandas objects, numpy arrays, lists and everything else without an Arrow
        or dataframe-interchange protocol are returned unchanged (the same object).

    Returns
    -------
    pandas.DataFrame or object
        A pandas DataFrame with the same column names, order and values (dtypes mapped as in
        the module documentation), or ``X`` itself.

    Raises
    ------
    TypeError
        For a lazy frame (call ``.collect()`` first).
    ValueError
        For an Arrow object that is not a table (a polars or pyarrow Series / Array).
    ImportError
        When the conversion needs pyarrow and it is not installed.
    """
    if isinstance(X, (pd.DataFrame, pd.Series)):
        return X
    if _is_lazy_frame(X):
        raise TypeError(
            f"X is a lazy frame ({type(X).__module__}.{type(X).__name__}); materialise it "
            "first with X.collect()."
        )
    if not _is_foreign_frame(X):
        return X
    return _arrow_table(X).to_pandas(types_mapper=_nullable_dtype)


def _arrow_table(X: Any) -> Any:
    """The pyarrow Table behind ``X``."""
    try:
        import pyarrow as pa
        import pyarrow.interchange as pa_interchange
    except ImportError as exc:  # pragma: no cover - pyarrow is installed with the dev extra
        raise ImportError(
            f"Reading a {type(X).__module__}.{type(X).__name__} needs pyarrow "
            "(pip install pyarrow); or convert the table to pandas first."
        ) from exc
    if isinstance(X, pa.Table):
        return X
    if isinstance(X, pa.RecordBatch):
        return pa.Table.from_batches([X])
    if hasattr(X, "__arrow_c_stream__") or hasattr(X, "__arrow_c_array__"):
        try:
            return pa.table(X)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            if hasattr(X, "__dataframe__"):  # a pyarrow too old for the capsule (< 15)
                return pa_interchange.from_dataframe(X)
            raise ValueError(
                "Expected a 2-D table (DataFrame, 2-D array or list of rows), got a "
                f"{type(X).__module__}.{type(X).__name__} that pyarrow does not read as a "
                f"table ({exc}); for a single column (Series, Array) use .to_frame()."
            ) from exc
    return pa_interchange.from_dataframe(X)


_NULLABLE_INTS: dict[tuple[bool, int], pd.api.extensions.ExtensionDtype] = {
    (False, 8): pd.Int8Dtype(),
    (False, 16): pd.Int16Dtype(),
    (False, 32): pd.Int32Dtype(),
    (False, 64): pd.Int64Dtype(),
    (True, 8): pd.UInt8Dtype(),
    (True, 16): pd.UInt16Dtype(),
    (True, 32): pd.UInt32Dtype(),
    (True, 64): pd.UInt64Dtype(),
}


def _nullable_dtype(arrow_type: Any) -> pd.api.extensions.ExtensionDtype | None:
    """pandas' nullable dtype for Arrow booleans and integers; None keeps pyarrow's default."""
    import pyarrow as pa

    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    if pa.types.is_integer(arrow_type):
        return _NULLABLE_INTS[pa.types.is_unsigned_integer(arrow_type), arrow_type.bit_width]
    return None
