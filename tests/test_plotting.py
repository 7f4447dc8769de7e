"""Plots, checked by what they draw (headless, Agg backend)."""

from __future__ import annotations

import copy
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.plotting import plot_attributions, plot_history, plot_importances, plot_masks

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TINY = {"n_d": 4, "n_a": 4, "n_steps": 2, "random_state": 0}
NAMES = ["age", "income", "city", "score", "height", "colour"]


@pytest.fixture(autouse=True)
def _close_figures():  # type: ignore[no-untyped-def]
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    n = 150
    X = pd.DataFrame(
        {
            "age": rng.normal(size=n),
            "income": rng.normal(size=n),
            "city": rng.choice(["a", "b", "c"], size=n),
            "score": rng.integers(0, 10, size=n),
            "height": rng.normal(size=n),
            "colour": rng.choice(["red", "blue"], size=n),
        }
    )
    y = (X["age"] + (X["city"] == "a") > 0.5).to_numpy().astype(int)
    return X, y


@pytest.fixture(scope="module")
def validated(data: tuple[pd.DataFrame, np.ndarray]) -> TabNetClassifier:
    """Fitted with validation data and an accuracy score (history has all keys)."""
    X, y = data
    est = TabNetClassifier(max_epochs=3, scoring="accuracy", n_iter_no_change=10, **TINY)
    return est.fit(X[:110], y[:110], X_val=X[110:], y_val=y[110:])


@pytest.fixture(scope="module")
def plain(data: tuple[pd.DataFrame, np.ndarray]) -> TabNetRegressor:
    X, _ = data
    return TabNetRegressor(max_epochs=2, **TINY).fit(X, X["income"].to_numpy())


# ---- plot_importances ---------------------------------------------------------------------------


@pytest.mark.parametrize("top", [3, 6, 20, None])
def test_importance_bars(validated: TabNetClassifier, top: int | None) -> None:
    ax = plot_importances(validated, top=top)
    importances = validated.feature_importances_
    order = np.argsort(-importances, kind="stable")[: len(NAMES) if top is None else top]
    bars = ax.patches
    assert len(bars) == min(top or len(NAMES), len(NAMES))
    np.testing.assert_allclose([bar.get_width() for bar in bars], importances[order])
    assert [t.get_text() for t in ax.get_yticklabels()] == [NAMES[j] for j in order]
    # the most important column is drawn on top (smallest y after the inverted limits)
    top_bar = min(bars, key=lambda bar: bar.get_y() if ax.yaxis_inverted() else -bar.get_y())
    assert top_bar.get_width() == pytest.approx(importances.max())


def test_importances_draw_into_a_given_axes(validated: TabNetClassifier) -> None:
    _, ax = plt.subplots()
    assert plot_importances(validated, ax=ax) is ax


@pytest.mark.parametrize("top", [0, -1, 2.5, True, "3"])
def test_importances_reject_a_bad_top(validated: TabNetClassifier, top: object) -> None:
    with pytest.raises(ValueError, match="top"):
        plot_importances(validated, top=top)  # type: ignore[arg-type]


def _bar_container(ax):  # type: ignore[no-untyped-def]
    from matplotlib.container import BarContainer

    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    return bars


def _error_bars(ax) -> np.ndarray:  # type: ignore[no-untyped-def]
    """``(n_bars, 2)``: the left and right ends of each horizontal error bar, in bar order."""
    container = _bar_container(ax).errorbar
    assert container is not None
    segments = container.lines[2][0].get_segments()
    return np.array([[seg[0][0], seg[1][0]] for seg in segments])


@pytest.mark.parametrize("z", [2.0, 1.0])
def test_importance_error_bars_are_z_standard_errors(validated: TabNetClassifier, z: float) -> None:
    ax = plot_importances(validated, top=None, z=z)
    importances = validated.feature_importances_.astype(np.float64)
    std = validated.feature_importances_std_.astype(np.float64)
    order = np.argsort(-importances, kind="stable")
    ends = _error_bars(ax)
    np.testing.assert_allclose(ends[:, 0], importances[order] - z * std[order], rtol=1e-6)
    np.testing.assert_allclose(ends[:, 1], importances[order] + z * std[order], rtol=1e-6)
    assert ax.get_xlabel() == f"importance (± {z:g} std. error)"


def test_negligible_features_are_grey_and_hatched(validated: TabNetClassifier) -> None:
    """Known importances and standard errors: the rule (importance at most 2 standard errors)
    picks the bars to hatch, and a legend names them."""
    est = copy.deepcopy(validated)
    est.feature_importances_ = np.array([0.5, 0.3, 0.1, 0.05, 0.03, 0.02])
    est.feature_importances_std_ = np.array([0.01, 0.2, 0.01, 0.03, 0.0, 0.01])
    ax = plot_importances(est)
    hatched = [bar.get_hatch() == "//" for bar in ax.patches]
    # income: 0.3 <= 2 x 0.2; score: 0.05 <= 2 x 0.03; colour: 0.02 <= 2 x 0.01 (the bound)
    assert hatched == [False, True, False, True, False, True]
    colours = [matplotlib.colors.to_hex(bar.get_facecolor()) for bar in ax.patches]
    grey, blue = matplotlib.colors.to_hex("lightgrey"), matplotlib.colors.to_hex("tab:blue")
    assert colours == [blue, grey, blue, grey, blue, grey]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["indistinguishable from zero"]
    # z=None: plain bars, no error bars, no legend
    ax = plot_importances(est, z=None, ax=plt.subplots()[1])
    assert _bar_container(ax).errorbar is None and ax.get_legend() is None
    assert not any(bar.get_hatch() for bar in ax.patches)


def test_no_error_bars_without_a_spread(validated: TabNetClassifier) -> None:
    """Models saved before the spread existed have no ``feature_importances_std_``."""
    old = copy.deepcopy(validated)
    del old.feature_importances_std_
    ax = plot_importances(old)
    assert _bar_container(ax).errorbar is None
    assert ax.get_xlabel() == "importance"
    np.testing.assert_allclose(
        sorted((bar.get_width() for bar in ax.patches), reverse=True),
        np.sort(validated.feature_importances_)[::-1],
    )


@pytest.mark.parametrize("z", [-1.0, True, "2", float("nan")])
def test_importances_reject_a_bad_z(validated: TabNetClassifier, z: object) -> None:
    with pytest.raises(ValueError, match="z must be a number >= 0 or None"):
        plot_importances(validated, z=z)  # type: ignore[arg-type]


def test_unfitted_estimators_are_refused() -> None:
    with pytest.raises(NotFittedError):
        plot_importances(TabNetClassifier())
    with pytest.raises(NotFittedError):
        plot_history(TabNetRegressor())


# ---- plot_masks ------------------------------------------------------------------------------


def test_mask_heatmaps_show_the_requested_rows(
    validated: TabNetClassifier, data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, _ = data
    explanation = validated.explain(X.iloc[:30])
    rows = [4, 0, 17]
    fig = plot_masks(explanation, rows)
    n_steps = explanation.masks.shape[0]
    panels = fig.axes[: n_steps + 1]
    for step in range(n_steps):
        (image,) = panels[step].get_images()
        np.testing.assert_array_equal(image.get_array(), explanation.masks[step][rows])
        assert [t.get_text() for t in panels[step].get_yticklabels()] == ["4", "0", "17"]
    (aggregate,) = panels[-1].get_images()
    np.testing.assert_array_equal(aggregate.get_array(), explanation.importances[rows])
    assert [t.get_text() for t in panels[-1].get_xticklabels()] == NAMES
    assert len(fig.axes) == n_steps + 2  # the panels and one colour bar


def test_masks_default_to_the_first_rows_and_accept_a_figure(
    validated: TabNetClassifier, data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, _ = data
    explanation = validated.explain(X.iloc[:25])
    fig = plt.figure()
    assert plot_masks(explanation, fig=fig) is fig
    (image,) = fig.axes[0].get_images()
    np.testing.assert_array_equal(image.get_array(), explanation.masks[0][:10])
    few = validated.explain(X.iloc[:3])
    (image,) = plot_masks(few).axes[0].get_images()
    assert image.get_array().shape == (3, len(NAMES))


@pytest.mark.parametrize(
    ("rows", "error", "match"),
    [
        ([0, 99], ValueError, "row 99"),
        ([-1], ValueError, "row -1"),
        ([], ValueError, "empty"),
        (3, TypeError, "sequence"),
        ([0.5], TypeError, "integer"),
    ],
)
def test_masks_reject_bad_rows(
    validated: TabNetClassifier,
    data: tuple[pd.DataFrame, np.ndarray],
    rows: object,
    error: type[Exception],
    match: str,
) -> None:
    explanation = validated.explain(data[0].iloc[:20])
    with pytest.raises(error, match=match):
        plot_masks(explanation, rows)  # type: ignore[arg-type]


def test_masks_need_an_explanation() -> None:
    with pytest.raises(TypeError, match="Explanation"):
        plot_masks(np.zeros((2, 3)))  # type: ignore[arg-type]


# ---- plot_history ------------------------------------------------------------------------------


def _line(ax, label: str):  # type: ignore[no-untyped-def]
    lines = [line for line in ax.get_lines() if line.get_label() == label]
    assert len(lines) == 1, [line.get_label() for line in ax.get_lines()]
    return lines[0]


def test_history_with_validation(validated: TabNetClassifier) -> None:
    history = validated.history_
    ax = plot_history(validated)
    epochs = [rec["epoch"] for rec in history]
    train = _line(ax, "train loss")
    np.testing.assert_array_equal(train.get_xdata(), epochs)
    np.testing.assert_allclose(train.get_ydata(), [rec["train_loss"] for rec in history])
    val = _line(ax, "validation loss")
    np.testing.assert_allclose(val.get_ydata(), [rec["val_loss"] for rec in history])
    twin = [other for other in ax.figure.axes if other is not ax]
    assert len(twin) == 1
    score = _line(twin[0], "validation score")
    np.testing.assert_allclose(score.get_ydata(), [rec["val_score"] for rec in history])
    best = validated.best_iteration_
    marker = _line(ax, f"best epoch ({best})")
    assert list(marker.get_xdata()) == [best, best]
    (star,) = [line for line in ax.get_lines() if line.get_marker() == "*"]
    assert list(star.get_xdata()) == [best]
    assert list(star.get_ydata()) == pytest.approx([history[best]["val_loss"]])
    (legend,) = [other.get_legend() for other in ax.figure.axes if other.get_legend()]
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == ["train loss", "validation loss", f"best epoch ({best})", "validation score"]


def test_history_without_validation(plain: TabNetRegressor) -> None:
    ax = plot_history(plain)
    labels = [line.get_label() for line in ax.get_lines()]
    assert "validation loss" not in labels
    assert len(ax.figure.axes) == 1  # no score axis
    np.testing.assert_allclose(
        _line(ax, "train loss").get_ydata(), [rec["train_loss"] for rec in plain.history_]
    )
    best = plain.best_iteration_
    assert list(_line(ax, f"best epoch ({best})").get_xdata()) == [best, best]


def test_history_skips_a_score_that_is_the_loss(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    est = TabNetClassifier(max_epochs=2, **TINY).fit(X[:110], y[:110], X_val=X[110:], y_val=y[110:])
    ax = plot_history(est)
    assert len(ax.figure.axes) == 1
    assert "validation loss" in [line.get_label() for line in ax.get_lines()]


def test_empty_history_is_an_error(plain: TabNetRegressor) -> None:
    empty = copy.copy(plain)
    empty.history_ = []
    with pytest.raises(ValueError, match="empty"):
        plot_history(empty)


# ---- without matplotlib -------------------------------------------------------------------------


def test_missing_matplotlib_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
    validated: TabNetClassifier,
    data: tuple[pd.DataFrame, np.ndarray],
) -> None:
    explanation = validated.explain(data[0].iloc[:5])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # "import matplotlib" now fails
    for call in (
        lambda: plot_importances(validated),
        lambda: plot_history(validated),
        lambda: plot_masks(explanation),
    ):
        with pytest.raises(ImportError, match=r"pip install 'tabsparse\[plot\]'"):
            call()


def test_explanations_plot_their_global_importances(
    validated: TabNetClassifier, data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    """An Explanation plots the mean over its rows with two standard errors."""
    X, _ = data
    for result in (validated.explain(X), validated.explain(X.iloc[:30])):
        mean, std = result.global_importances()
        ax = plot_importances(result, top=None)
        order = np.argsort(-mean, kind="stable")
        widths = [bar.get_width() for bar in ax.patches]
        np.testing.assert_allclose(widths, mean[order], rtol=1e-6)
        np.testing.assert_allclose(_error_bars(ax)[:, 1], (mean + 2 * std)[order], rtol=1e-6)
        assert [t.get_text() for t in ax.get_yticklabels()] == [NAMES[j] for j in order]
        plt.close("all")


# ---- plot_attributions --------------------------------------------------------------------------


def test_attribution_bars_of_a_row_are_signed_and_add_up(
    validated: TabNetClassifier, data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, _ = data
    e = validated.explain(X[:5], attributions=True, n_permutations=16)
    ax = plot_attributions(e, 2, top=4)
    values = e.attributions[2]
    order = np.argsort(-np.abs(values), kind="stable")[:4]
    np.testing.assert_allclose([bar.get_width() for bar in ax.patches], values[order])
    assert [t.get_text() for t in ax.get_yticklabels()] == [NAMES[j] for j in order]
    colours = [tuple(bar.get_facecolor()) for bar in ax.patches]
    red, blue = matplotlib.colors.to_rgba("tab:red"), matplotlib.colors.to_rgba("tab:blue")
    assert colours == [red if values[j] >= 0 else blue for j in order]
    total = e.base_values[2] + values.sum()
    assert f"-> output {total:.4g}" in ax.get_title()


def test_attribution_bars_over_rows_are_mean_sizes(
    plain: TabNetRegressor, data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, _ = data
    e = plain.explain(X[:20], attributions=True, n_permutations=8)
    ax = plot_attributions(e, top=None)
    mean = np.abs(e.attributions).mean(axis=0)
    order = np.argsort(-mean, kind="stable")
    np.testing.assert_allclose([bar.get_width() for bar in ax.patches], mean[order])


def test_attribution_plot_errors(
    validated: TabNetClassifier, data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, _ = data
    with pytest.raises(ValueError, match=r"call explain\(X, attributions=True\)"):
        plot_attributions(validated.explain(X[:3]))
    e = validated.explain(X[:3], attributions=True, n_permutations=4)
    with pytest.raises(ValueError, match="row 3 is out of range"):
        plot_attributions(e, 3)
    with pytest.raises(ValueError, match=r"output must be an integer in \[0, 1\), got 1"):
        plot_attributions(e, 0, output=1)
