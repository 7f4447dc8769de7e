"""Tests for tabsparse.data.frames: polars, pyarrow and protocol tables encode as pandas does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from data_helpers import assert_same_encoding

from tabsparse.data import TableEncoder, as_pandas

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")


def polars_frame() -> Any:
    """One column of every family a polars user has, with nulls."""
    return pl.DataFrame(
        {
            "f": [1.5, None, -3.0, 2.0],
            "i": [10, None, 30, 40],
            "u8": pl.Series([1, 2, 3, 250], dtype=pl.UInt8),
            "b": [True, None, False, True],
            "s": ["x", "y", None, "x"],
            "cat": pl.Series(["u", "v", None, "u"], dtype=pl.Categorical),
            "enum": pl.Series(["u", "v", None, "u"], dtype=pl.Enum(["v", "u", "w"])),
            "null": pl.Series([None, None, None, None], dtype=pl.Null),
        }
    )


def pandas_frame() -> pd.DataFrame:
    """The same table written with pandas dtypes."""
    return pd.DataFrame(
        {
            "f": [1.5, np.nan, -3.0, 2.0],
            "i": pd.array([10, None, 30, 40], dtype="Int64"),
            "u8": np.array([1, 2, 3, 250], dtype=np.uint8),
            "b": pd.array([True, None, False, True], dtype="boolean"),
            "s": pd.Series(["x", "y", None, "x"], dtype="str"),
            "cat": pd.Categorical(["u", "v", None, "u"]),
            "enum": pd.Categorical(["u", "v", None, "u"], categories=["v", "u", "w"]),
            "null": pd.Series([None, None, None, None], dtype=object),
        }
    )


def assert_same_fit(a: TableEncoder, b: TableEncoder, rtol: float = 0.0) -> None:
    assert a.feature_names == b.feature_names
    assert a.has_feature_names is b.has_feature_names is True
    assert a.kinds == b.kinds
    assert a.categories == b.categories
    np.testing.assert_allclose(a.numeric_mean, b.numeric_mean, rtol=rtol)
    np.testing.assert_allclose(a.numeric_std, b.numeric_std, rtol=rtol)


class _StreamOnly:
    """An object offering its table only through the Arrow PyCapsule stream."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)


class _InterchangeOnly:
    """An object offering its table only through the dataframe-interchange protocol."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __dataframe__(self, nan_as_null: bool = False, allow_copy: bool = True) -> object:
        return self._table.__dataframe__(nan_as_null=nan_as_null, allow_copy=allow_copy)


def foreign_tables() -> dict[str, Any]:
    table = polars_frame().to_arrow()
    return {
        "polars": polars_frame(),
        "pyarrow.Table": table,
        "pyarrow.RecordBatch": table.to_batches()[0],
        "arrow stream": _StreamOnly(table),
        # the interchange protocol has no null type: that column is left out
        "interchange": _InterchangeOnly(table.drop_columns(["null"])),
    }


@pytest.mark.parametrize("kind", list(foreign_tables()))
def test_foreign_tables_encode_exactly_as_pandas(kind: str) -> None:
    X = foreign_tables()[kind]
    df = pandas_frame()
    n_cat = 4
    if kind == "interchange":
        df, n_cat = df.drop(columns="null"), 3
    enc = TableEncoder()
    out = enc.fit_transform(X)
    ref = TableEncoder()
    expected = ref.fit_transform(df)
    assert_same_fit(enc, ref)
    assert enc.kinds == ["numeric"] * 4 + ["categorical"] * n_cat
    assert enc.categories == [["x", "y"], ["u", "v"], ["u", "v", "w"], []][:n_cat]
    assert_same_encoding(out, expected)
    # a model fitted on either transforms the other identically
    assert_same_encoding(ref.transform(X), expected)
    assert_same_encoding(enc.transform(df), expected)


def test_nullable_dtypes_keep_nulls_missing_and_columns_numeric() -> None:
    df = as_pandas(polars_frame())
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(polars_frame().columns)
    assert str(df["i"].dtype) == "Int64"
    assert str(df["u8"].dtype) == "UInt8"
    assert str(df["b"].dtype) == "boolean"
    assert isinstance(df["enum"].dtype, pd.CategoricalDtype)
    assert list(df["enum"].cat.categories) == ["v", "u", "w"]
    out = TableEncoder().fit_transform(polars_frame())
    np.testing.assert_array_equal(out.numeric[1], [np.nan, np.nan, 2.0, np.nan])
    # big integers stay exact up to the float32 cast (no detour through float64 with NaN)
    big = pl.DataFrame({"n": [2**62 + 1, None]})
    assert as_pandas(big)["n"].iloc[0] == 2**62 + 1


def test_reordered_frame_is_matched_by_name_as_for_pandas() -> None:
    enc = TableEncoder().fit(polars_frame())
    expected = enc.transform(polars_frame())
    reordered = polars_frame().select(list(reversed(polars_frame().columns)))
    assert_same_encoding(enc.transform(reordered), expected)
    assert_same_encoding(enc.transform(reordered.to_arrow()), expected)
    from_pandas = TableEncoder().fit(pandas_frame())
    assert_same_encoding(from_pandas.transform(reordered), expected)
    with pytest.raises(ValueError, match=r"missing columns: \['null'\]"):
        enc.transform(polars_frame().drop("null"))


def test_partial_fit_over_polars_chunks_equals_fit() -> None:
    df = polars_frame()
    streamed = TableEncoder().partial_fit(df.slice(0, 2)).partial_fit(df.slice(2, 2))
    assert_same_fit(streamed, TableEncoder().fit(df), rtol=1e-12)


def test_lazy_frame_is_refused_with_a_hint() -> None:
    with pytest.raises(TypeError, match=r"lazy frame .*LazyFrame.*X\.collect\(\)"):
        TableEncoder().fit(polars_frame().lazy())


@pytest.mark.parametrize(
    "column", [pl.Series("f", [1.0, 2.0]), pa.chunked_array([[1.0, 2.0]])], ids=["polars", "arrow"]
)
def test_one_dimensional_arrow_objects_are_refused(column: Any) -> None:
    with pytest.raises(ValueError, match=r"does not read as a table .*use \.to_frame\(\)"):
        TableEncoder().fit(column)


def test_unsupported_columns_raise_the_pandas_errors() -> None:
    from datetime import datetime

    df = pl.DataFrame({"t": [datetime(2020, 1, 1), datetime(2021, 1, 1)], "x": [1.0, 2.0]})
    with pytest.raises(TypeError, match="Column 't' has datetime values"):
        TableEncoder().fit(df)
    with pytest.raises(ValueError, match="duplicated column names"):
        TableEncoder().fit(pa.table([[1.0], [2.0]], names=["a", "a"]))


def test_other_inputs_are_returned_unchanged() -> None:
    for X in (pandas_frame(), np.zeros((2, 2)), [[1, 2]], pd.Series([1.0])):
        assert as_pandas(X) is X


def test_estimator_fitted_on_polars_records_names_and_matches_reordered_frames() -> None:
    from tabsparse import TabNetRegressor

    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {"a": rng.normal(size=200), "b": 5 * rng.normal(size=200), "c": rng.choice(["u", "v"], 200)}
    )
    y = 3 * X["a"] + (X["c"] == "u")
    P = pl.from_pandas(X)
    params: dict[str, Any] = {"max_epochs": 2, "random_state": 0, "verbose": 0}
    model = TabNetRegressor(**params).fit(P, y)
    assert list(model.feature_names_in_) == ["a", "b", "c"]
    pred = model.predict(P)
    np.testing.assert_array_equal(model.predict(P.select(["c", "b", "a"])), pred)
    np.testing.assert_array_equal(model.predict(P.to_arrow()), pred)
    np.testing.assert_array_equal(TabNetRegressor(**params).fit(X, y).predict(P), pred)
    with pytest.raises(ValueError, match=r"missing columns: \['c'\]"):
        model.predict(P.select(["a", "b"]))
