"""Tests for tabsparse.data: TableEncoder, EncodedTable and describe_columns."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabsparse.data import (
    CODE_MISSING,
    CODE_UNSEEN,
    EncodedTable,
    EncoderNotFittedError,
    TableEncoder,
    describe_columns,
)


def mixed_frame() -> pd.DataFrame:
    """A small frame with one column of every supported family."""
    return pd.DataFrame(
        {
            "f64": [1.5, np.nan, -3.0, 2.0],
            "i8": np.array([1, 2, 3, 4], dtype=np.int8),
            "b": [True, False, True, True],
            "I": pd.array([10, None, 30, 40], dtype="Int64"),
            "F": pd.array([0.5, 1.5, None, 2.5], dtype="Float64"),
            "nb": pd.array([True, None, False, True], dtype="boolean"),
            "s": pd.array(["x", "y", None, "x"], dtype="string"),
            "str": pd.Series(["p", None, "q", "q"], dtype="str"),
            "o": pd.Series([1, "a", None, 2.0], dtype=object),
            "c": pd.Categorical(["u", "v", None, "u"], categories=["v", "u", "w"]),
        }
    )


def assert_same_encoding(a: EncodedTable, b: EncodedTable) -> None:
    np.testing.assert_array_equal(a.numeric, b.numeric)
    np.testing.assert_array_equal(a.codes, b.codes)


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


# --------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------


def test_series_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"got a pandas Series.*to_frame\(\)"):
        TableEncoder().fit(pd.Series([1.0, 2.0]))


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4)])
def test_wrong_number_of_dimensions(shape: tuple[int, ...]) -> None:
    with pytest.raises(
        ValueError, match=r"Expected a 2-D table .*got an input of shape " + re.escape(str(shape))
    ):
        TableEncoder().fit(np.zeros(shape))


def test_ragged_rows_are_rejected() -> None:
    with pytest.raises(ValueError, match="Expected a 2-D table"):
        TableEncoder().fit([[1, 2], [3]])


def test_zero_rows_at_fit_rejected_but_fine_at_transform() -> None:
    with pytest.raises(ValueError, match="Found 0 rows"):
        TableEncoder().fit(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="Found 0 rows"):
        TableEncoder().fit(pd.DataFrame({"a": pd.Series([], dtype=float)}))
    enc = TableEncoder().fit(pd.DataFrame({"a": [1.0], "c": ["x"]}))
    out = enc.transform(pd.DataFrame({"a": pd.Series([], dtype=float), "c": []}))
    assert out.numeric.shape == (0, 1) and out.codes.shape == (0, 1)


def test_zero_columns_rejected() -> None:
    with pytest.raises(ValueError, match="got 0 columns"):
        TableEncoder().fit(np.zeros((3, 0)))
    with pytest.raises(ValueError, match="got 0 columns"):
        TableEncoder().fit(pd.DataFrame(index=[0, 1]))


def test_scipy_sparse_rejected() -> None:
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match=r"dense input is required.*toarray\(\)"):
        TableEncoder().fit(sparse.csr_matrix(np.eye(3)))


def test_duplicated_column_names_rejected() -> None:
    df = pd.DataFrame([[1, 2, 3, 4]], columns=["a", "b", "a", "b"])
    with pytest.raises(ValueError, match=r"duplicated column names: \['a', 'b'\]"):
        TableEncoder().fit(df)
    # names that collide once converted to strings
    with pytest.raises(ValueError, match=r"duplicated column names: \['1'\]"):
        TableEncoder().fit(pd.DataFrame([[1, 2]], columns=[1, "1"]))


def test_non_string_column_names() -> None:
    enc = TableEncoder().fit(pd.DataFrame({0: [1.0, 2.0], 1: ["a", "b"]}))
    assert enc.feature_names == ["0", "1"] and enc.has_feature_names is False
    enc = TableEncoder().fit(pd.DataFrame({"a": [1.0], 2: [3.0]}))
    assert enc.feature_names == ["a", "2"] and enc.has_feature_names is False
    enc = TableEncoder().fit(pd.DataFrame({"a": [1.0], "b": [3.0]}))
    assert enc.feature_names == ["a", "b"] and enc.has_feature_names is True


@pytest.mark.parametrize(
    ("column", "what"),
    [
        (pd.date_range("2020-01-01", periods=3), "datetime"),
        (pd.date_range("2020-01-01", periods=3, tz="UTC"), "datetime"),
        (pd.to_timedelta([1, 2, 3], unit="s"), "timedelta"),
        (pd.period_range("2020-01", periods=3, freq="M"), "period"),
        (pd.interval_range(0, 3), "interval"),
        (np.array([1 + 1j, 2, 3]), "complex"),
    ],
)
@pytest.mark.parametrize("spec", ["from_dtype", ["when"], None])
def test_unsupported_dtypes_raise_type_error(column: Any, what: str, spec: Any) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "when": column})
    with pytest.raises(TypeError, match=rf"Column 'when' has {what} values.*convert them"):
        TableEncoder(categorical_features=spec).fit(df)


def test_datetime_bytes_and_odd_object_values_raise_type_error() -> None:
    with pytest.raises(TypeError, match="Column 'x0' has datetime values"):
        TableEncoder().fit(np.array([["2020-01-01"]], dtype="datetime64[D]"))
    objects = pd.DataFrame({"d": pd.Series([pd.Timestamp("2020-01-01"), None], dtype=object)})
    with pytest.raises(TypeError, match="Column 'd' has datetime values"):
        TableEncoder().fit(objects)
    with pytest.raises(TypeError, match=r"Column 'x0' has bytes values.*decode them to str"):
        TableEncoder().fit(np.array([[b"abc"]]))
    mixed = pd.DataFrame({"d": pd.Series(["a", (1, 2)], dtype=object)})
    with pytest.raises(TypeError, match=r"Column 'd' contains a value of type tuple \(\(1, 2\)\)"):
        TableEncoder().fit(mixed)


def test_non_numeric_values_in_numeric_column_at_transform() -> None:
    enc = TableEncoder().fit(pd.DataFrame({"n": [1.0, 2.0]}))
    out = enc.transform(pd.DataFrame({"n": ["3", None]}))  # numeric strings are parsed
    np.testing.assert_array_equal(out.numeric.ravel(), np.array([3, np.nan], np.float32))
    with pytest.raises(ValueError, match=r"Column 'n' is numeric .* such as 'oops'"):
        enc.transform(pd.DataFrame({"n": ["3", "oops"]}))


# --------------------------------------------------------------------------------------
# Infinite and large values
# --------------------------------------------------------------------------------------


def test_infinite_values_rejected_at_fit_and_transform() -> None:
    bad = pd.DataFrame({"ok": [1.0, 2.0], "bad": [1.0, np.inf]})
    with pytest.raises(ValueError, match="Column 'bad' contains infinite values"):
        TableEncoder().fit(bad)
    with pytest.raises(ValueError, match="Column 'x1' contains infinite values"):
        TableEncoder().fit(np.array([[1.0, -np.inf]]))
    enc = TableEncoder().fit(pd.DataFrame({"ok": [1.0, 2.0], "bad": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="Column 'bad' contains infinite values"):
        enc.transform(bad)
    cat = TableEncoder(categorical_features=[0]).fit(np.array([[1.0], [2.0]]))
    with pytest.raises(ValueError, match="Column 'x0' contains infinite values"):
        cat.transform(np.array([[np.inf]]))


def test_large_values_and_float32_range() -> None:
    X = np.array([[1e30], [3e30], [np.nan]])
    enc = TableEncoder()
    out = enc.fit_transform(X)
    np.testing.assert_array_equal(out.numeric.ravel(), np.array([1e30, 3e30, np.nan], np.float32))
    np.testing.assert_allclose(
        enc.numeric_mean, [(float(np.float32(1e30)) + float(np.float32(3e30))) / 2]
    )
    assert np.isfinite(enc.numeric_std).all() and enc.numeric_std[0] > 1e29
    with pytest.raises(ValueError, match=r"Column 'big' contains values beyond the float32 range"):
        TableEncoder().fit(pd.DataFrame({"small": [1.0], "big": [1e39]}))
    with pytest.raises(ValueError, match=r"Column 'x0' contains values beyond the float32 range"):
        enc.transform(np.array([[-4e38]]))


# --------------------------------------------------------------------------------------
# Column matching at transform
# --------------------------------------------------------------------------------------


def test_transform_matches_columns_by_name_in_any_order() -> None:
    df = mixed_frame()
    enc = TableEncoder().fit(df)
    assert_same_encoding(enc.transform(df), enc.transform(df[df.columns[::-1]]))


def test_transform_missing_and_unexpected_columns() -> None:
    df = pd.DataFrame({"a": [1.0], "b": [2.0], "c": ["x"]})
    enc = TableEncoder().fit(df)
    with pytest.raises(ValueError, match=r"missing columns: \['b'\]"):
        enc.transform(df[["a", "c"]])
    with pytest.raises(ValueError, match=r"unexpected columns: \['z'\]"):
        enc.transform(df.assign(z=1))
    with pytest.raises(ValueError, match=r"missing columns: \['c'\]; unexpected columns: \['d'\]"):
        enc.transform(df.rename(columns={"c": "d"}))


def test_transform_array_needs_the_fitted_number_of_features() -> None:
    enc = TableEncoder().fit(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="X has 5 features, but the encoder was fitted with 4"):
        enc.transform(np.zeros((2, 5)))
    fitted_on_frame = TableEncoder().fit(pd.DataFrame(np.zeros((3, 4)), columns=list("abcd")))
    with pytest.raises(ValueError, match="X has 3 features, but the encoder was fitted with 4"):
        fitted_on_frame.transform(np.zeros((2, 3)))
    out = fitted_on_frame.transform(np.ones((2, 4)))  # arrays are taken by position
    np.testing.assert_array_equal(out.numeric, np.ones((2, 4), np.float32))


def test_fitted_on_array_transform_frame_is_positional() -> None:
    enc = TableEncoder(categorical_features=[1]).fit(np.array([[1.0, 7], [2.0, 8]]))
    frame = pd.DataFrame({"whatever": [3.0], "names": [8]})
    out = enc.transform(frame)
    np.testing.assert_array_equal(out.numeric, [[3.0]])
    np.testing.assert_array_equal(out.codes, [[3]])


# --------------------------------------------------------------------------------------
# Dtype changes between fit and transform
# --------------------------------------------------------------------------------------


def test_category_at_fit_object_or_string_at_transform() -> None:
    fit_df = pd.DataFrame({"c": pd.Categorical(["a", "b", "a"])})
    enc = TableEncoder().fit(fit_df)
    expected = enc.transform(fit_df).codes
    for dtype in (object, "string", "str", "category"):
        out = enc.transform(pd.DataFrame({"c": pd.Series(["a", "b", "a"], dtype=dtype)}))
        np.testing.assert_array_equal(out.codes, expected)


def test_ints_at_fit_strings_at_transform_and_back() -> None:
    ints = TableEncoder(categorical_features=["z"]).fit(pd.DataFrame({"z": [10, 20, 30]}))
    out = ints.transform(pd.DataFrame({"z": ["20", "10.0", "abc", None, "40"]}))
    np.testing.assert_array_equal(out.codes.ravel(), [3, 2, CODE_UNSEEN, CODE_MISSING, 1])
    strings = TableEncoder().fit(pd.DataFrame({"z": ["10", "20", "2.5"]}))
    out = strings.transform(pd.DataFrame({"z": [20, 10, 30]}))
    np.testing.assert_array_equal(out.codes.ravel(), [4, 2, CODE_UNSEEN])
    out = strings.transform(pd.DataFrame({"z": [20.0, 2.5, np.nan]}))
    np.testing.assert_array_equal(out.codes.ravel(), [4, 3, CODE_MISSING])


def test_bools_and_numbers_across_fit_and_transform() -> None:
    enc = TableEncoder(categorical_features=[0]).fit(np.array([[True], [False]]))
    assert enc.categories == [[False, True]]
    np.testing.assert_array_equal(enc.transform(np.array([[1], [0], [2]])).codes.ravel(), [3, 2, 1])
    nums = TableEncoder(categorical_features=[0]).fit(np.array([[0], [1], [5]]))
    np.testing.assert_array_equal(nums.transform(np.array([[True], [False]])).codes.ravel(), [3, 2])
    # with both bools and numbers in the vocabulary the kinds stay apart
    both = TableEncoder().fit(pd.DataFrame({"m": pd.Series([True, 1, "a"], dtype=object)}))
    assert both.categories == [[True, 1, "a"]]
    out = both.transform(pd.DataFrame({"m": pd.Series([1, True, False, 1.0], dtype=object)}))
    np.testing.assert_array_equal(out.codes.ravel(), [3, 2, CODE_UNSEEN, 3])


# --------------------------------------------------------------------------------------
# Non-mutation
# --------------------------------------------------------------------------------------


def test_caller_data_is_never_modified() -> None:
    df = mixed_frame()
    before = copy.deepcopy(df)
    enc = TableEncoder()
    out = enc.fit_transform(df)
    enc.partial_fit(df)
    enc.transform(df)
    pd.testing.assert_frame_equal(df, before)
    assert list(df.dtypes) == list(before.dtypes)

    X = np.array([[1.0, np.nan], [3.0, 4.0]], dtype=np.float32)
    X_before = X.copy()
    out = TableEncoder().fit_transform(X)
    # float32 input is not copied (large tables), but the view cannot write to the input
    assert np.shares_memory(out.numeric, X)
    with pytest.raises(ValueError, match="read-only"):
        out.numeric[:] = 0.0
    np.testing.assert_array_equal(X, X_before)
    assert X.dtype == np.float32
    X64 = X.astype(np.float64)
    out = TableEncoder().fit_transform(X64)
    assert not np.shares_memory(out.numeric, X64) and out.numeric.flags.writeable

    objects = np.array([[1, "a"], [None, "b"]], dtype=object)
    objects_before = copy.deepcopy(objects)
    TableEncoder().fit_transform(objects)
    assert objects.tolist() == objects_before.tolist() and objects.dtype == object


# --------------------------------------------------------------------------------------
# Statistics and streaming
# --------------------------------------------------------------------------------------


def test_numeric_statistics() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(5.0, 2.0, size=1000)
    a[::10] = np.nan
    df = pd.DataFrame({"a": a, "const": 3.3, "empty": np.nan, "int": np.arange(1000)})
    enc = TableEncoder().fit(df)
    a32 = a.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(enc.numeric_mean[0], np.nanmean(a32), rtol=1e-12)
    np.testing.assert_allclose(enc.numeric_std[0], np.nanstd(a32), rtol=1e-12)
    assert enc.numeric_std[1] == 1.0 and enc.numeric_mean[1] == pytest.approx(np.float32(3.3))
    assert enc.numeric_mean[2] == 0.0 and enc.numeric_std[2] == 1.0
    np.testing.assert_allclose(enc.numeric_std[3], np.std(np.arange(1000)), rtol=1e-12)
    np.testing.assert_array_equal(enc.numeric_missing, [True, False, True, False])
    assert enc.numeric_mean.dtype == np.float64 and enc.numeric_std.dtype == np.float64
    assert np.isnan(enc.numeric_min[2]) and enc.numeric_min[3] == 0 and enc.numeric_max[3] == 999
    assert enc.n_rows_seen == 1000


def _assert_same_state(a: TableEncoder, b: TableEncoder, scale: float = 0.0) -> None:
    """Same state; statistics to 1e-9 relative (``scale``: largest magnitude in the data)."""
    assert a.kinds == b.kinds and a.feature_names == b.feature_names
    assert a.categories == b.categories and a.cardinalities == b.cardinalities
    for x, y in zip(a.categories, b.categories, strict=True):
        assert [type(v) for v in x] == [type(v) for v in y]
    assert a.n_rows_seen == b.n_rows_seen
    np.testing.assert_allclose(a.numeric_mean, b.numeric_mean, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(a.numeric_std, b.numeric_std, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_array_equal(a.numeric_missing, b.numeric_missing)
    np.testing.assert_array_equal(a.numeric_min, b.numeric_min)
    np.testing.assert_array_equal(a.numeric_max, b.numeric_max)


def test_partial_fit_equals_fit_on_concatenation() -> None:
    rng = np.random.default_rng(1)
    n = 3000
    df = pd.DataFrame(
        {
            "x": rng.normal(1e6, 1.0, n),  # large offset: needs a stable merge
            "k": rng.choice(np.array(["a", "b", "c", None], dtype=object), n),
            "i": rng.integers(0, 50, n),
            "m": pd.Series(rng.choice(np.array([1, "q", 2.5], dtype=object), n), dtype=object),
        }
    )
    full = TableEncoder(categorical_features=["k", "i", "m"]).fit(df)
    streamed = TableEncoder(categorical_features=["k", "i", "m"])
    for start in range(0, n, 700):
        streamed.partial_fit(df.iloc[start : start + 700])
    _assert_same_state(full, streamed)
    assert_same_encoding(full.transform(df), streamed.transform(df))


@st.composite
def frames_and_cuts(draw: st.DrawFn) -> tuple[pd.DataFrame, list[int]]:
    n = draw(st.integers(1, 40))
    finite = st.floats(-(2.0**40), 2.0**40, allow_nan=False, allow_infinity=False, width=32)
    floats = draw(st.lists(st.one_of(finite, st.just(float("nan"))), min_size=n, max_size=n))
    ints = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    words = draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n))
    mixed = draw(st.lists(st.sampled_from([1, 2.5, "1", "z", True, None]), min_size=n, max_size=n))
    df = pd.DataFrame(
        {
            "f": np.array(floats, dtype=np.float64),
            "i": np.array(ints, dtype=np.int64),
            "w": pd.Series(words, dtype=object),
            "m": pd.Series(mixed, dtype=object),
            "c": pd.Categorical(words, categories=["c", "b", "a", "d"]),
        }
    )
    cuts = sorted(set(draw(st.lists(st.integers(1, n), max_size=5))) | {n})
    return df, cuts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames_and_cuts())
def test_property_partial_fit_over_random_chunks_equals_fit(
    case: tuple[pd.DataFrame, list[int]],
) -> None:
    df, cuts = case
    full = TableEncoder(categorical_features=["i", "w", "m", "c"]).fit(df)
    streamed = TableEncoder(categorical_features=["i", "w", "m", "c"])
    start = 0
    for stop in cuts:
        streamed.partial_fit(df.iloc[start:stop])
        start = stop
    # Means of data with cancellation (e.g. 1e12, -1e12, 0.5) are exact only relative to
    # the magnitude of the data, so the tolerance is scaled by it.
    values = df["f"].to_numpy()
    scale = float(np.abs(values[np.isfinite(values)]).max(initial=0.0))
    _assert_same_state(full, streamed, scale=scale)
    assert_same_encoding(full.transform(df), streamed.transform(df))


def test_partial_fit_rejects_a_different_kind_or_columns() -> None:
    enc = TableEncoder().partial_fit(pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}))
    with pytest.raises(ValueError, match="column 'a' would be categorical in this chunk but was"):
        enc.partial_fit(pd.DataFrame({"a": ["u", "v"], "b": ["x", "y"]}))
    with pytest.raises(ValueError, match=r"unexpected columns: \['c'\]"):
        enc.partial_fit(pd.DataFrame({"a": [1.0], "b": ["x"], "c": [0]}))
    # a column that is entirely missing in a chunk carries no kind
    enc.partial_fit(pd.DataFrame({"a": pd.Series([None, None], dtype=object), "b": ["z", "x"]}))
    assert enc.kinds == ["numeric", "categorical"] and enc.categories == [["x", "y", "z"]]
    assert enc.n_rows_seen == 4


def test_failed_fit_leaves_encoder_unfitted_and_failed_chunk_changes_nothing() -> None:
    enc = TableEncoder()
    with pytest.raises(ValueError, match="infinite"):
        enc.fit(pd.DataFrame({"a": [np.inf], "b": ["x"]}))
    assert not enc.is_fitted
    with pytest.raises(EncoderNotFittedError, match="not fitted"):
        enc.transform(pd.DataFrame({"a": [1.0], "b": ["x"]}))
    enc.partial_fit(pd.DataFrame({"a": [1.0], "b": ["x"]}))
    state = enc.to_dict()
    with pytest.raises(TypeError, match="cannot be a category"):
        enc.partial_fit(pd.DataFrame({"a": [2.0, 3.0], "b": ["new", b"bytes"]}))
    assert enc.to_dict() == state


def test_partial_fit_accepts_empty_chunks_once_fitted() -> None:
    enc = TableEncoder().partial_fit(pd.DataFrame({"a": [1.0, 3.0]}))
    enc.partial_fit(pd.DataFrame({"a": pd.Series([], dtype=float)}))
    assert enc.n_rows_seen == 2 and enc.numeric_mean[0] == 2.0


def test_vocabulary_order_does_not_depend_on_row_order() -> None:
    values = ["b", 3, "a", 10, 2.5, False, "10", None]
    first = TableEncoder().fit(pd.DataFrame({"v": pd.Series(values, dtype=object)}))
    second = TableEncoder().fit(pd.DataFrame({"v": pd.Series(values[::-1], dtype=object)}))
    assert first.categories == second.categories == [[False, 2.5, 3, 10, "10", "a", "b"]]


# --------------------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------------------


def test_to_dict_json_round_trip_gives_identical_transforms() -> None:
    df = mixed_frame().assign(
        m=pd.Series([True, 1, "1", 2.5], dtype=object), big=[1e30, -2e30, 0.0, 5.0]
    )
    enc = TableEncoder().fit(df)
    state = enc.to_dict()
    text = json.dumps(state, allow_nan=False)
    restored = TableEncoder.from_dict(json.loads(text))
    assert state["version"] == 1
    assert restored.categories == enc.categories
    assert [type(v) for v in restored.categories[-1]] == [bool, int, float, str]
    assert state["category_types"][-1] == ["bool", "int", "float", "str"]
    assert_same_encoding(restored.transform(df), enc.transform(df))
    probe = df.iloc[[3, 1, 0]]
    assert_same_encoding(restored.transform(probe), enc.transform(probe))
    np.testing.assert_array_equal(restored.numeric_std, enc.numeric_std)
    assert restored.to_dict() == state


def test_from_dict_then_partial_fit_continues_the_stream() -> None:
    df = pd.DataFrame({"x": np.arange(10.0), "k": list("abcdeabcde")})
    first = TableEncoder().partial_fit(df.iloc[:4])
    resumed = TableEncoder.from_dict(json.loads(json.dumps(first.to_dict())))
    resumed.partial_fit(df.iloc[4:])
    _assert_same_state(resumed, TableEncoder().fit(df))


def _valid_state() -> dict[str, Any]:
    df = pd.DataFrame({"x": [1.0, 2.0, np.nan], "k": ["a", "b", "a"]})
    return TableEncoder().fit(df).to_dict()


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.pop("kinds"), "missing key 'kinds'"),
        (lambda d: d.update(version=99), "unsupported version 99"),
        (lambda d: d.update(format="other"), "'format' must be"),
        (lambda d: d.update(kinds=["numeric", "text"]), "'kinds' must contain"),
        (lambda d: d.update(feature_names=["x"]), "'feature_names' must have 2 entries"),
        (lambda d: d["categories"][0].append("a"), "must have 2 entries|values but"),
        (lambda d: d["category_types"][0].__setitem__(0, "int"), "not a valid int category"),
        (lambda d: d.update(categories=[["b", "a"]]), "not in canonical order"),
        (lambda d: d.update(cardinalities=[3]), "'cardinalities' must be"),
        (lambda d: d.update(numeric_std=[0.0]), "'numeric_std' must contain numbers > 0"),
        (lambda d: d.update(numeric_mean=["1"]), "'numeric_mean' must contain finite numbers"),
        (lambda d: d.update(numeric_missing=[False]), "disagrees with the count"),
        (lambda d: d.update(n_rows_seen=True), "'n_rows_seen' must be an integer"),
    ],
)
def test_from_dict_rejects_malformed_state(mutate: Any, match: str) -> None:
    state = _valid_state()
    mutate(state)
    with pytest.raises(ValueError, match="Invalid TableEncoder state: .*" + f"({match})"):
        TableEncoder.from_dict(state)


def test_from_dict_rejects_non_dict() -> None:
    with pytest.raises(ValueError, match="Invalid TableEncoder state: expected a dict, got list"):
        TableEncoder.from_dict([1, 2])


def test_to_dict_serialises_numpy_parameters() -> None:
    enc = TableEncoder(categorical_features=np.array([False, True])).fit(np.array([[1.0, 2.0]]))
    state = enc.to_dict()
    assert state["categorical_features"] == [False, True]
    assert json.loads(json.dumps(state)) == state


# --------------------------------------------------------------------------------------
# Misc API
# --------------------------------------------------------------------------------------


def test_describe_columns() -> None:
    enc = TableEncoder().fit(mixed_frame())
    described = describe_columns(enc)
    assert described[0] == ("f64", "numeric", 0)
    assert described[-4:] == [
        ("s", "categorical", 2),
        ("str", "categorical", 2),
        ("o", "categorical", 3),
        ("c", "categorical", 3),
    ]


def test_not_fitted_errors() -> None:
    enc = TableEncoder()
    for call in (lambda: enc.transform(np.zeros((1, 1))), enc.to_dict):
        with pytest.raises(EncoderNotFittedError, match="not fitted"):
            call()
    with pytest.raises(AttributeError):
        _ = enc.kinds
    assert isinstance(EncoderNotFittedError("x"), ValueError)


def test_fit_transform_equals_fit_then_transform_and_refit_resets() -> None:
    df = mixed_frame()
    enc = TableEncoder()
    assert_same_encoding(enc.fit_transform(df), TableEncoder().fit(df).transform(df))
    enc.fit(pd.DataFrame({"only": ["q"]}))
    assert enc.feature_names == ["only"] and enc.categories == [["q"]] and enc.n_rows_seen == 1


def test_encoded_table_take_and_validation() -> None:
    table = EncodedTable(
        np.arange(6, dtype=np.float32).reshape(3, 2), np.arange(3, dtype=np.int64).reshape(3, 1)
    )
    sub = table.take([2, 0])
    np.testing.assert_array_equal(sub.numeric, [[4, 5], [0, 1]])
    np.testing.assert_array_equal(sub.codes, [[2], [0]])
    assert len(table.take(np.array([True, False, True]))) == 2
    assert len(table.take(slice(1, None))) == 2 and len(table.take(1)) == 1
    assert sub.numeric.flags.c_contiguous and sub.codes.flags.c_contiguous
    with pytest.raises(TypeError, match="numeric must be a float32 array"):
        EncodedTable(np.zeros((2, 1)), np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="same number of rows"):
        EncodedTable(np.zeros((2, 1), np.float32), np.zeros((3, 1), np.int64))
    with pytest.raises(ValueError, match="must be 2-D"):
        EncodedTable(np.zeros(2, np.float32), np.zeros((2, 1), np.int64))


def test_wide_transform_uses_block_copies_correctly() -> None:
    rng = np.random.default_rng(3)
    n = 10_000  # several row blocks
    values = rng.normal(size=(n, 7))
    values[rng.random((n, 7)) < 0.05] = np.nan
    words = rng.choice(["a", "b", "c"], size=n).astype(object)
    df = pd.DataFrame(values, columns=[f"v{j}" for j in range(7)]).assign(w=words)
    out = TableEncoder().fit_transform(df)
    np.testing.assert_array_equal(out.numeric, values.astype(np.float32))
    np.testing.assert_array_equal(out.codes[:, 0], pd.Series(words).map({"a": 2, "b": 3, "c": 4}))
    late_inf = df.copy()
    late_inf.iloc[n - 1, 5] = -np.inf  # in the last block of rows
    with pytest.raises(ValueError, match="Column 'v5' contains infinite values"):
        TableEncoder().fit(late_inf)
