"""refit_importances: the mean and spread of global importances over refits with other seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_FIT
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from tabsparse import RefitImportances, TabNetClassifier, TabNetPretrainer, refit_importances
from tabsparse.importance import global_importances

NAMES = ["a", "b", "c", "d", "e"]


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 5)), columns=NAMES)
    y = (X["a"] + 0.5 * X["b"] > 0).astype(int).to_numpy()
    return X, y


@pytest.fixture(scope="module")
def result(data: tuple[pd.DataFrame, np.ndarray]) -> RefitImportances:
    X, y = data
    return refit_importances(TabNetClassifier(**TINY_FIT), X, y, seeds=[0, 3, 7])


def test_each_refit_is_the_fit_with_its_seed(
    data: tuple[pd.DataFrame, np.ndarray], result: RefitImportances
) -> None:
    X, y = data
    assert result.seeds == [0, 3, 7]
    assert result.feature_names == NAMES
    for seed, row, est in zip(result.seeds, result.per_fit, result.estimators, strict=True):
        alone = TabNetClassifier(**{**TINY_FIT, "random_state": seed}).fit(X, y)
        np.testing.assert_array_equal(row, alone.feature_importances_)
        assert est.random_state == seed
    # the refits differ: otherwise there would be no spread to report
    assert np.ptp(result.per_fit, axis=0).max() > 1e-3


def test_mean_and_standard_error_over_the_refits(result: RefitImportances) -> None:
    rows = result.per_fit / result.per_fit.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(result.feature_importances_, rows.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(
        result.feature_importances_std_, rows.std(axis=0, ddof=1) / np.sqrt(3), rtol=1e-12
    )
    assert result.feature_importances_.sum() == pytest.approx(1.0)
    expected = result.feature_importances_ <= 2.0 * result.feature_importances_std_
    np.testing.assert_array_equal(result.negligible(), expected)


def test_importances_on_given_rows(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    rows = X.iloc[:40]
    got = refit_importances(TabNetClassifier(**TINY_FIT), X, y, seeds=2, X_explain=rows)
    for row, est in zip(got.per_fit, got.estimators, strict=True):
        want = global_importances(est.explain(rows).importances)[0]
        np.testing.assert_allclose(row, want, rtol=1e-12)


def test_seeds_count_from_the_estimators_random_state(
    data: tuple[pd.DataFrame, np.ndarray],
) -> None:
    X, y = data
    est = TabNetClassifier(**{**TINY_FIT, "random_state": 5, "max_epochs": 1})
    got = refit_importances(est, X, y, seeds=3)
    assert got.seeds == [5, 6, 7]
    unseeded = TabNetClassifier(**{**TINY_FIT, "random_state": None, "max_epochs": 1})
    assert refit_importances(unseeded, X, y, seeds=2).seeds == [0, 1]
    # the estimator passed in is neither fitted nor changed
    assert not hasattr(est, "network_")
    assert est.get_params() == clone(est).get_params()
    assert est.random_state == 5


def test_fit_parameters_reach_every_fit(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 2})
    got = refit_importances(est, X[:200], y[:200], seeds=2, X_val=X[200:], y_val=y[200:])
    assert all("val_score" in e.history_[-1] for e in got.estimators)


def test_the_pretrainer_refits_without_a_target(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, _ = data
    got = refit_importances(TabNetPretrainer(**{**TINY_FIT, "max_epochs": 1}), X, seeds=2)
    assert got.per_fit.shape == (2, 5)
    np.testing.assert_allclose(got.per_fit.sum(axis=1), 1.0, rtol=1e-5)


def test_parallel_refits_give_the_same_result(
    data: tuple[pd.DataFrame, np.ndarray], result: RefitImportances
) -> None:
    X, y = data
    got = refit_importances(TabNetClassifier(**TINY_FIT), X, y, seeds=[0, 3, 7], n_jobs=2)
    np.testing.assert_array_equal(got.per_fit, result.per_fit)


def test_agreement_counts_shared_top_features() -> None:
    per_fit = np.array(
        [
            [0.4, 0.3, 0.2, 0.1, 0.0],
            [0.1, 0.3, 0.2, 0.4, 0.0],
            [0.0, 0.1, 0.2, 0.3, 0.4],
        ]
    )
    got = RefitImportances(per_fit, [0, 1, 2], NAMES, [])
    # top 2: {a, b}, {d, b}, {e, d}: pairs share 1, 0, 1
    assert got.agreement(2) == pytest.approx(2 / 3)
    # top 1: a, d, e: no pair agrees
    assert got.agreement(1) == 0.0
    assert got.agreement(5) == 5.0
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        got.agreement(0)


def test_top_features_and_frame(result: RefitImportances) -> None:
    mean, std = result.feature_importances_, result.feature_importances_std_
    top = result.top_features(2)
    j = int(np.argmax(mean))
    assert top[0] == (NAMES[j], pytest.approx(mean[j]), pytest.approx(std[j]))
    frame = result.to_frame()
    assert list(frame.columns) == ["importance", "std", "negligible", "seed 0", "seed 3", "seed 7"]
    assert frame.index[0] == NAMES[j]
    np.testing.assert_allclose(frame.loc["c", "seed 3"], result.per_fit[1, 2])


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        (1, "seeds=1: at least 2 refits are needed for a spread"),
        ([4], r"seeds must be an int >= 2 or a sequence of at least 2 distinct ints, got \[4\]"),
        ([1, 1], r"at least 2 distinct ints, got \[1, 1\]"),
        ([1, 2.5], r"at least 2 distinct ints, got \[1, 2.5\]"),
        ("ab", "at least 2 distinct ints, got 'ab'"),
        (True, "at least 2 distinct ints, got True"),
    ],
)
def test_bad_seeds_are_refused(
    data: tuple[pd.DataFrame, np.ndarray], seeds: object, message: str
) -> None:
    X, y = data
    with pytest.raises(ValueError, match=message):
        refit_importances(TabNetClassifier(**TINY_FIT), X, y, seeds=seeds)  # type: ignore[arg-type]


def test_an_estimator_without_a_seed_is_refused(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    with pytest.raises(ValueError, match="LinearRegression has no random_state parameter"):
        refit_importances(LinearRegression(), X, y)


def test_plot_draws_the_spread_over_refits(result: RefitImportances) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tabsparse.plotting import plot_importances

    ax = plot_importances(result, z=2.0)
    order = np.argsort(-result.feature_importances_, kind="stable")
    widths = [p.get_width() for p in ax.patches]
    np.testing.assert_allclose(widths, result.feature_importances_[order], rtol=1e-6)
    assert [t.get_text() for t in ax.get_yticklabels()] == [NAMES[j] for j in order]
    from matplotlib.container import BarContainer

    (container,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    bars = container.errorbar
    assert bars is not None
    segments = bars.lines[2][0].get_segments()
    half = [(seg[1][0] - seg[0][0]) / 2 for seg in segments]
    np.testing.assert_allclose(half, 2.0 * result.feature_importances_std_[order], rtol=1e-5)
    plt.close("all")


def test_plot_refuses_a_result_without_importances() -> None:
    pytest.importorskip("matplotlib")
    from sklearn.exceptions import NotFittedError

    from tabsparse.plotting import plot_importances

    with pytest.raises(NotFittedError, match="object has no feature_importances_"):
        plot_importances(object())
