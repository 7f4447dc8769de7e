"""Tests for tabsparse.data.state: the JSON state of a TableEncoder."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from data_helpers import assert_same_encoding, mixed_frame

from tabsparse.data import (
    TableEncoder,
)

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
