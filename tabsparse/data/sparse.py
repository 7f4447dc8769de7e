"""Sparse input: ``scipy.sparse`` matrices and arrays encoded without a dense copy of the whole.

A scipy sparse matrix or array (CSR, CSC, COO, or any format with ``tocsr()``; what
``OneHotEncoder`` or ``TfidfVectorizer`` give inside a ``ColumnTransformer``) is a table of
numeric columns named ``x0, x1, ...``. It is read in CSR form (``tocsr()`` returns a CSR input
itself; other formats are converted, which copies the stored entries, never the zeros).

* Encoding: the float32 block is filled :data:`SPARSE_BLOCK_ROWS` rows at a time by scattering
  the stored entries into a zeroed output; no dense float64 copy of the matrix is ever made.
  The encoded numeric block of the whole table is float32 in memory (as for any input held in
  memory), ``4 * n_rows * n_cols`` bytes.
* Statistics: count, mean, M2, min and max per column come from the stored entries and the
  number of implicit zeros of each block of rows, in float64 of the float32-cast values, the
  same quantities as for the dense table (equal to rounding).
* Values: implicit entries are 0; a stored NaN is missing, exactly as in a dense array;
  infinite values and finite values beyond float32's range raise ``ValueError`` naming the
  column. Duplicated stored entries are summed (as ``toarray()`` does). Only bool, integer and
  float matrices are accepted.

scipy is never imported here: an input that is a sparse matrix has brought it already.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabsparse.data.stats import empty_stats, merge_stats

SPARSE_BLOCK_ROWS = 8192
"""Rows of a sparse matrix encoded (and summarised) at a time."""
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def is_sparse_matrix(X: object) -> bool:
    """Whether ``X`` is a scipy sparse matrix or array (or anything with ``tocsr`` and ``nnz``)."""
    module = type(X).__module__ or ""
    return module.startswith("scipy.sparse") or (hasattr(X, "tocsr") and hasattr(X, "nnz"))


def as_csr(X: Any) -> Any:
    """``X`` in CSR form without duplicated entries, or ValueError / TypeError when unusable."""
    shape = getattr(X, "shape", ())
    if len(shape) != 2:
        raise ValueError(
            "Expected a 2-D table (DataFrame, 2-D array or list of rows), "
            f"got a sparse input of shape {tuple(shape)}."
        )
    csr = X.tocsr()
    if csr.dtype.kind not in "biuf":
        raise TypeError(
            f"A sparse matrix of dtype {csr.dtype} was passed; only bool, integer and float "
            "sparse matrices are supported."
        )
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    return csr


def check_sparse_values(csr: Any, names: list[str]) -> None:
    """Raise ``ValueError`` for infinite or beyond-float32 stored values, naming the column."""
    data = csr.data
    if data.dtype.kind != "f" or data.size == 0:
        return
    with np.errstate(invalid="ignore"):
        infinite = np.isinf(data)
        if infinite.any():
            j = int(csr.indices[np.argmax(infinite)])
            raise ValueError(
                f"Column {names[j]!r} contains infinite values (inf or -inf); replace them, "
                "e.g. with NaN to mark them missing."
            )
        if data.dtype.itemsize > 4:
            big = np.abs(data) > _FLOAT32_MAX
            if big.any():
                k = int(np.argmax(big))
                raise ValueError(
                    f"Column {names[int(csr.indices[k])]!r} contains values beyond the float32 "
                    f"range (|x| > 3.4e38) such as {data[k]!r}; rescale the column."
                )


def _block(csr: Any, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row (relative to ``start``), column and float32-cast value of each stored entry."""
    lo, hi = int(csr.indptr[start]), int(csr.indptr[stop])
    counts = np.diff(csr.indptr[start : stop + 1])
    rows = np.repeat(np.arange(stop - start), counts)
    return rows, csr.indices[lo:hi], csr.data[lo:hi].astype(np.float32)


def sparse_to_float32(csr: Any) -> np.ndarray:
    """The dense float32 C-ordered block of ``csr`` (checked with :func:`check_sparse_values`)."""
    n, k = csr.shape
    out = np.zeros((n, k), dtype=np.float32)
    for start in range(0, n, SPARSE_BLOCK_ROWS):
        stop = min(n, start + SPARSE_BLOCK_ROWS)
        rows, cols, values = _block(csr, start, stop)
        out[start + rows, cols] = values
    return out


def sparse_stats(csr: Any) -> tuple[np.ndarray, ...]:
    """Count, mean, M2, min and max per column (as :func:`tabsparse.data.stats.block_stats`
    gives for the dense table), from the stored entries block of rows by block."""
    n, k = csr.shape
    acc = empty_stats(k)
    for start in range(0, n, SPARSE_BLOCK_ROWS):
        stop = min(n, start + SPARSE_BLOCK_ROWS)
        m = stop - start
        _, cols, values32 = _block(csr, start, stop)
        values = values32.astype(np.float64)
        nan = np.isnan(values)
        values[nan] = 0.0
        stored = np.bincount(cols, minlength=k).astype(np.float64)
        count = m - np.bincount(cols[nan], minlength=k).astype(np.float64)
        implicit = m - stored
        mean = np.bincount(cols, weights=values, minlength=k) / np.maximum(count, 1.0)
        dev = values - mean[cols]
        dev[nan] = 0.0
        m2 = np.bincount(cols, weights=dev * dev, minlength=k) + implicit * mean * mean
        lo = np.full(k, np.inf)
        hi = np.full(k, -np.inf)
        keep = ~nan
        np.minimum.at(lo, cols[keep], values[keep])
        np.maximum.at(hi, cols[keep], values[keep])
        zeros = implicit > 0
        lo[zeros] = np.minimum(lo[zeros], 0.0)
        hi[zeros] = np.maximum(hi[zeros], 0.0)
        acc = merge_stats(acc, (count, mean, m2, lo, hi))
    return acc
