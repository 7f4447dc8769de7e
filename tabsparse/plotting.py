"""Plots of a fitted TabNet: global importances, signed attributions, per-step attention masks,
training history.

matplotlib is an optional dependency (``pip install 'tabsparse[plot]'``); it is imported only when
a plotting function is called. Every function draws into the Axes or Figure it is given (or into
a new one) and returns it, so plots can be styled further, saved or shown by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

import numpy as np

from tabsparse.importance import Z_NEGLIGIBLE, negligible

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tabsparse.explain import Explanation

__all__ = ["plot_attributions", "plot_history", "plot_importances", "plot_masks"]

MATPLOTLIB_MISSING = "plotting needs matplotlib: pip install 'tabsparse[plot]'"
DEFAULT_MASK_ROWS = 10


def _require_matplotlib() -> Any:
    """Import matplotlib or raise an ImportError that says how to install it."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(MATPLOTLIB_MISSING) from exc
    return matplotlib


def _new_axes(figsize: tuple[float, float]) -> Axes:
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def _check_fitted(estimator: Any, attributes: Sequence[str]) -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    if hasattr(estimator, "fit"):
        check_is_fitted(estimator, list(attributes))
    else:  # a result such as tabsparse.RefitImportances, not an estimator
        missing = [name for name in attributes if not hasattr(estimator, name)]
        if missing:
            raise NotFittedError(f"{type(estimator).__name__} has no {', '.join(missing)}")


def _feature_names(estimator: Any, n_features: int) -> list[str]:
    """Column names of a fitted estimator (``x0, x1, ...`` when it knows none)."""
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        encoder = getattr(estimator, "encoder_", None)
        names = getattr(encoder, "feature_names", None)
    if names is None or len(names) != n_features:
        return [f"x{j}" for j in range(n_features)]
    return [str(name) for name in names]


def plot_importances(
    estimator: Any, *, top: int | None = 20, z: float | None = Z_NEGLIGIBLE, ax: Axes | None = None
) -> Axes:
    """Horizontal bars of a fitted estimator's ``feature_importances_``, largest on top, with
    their spread.

    When the estimator has ``feature_importances_std_`` (the standard error of each importance;
    models saved before it existed have none), each bar gets an error bar of ``z`` standard
    errors either side, and the features the rule of :func:`tabsparse.importance.negligible`
    calls indistinguishable from zero (importance at most ``z`` standard errors, so that the
    error bar reaches zero) are drawn grey and hatched.

    Parameters
    ----------
    estimator : TabNetClassifier, TabNetRegressor, TabNetPretrainer, RefitImportances or \
Explanation
        A fitted estimator (anything with ``feature_importances_`` works), the result of
        :func:`tabsparse.refit_importances`, whose error bars are then the spread over refits
        with other seeds, or what ``explain(X)`` returns (the mean over
        their rows and its standard error).
    top : int or None, default=20
        Show the ``top`` most important columns; ``None`` shows all of them.
    z : float or None, default=2.0
        Half-width of the error bars in standard errors, and the ``z`` of the rule. ``None``
        draws plain bars.
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.

    Returns
    -------
    matplotlib.axes.Axes
        The bars are ``ax.patches``, in order from the most important column down; the y tick
        labels are the column names. With error bars, the ``BarContainer`` in ``ax.containers``
        holds them as ``.errorbar`` (half-widths ``z * feature_importances_std_``); a negligible
        feature's bar has the hatch ``"//"``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        The estimator is not fitted.
    ValueError
        ``top`` is not a positive integer, or ``z`` is not a number >= 0.
    ImportError
        matplotlib is not installed.
    """
    _require_matplotlib()
    _check_fitted(estimator, ["feature_importances_"])
    if top is not None and (isinstance(top, bool) or not isinstance(top, Integral) or top < 1):
        raise ValueError(f"top must be a positive integer or None, got {top!r}")
    if z is not None and (isinstance(z, bool) or not isinstance(z, Real) or not z >= 0):
        raise ValueError(f"z must be a number >= 0 or None, got {z!r}")
    importances = np.asarray(estimator.feature_importances_, dtype=np.float64).ravel()
    std = getattr(estimator, "feature_importances_std_", None)
    if std is not None:
        std = np.asarray(std, dtype=np.float64).ravel()
    names = _feature_names(estimator, len(importances))
    order = np.argsort(-importances, kind="stable")
    if top is not None:
        order = order[: int(top)]
    if ax is None:
        ax = _new_axes((6.4, max(2.0, 0.3 * len(order) + 1.0)))
    positions = np.arange(len(order))
    if std is None or z is None:
        ax.barh(positions, importances[order], color="tab:blue")
    else:
        flat = negligible(importances[order], std[order], z=float(z))
        bars = ax.barh(
            positions,
            importances[order],
            xerr=float(z) * std[order],
            color=np.where(flat, "lightgrey", "tab:blue").tolist(),
            error_kw={"ecolor": "black", "capsize": 2, "elinewidth": 1},
        )
        for bar, is_flat in zip(bars.patches, flat, strict=True):
            if is_flat:
                bar.set_hatch("//")
        if flat.any():
            from matplotlib.patches import Patch

            ax.legend(
                handles=[Patch(facecolor="lightgrey", hatch="//")],
                labels=["indistinguishable from zero"],
                loc="lower right",
                fontsize="small",
            )
        ax.set_xlim(left=0.0)
    ax.set_yticks(positions, [names[j] for j in order])
    ax.set_ylim(len(order) - 0.5, -0.5)  # the most important column on top
    ax.set_xlabel("importance" if std is None or z is None else f"importance (± {z:g} std. error)")
    shown = f"top {len(order)} of {len(importances)}" if len(order) < len(importances) else "all"
    ax.set_title(f"Feature importances ({shown} columns)")
    return ax


def plot_attributions(
    explanation: Explanation,
    row: int | None = None,
    *,
    output: int = 0,
    top: int | None = 20,
    z: float | None = Z_NEGLIGIBLE,
    ax: Axes | None = None,
) -> Axes:
    """Signed attributions of ``explain(X, attributions=True)``: one row's, or the mean size
    over all rows.

    With ``row``, a horizontal bar per column (the ``top`` largest in size, largest on top):
    to the right (red) a column that raised the row's raw output, to the left (blue) one that
    lowered it, with error bars of ``z`` standard errors where the values were sampled; the
    title gives the base value and the row's output, which the bars add up to (with the
    columns not shown). Without ``row``, the mean absolute attribution of each column over the
    explained rows (as shap's bar plot).

    Parameters
    ----------
    explanation : Explanation
        With attributions (``explain(X, attributions=True)``).
    row : int, optional
        The row to draw; None: the mean absolute attribution over the rows.
    output : int, default=0
        Which output, for a model with several (``explanation.output_names``).
    top : int or None, default=20
        Show the ``top`` largest columns; ``None`` shows all.
    z : float or None, default=2.0
        Half-width of a row's error bars in standard errors; ``None`` draws none.
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.

    Returns
    -------
    matplotlib.axes.Axes
        The bars are ``ax.patches`` from the top down; the y tick labels are the column names.

    Raises
    ------
    ValueError
        The explanation has no attributions, or ``row``, ``output``, ``top`` or ``z`` is out
        of range.
    ImportError
        matplotlib is not installed.
    """
    _require_matplotlib()
    if explanation.attributions is None or explanation.base_values is None:
        raise ValueError("this explanation has no attributions: call explain(X, attributions=True)")
    values = np.asarray(explanation.attributions, dtype=np.float64)
    std = np.asarray(explanation.attributions_std, dtype=np.float64)
    base = np.asarray(explanation.base_values, dtype=np.float64)
    if values.ndim == 2:
        values, std, base = values[..., None], std[..., None], base[..., None]
    n_outputs = values.shape[2]
    if isinstance(output, bool) or not isinstance(output, Integral) or not 0 <= output < n_outputs:
        raise ValueError(f"output must be an integer in [0, {n_outputs}), got {output!r}")
    if top is not None and (isinstance(top, bool) or not isinstance(top, Integral) or top < 1):
        raise ValueError(f"top must be a positive integer or None, got {top!r}")
    if z is not None and (isinstance(z, bool) or not isinstance(z, Real) or not z >= 0):
        raise ValueError(f"z must be a number >= 0 or None, got {z!r}")
    names = [str(name) for name in explanation.feature_names]
    if row is None:
        shown = np.abs(values[:, :, output]).mean(axis=0)
        err = None
    else:
        r = _check_rows([row], len(values))[0]
        shown, err = values[r, :, output], std[r, :, output]
    order = np.argsort(-np.abs(shown), kind="stable")
    if top is not None:
        order = order[: int(top)]
    if ax is None:
        ax = _new_axes((6.4, max(2.0, 0.3 * len(order) + 1.0)))
    positions = np.arange(len(order))
    label = ""
    if explanation.output_names and n_outputs > 1:
        label = f" ({explanation.output_names[output]})"
    if row is None:
        ax.barh(positions, shown[order], color="tab:blue")
        ax.set_xlabel(f"mean |attribution|{label}")
        ax.set_title(f"Attributions over {len(values)} rows")
    else:
        assert err is not None
        xerr = None
        if z is not None and np.isfinite(err[order]).all() and (err[order] > 0).any():
            xerr = float(z) * err[order]
        ax.barh(
            positions,
            shown[order],
            xerr=xerr,
            color=np.where(shown[order] >= 0, "tab:red", "tab:blue").tolist(),
            error_kw={"ecolor": "black", "capsize": 2, "elinewidth": 1},
        )
        ax.axvline(0.0, color="black", linewidth=0.8)
        total = base[r, output] + values[r, :, output].sum()
        ax.set_xlabel(f"attribution{label}")
        ax.set_title(f"Row {r}: base {base[r, output]:.4g} -> output {total:.4g}")
    ax.set_yticks(positions, [names[j] for j in order])
    ax.set_ylim(len(order) - 0.5, -0.5)
    return ax


def _check_rows(rows: Any, n_rows: int) -> list[int]:
    """Row indices as a list, each in ``[0, n_rows)``; a clear error otherwise."""
    if rows is None:
        return list(range(min(DEFAULT_MASK_ROWS, n_rows)))
    if isinstance(rows, (str, bytes)) or not isinstance(rows, (Iterable, np.ndarray)):
        raise TypeError(
            f"rows must be a sequence of row indices such as [0, 5] or range(10), got {rows!r}"
        )
    out: list[int] = []
    for row in rows:
        if isinstance(row, (bool, np.bool_)) or not isinstance(row, (Integral, np.integer)):
            raise TypeError(f"rows must hold integer row indices, got {row!r}")
        if not 0 <= int(row) < n_rows:
            raise ValueError(
                f"row {int(row)} is out of range: the explanation has {n_rows} rows "
                f"(valid rows are 0 to {n_rows - 1})"
            )
        out.append(int(row))
    if not out:
        raise ValueError("rows is empty; choose at least one row to plot")
    return out


def _masks_figsize(n_steps: int, n_rows: int, n_features: int) -> tuple[float, float]:
    """A figure size (inches) that keeps the heatmaps of :func:`plot_masks` legible."""
    width = max(6.0, 0.35 * n_features + 2.5)
    height = (n_steps + 1) * max(1.2, 0.22 * n_rows + 0.6) + 0.8
    return width, height


def plot_masks(
    explanation: Explanation, rows: Sequence[int] | None = None, *, fig: Figure | None = None
) -> Figure:
    """Heatmaps of the attention masks of each decision step, plus the aggregate importances.

    One panel per decision step shows, for the chosen rows (y axis), how much attention each
    column (x axis) received; a last panel shows the rows' aggregate importances. All panels share
    one colour scale.

    Parameters
    ----------
    explanation : Explanation
        What ``estimator.explain(X)`` returned.
    rows : sequence of int, optional
        Row positions within the explanation (0-based); the first 10 rows by default.
    fig : matplotlib Figure, optional
        Where to draw (the panels are added to it); a new figure is made when omitted.

    Returns
    -------
    matplotlib.figure.Figure
        Its first ``n_steps`` axes hold the step masks (as images of shape
        ``(len(rows), n_features)``), the next one the aggregate importances, the last one the
        colour bar.

    Raises
    ------
    ValueError
        A row is out of range, or ``rows`` is empty.
    TypeError
        ``explanation`` is not an :class:`~tabsparse.explain.Explanation`, or ``rows`` does not
        hold integers.
    ImportError
        matplotlib is not installed.
    """
    _require_matplotlib()
    masks = getattr(explanation, "masks", None)
    importances = getattr(explanation, "importances", None)
    if masks is None or importances is None:
        raise TypeError(
            "plot_masks needs an Explanation (what estimator.explain(X) returns), "
            f"got {type(explanation).__name__}"
        )
    masks = np.asarray(masks)
    importances = np.asarray(importances)
    n_steps, n_rows, n_features = masks.shape
    chosen = _check_rows(rows, n_rows)
    names = [str(name) for name in explanation.feature_names]
    panels = [(f"step {s + 1}", masks[s, chosen, :]) for s in range(n_steps)]
    panels.append(("aggregate importance", importances[chosen, :]))
    vmax = max(float(max(np.max(data) for _, data in panels)), 1e-12)
    if fig is None:
        import matplotlib.pyplot as plt

        figsize = _masks_figsize(n_steps, len(chosen), n_features)
        fig = plt.figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    image = None
    for ax, (title, data) in zip(axes, panels, strict=True):
        image = ax.imshow(
            data, aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest"
        )
        ax.set_title(title, fontsize="medium", loc="left")
        ax.set_ylabel("row")
        ax.set_yticks(np.arange(len(chosen)), [str(r) for r in chosen])
        if len(chosen) > 25:  # keep the row labels legible
            for label in ax.get_yticklabels()[1::2]:
                label.set_visible(False)
    axes[-1].set_xticks(np.arange(n_features), names, rotation=90)
    axes[-1].set_xlabel("feature")
    assert image is not None
    fig.colorbar(image, ax=list(axes), label="attention")
    fig.suptitle("Attention masks per decision step")
    return fig


def plot_history(estimator: Any, *, ax: Axes | None = None) -> Axes:
    """Training loss per epoch and, with validation data, validation loss and score.

    Parameters
    ----------
    estimator : TabNetClassifier or TabNetRegressor
        A fitted estimator (uses ``history_`` and ``best_iteration_``).
    ax : matplotlib Axes, optional
        Where to draw the losses; a new figure is made when omitted.

    Returns
    -------
    matplotlib.axes.Axes
        The axes with the loss lines (labelled ``"train loss"`` and ``"validation loss"``), a
        dashed vertical line and a marker at the best epoch (the one whose weights were kept).
        When the estimator watched a score other than the loss, the validation score is drawn
        on a twin axes (right-hand scale), ``ax.figure.axes`` holds it.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        The estimator is not fitted.
    ValueError
        The history is empty.
    ImportError
        matplotlib is not installed.
    """
    _require_matplotlib()
    _check_fitted(estimator, ["history_"])
    history = list(estimator.history_)
    if not history:
        raise ValueError("the estimator's history_ is empty: there is no epoch to plot")
    epochs = np.array([int(rec["epoch"]) for rec in history])

    def column(key: str) -> np.ndarray | None:
        if not all(key in rec for rec in history):
            return None
        return np.array([float(rec[key]) for rec in history])

    train_loss = column("train_loss")
    val_loss = column("val_loss")
    val_score = column("val_score")
    if ax is None:
        ax = _new_axes((6.4, 4.0))
    if train_loss is not None:
        ax.plot(epochs, train_loss, marker=".", color="tab:blue", label="train loss")
    if val_loss is not None:
        ax.plot(epochs, val_loss, marker=".", color="tab:orange", label="validation loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    best = getattr(estimator, "best_iteration_", None)
    if best is not None and best in epochs:
        i = int(np.flatnonzero(epochs == best)[0])
        watched = val_loss if val_loss is not None else train_loss
        ax.axvline(best, color="gray", linestyle="--", linewidth=1, label=f"best epoch ({best})")
        if watched is not None:
            ax.plot([best], [watched[i]], marker="*", markersize=12, color="tab:red", ls="none")
    handles, labels = ax.get_legend_handles_labels()
    legend_ax = ax
    # With scoring="loss" the score is minus the validation loss: not worth a second scale.
    if val_score is not None and not (
        val_loss is not None and np.allclose(val_score, -val_loss, equal_nan=True)
    ):
        twin = ax.twinx()
        twin.plot(
            epochs,
            val_score,
            marker=".",
            color="tab:green",
            linestyle=":",
            label="validation score",
        )
        twin.set_ylabel("validation score")
        more_handles, more_labels = twin.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
        legend_ax = twin  # drawn last, so no line crosses the legend
    legend_ax.legend(handles, labels, loc="best", fontsize="small")
    if len(epochs) <= 20:
        ax.set_xticks(epochs)
    ax.set_title("Training history")
    return ax
