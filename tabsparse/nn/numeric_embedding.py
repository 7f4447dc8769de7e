"""Numeric embeddings: each standardised numeric column becomes ``dim`` channels.

The periodic embedding of Gorishniy et al. (2022, "On Embeddings for Numerical Features in
Tabular Deep Learning", the PLR variant): column ``j``'s value ``z`` is mapped to
``2 * n_frequencies`` periodic features ``cos(2 pi c_ji z), sin(2 pi c_ji z)`` with trainable
frequencies ``c_j`` (initialised from ``N(0, sigma^2)``), then by the column's own linear layer
and a ReLU to ``dim - 1`` channels. The column's first channel is the standardised value itself,
so the embedding can only add to what the plain input offers.

The channels of a column are contiguous, ``[column 0's dim channels, column 1's, ...]``; the
network makes them one attention group, so the sparsemax mask selects a column's embedding as one
unit and masks and importances stay per original column.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["NUMERIC_EMBEDDINGS", "PeriodicEmbedding", "periodic_embedding"]

#: The kinds of numeric embedding, by the name the estimators' ``numeric_embedding`` takes.
NUMERIC_EMBEDDINGS = ("periodic",)


def periodic_embedding(z: Tensor, frequencies: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``(n, m)`` standardised values to ``(n, m * dim)`` channels, ``dim = weight.shape[1] + 1``.

    ``frequencies`` ``(m, k)``, ``weight`` ``(m, dim - 1, 2k)``, ``bias`` ``(m, dim - 1)``.
    Per column ``j``: ``[z_j, relu(b_j + W_j @ [cos(2 pi c_j z_j), sin(2 pi c_j z_j)])]``.
    Plain differentiable torch operations: autograd differentiates it, export traces it.
    """
    n = z.shape[0]
    # columns first: one (dim - 1, 2k) @ (2k, n) product per column, a batched matrix product
    # with n as its wide side (n as the short side, (n, 2k) @ (2k, dim - 1), is ~10x slower)
    zt = z.t().unsqueeze(1)  # (m, 1, n)
    angles = (2.0 * math.pi) * frequencies.unsqueeze(-1) * zt  # (m, k, n)
    periodic = torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)  # (m, 2k, n)
    learned = torch.relu(torch.baddbmm(bias.unsqueeze(-1), weight, periodic))  # (m, dim - 1, n)
    return torch.cat([zt, learned], dim=1).permute(2, 0, 1).reshape(n, -1)


class PeriodicEmbedding(nn.Module):
    """``(n, n_columns) -> (n, n_columns * dim)``: :func:`periodic_embedding` with its
    trainable frequencies and per-column linear layers.

    Parameters
    ----------
    n_columns : int
        Numeric columns (>= 1).
    dim : int
        Channels per column (>= 2): the value itself and ``dim - 1`` learned ones.
    n_frequencies : int
        Frequencies per column (``2 * n_frequencies`` periodic features).
    sigma : float
        Standard deviation of the frequencies' initial normal distribution (for inputs
        standardised to unit variance).

    Examples
    --------
    >>> emb = PeriodicEmbedding(n_columns=3, dim=4)
    >>> emb(torch.randn(5, 3)).shape
    torch.Size([5, 12])
    """

    def __init__(
        self, *, n_columns: int, dim: int, n_frequencies: int = 16, sigma: float = 0.1
    ) -> None:
        super().__init__()
        if n_columns < 1:
            raise ValueError(f"{n_columns=} must be >= 1")
        if dim < 2:
            raise ValueError(f"{dim=} must be >= 2")
        if n_frequencies < 1:
            raise ValueError(f"{n_frequencies=} must be >= 1")
        if not sigma > 0:
            raise ValueError(f"{sigma=} must be > 0")
        self.n_columns = n_columns
        self.dim = dim
        self.n_frequencies = n_frequencies
        self.sigma = sigma
        self.frequencies = nn.Parameter(torch.empty(n_columns, n_frequencies))
        self.weight = nn.Parameter(torch.empty(n_columns, dim - 1, 2 * n_frequencies))
        self.bias = nn.Parameter(torch.empty(n_columns, dim - 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Frequencies from ``N(0, sigma^2)``; each column's linear layer as ``nn.Linear``
        initialises one (uniform in ``+-1 / sqrt(fan_in)``)."""
        nn.init.normal_(self.frequencies, 0.0, self.sigma)
        bound = 1.0 / math.sqrt(2 * self.n_frequencies)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, z: Tensor) -> Tensor:
        return periodic_embedding(z, self.frequencies, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"n_columns={self.n_columns}, dim={self.dim}, "
            f"n_frequencies={self.n_frequencies}, sigma={self.sigma}"
        )
