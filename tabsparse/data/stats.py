"""Streaming statistics of the numeric columns and the scale they give.

Per block of rows: count, mean, sum of squared deviations (M2), min and max of each column,
ignoring NaN, in float64; blocks and chunks are merged with Chan et al.'s parallel update, so any
chunking agrees with one pass to rounding error. :func:`column_scale` turns them into the mean
and standard deviation the network standardises with.
"""

from __future__ import annotations

import numpy as np

_STATS_ROWS = 65536  # rows per block of the statistics computation


def block_stats(block: np.ndarray) -> tuple[np.ndarray, ...]:
    """Count, mean, M2, min and max per column of ``block`` ignoring NaN, in float64."""
    k = block.shape[1]
    acc = empty_stats(k)
    for start in range(0, block.shape[0], _STATS_ROWS):
        x = block[start : start + _STATS_ROWS].astype(np.float64)
        nan = np.isnan(x)
        count = (x.shape[0] - nan.sum(axis=0)).astype(np.float64)
        x[nan] = 0.0
        safe = np.maximum(count, 1.0)
        mean = x.sum(axis=0) / safe
        dev = x - mean
        dev[nan] = 0.0
        m2 = np.einsum("ij,ij->j", dev, dev)
        x[nan] = np.inf
        lo = x.min(axis=0)
        x[nan] = -np.inf
        hi = x.max(axis=0)
        acc = merge_stats(acc, (count, mean, m2, lo, hi))
    return acc


def empty_stats(k: int) -> tuple[np.ndarray, ...]:
    return (
        np.zeros(k),
        np.zeros(k),
        np.zeros(k),
        np.full(k, np.inf),
        np.full(k, -np.inf),
    )


def merge_stats(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Chan et al.'s parallel merge of (count, mean, M2, min, max)."""
    na, ma, m2a, loa, hia = a
    nb, mb, m2b, lob, hib = b
    n = na + nb
    safe = np.maximum(n, 1.0)
    delta = mb - ma
    mean = np.where(n > 0, ma + delta * (nb / safe), 0.0)
    m2 = m2a + m2b + delta * delta * (na * nb / safe)
    return n, mean, m2, np.minimum(loa, lob), np.maximum(hia, hib)


def column_scale(stats: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population standard deviation (ddof=0) per column from merged statistics.

    The standard deviation is relative to the column: however small the values (1e-20 is as
    good as 1e3), it is their own spread, computed in float64 so that squared deviations far
    below float32's range stay exact. Only a column that is truly constant (min == max) or has
    no values gets ``std = 1.0``; one with no values gets ``mean = 0.0``. No absolute floor.
    """
    count, mean, m2, lo, hi = stats
    has = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.sqrt(m2 / np.maximum(count, 1.0))
    constant = ~has | (lo >= hi) | ~np.isfinite(std) | (std <= 0.0)
    return np.where(has, mean, 0.0), np.where(constant, 1.0, std)
