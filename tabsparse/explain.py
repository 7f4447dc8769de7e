"""Per-sample explanations: which columns each decision step attended to, and how sure the
global importances drawn from them are."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tabsparse.importance import (
    MIN_SELECTION_RATE,
    Z_NEGLIGIBLE,
    global_importances,
    negligible,
)


@dataclass(frozen=True)
class Explanation:
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

    def __len__(self) -> int:
        return int(self.importances.shape[0])

    def top_features(self, row: int, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` most important columns of one row, as ``(name, importance)`` pairs."""
        order = np.argsort(-self.importances[row], kind="stable")[:k]
        return [(self.feature_names[j], float(self.importances[row, j])) for j in order]

    @property
    def selected(self) -> np.ndarray:
        """Boolean ``(n_samples, n_features)``: whether each row's importance of each feature is
        above zero."""
        return np.asarray(self.importances) > 0

    def selection_rate(self) -> np.ndarray:
        """Share of the rows in which each feature is selected, shape ``(n_features,)``."""
        return self.selected.mean(axis=0)

    def global_importances(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean importance of each feature over the explained rows and its standard error.

        The mean is normalised to sum to one (what ``feature_importances_`` is on the estimator's
        own sample of rows). The standard error is that of a mean over the rows,
        ``std(importances, axis=0, ddof=1) / sqrt(n_rows)``: it says how much the mean depends
        on which rows were explained, not how much it would change if the model
        were refitted with another seed (see :func:`tabsparse.importance.global_importances`).

        Returns
        -------
        mean, std : ndarray of shape (n_features,)
        """
        return global_importances(self.importances)

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
