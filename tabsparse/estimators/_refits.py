"""Global importances averaged over refits with other seeds: :func:`refit_importances`.

One fit's global importances say which columns *that* network attends to; a refit with another
``random_state`` may spread the weight differently among columns that carry the same information
(``docs/trust.md``). The mean over a few refits is steadier, and the spread over them is the
uncertainty that matters when deciding whether to act on an importance: how much a refit moves
it. The math of the mean, its standard error and the negligible rule is
:mod:`tabsparse.importance`'s; this module only fits and collects.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from tabsparse.importance import Z_NEGLIGIBLE, global_importances, negligible

__all__ = ["RefitImportances", "refit_importances"]


@dataclass(frozen=True)
class RefitImportances:
    """What :func:`refit_importances` returns.

    Attributes
    ----------
    per_fit : ndarray of shape (n_fits, n_features)
        Each refit's global importances (each row sums to one).
    seeds : list of int
        The ``random_state`` of each refit, in the order of ``per_fit``.
    feature_names : list of str
        The column names, in the order of the last axis.
    estimators : list of estimators
        The refitted estimators, in the order of ``per_fit``.
    """

    per_fit: np.ndarray
    seeds: list[int]
    feature_names: list[str]
    estimators: list[Any]

    @property
    def feature_importances_(self) -> np.ndarray:
        """The mean of the refits' importances, shape ``(n_features,)``, summing to one."""
        return global_importances(self.per_fit[:, None, :])[0]

    @property
    def feature_importances_std_(self) -> np.ndarray:
        """The standard error of :attr:`feature_importances_` over the refits,
        ``std(per_fit, ddof=1) / sqrt(n_fits)``: how much the mean would move with other
        seeds."""
        return global_importances(self.per_fit[:, None, :])[1]

    @property
    def feature_names_in_(self) -> np.ndarray:
        """:attr:`feature_names` as an array (what :func:`tabsparse.plotting.plot_importances`
        labels the bars with)."""
        return np.asarray(self.feature_names, dtype=object)

    def negligible(self, *, z: float = Z_NEGLIGIBLE) -> np.ndarray:
        """Boolean ``(n_features,)``: the features whose mean importance is at most ``z``
        standard errors over the refits (:func:`tabsparse.importance.negligible`)."""
        return negligible(self.feature_importances_, self.feature_importances_std_, z=z)

    def agreement(self, k: int = 5) -> float:
        """How many of their top ``k`` features two refits share, on average over all pairs
        (0 to ``k``): how steady this table's ranking is from one seed to the next. The
        benchmark's stability measure (``benchmarks/README.md``, "Explanations")."""
        if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        tops = [set(np.argsort(-row, kind="stable")[: int(k)].tolist()) for row in self.per_fit]
        pairs = list(itertools.combinations(tops, 2))
        return float(np.mean([len(a & b) for a, b in pairs]))

    def top_features(self, k: int = 5) -> list[tuple[str, float, float]]:
        """The ``k`` features of largest mean importance, as ``(name, mean, standard error)``."""
        mean, std = self.feature_importances_, self.feature_importances_std_
        order = np.argsort(-mean, kind="stable")[:k]
        return [(self.feature_names[j], float(mean[j]), float(std[j])) for j in order]

    def to_frame(self):  # type: ignore[no-untyped-def]
        """A pandas DataFrame, one row per feature sorted by mean importance: ``importance``,
        ``std`` (standard error over the refits), ``negligible``, and one column per seed."""
        import pandas as pd

        frame = pd.DataFrame(
            {
                "importance": self.feature_importances_,
                "std": self.feature_importances_std_,
                "negligible": self.negligible(),
            },
            index=pd.Index(self.feature_names, name="feature"),
        )
        for seed, row in zip(self.seeds, self.per_fit, strict=True):
            frame[f"seed {seed}"] = row
        return frame.sort_values("importance", ascending=False, kind="stable")


def refit_importances(
    estimator: Any,
    X: Any,
    y: Any = None,
    *,
    seeds: int | Sequence[int] = 3,
    X_explain: Any = None,
    n_jobs: int | None = None,
    **fit_params: Any,
) -> RefitImportances:
    """Fit copies of ``estimator`` with several ``random_state`` values and average their global
    importances, with the spread over the refits.

    Parameters
    ----------
    estimator : TabNetClassifier, TabNetRegressor or TabNetPretrainer
        The settings to refit (it is cloned: neither fitted nor changed; a fitted estimator's
        own fit is not reused).
    X, y
        The training data, as for ``estimator.fit`` (``y`` is not used by the pretrainer).
    seeds : int or sequence of int, default=3
        An int ``n >= 2``: the seeds ``r, r + 1, ..., r + n - 1``, where ``r`` is the
        estimator's ``random_state`` when that is an int, else 0. A sequence: at least two
        distinct ints.
    X_explain : array-like, optional
        Rows to compute every refit's importances on (the mean of ``explain(X_explain)``'s
        per-row importances); by default each refit's ``feature_importances_`` (its own
        held-out or training rows).
    n_jobs : int, optional
        Refits run in parallel (joblib); None: one after the other.
    **fit_params
        Passed to every ``fit`` (``X_val``, ``sample_weight``, ...).

    Returns
    -------
    RefitImportances
        ``feature_importances_`` (the mean), ``feature_importances_std_`` (its standard error
        over the refits), ``per_fit``, ``agreement(k)``, ``negligible()``; it can be passed to
        :func:`tabsparse.plotting.plot_importances`.

    Raises
    ------
    ValueError
        ``seeds`` is not an int >= 2 or a sequence of at least two distinct ints, or
        ``estimator`` has no ``random_state`` parameter.
    """
    from joblib import Parallel, delayed
    from sklearn.base import clone

    params = estimator.get_params(deep=False)
    if "random_state" not in params:
        raise ValueError(
            f"{type(estimator).__name__} has no random_state parameter: refits with other "
            "seeds need one"
        )
    chosen = _seeds(seeds, params["random_state"])
    fitted = Parallel(n_jobs=n_jobs)(
        delayed(_fit_one)(clone(estimator).set_params(random_state=s), X, y, fit_params)
        for s in chosen
    )
    rows = [_global(est, X_explain) for est in fitted]
    names = [str(name) for name in fitted[0].encoder_.input_names]
    return RefitImportances(np.stack(rows), chosen, names, list(fitted))


def _seeds(seeds: Any, base: Any) -> list[int]:
    if isinstance(seeds, Integral) and not isinstance(seeds, bool):
        if seeds < 2:
            raise ValueError(f"seeds={seeds!r}: at least 2 refits are needed for a spread")
        start = int(base) if isinstance(base, Integral) and not isinstance(base, bool) else 0
        return list(range(start, start + int(seeds)))
    try:
        chosen = list(seeds)
    except TypeError:
        chosen = []
    if (
        len(chosen) < 2
        or any(isinstance(s, bool) or not isinstance(s, Integral) for s in chosen)
        or len(set(chosen)) != len(chosen)
    ):
        raise ValueError(
            f"seeds must be an int >= 2 or a sequence of at least 2 distinct ints, got {seeds!r}"
        )
    return [int(s) for s in chosen]


def _fit_one(estimator: Any, X: Any, y: Any, fit_params: dict[str, Any]) -> Any:
    if y is None:
        return estimator.fit(X, **fit_params)
    return estimator.fit(X, y, **fit_params)


def _global(estimator: Any, X_explain: Any) -> np.ndarray:
    if X_explain is None:
        return np.asarray(estimator.feature_importances_, dtype=np.float64)
    return global_importances(estimator.explain(X_explain).importances)[0]
