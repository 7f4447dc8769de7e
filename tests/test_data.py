"""Tests for tabsparse.data.encoder: TableEncoder end to end (column matching, dtype
changes between fit and transform, non-mutation, fit_transform, describe_columns, EncodedTable)."""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from data_helpers import assert_same_encoding, mixed_frame

from tabsparse.data import (
    CODE_MISSING,
    CODE_UNSEEN,
    EncodedTable,
    EncoderNotFittedError,
    TableEncoder,
    describe_columns,
)

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


def test_importing_the_data_layer_loads_no_scikit_learn_torch_or_upper_layers() -> None:
    code = (
        "import sys, numpy as np, pandas as pd\n"
        "from tabsparse.data import TableEncoder\n"
        "TableEncoder().fit_transform(pd.DataFrame({'a': [1.0, 2.0], 'b': ['x', 'y']}))\n"
        "TableEncoder().fit_transform(np.zeros((3, 2)))\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('sklearn', 'torch') or\n"
        "       m.startswith(('tabsparse.estimators', 'tabsparse.io', 'tabsparse.export'))]\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
