"""Global importances with their spread, and the rule for an importance indistinguishable from zero.

A global importance is the mean of per-row importances (the aggregate masks of
:class:`tabsparse.explain.Explanation`, each row summing to one) over a set of rows, normalised to
sum to one. This module says how sure that mean is:

* :func:`global_importances` returns the mean and its **standard error**. For one model (an array
  ``(n_rows, n_features)``) the standard error is in closed form, below. For several models (an
  array ``(n_members, n_rows, n_features)``: ensemble members or refits with other seeds, on the
  same or on different rows) it is the spread over the members: the standard deviation of the
  members' global importances divided by ``sqrt(n_members)``, the standard error of their mean.
  One member falls back to the closed form over its rows.
* :func:`negligible` is the documented rule for a feature whose importance is indistinguishable
  from zero: its mean importance is at most ``z`` standard errors (``z = 2`` by default, about a
  95% one-sided bound), or, where the per-row selection is known, the feature is selected
  (importance > 0, which sparsemax makes exact) in fewer than ``min_rate`` of the rows (1%).

**The standard error of one model's global importance.** Write ``x_i`` for row ``i``'s importances
(``n`` rows), ``s_i = sum_k x_ik`` for its sum, ``m = mean_i x_i``, ``S = sum_k m_k`` and
``r = m / S`` for the global importance. ``r`` is a smooth function of the mean ``m``, whose
covariance is ``C / n`` (``C`` the covariance of the rows, ``ddof=1``), so the delta method gives
``var(r_j) ~= g_j^T C g_j / n`` with ``g_j = dr_j/dm = (e_j - r_j * 1) / S``. Since
``g_j^T (x_i - m) = (x_ij - r_j s_i) / S - (m_j - r_j S) / S`` and ``m_j = r_j S``, this is the
plain variance of the per-row residuals ``z_ij = (x_ij - r_j s_i) / S`` (whose mean is zero)::

    se_j = sqrt(sum_i z_ij**2 / (n - 1)) / sqrt(n)

Aggregate masks sum to one in every row (``s_i = S = 1``), where ``z_ij = x_ij - m_j`` and the
formula is exactly the standard error of a mean, ``std(x[:, j], ddof=1) / sqrt(n)``: the
normalised mean is the plain mean. It agrees with the standard deviation of the mean over
bootstrap resamples of the rows up to resampling noise and a factor ``sqrt(n / (n - 1))``, without
drawing any resample. A feature never selected has ``z_ij = 0`` and so no spread.

Pure numpy: the core layer, used by the estimators and by :class:`~tabsparse.explain.Explanation`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MIN_SELECTION_RATE",
    "Z_NEGLIGIBLE",
    "global_importances",
    "negligible",
    "sum_to_columns",
]

Z_NEGLIGIBLE = 2.0  # an importance within this many standard errors of zero is negligible
MIN_SELECTION_RATE = 0.01  # a feature selected in fewer rows than this share is negligible


def global_importances(importances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Global importances and their standard errors.

    Parameters
    ----------
    importances : ndarray of shape (n_rows, n_features) or (n_members, n_rows, n_features)
        Per-row importances of one model, or of several (ensemble members, seeds).

    Returns
    -------
    mean : ndarray of shape (n_features,), float64
        One model: the mean over the rows, normalised to sum to one. Several: the mean of the
        members' normalised means.
    std : ndarray of shape (n_features,), float64
        The standard error of ``mean``. One model: the delta-method standard error of the
        module docstring, ``std(importances, axis=0, ddof=1) / sqrt(n_rows)`` when every row sums
        to one; zero for one row. Several: ``std(member_means, ddof=1) / sqrt(n_members)``.
    """
    arr = np.asarray(importances, dtype=np.float64)
    if arr.ndim == 3:
        if arr.shape[0] == 1:
            arr = arr[0]
        else:
            members = _normalised(arr.mean(axis=1))
            std = members.std(axis=0, ddof=1) / np.sqrt(members.shape[0])
            return members.mean(axis=0), std
    x = _as_rows(arr)
    if len(x) == 0:
        raise ValueError("importances has no rows")
    raw = x.mean(axis=0)
    mean, total = _normalised(raw), raw.sum()
    if len(x) == 1 or total <= 0:  # no spread to measure from one row, nor from all zeros
        return mean, np.zeros_like(mean)
    # the delta method's residuals times ``total`` (module docstring), in one buffer
    z = np.outer(x.sum(axis=1), mean)
    np.subtract(x, z, out=z)
    return mean, np.sqrt(np.einsum("ij,ij->j", z, z) / ((len(x) - 1) * len(x))) / total


def negligible(
    mean: np.ndarray,
    std: np.ndarray,
    selection_rate: np.ndarray | None = None,
    *,
    z: float = Z_NEGLIGIBLE,
    min_rate: float = MIN_SELECTION_RATE,
) -> np.ndarray:
    """Which features' importances are indistinguishable from zero.

    A feature is negligible when ``mean <= z * std`` (its importance is within ``z`` standard
    errors of zero; an importance of exactly zero always is), or when ``selection_rate`` is given
    and is below ``min_rate`` (it is selected in too few rows to act on).

    Parameters
    ----------
    mean, std : ndarray of shape (n_features,)
        Global importances and their standard errors (:func:`global_importances`).
    selection_rate : ndarray of shape (n_features,), optional
        The share of rows in which each feature's importance is above zero.
    z : float
        Standard errors.
    min_rate : float
        The least share of rows in which a feature that matters is selected.

    Returns
    -------
    ndarray of shape (n_features,), bool
    """
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    if mean.shape != std.shape or mean.ndim != 1:
        raise ValueError(f"mean {mean.shape} and std {std.shape} must be the same 1-d shape")
    out = mean <= z * std
    if selection_rate is not None:
        rate = np.asarray(selection_rate, dtype=np.float64)
        if rate.shape != mean.shape:
            raise ValueError(f"selection_rate {rate.shape} must have the shape {mean.shape}")
        out |= rate < min_rate
    return out


def sum_to_columns(values: np.ndarray, positions: np.ndarray, n_columns: int) -> np.ndarray:
    """``values`` (last axis: features) summed over the features of each input column:
    ``out[..., c] = sum(values[..., j] for j where positions[j] == c)``, in ``values``' dtype.

    How per-feature importances and masks become one entry per input column (an expanded
    datetime column's parts summed back to it); rows summing to one still do."""
    positions = np.asarray(positions, dtype=np.int64)
    if values.shape[-1] != len(positions):
        raise ValueError(f"values have {values.shape[-1]} features, positions {len(positions)}")
    if np.array_equal(positions, np.arange(n_columns)):
        return values
    onehot = np.zeros((len(positions), n_columns), dtype=values.dtype)
    onehot[np.arange(len(positions)), positions] = 1
    return values @ onehot


def _as_rows(per_row: np.ndarray) -> np.ndarray:
    x = np.asarray(per_row, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"per-row importances must be 2-d (n_rows, n_features), got {x.shape}")
    return x


def _normalised(rows: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (rows summing to zero stay zero)."""
    total = rows.sum(axis=-1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)
