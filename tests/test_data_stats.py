"""Tests for tabsparse.data.stats: numeric statistics, streaming and partial_fit."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from data_helpers import assert_same_encoding
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabsparse.data import (
    EncoderNotFittedError,
    TableEncoder,
)
from tabsparse.nn.inputs import TabularInput

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


def test_from_dict_then_partial_fit_continues_the_stream() -> None:
    df = pd.DataFrame({"x": np.arange(10.0), "k": list("abcdeabcde")})
    first = TableEncoder().partial_fit(df.iloc[:4])
    resumed = TableEncoder.from_dict(json.loads(json.dumps(first.to_dict())))
    resumed.partial_fit(df.iloc[4:])
    _assert_same_state(resumed, TableEncoder().fit(df))


# --------------------------------------------------------------------------------------
# Scale relative to the column (issue 25 item 3)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-20, 1e-30, 1e-3, 1.0, 1e20])
def test_columns_are_standardised_by_their_own_spread_at_any_scale(scale: float) -> None:
    rng = np.random.default_rng(0)
    x = (rng.normal(size=2000) * scale).astype(np.float32)
    enc = TableEncoder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a tiny scale is not a constant column: no warning
        encoded = enc.fit_transform(pd.DataFrame({"x": x}))
    np.testing.assert_allclose(enc.numeric_std, [x.astype(np.float64).std()], rtol=1e-12)
    np.testing.assert_allclose(enc.numeric_mean, [x.astype(np.float64).mean()], rtol=1e-12)
    inputs = TabularInput(
        numeric_mean=enc.numeric_mean.tolist(),
        numeric_std=enc.numeric_std.tolist(),
        cardinalities=[],
    ).eval()
    with torch.no_grad():
        z = inputs(torch.from_numpy(encoded.numeric), torch.zeros((2000, 0), dtype=torch.int64))
    z64 = z.double()
    assert abs(float(z64.mean())) < 1e-5
    assert abs(float(z64.std(correction=0)) - 1.0) < 1e-5


def test_only_truly_constant_columns_get_unit_std() -> None:
    df = pd.DataFrame(
        {
            "const": [3e-20] * 4,
            "tiny": [1e-20, 2e-20, 3e-20, 4e-20],
            "empty": [np.nan] * 4,
            "ulp": np.array([1.0, 1.0, 1.0, np.nextafter(np.float32(1), np.float32(2))]),
        }
    )
    enc = TableEncoder().fit(df)
    expected_ulp = float(np.std(df["ulp"].to_numpy(np.float32).astype(np.float64)))
    np.testing.assert_allclose(
        enc.numeric_std, [1.0, np.sqrt(1.25) * 1e-20, 1.0, expected_ulp], rtol=1e-6
    )


def test_tiny_scale_column_is_learned_like_an_ordinary_one() -> None:
    from tabsparse import TabNetClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 1))
    y = (x[:, 0] > 0).astype(int)
    params: dict[str, Any] = {
        "max_epochs": 15,
        "random_state": 0,
        "verbose": 0,
        "early_stopping": False,
    }
    tiny = TabNetClassifier(**params).fit(x * 1e-20, y)
    ordinary = TabNetClassifier(**params).fit(x, y)
    assert ordinary.score(x, y) > 0.9
    assert tiny.score(x * 1e-20, y) > 0.9
