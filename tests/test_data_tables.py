"""Tests for tabsparse.data.tables: validation of the raw input."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tabsparse.data import (
    TableEncoder,
)

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


def test_scipy_sparse_accepted_but_not_complex_or_empty() -> None:
    # Sparse input is accepted since issue 25 item 6 (values: tests/test_data_sparse.py);
    # only numeric sparse matrices with at least one column are.
    sparse = pytest.importorskip("scipy.sparse")
    enc = TableEncoder().fit(sparse.csr_matrix(np.eye(3)))
    assert enc.feature_names == ["x0", "x1", "x2"]
    with pytest.raises(TypeError, match="only bool, integer and float sparse matrices"):
        TableEncoder().fit(sparse.csr_matrix(np.eye(3) * 1j))
    with pytest.raises(ValueError, match="got 0 columns"):
        TableEncoder().fit(sparse.csr_matrix((3, 0)))


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
