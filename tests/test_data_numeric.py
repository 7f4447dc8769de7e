"""Tests for tabsparse.data.numeric: infinite values and the float32 range."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsparse.data import (
    TableEncoder,
)

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
