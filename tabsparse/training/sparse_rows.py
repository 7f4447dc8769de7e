"""Training rows of a sparse matrix: a :class:`TensorData` whose numeric block stays sparse.

:class:`SparseRows` stands in for the float32 ``numeric`` tensor of a
:class:`~tabsparse.training.TensorData`: it holds the rows in CSR form on the host
(:class:`tabsparse.data.sparse.CSRRows`) and answers the two reads ``TensorData.take`` makes
(``index_select(0, rows)`` and ``[slice]``) with a dense float32 tensor of just those rows on
the training device. Every batch, validation chunk and importance sample is therefore an
ordinary dense ``TensorData``, drawn by the same code, in the same order, as for a dense table
(the same permutations, the same ghost-batch-norm multiples), so a fit on a sparse matrix is
the fit on its dense array while only one batch of rows is ever dense.

Pure torch and numpy (no scipy, no scikit-learn).
"""

from __future__ import annotations

from typing import Any, cast

import torch

from tabsparse.data.sparse import CSRRows
from tabsparse.training.batches import TensorData

__all__ = ["SparseRows", "sparse_tensor_data"]


class SparseRows:
    """A float32 ``(n_rows, n_cols)`` numeric block kept sparse, densified by rows on ``device``.

    It supports what :class:`~tabsparse.training.TensorData` does with its ``numeric`` tensor
    (``shape``, ``dtype``, ``device``, ``index_select`` along rows, row slices, ``to``);
    anything else is not available, so code reading it as a whole fails loudly instead of
    densifying the table.
    """

    dtype = torch.float32

    def __init__(self, rows: CSRRows, device: torch.device | str = "cpu") -> None:
        self.rows = rows
        self._device = torch.device(device)

    @property
    def shape(self) -> torch.Size:
        return torch.Size(self.rows.shape)

    @property
    def device(self) -> torch.device:
        return self._device

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        n, k = self.rows.shape
        return f"SparseRows(shape=({n}, {k}), nnz={self.rows.data.shape[0]}, device={self.device})"

    def _dense(self, idx: Any) -> torch.Tensor:
        return torch.from_numpy(self.rows.dense(idx)).to(self._device)

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        """The rows ``index`` (``dim`` must be 0) as a dense tensor on the device."""
        if dim != 0:
            raise ValueError(f"SparseRows selects rows only (dim=0), got dim={dim}")
        return self._dense(index.detach().cpu().numpy())

    def __getitem__(self, idx: slice | torch.Tensor) -> torch.Tensor:
        """Rows by a slice or an integer tensor, dense on the device."""
        if isinstance(idx, torch.Tensor):
            if idx.dtype == torch.bool:
                idx = torch.nonzero(idx).reshape(-1)
            return self.index_select(0, idx)
        if isinstance(idx, slice):
            return self._dense(idx)
        raise TypeError(f"SparseRows takes rows by a slice or a tensor, got {type(idx).__name__}")

    def to(self, device: torch.device | str, non_blocking: bool = False) -> SparseRows:
        """The same rows, densified on ``device`` from now on (the CSR arrays stay on the host)."""
        return SparseRows(self.rows, device)

    def fingerprint(self) -> str:
        """A hash of the stored entries (for the resume check of a checkpointed fit)."""
        return self.rows.fingerprint()


def sparse_tensor_data(
    rows: CSRRows,
    target: torch.Tensor | None,
    weight: torch.Tensor | None,
    device: torch.device,
) -> TensorData:
    """A :class:`TensorData` of sparse rows (no categorical columns) whose batches are dense."""
    numeric = SparseRows(rows, device)
    codes = torch.empty((len(rows), 0), dtype=torch.int64, device=device)
    # SparseRows answers every read TensorData makes of its numeric tensor (module docstring)
    return TensorData(cast(torch.Tensor, numeric), codes, target, weight)
