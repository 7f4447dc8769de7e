"""explain(X, attributions=True): Shapley values that add up to each kind of model's raw output,
equal exact enumeration where computed by sampling within their standard errors, the kept
background in model files, to_shap, and the errors for bad arguments."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_FIT

from tabsparse import TabNetClassifier, TabNetRegressor, load, save

PARAMS: dict[str, Any] = {**TINY_FIT, "max_epochs": 4}


def frame(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": rng.choice(["x", "y", "z"], size=n),
            "d": rng.normal(size=n),
        }
    )
    y = ((X["a"] + (X["c"] == "x") - 0.5 * X["b"]) > 0.3).astype(int).to_numpy()
    return X, y


@pytest.fixture(scope="module")
def binary() -> tuple[TabNetClassifier, pd.DataFrame]:
    X, y = frame()
    return TabNetClassifier(**PARAMS).fit(X, y), X


def log_odds(model: TabNetClassifier, X: pd.DataFrame) -> np.ndarray:
    p = model.predict_proba(X)
    return np.log(p[:, 1]) - np.log(p[:, 0])


def brute_force(model: Any, X: pd.DataFrame, background: pd.DataFrame, output: Any) -> np.ndarray:
    """The definition through the public predict functions: (n, p) for one output."""
    cols, p = list(X.columns), X.shape[1]
    out = np.zeros((len(X), p))
    for row in range(len(X)):

        def value(coalition: tuple[str, ...], row: int = row) -> float:
            hybrid = background.copy()
            for c in coalition:
                hybrid[c] = X[c].iloc[row]
            return float(output(model, hybrid).mean())

        for i, col in enumerate(cols):
            others = [c for c in cols if c != col]
            for size in range(p):
                w = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
                for s in itertools.combinations(others, size):
                    out[row, i] += w * (value((*s, col)) - value(s))
    return out


def test_binary_attributions_equal_brute_force_and_add_up_to_the_log_odds(binary) -> None:
    model, X = binary
    rows, background = X.iloc[:3], X.iloc[100:112]
    e = model.explain(rows, attributions=True, background=background)
    assert e.attributions.shape == (3, 4) and e.base_values.shape == (3,)
    assert e.output_names == ["1"]
    want = brute_force(model, rows, background, log_odds)
    np.testing.assert_allclose(e.attributions, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(e.base_values, log_odds(model, background).mean(), rtol=1e-5)
    np.testing.assert_allclose(
        e.base_values + e.attributions.sum(axis=1), log_odds(model, rows), rtol=1e-4, atol=1e-5
    )
    assert np.all(e.attributions_std == 0)
    np.testing.assert_array_equal(e.data, rows.to_numpy())


def test_sampled_attributions_match_exact_within_their_standard_errors(binary) -> None:
    model, X = binary
    rows = X.iloc[:20]
    exact = model.explain(rows, attributions=True, n_permutations="exact")
    sampled = model.explain(rows, attributions=True, n_permutations=64, random_state=3)
    np.testing.assert_allclose(
        sampled.base_values + sampled.attributions.sum(axis=1),
        log_odds(model, rows),
        rtol=1e-4,
        atol=1e-5,
    )
    np.testing.assert_allclose(sampled.base_values, exact.base_values, rtol=1e-10)
    z = np.abs(sampled.attributions - exact.attributions) / sampled.attributions_std
    assert np.all(sampled.attributions_std > 0)
    assert z.max() < 4.0 and np.mean(z < 3.0) > 0.97
    again = model.explain(rows, attributions=True, n_permutations=64, random_state=3)
    np.testing.assert_array_equal(again.attributions, sampled.attributions)


def test_multiclass_attributions_are_centred_logits_one_set_per_class() -> None:
    X, y = frame()
    y = y + (X["d"] > 1).to_numpy()  # three classes
    model = TabNetClassifier(**PARAMS).fit(X, y)
    e = model.explain(X.iloc[:10], attributions=True)
    assert e.attributions.shape == (10, 4, 3) and e.base_values.shape == (10, 3)
    assert e.output_names == ["0", "1", "2"]
    logp = np.log(model.predict_proba(X.iloc[:10]))
    centred = logp - logp.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(e.base_values + e.attributions.sum(axis=1), centred, atol=1e-4)
    np.testing.assert_allclose(e.attributions.sum(axis=2), 0.0, atol=1e-5)


def test_regression_attributions_add_up_to_the_prediction() -> None:
    X, _ = frame()
    target = 3.0 * X["a"] - X["b"] + 100.0
    model = TabNetRegressor(**PARAMS).fit(X, target)
    e = model.explain(X.iloc[:15], attributions=True)
    assert e.attributions.shape == (15, 4)
    np.testing.assert_allclose(
        e.base_values + e.attributions.sum(axis=1), model.predict(X.iloc[:15]), rtol=1e-5
    )
    quantile = TabNetRegressor(**PARAMS, loss="quantile", quantile=[0.1, 0.9]).fit(X, target)
    q = quantile.explain(X.iloc[:5], attributions=True)
    assert q.attributions.shape == (5, 4, 2) and q.output_names == ["q0.1", "q0.9"]
    np.testing.assert_allclose(
        q.base_values + q.attributions.sum(axis=1), quantile.predict(X.iloc[:5]), rtol=1e-5
    )


def test_multilabel_attributions_add_up_to_each_labels_logit() -> None:
    X, y = frame()
    Y = np.c_[y, (X["d"] > 0).to_numpy().astype(int)]
    model = TabNetClassifier(**PARAMS, multilabel_loss="bce").fit(X, Y)
    e = model.explain(X.iloc[:6], attributions=True)
    assert e.attributions.shape == (6, 4, 2)
    p = model.predict_proba(X.iloc[:6])
    np.testing.assert_allclose(
        e.base_values + e.attributions.sum(axis=1), np.log(p / (1 - p)), rtol=1e-4, atol=1e-4
    )


def test_a_datetime_column_is_one_player_unless_parts_are_asked_for() -> None:
    rng = np.random.default_rng(0)
    when = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 400 * 24, 240), unit="h")
    X = pd.DataFrame({"a": rng.normal(size=240), "when": when})
    y = (when.month >= 6).astype(int)
    model = TabNetClassifier(**PARAMS, datetime_features="expand").fit(X, np.asarray(y))
    columns = model.explain(X[:5], attributions=True, n_permutations="exact")
    assert columns.feature_names == ["a", "when"] and columns.attributions.shape == (5, 2)
    parts = model.explain(X[:5], attributions=True, n_permutations=8, datetime_parts=True)
    assert parts.attributions.shape == (5, len(model.encoder_.feature_names))
    assert parts.data is None
    for e in (columns, parts):
        np.testing.assert_allclose(
            e.base_values + e.attributions.sum(axis=1), log_odds(model, X[:5]), atol=1e-4
        )


def test_the_kept_background_is_saved_and_checked(binary, tmp_path: Path) -> None:
    model, X = binary
    kept = model.background_
    assert kept["numeric"].shape == (64, 3) and kept["codes"].shape == (64, 1)
    save(model, tmp_path / "m.tabsparse")
    loaded = load(tmp_path / "m.tabsparse")
    np.testing.assert_array_equal(loaded.background_["numeric"], kept["numeric"])
    a = model.explain(X.iloc[:4], attributions=True, n_permutations=8)
    b = loaded.explain(X.iloc[:4], attributions=True, n_permutations=8)
    np.testing.assert_array_equal(a.attributions, b.attributions)


def test_to_shap_round_trips_and_shaps_plots_take_it(binary) -> None:
    shap = pytest.importorskip("shap")
    model, X = binary
    e = model.explain(X.iloc[:8], attributions=True)
    s = e.to_shap()
    assert isinstance(s, shap.Explanation)
    np.testing.assert_array_equal(s.values, e.attributions)
    np.testing.assert_array_equal(s.base_values, e.base_values)
    assert list(s.feature_names) == ["a", "b", "c", "d"]
    import matplotlib

    matplotlib.use("Agg")
    shap.plots.waterfall(s[0], show=False)
    shap.plots.bar(s, show=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_permutations": 3}, r"n_permutations=3 must be 'auto', 'exact' or an even integer"),
        ({"n_permutations": "many"}, r"n_permutations='many' must be"),
        ({"n_permutations": True}, r"n_permutations=True must be"),
    ],
)
def test_bad_attribution_arguments_are_named(binary, kwargs: dict[str, Any], match: str) -> None:
    model, X = binary
    with pytest.raises(ValueError, match=match):
        model.explain(X.iloc[:2], attributions=True, **kwargs)


def test_exact_attributions_of_many_columns_are_refused_with_the_cost() -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 20)), columns=[f"x{i}" for i in range(20)])
    model = TabNetRegressor(**{**PARAMS, "max_epochs": 1}).fit(X, X["x0"])
    with pytest.raises(ValueError, match=r"cost 2\*\*20 \* 64 forward passes per row"):
        model.explain(X.iloc[:2], attributions=True, n_permutations="exact")


def test_no_attributions_without_asking_and_to_shap_says_so(binary) -> None:
    model, X = binary
    e = model.explain(X.iloc[:2])
    assert e.attributions is None and e.base_values is None
    with pytest.raises(ValueError, match=r"call explain\(X, attributions=True\)"):
        e.to_shap()


def test_a_model_without_background_asks_for_one(binary) -> None:
    import copy

    model, X = binary
    old = copy.deepcopy(model)
    del old.background_
    with pytest.raises(ValueError, match="pass background= with a sample of the training rows"):
        old.explain(X.iloc[:2], attributions=True)
    e = old.explain(X.iloc[:2], attributions=True, background=X.iloc[:30])
    np.testing.assert_allclose(
        e.base_values + e.attributions.sum(axis=1), log_odds(model, X.iloc[:2]), atol=1e-5
    )


def test_explaining_leaves_the_network_in_eval_mode_and_threads_as_they_were(binary) -> None:
    model, X = binary
    threads = torch.get_num_threads()
    model.explain(X.iloc[:3], attributions=True, n_permutations=4)
    assert torch.get_num_threads() == threads
    assert not model.network_.training
