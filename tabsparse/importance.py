"""Global importances with their spread, and the rule for an importance indistinguishable from zero.

A global importance is the mean of per-row importances (the aggregate masks of
:class:`tabsparse.explain.Explanation`, each row summing to one) over a set of rows, normalised to
sum to one. This module says how sure that mean is:

* :func:`global_importances` returns the mean and its **standard error**. For one model (an array
  ``(n_rows, n_features)``) the standard error comes from a seeded bootstrap over the rows
  (:func:`bootstrap_means`): the standard deviation of the mean over ``n_resamples`` resamples of
  the rows drawn with replacement. For several models (an array ``(n_members, n_rows,
  n_features)``: ensemble members or refits with other seeds, on the same or on different rows)
  it is the spread over the members: the standard deviation of the members' global importances
  divided by ``sqrt(n_members)``, the standard error of their mean. One member falls back to the
  bootstrap over its rows.
* :func:`negligible` is the documented rule for a feature whose importance is indistinguishable
  from zero: its mean importance is at most ``z`` standard errors (``z = 2`` by default, about a
  95% one-sided bound), or, where the per-row selection is known, the feature is selected
  (importance > 0, which sparsemax makes exact) in fewer than ``min_rate`` of the rows (1%).

Pure numpy: the core layer, used by the estimators and by :class:`~tabsparse.explain.Explanation`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MIN_SELECTION_RATE",
    "N_RESAMPLES",
    "Z_NEGLIGIBLE",
    "bootstrap_means",
    "global_importances",
    "negligible",
]

N_RESAMPLES = 200  # bootstrap resamples behind a standard error
Z_NEGLIGIBLE = 2.0  # an importance within this many standard errors of zero is negligible
MIN_SELECTION_RATE = 0.01  # a feature selected in fewer rows than this share is negligible
_CHUNK_CELLS = 1 << 22  # resample x row counts held at once (32 MiB of float64)


def bootstrap_means(
    per_row: np.ndarray, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> np.ndarray:
    """The normalised mean importance of each of ``n_resamples`` bootstrap resamples of the rows.

    Parameters
    ----------
    per_row : ndarray of shape (n_rows, n_features)
        Per-row importances (need not be normalised).
    n_resamples : int
        How many resamples.
    seed : int
        Seed of ``numpy.random.default_rng``: resample ``b`` holds the rows
        ``rng.integers(0, n_rows, size=(n_resamples, n_rows))[b]`` (drawn in chunks of resamples
        from the one generator, which gives the same rows).

    Returns
    -------
    ndarray of shape (n_resamples, n_features), float64
        Row ``b``: the mean of resample ``b``'s rows divided by its sum (all zeros where that sum is
        zero). Computed as a matrix product of row counts and ``per_row``, a chunk of resamples at
        a time: no Python loop over resamples or features.
    """
    x = _as_rows(per_row)
    if n_resamples < 2:
        raise ValueError(f"{n_resamples=} must be >= 2")
    n = x.shape[0]
    if n == 0:
        raise ValueError("per_row has no rows")
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_CELLS // n)
    out = np.empty((n_resamples, x.shape[1]))
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        idx += n * np.arange(b)[:, None]
        counts = np.bincount(idx.ravel(), minlength=b * n).reshape(b, n)
        out[start : start + b] = counts @ x
    return _normalised(out)


def global_importances(
    importances: np.ndarray, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Global importances and their standard errors.

    Parameters
    ----------
    importances : ndarray of shape (n_rows, n_features) or (n_members, n_rows, n_features)
        Per-row importances of one model, or of several (ensemble members, seeds).
    n_resamples, seed : int
        The bootstrap of :func:`bootstrap_means` (used for one model only).

    Returns
    -------
    mean : ndarray of shape (n_features,), float64
        One model: the mean over the rows, normalised to sum to one. Several: the mean of the
        members' normalised means.
    std : ndarray of shape (n_features,), float64
        The standard error of ``mean``. One model: the standard deviation (``ddof=1``) of the
        bootstrap means. Several: ``std(member_means, ddof=1) / sqrt(n_members)``.
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
    mean = _normalised(x.mean(axis=0, keepdims=True))[0]
    if len(x) == 1:  # no spread to measure from one row
        return mean, np.zeros_like(mean)
    boot = bootstrap_means(x, n_resamples=n_resamples, seed=seed)
    return mean, boot.std(axis=0, ddof=1)


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


def _as_rows(per_row: np.ndarray) -> np.ndarray:
    x = np.asarray(per_row, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"per-row importances must be 2-d (n_rows, n_features), got {x.shape}")
    return x


def _normalised(rows: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (rows summing to zero stay zero)."""
    total = rows.sum(axis=-1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)
