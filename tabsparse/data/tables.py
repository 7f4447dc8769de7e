"""Validation of a raw 2-D input into a :class:`Table`: a pandas DataFrame, a 2-D numpy array
or a scipy sparse matrix (in CSR form, see :mod:`tabsparse.data.sparse`).

Any other DataFrame (polars, pyarrow, ...) is first converted to pandas by
:func:`tabsparse.data.frames.as_pandas`; lists of rows become arrays keeping their Python types.
Nothing is copied that need not be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tabsparse.data.frames import as_pandas
from tabsparse.data.sparse import as_csr, is_sparse_matrix


@dataclass
class Table:
    """A validated 2-D input: a DataFrame, a 2-D numpy array or a CSR matrix (``sparse``)."""

    frame: pd.DataFrame | None
    array: np.ndarray | None
    n_rows: int
    n_cols: int
    names: list[str]
    has_names: bool
    sparse: Any = None

    def column(self, j: int) -> pd.Series | np.ndarray:
        if self.frame is not None:
            return self.frame.iloc[:, j]
        if self.sparse is not None:
            return np.asarray(self.sparse[:, [j]].toarray()).reshape(-1)
        assert self.array is not None
        return self.array[:, j]


def as_table(X: object) -> Table:
    """Validate ``X`` and wrap it as a :class:`Table` without copying data.

    Tables from other libraries (polars, pyarrow, ...) are converted to pandas first; a scipy
    sparse matrix or array is kept sparse (CSR, columns ``x0, x1, ...``).
    """
    if is_sparse_matrix(X):
        csr = as_csr(X)
        n_rows, n_cols = (int(s) for s in csr.shape)
        names = [f"x{j}" for j in range(n_cols)]
        table = Table(None, None, n_rows, n_cols, names, False, csr)
        if n_cols == 0:
            raise ValueError(
                f"Expected a 2-D table with at least 1 column, got 0 columns (shape ({n_rows}, 0))."
            )
        return table
    X = as_pandas(X)
    if isinstance(X, pd.Series):
        raise ValueError(
            "Expected a 2-D table (DataFrame, 2-D array or list of rows), got a pandas Series "
            f"of shape {X.shape}; use series.to_frame() for a single column."
        )
    if isinstance(X, pd.DataFrame):
        names = [str(c) for c in X.columns]
        _check_unique(names)
        has_names = len(names) > 0 and all(isinstance(c, str) for c in X.columns)
        table = Table(X, None, int(X.shape[0]), int(X.shape[1]), names, has_names)
    else:
        arr = _as_array(X)
        n_rows, n_cols = (int(s) for s in arr.shape)
        names = [f"x{j}" for j in range(n_cols)]
        table = Table(None, arr, n_rows, n_cols, names, False)
    if table.n_cols == 0:
        raise ValueError(
            f"Expected a 2-D table with at least 1 column, got 0 columns "
            f"(shape ({table.n_rows}, 0))."
        )
    return table


def _as_array(X: object) -> np.ndarray:
    if isinstance(X, np.ndarray):
        arr = X
    else:
        try:
            arr = np.asarray(X)
        except ValueError as exc:  # ragged rows
            raise ValueError(
                f"Expected a 2-D table (DataFrame, 2-D array or list of rows); "
                f"could not convert the input to an array: {exc}"
            ) from exc
        if arr.dtype.kind in "USO":
            # Keep the Python types of mixed rows (np.asarray turns 1 into "1").
            arr = np.asarray(X, dtype=object)
    if arr.ndim != 2:
        raise ValueError(
            "Expected a 2-D table (DataFrame, 2-D array or list of rows), "
            f"got an input of shape {arr.shape}."
        )
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return arr


def _check_unique(names: list[str]) -> None:
    seen: set[str] = set()
    dups: list[str] = []
    for name in names:
        if name in seen and name not in dups:
            dups.append(name)
        seen.add(name)
    if dups:
        raise ValueError(f"X has duplicated column names: {dups}; column names must be unique.")


def short_list(names: list[str], limit: int = 20) -> str:
    if len(names) <= limit:
        return str(names)
    return str(names[:limit])[:-1] + f", ... ({len(names) - limit} more)]"
