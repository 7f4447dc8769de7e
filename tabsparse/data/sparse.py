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
* Training rows (:class:`CSRRows`): a fit keeps the matrix sparse, as float32 values in CSR
  form, and densifies only the rows asked for (one training batch, one inference chunk, the
  importance sample). :func:`fit_sparse_rows` fits the encoder block of rows by block
  (:meth:`~tabsparse.data.TableEncoder.partial_fit`, which gives the statistics of ``fit`` on
  the whole); :func:`encode_sparse_rows` checks a matrix against a fitted encoder. The values
  densified are those of the encoded dense table, bit for bit (0 for implicit entries, the
  float32 cast of stored ones), so a fit on the matrix is the fit on its dense array.

scipy is never imported here: an input that is a sparse matrix has brought it already.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tabsparse.data.stats import empty_stats, merge_stats

if TYPE_CHECKING:
    from tabsparse.data.encoder import TableEncoder

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


@dataclass(frozen=True, eq=False)
class CSRRows:
    """Rows of a sparse matrix kept in CSR form, densified on request.

    The numeric block of an encoded sparse table without its zeros: a sparse matrix has numeric
    columns only, so its columns are the encoded numeric columns in their order. Values are
    float32 (the cast the dense encoding makes); a stored NaN is missing.

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_rows + 1,)
    indices : ndarray of int, shape (nnz,)
        Column of each stored entry (sorted within a row, no duplicates).
    data : ndarray of float32, shape (nnz,)
    n_cols : int
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    n_cols: int

    @classmethod
    def from_csr(cls, csr: Any) -> CSRRows:
        """Rows of a CSR matrix from :func:`as_csr` (indices shared, values cast to float32)."""
        return cls(
            np.asarray(csr.indptr, dtype=np.int64),
            csr.indices,
            np.asarray(csr.data, dtype=np.float32),
            int(csr.shape[1]),
        )

    def __len__(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self), self.n_cols)

    @property
    def nbytes(self) -> int:
        """Bytes held (the dense float32 block would take ``4 * n_rows * n_cols``)."""
        return int(self.indptr.nbytes + self.indices.nbytes + self.data.nbytes)

    def _positions(self, idx: Any) -> tuple[np.ndarray, np.ndarray]:
        """Stored-entry positions of the rows ``idx`` (in that order) and each row's count."""
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            if step == 1:
                stop = max(start, stop)
                counts = np.diff(self.indptr[start : stop + 1])
                lo, hi = int(self.indptr[start]), int(self.indptr[stop])
                return np.arange(lo, hi), counts
            idx = np.arange(start, stop, step)
        rows = np.asarray(idx, dtype=np.int64).reshape(-1)
        starts = self.indptr[rows]
        counts = self.indptr[rows + 1] - starts
        total = int(counts.sum())
        offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        return np.arange(total, dtype=np.int64) + offsets, counts

    def dense(self, idx: Any = None) -> np.ndarray:
        """The rows ``idx`` (a slice or integer positions, in that order; all rows if None) as a
        zero-filled C-ordered float32 block, exactly the dense encoding of those rows."""
        pos, counts = self._positions(slice(None) if idx is None else idx)
        out = np.zeros((len(counts), self.n_cols), dtype=np.float32)
        rows = np.repeat(np.arange(len(counts)), counts)
        out[rows, self.indices[pos]] = self.data[pos]
        return out

    def take(self, idx: Any) -> CSRRows:
        """The rows ``idx`` as new CSR rows (their stored entries copied, nothing densified)."""
        pos, counts = self._positions(idx)
        indptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return CSRRows(indptr, self.indices[pos], self.data[pos], self.n_cols)

    def fingerprint(self) -> str:
        """A hash (BLAKE2b, hex) of the shape and the stored entries."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"csr:{self.shape};".encode())
        for part in (self.indptr, self.indices.astype(np.int64), self.data):
            digest.update(np.ascontiguousarray(part).tobytes())
        return digest.hexdigest()


def fit_sparse_rows(encoder: TableEncoder, X: Any) -> CSRRows:
    """Fit the unfitted ``encoder`` on the sparse matrix ``X`` block of
    :data:`SPARSE_BLOCK_ROWS` rows by block and return the rows, kept sparse.

    ``partial_fit`` on those blocks is ``fit`` on the whole (the statistics are merged block
    by block either way); only one block is ever dense."""
    csr = as_csr(X)
    n = int(csr.shape[0])
    if n == 0:
        encoder.fit(csr)  # raises: no rows to fit on
    for start in range(0, n, SPARSE_BLOCK_ROWS):
        encoder.partial_fit(csr[start : start + SPARSE_BLOCK_ROWS])
    return CSRRows.from_csr(csr)


def encode_sparse_rows(encoder: TableEncoder, X: Any) -> CSRRows:
    """The rows of the sparse matrix ``X`` for the fitted ``encoder``, kept sparse, after the
    checks ``encoder.transform`` makes (the columns, and no categorical or expanded datetime
    features, on an empty slice; the values on the stored entries)."""
    csr = as_csr(X)
    encoder.transform(csr[:0])
    check_sparse_values(csr, [encoder.feature_names[j] for j in encoder.numeric_columns])
    return CSRRows.from_csr(csr)
