"""Helpers shared by the data-layer tests (tests/test_data*.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabsparse.data import EncodedTable


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
