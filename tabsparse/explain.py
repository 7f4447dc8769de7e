"""Per-sample explanations (:class:`Explanation`): which columns each prediction needs, what
each decision step read, how much and which way each column moved each prediction, and how
sure the global importances drawn from them are."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tabsparse.importance import (
    MIN_SELECTION_RATE,
    Z_NEGLIGIBLE,
    global_importances,
    negligible,
)

__all__ = ["Explanation"]


class _RowImportances:
    """What an explanation offers over its per-row ``importances`` (rows summing to one) and
    ``selected`` features."""

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


@dataclass(frozen=True)
class Explanation(_RowImportances):
    """What ``estimator.explain(X)`` returns.

    Attributes
    ----------
    selected : ndarray of bool, shape (n_samples, n_features)
        Which columns each row's prediction needs: ``selection_probabilities >= 0.5`` (see
        Notes).
    selection_probabilities : ndarray of shape (n_samples, n_features) or None
        The fitted column selector's probability that the row needs each column (the
        estimator's ``explain``); None for a model without a selector.
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
    The masks say what each step *read*; ``selected`` says what the prediction *needs*: the
    columns whose values, kept while every other column is replaced by a training row's, hold
    the row's prediction (the fit's column selector, :mod:`tabsparse.training.selection`). A
    network often reads a column it hardly uses, so the masks select more than is needed. For a
    model without a selector (``selection_probabilities`` None), ``selected`` falls back to the
    masks: an importance above zero (sparsemax gives exact zeros). Global statements come with
    their spread: :meth:`global_importances` gives the mean over the rows
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
    selection_probabilities: np.ndarray | None = None

    @property
    def selected(self) -> np.ndarray:
        """Boolean ``(n_samples, n_features)``: whether each row's prediction needs each column
        (``selection_probabilities >= 0.5``; without them, an importance above zero)."""
        if self.selection_probabilities is not None:
            return np.asarray(self.selection_probabilities) >= 0.5
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
