"""Per-sample explanations: which columns each decision step attended to
(:class:`Explanation`), how far each column moves each prediction (:class:`Effects`), which
columns each prediction needs (:class:`Selection`), and how sure the global importances drawn
from them are."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tabsparse.importance import (
    MATERIAL_SHARE,
    MIN_SELECTION_RATE,
    Z_NEGLIGIBLE,
    global_importances,
    negligible,
)

__all__ = ["Effects", "Explanation", "Selection"]


class _RowImportances:
    """What both kinds of explanation offer over their per-row ``importances`` (rows summing to
    one) and ``selected`` features."""

    importances: np.ndarray
    feature_names: list[str]

    @property
    def selected(self) -> np.ndarray:
        raise NotImplementedError

    def __len__(self) -> int:
        return int(self.importances.shape[0])

    def top_features(self, row: int, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` most important columns of one row, as ``(name, importance)`` pairs."""
        order = np.argsort(-self.importances[row], kind="stable")[:k]
        return [(self.feature_names[j], float(self.importances[row, j])) for j in order]

    def selection_rate(self) -> np.ndarray:
        """Share of the rows in which each feature is selected, shape ``(n_features,)``."""
        return np.asarray(self.selected.mean(axis=0))

    def global_importances(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean importance of each feature over the explained rows and its standard error.

        The mean is normalised to sum to one (for :class:`Explanation`, what
        ``feature_importances_`` is on the estimator's own sample of rows). The standard error
        is that of a mean over the rows, ``std(importances, axis=0, ddof=1) / sqrt(n_rows)``: it
        says how much the mean depends on which rows were explained, not how much it would
        change if the model were refitted with another seed (see
        :func:`tabsparse.importance.global_importances`).

        Returns
        -------
        mean, std : ndarray of shape (n_features,)
        """
        return global_importances(self.importances)

    @property
    def feature_importances_(self) -> np.ndarray:
        """The mean of :meth:`global_importances`: what ``plot_importances`` draws."""
        return self.global_importances()[0]

    @property
    def feature_importances_std_(self) -> np.ndarray:
        """The standard error of :meth:`global_importances` (over the explained rows)."""
        return self.global_importances()[1]

    @property
    def feature_names_in_(self) -> np.ndarray:
        """``feature_names`` as an array, as on a fitted estimator."""
        return np.asarray(self.feature_names, dtype=object)

    def negligible(
        self,
        *,
        z: float = Z_NEGLIGIBLE,
        min_rate: float = MIN_SELECTION_RATE,
    ) -> np.ndarray:
        """Boolean ``(n_features,)``: the features whose importance on these rows is
        indistinguishable from zero.

        A feature is negligible when its mean importance is at most ``z`` standard errors
        (:meth:`global_importances`) or when it is selected in fewer than ``min_rate`` of the
        rows (:meth:`selection_rate`). The rule says whether *this model* uses a feature on these
        rows; a feature it does use may still be irrelevant to the target (a model can lean on
        noise): the spread over refits or ensemble members says that.
        """
        mean, std = self.global_importances()
        return negligible(mean, std, self.selection_rate(), z=z, min_rate=min_rate)

    def to_frame(self):  # type: ignore[no-untyped-def]
        """Importances as a pandas DataFrame with one column per feature."""
        import pandas as pd

        return pd.DataFrame(self.importances, columns=self.feature_names)


def _per_row(name: str, values: object, feature_names: list[str]) -> np.ndarray:
    """``values`` as float64 ``(n_samples, n_features)``, or a ``ValueError`` naming ``name``."""
    out = np.asarray(values, dtype=np.float64)
    if out.ndim != 2 or out.shape[1] != len(feature_names):
        raise ValueError(f"{name} {out.shape} must be (n_samples, {len(feature_names)})")
    return out


def _shares(values: np.ndarray) -> np.ndarray:
    """Each row of ``values`` as shares of its total (a row totalling 0 stays zeros)."""
    total = values.sum(axis=1, keepdims=True)
    return np.divide(values, total, out=np.zeros_like(values), where=total > 0)


@dataclass(frozen=True)
class Explanation(_RowImportances):
    """What ``estimator.explain(X)`` returns.

    Attributes
    ----------
    importances : ndarray of shape (n_samples, n_features)
        The paper's aggregate mask: every step's mask weighted by how far that step moves the
        row's outputs (the size of its share of the logits or predictions through the linear
        head, centred within a softmax: :func:`tabsparse.nn.functional.step_effects`),
        normalised so that each row sums to one. Embedding channels of a
        categorical column are summed back to that column; a feature group's weight is shared
        equally among its columns.
    masks : ndarray of shape (n_steps, n_samples, n_features)
        The attention mask of each decision step (each row of each step sums to one).
    feature_names : list of str
        The column names, in the order of the last axis.
    attributions : ndarray of shape (n_samples, n_features) or (n_samples, n_features, n_outputs)
        With ``explain(X, attributions=True)``: each column's Shapley value in each row
        (interventional, in the units of the model's raw output: log-odds, centred logits or
        predictions); one output drops the last axis. None otherwise.
    base_values : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        The mean raw output over the background rows (the same in every row):
        ``base_values + attributions.sum(axis=1)`` is each row's raw output.
    attributions_std : ndarray, the shape of ``attributions``
        The standard error of each attribution: zero where exact, NaN where one antithetic
        pair gives no spread.
    output_names : list of str
        A name per raw output (the class of a binary classifier's log-odds, each class of a
        multi-class one, ...).
    data : ndarray of shape (n_samples, n_features) or None
        The explained rows as given (for plots: shap colours a beeswarm by them).

    Notes
    -----
    A row's *selected* features are those with an importance above zero: sparsemax gives exact
    zeros, so "selected" is not a threshold choice (with ``mask_type="entmax"`` too). Global
    statements come with their spread: :meth:`global_importances` gives the mean over the rows
    and its standard error, :meth:`negligible` applies the rule of
    :func:`tabsparse.importance.negligible` to them.
    """

    importances: np.ndarray
    masks: np.ndarray
    feature_names: list[str]
    attributions: np.ndarray | None = None
    base_values: np.ndarray | None = None
    attributions_std: np.ndarray | None = None
    output_names: list[str] | None = None
    data: np.ndarray | None = None

    @property
    def selected(self) -> np.ndarray:
        """Boolean ``(n_samples, n_features)``: whether each row's importance of each feature is
        above zero."""
        return np.asarray(self.importances) > 0

    def to_shap(self):  # type: ignore[no-untyped-def]
        """The attributions as a ``shap.Explanation`` (needs the ``shap`` package: ``pip install
        tabsparse[shap]``), so that shap's plots work on them: ``shap.plots.waterfall(e[0])``,
        ``shap.plots.beeswarm(e)``, ``shap.plots.bar(e)`` (for several outputs, one output at a
        time: ``e[:, :, k]``)."""
        if self.attributions is None:
            raise ValueError(
                "this explanation has no attributions: call explain(X, attributions=True)"
            )
        try:
            import shap
        except ImportError as exc:
            raise ImportError(
                "to_shap needs the shap package: pip install 'tabsparse[shap]'"
            ) from exc
        multi = self.attributions.ndim == 3
        return shap.Explanation(
            values=self.attributions,
            base_values=self.base_values,
            data=self.data,
            feature_names=list(self.feature_names),
            output_names=list(self.output_names or []) if multi else None,
        )


@dataclass(frozen=True)
class Effects(_RowImportances):
    """What ``estimator.explain_effects(X)`` returns: how far each column moves each row's
    prediction when it is replaced by values drawn from its marginal distribution.

    Attributes
    ----------
    effects : ndarray of shape (n_samples, n_features)
        The mean size of the change of the row's outputs over the draws (logits of a
        classifier, centred within a softmax; predictions of a regressor, in the network's
        standardised units; :mod:`tabsparse.training.effects`). With a shared first mask,
        exactly zero where no step reads the column in that row.
    feature_names : list of str
        The column names, in the order of the last axis.
    material_share : float
        The rule for :attr:`selected` (default :data:`tabsparse.importance.MATERIAL_SHARE`).
    importances : ndarray of shape (n_samples, n_features)
        ``effects`` as shares of the row's total (rows sum to one; a row that no column moves
        is all zeros).

    Notes
    -----
    A row's *selected* features are those whose share is at least ``material_share`` (5%): a
    column the network reads but whose replacement moves the prediction by less than a
    twentieth of what all columns together move it is not counted. The masks of
    :class:`Explanation` say what each step *read*; effects say what *moved* the prediction,
    whatever route it took through the steps. On synthetic tables with known answers effects
    rank the relevant features more accurately and select far fewer irrelevant ones
    (``docs/trust.md``); they cost ``n_draws * n_features`` forward passes per row.
    """

    effects: np.ndarray
    feature_names: list[str]
    material_share: float = MATERIAL_SHARE
    importances: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        effects = _per_row("effects", self.effects, self.feature_names)
        if not 0.0 <= self.material_share <= 1.0:
            raise ValueError(f"material_share={self.material_share!r} must be in [0, 1]")
        object.__setattr__(self, "effects", effects)
        object.__setattr__(self, "importances", _shares(effects))

    @property
    def selected(self) -> np.ndarray:
        """Boolean ``(n_samples, n_features)``: whether each column's share of the row's
        effects is at least :attr:`material_share` (and above zero)."""
        return (self.importances >= self.material_share) & (self.importances > 0)


@dataclass(frozen=True)
class Selection(_RowImportances):
    """What ``selector.explain(X)`` returns (a :class:`tabsparse.ColumnSelector` from
    ``estimator.fit_selector``): which columns each row's prediction needs, when every other
    column is replaced by values drawn from the background.

    Attributes
    ----------
    probabilities : ndarray of shape (n_samples, n_features)
        The learned selector's probability that the row needs each column
        (:mod:`tabsparse.training.selection`).
    residual : ndarray of shape (n_samples,)
        How far the row's prediction moves, on average, when its unselected columns are drawn
        from the background, as a share of how far a background row's moves when all of its
        columns are drawn: near 0, the selected columns are enough for this row; near 1 or
        above, they are not (the selection is unreliable for that row).
    feature_names : list of str
        The column names, in the order of the last axis.
    probabilities_std : ndarray of shape (n_samples, n_features) or None
        With several selectors (``fit_selector(n_selectors=k)``, ``k > 1``): the standard
        deviation of their probabilities (``probabilities`` is their mean); None for one.
    importances : ndarray of shape (n_samples, n_features)
        ``probabilities`` as shares of the row's total (rows sum to one).

    Notes
    -----
    A row's *selected* columns are those with probability at least 0.5. Where
    :class:`Effects` replace one column at a time, the selector chooses a set, and being one
    smooth function of the row it keeps the columns of the row's regime together even where one
    of them happens to matter little in that row; on synthetic tables with known answers it
    selects the relevant columns at least as often as effects and fewer irrelevant ones
    (``docs/trust.md``).
    """

    probabilities: np.ndarray
    residual: np.ndarray
    feature_names: list[str]
    probabilities_std: np.ndarray | None = None
    importances: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        p = _per_row("probabilities", self.probabilities, self.feature_names)
        residual = np.asarray(self.residual, dtype=np.float64)
        if residual.shape != (p.shape[0],):
            raise ValueError(f"residual {residual.shape} must be ({p.shape[0]},)")
        if self.probabilities_std is not None:
            std = _per_row("probabilities_std", self.probabilities_std, self.feature_names)
            if std.shape != p.shape:
                raise ValueError(f"probabilities_std {std.shape} must be {p.shape}")
            object.__setattr__(self, "probabilities_std", std)
        object.__setattr__(self, "probabilities", p)
        object.__setattr__(self, "residual", residual)
        object.__setattr__(self, "importances", _shares(p))

    @property
    def selected(self) -> np.ndarray:
        """Boolean ``(n_samples, n_features)``: whether the row needs each column (probability
        at least 0.5)."""
        return self.probabilities >= 0.5
