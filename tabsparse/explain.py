"""Per-sample explanations: which columns each decision step attended to."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Explanation:
    """What ``estimator.explain(X)`` returns.

    Attributes
    ----------
    importances : ndarray of shape (n_samples, n_features)
        The paper's aggregate mask: every step's mask weighted by how much that step contributed
        to the decision, normalised so that each row sums to one. Embedding channels of a
        categorical column are summed back to that column; a feature group's weight is shared
        equally among its columns.
    masks : ndarray of shape (n_steps, n_samples, n_features)
        The attention mask of each decision step (each row of each step sums to one).
    feature_names : list of str
        The column names, in the order of the last axis.
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

    def to_frame(self):  # type: ignore[no-untyped-def]
        """Importances as a pandas DataFrame with one column per feature."""
        import pandas as pd

        return pd.DataFrame(self.importances, columns=self.feature_names)
