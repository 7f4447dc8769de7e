"""The encoded form of a table: :class:`EncodedTable` and the category-code convention.

An encoded table is two C-contiguous arrays with one row per input row: ``numeric`` (float32,
NaN = missing, never ``inf``) and ``codes`` (int64 category codes: :data:`CODE_MISSING`,
:data:`CODE_UNSEEN`, then :data:`CODE_OFFSET` + the vocabulary position).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

CODE_MISSING = 0
"""Code of a missing categorical value."""
CODE_UNSEEN = 1
"""Code of a categorical value that was not seen during fitting."""
CODE_OFFSET = 2
"""Code of the first vocabulary entry; entry ``k`` gets ``k + CODE_OFFSET``."""


@dataclass(frozen=True, eq=False)
class EncodedTable:
    """A table encoded for the network.

    Parameters
    ----------
    numeric : numpy.ndarray
        float32 array of shape ``(n, n_numeric)``, C-contiguous. NaN marks a
        missing value; ``inf`` never occurs.
    codes : numpy.ndarray
        int64 array of shape ``(n, n_categorical)``, C-contiguous. ``0`` is
        missing, ``1`` is unseen at fit, ``k + 2`` is vocabulary entry ``k``.

    Raises
    ------
    TypeError
        If an array is not a numpy array of the required dtype.
    ValueError
        If an array is not 2-D and C-contiguous, or the row counts differ.

    Notes
    -----
    Equality is identity (``eq=False``): comparing arrays element-wise has no
    single truth value.
    """

    numeric: np.ndarray
    codes: np.ndarray

    def __post_init__(self) -> None:
        for field, dtype in (("numeric", np.float32), ("codes", np.int64)):
            arr = getattr(self, field)
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype:
                got = arr.dtype if isinstance(arr, np.ndarray) else type(arr).__name__
                raise TypeError(f"EncodedTable.{field} must be a {dtype.__name__} array, got {got}")
            if arr.ndim != 2:
                raise ValueError(f"EncodedTable.{field} must be 2-D, got shape {arr.shape}")
            if not arr.flags.c_contiguous:
                raise ValueError(f"EncodedTable.{field} must be C-contiguous")
        if self.numeric.shape[0] != self.codes.shape[0]:
            raise ValueError(
                "EncodedTable.numeric and EncodedTable.codes must have the same number of rows, "
                f"got {self.numeric.shape[0]} and {self.codes.shape[0]}"
            )

    def __len__(self) -> int:
        """Return the number of rows."""
        return int(self.numeric.shape[0])

    @property
    def n_numeric(self) -> int:
        """Number of numeric columns."""
        return int(self.numeric.shape[1])

    @property
    def n_categorical(self) -> int:
        """Number of categorical columns."""
        return int(self.codes.shape[1])

    def take(self, idx: Any) -> EncodedTable:
        """Return a subset of rows.

        Parameters
        ----------
        idx : slice, int, array-like of int or array-like of bool
            Rows to keep, as accepted by numpy indexing along the first axis.
            A single integer keeps that row as a table of one row.

        Returns
        -------
        EncodedTable
            The selected rows; arrays are C-contiguous (copies unless ``idx``
            is a slice).
        """
        if not isinstance(idx, slice):
            idx = np.asarray(idx)
            if idx.ndim == 0:
                idx = idx.reshape(1)
            if idx.ndim != 1:
                raise ValueError(f"take expects a 1-D index, got shape {idx.shape}")
        return EncodedTable(
            np.ascontiguousarray(self.numeric[idx]), np.ascontiguousarray(self.codes[idx])
        )
