"""Tests for tabsparse.data.columns: column kinds, dtypes and categorical_features."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from data_helpers import mixed_frame

from tabsparse.data import (
    CODE_MISSING,
    CODE_UNSEEN,
    TableEncoder,
)

# --------------------------------------------------------------------------------------
# Kinds, dtypes and values
# --------------------------------------------------------------------------------------


def test_mixed_frame_kinds_vocabularies_and_codes() -> None:
    df = mixed_frame()
    enc = TableEncoder()
    out = enc.fit_transform(df)
    assert enc.kinds == ["numeric"] * 6 + ["categorical"] * 4
    assert enc.numeric_columns == [0, 1, 2, 3, 4, 5]
    assert enc.categorical_columns == [6, 7, 8, 9]
    assert enc.categories == [["x", "y"], ["p", "q"], [1, 2, "a"], ["u", "v", "w"]]
    assert enc.cardinalities == [4, 4, 5, 5]
    expected_numeric = np.array(
        [
            [1.5, 1, 1, 10, 0.5, 1],
            [np.nan, 2, 0, np.nan, 1.5, np.nan],
            [-3.0, 3, 1, 30, np.nan, 0],
            [2.0, 4, 1, 40, 2.5, 1],
        ],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(out.numeric, expected_numeric)
    np.testing.assert_array_equal(
        out.codes, [[2, 2, 2, 2], [3, 0, 4, 3], [0, 3, 0, 0], [2, 3, 3, 2]]
    )


def test_output_arrays_dtype_and_layout() -> None:
    out = TableEncoder().fit_transform(mixed_frame())
    assert out.numeric.dtype == np.float32 and out.numeric.flags.c_contiguous
    assert out.codes.dtype == np.int64 and out.codes.flags.c_contiguous
    assert out.numeric.shape == (4, 6) and out.codes.shape == (4, 4)
    assert len(out) == 4 and out.n_numeric == 6 and out.n_categorical == 4


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int8, np.int64, np.uint16, np.uint64, bool]
)
def test_numpy_dtypes_of_any_width_are_numeric(dtype: Any) -> None:
    values = np.array([[0, 1], [1, 0], [1, 1]], dtype=dtype)
    enc = TableEncoder()
    out = enc.fit_transform(values)
    assert enc.kinds == ["numeric", "numeric"]
    np.testing.assert_array_equal(out.numeric, values.astype(np.float32))
    assert out.codes.shape == (3, 0)


def test_object_array_columns_inspected_by_value() -> None:
    X = np.array(
        [[1, "a", None, "1.5", True], [2.5, "b", None, "2", False], [None, 3, None, None, None]],
        dtype=object,
    )
    enc = TableEncoder().fit(X)
    # numbers (+missing) -> numeric; any string -> categorical; all missing -> numeric;
    # numeric-looking strings stay strings; bools count as numbers
    assert enc.kinds == ["numeric", "categorical", "numeric", "categorical", "numeric"]
    assert enc.categories == [[3, "a", "b"], ["1.5", "2"]]
    out = enc.transform(X)
    np.testing.assert_array_equal(
        out.numeric, np.array([[1, np.nan, 1], [2.5, np.nan, 0], [np.nan] * 3], dtype=np.float32)
    )
    np.testing.assert_array_equal(out.codes, [[3, 2], [4, 3], [2, 0]])


def test_list_of_rows_keeps_python_types() -> None:
    rows = [[1, "a", 0.5], [2, 7, 1.5], [3, "a", None]]
    enc = TableEncoder().fit(rows)
    assert enc.kinds == ["numeric", "categorical", "numeric"]
    assert enc.categories == [[7, "a"]]  # 7 stays an int, not the string "7"
    assert enc.feature_names == ["x0", "x1", "x2"] and not enc.has_feature_names
    np.testing.assert_array_equal(enc.transform(rows).codes.ravel(), [3, 2, 3])


def test_string_numpy_array_is_categorical() -> None:
    X = np.array([["a", "1"], ["b", "2"]])
    enc = TableEncoder().fit(X)
    assert enc.kinds == ["categorical", "categorical"]
    assert enc.categories == [["a", "b"], ["1", "2"]]


def test_object_column_mixed_kinds_are_distinct_categories() -> None:
    df = pd.DataFrame({"m": pd.Series([1, "1", True, 1.0, 0, False, "a", 2.5, None], dtype=object)})
    enc = TableEncoder().fit(df)
    assert enc.categories == [[False, True, 0, 1, 2.5, "1", "a"]]
    codes = enc.transform(df).codes.ravel()
    np.testing.assert_array_equal(codes, [5, 7, 3, 5, 4, 2, 8, 6, 0])


def test_category_dtype_vocabulary_is_all_declared_categories_sorted() -> None:
    cat = pd.CategoricalDtype(["z", "b", "a"])
    df = pd.DataFrame({"c": pd.Series(["b", "b", None], dtype=cat)})
    enc = TableEncoder().fit(df)
    assert enc.categories == [["a", "b", "z"]]  # "a" and "z" never observed, still included
    np.testing.assert_array_equal(enc.transform(df).codes.ravel(), [3, 3, 0])


def test_missing_markers_in_object_columns() -> None:
    df = pd.DataFrame({"o": pd.Series(["a", None, np.nan, pd.NA, pd.NaT, "b"], dtype=object)})
    enc = TableEncoder().fit(df)
    assert enc.categories == [["a", "b"]]
    np.testing.assert_array_equal(enc.transform(df).codes.ravel(), [2, 0, 0, 0, 0, 3])


def test_unseen_and_missing_codes() -> None:
    enc = TableEncoder().fit(pd.DataFrame({"c": ["a", "b", "a"]}))
    out = enc.transform(pd.DataFrame({"c": ["b", "zzz", None, "a"]}))
    np.testing.assert_array_equal(out.codes.ravel(), [3, CODE_UNSEEN, CODE_MISSING, 2])
    # values of unexpected types (here unhashable lists) are unseen, not errors
    odd = pd.DataFrame({"c": pd.Series(["a", [1, 2], 3.5, None], dtype=object)})
    np.testing.assert_array_equal(enc.transform(odd).codes.ravel(), [2, 1, 1, 0])


def test_pandas_sparse_column_is_densified() -> None:
    df = pd.DataFrame({"s": pd.arrays.SparseArray([0.0, 0.0, 2.0, np.nan])})
    out = TableEncoder().fit_transform(df)
    np.testing.assert_array_equal(out.numeric.ravel(), np.array([0, 0, 2, np.nan], np.float32))


# --------------------------------------------------------------------------------------
# categorical_features
# --------------------------------------------------------------------------------------


def test_categorical_features_by_name() -> None:
    df = pd.DataFrame({"a": [1, 2, 2], "b": ["x", "y", "x"], "c": [0.5, 0.5, 1.0]})
    # "b" is not listed, so it is numeric, but its strings are not numbers
    with pytest.raises(ValueError, match=r"Column 'b' is numeric but contains non-numeric .*'x'"):
        TableEncoder(categorical_features=["a"]).fit(df)
    enc = TableEncoder(categorical_features=["a", "b"]).fit(df)
    assert enc.kinds == ["categorical", "categorical", "numeric"]
    assert enc.categories == [[1, 2], ["x", "y"]]


def test_categorical_features_by_index_negative_and_mask() -> None:
    X = np.array([[1.0, 5.0, 0.0], [2.0, 5.0, 1.0]])
    by_index = TableEncoder(categorical_features=[0, -1]).fit(X)
    by_mask = TableEncoder(categorical_features=np.array([True, False, True])).fit(X)
    assert by_index.kinds == by_mask.kinds == ["categorical", "numeric", "categorical"]
    assert by_index.categories == by_mask.categories == [[1, 2], [0, 1]]


@pytest.mark.parametrize("spec", [None, [], ()])
def test_categorical_features_none_makes_everything_numeric(spec: Any) -> None:
    df = pd.DataFrame({"s": ["1.5", "2", None], "o": pd.Series([1, True, 3], dtype=object)})
    enc = TableEncoder(categorical_features=spec)
    out = enc.fit_transform(df)
    assert enc.kinds == ["numeric", "numeric"]
    np.testing.assert_array_equal(
        out.numeric, np.array([[1.5, 1], [2, 1], [np.nan, 3]], dtype=np.float32)
    )


@pytest.mark.parametrize(
    ("spec", "X", "match"),
    [
        (["a"], np.zeros((2, 3)), r"contains column names \['a'\], but X is not a DataFrame"),
        (["zz"], pd.DataFrame({"a": [1], "b": [2]}), r"unknown column names: \['zz'\]"),
        ([7], np.zeros((2, 3)), r"index 7 is out of range for X with 3 features"),
        ([True, False], np.zeros((2, 3)), r"boolean mask of length 2, but X has 3 features"),
        ("a", pd.DataFrame({"a": [1]}), r"got the string 'a'.*pass a list"),
        ([0, "a"], pd.DataFrame({"a": [1]}), r"list mixing types: \[0, 'a'\]"),
        (3, np.zeros((2, 3)), r"categorical_features must be .*; got 3"),
    ],
)
def test_categorical_features_errors(spec: Any, X: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TableEncoder(categorical_features=spec).fit(X)


def test_numeric_column_declared_categorical_matches_ints_and_floats() -> None:
    enc = TableEncoder(categorical_features=[0]).fit(np.array([[1.0], [2.0], [np.nan], [2.0]]))
    assert enc.categories == [[1, 2]]
    assert all(type(v) is int for v in enc.categories[0])
    out = enc.transform(np.array([[1], [2], [3]]))  # ints now
    np.testing.assert_array_equal(out.codes.ravel(), [2, 3, CODE_UNSEEN])
    out = enc.transform(np.array([[2.0], [np.nan], [1.5]]))
    np.testing.assert_array_equal(out.codes.ravel(), [3, CODE_MISSING, CODE_UNSEEN])
