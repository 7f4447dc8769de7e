"""Ghost batch normalisation: batch norm over small virtual batches.

During training the batch is cut into ``ceil(n / virtual_batch_size)`` virtual batches of near-equal
size (sizes differ by at most one row, so there is never a ragged one-row tail) and each one is
normalised with its own statistics, all in one vectorised operation per size class — no Python loop
over chunks. In eval mode the layer is an ordinary batch norm with the running statistics and never
branches on the batch size, so it exports with a dynamic batch dimension.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class GhostBatchNorm(nn.Module):
    """Batch norm whose training statistics come from virtual batches.

    Parameters
    ----------
    num_features : int
        Number of channels ``C`` of the ``(n, C)`` input.
    virtual_batch_size : int
        Target rows per virtual batch.
    momentum : float
        PyTorch convention: ``running = (1 - m) * running + m * batch`` with
        ``m = max(momentum, 1 / (batches seen + 1))``: the first batches are averaged exactly, so
        the running statistics are right after a few steps even with a small momentum (short
        fits on small data no longer predict with the initial statistics).
    eps : float
        Added to the variance.

    Examples
    --------
    >>> bn = GhostBatchNorm(num_features=4, virtual_batch_size=8)
    >>> bn(torch.randn(20, 4)).shape
    torch.Size([20, 4])
    """

    running_mean: torch.Tensor
    running_var: torch.Tensor
    num_batches_tracked: torch.Tensor

    def __init__(
        self,
        num_features: int,
        *,
        virtual_batch_size: int = 128,
        momentum: float = 0.02,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_features < 1:
            raise ValueError(f"{num_features=} must be >= 1")
        if virtual_batch_size < 1:
            raise ValueError(f"{virtual_batch_size=} must be >= 1")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{momentum=} must be in [0, 1]")
        self.num_features = num_features
        self.virtual_batch_size = virtual_batch_size
        self.momentum = momentum
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.zeros((), dtype=torch.int64))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)
        self.running_mean.zero_()
        self.running_var.fill_(1.0)
        self.num_batches_tracked.zero_()

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, virtual_batch_size={self.virtual_batch_size}, "
            f"momentum={self.momentum}, eps={self.eps}"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            scale = self.weight * torch.rsqrt(self.running_var + self.eps)
            shift = self.bias - self.running_mean * scale
            return torch.addcmul(shift, x, scale)
        n = x.shape[0]
        n_chunks = max(1, math.ceil(n / self.virtual_batch_size))
        base, n_big = divmod(n, n_chunks)
        split = n_big * (base + 1)
        parts = []
        means = []
        variances = []
        for rows, size in ((x[:split], base + 1), (x[split:], base)):
            if rows.shape[0] == 0:
                continue
            out, mean, var = self._normalise(rows, size)
            parts.append(out)
            if mean is not None and var is not None:
                means.append(mean)
                variances.append(var)
        if self.momentum > 0 and means:
            self._update_running(torch.cat(means), torch.cat(variances))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _normalise(
        self, rows: torch.Tensor, size: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Normalise ``rows`` in virtual batches of ``size`` rows.

        The virtual batches are laid side by side as extra channels of a ``(size, k * C)`` view,
        so one call of PyTorch's fused batch norm (forward and backward) does all of them; its
        running buffers, with momentum 1, hand back each virtual batch's mean and unbiased
        variance.
        """
        c = self.num_features
        k = rows.shape[0] // size
        if size == 1:  # a single row normalises to zero: the output is the bias
            return self.bias.expand(rows.shape[0], c) + 0.0 * rows, None, None
        side = rows.reshape(k, size, c).transpose(0, 1).reshape(size, k * c)
        mean = torch.zeros(k * c, dtype=self.weight.dtype, device=rows.device)
        var = torch.ones(k * c, dtype=self.weight.dtype, device=rows.device)
        out = nn.functional.batch_norm(
            side, mean, var, self.weight.repeat(k), self.bias.repeat(k), True, 1.0, self.eps
        )
        out = out.reshape(size, k, c).transpose(0, 1).reshape(k * size, c)
        return out, mean.view(k, c), var.view(k, c)

    @torch.no_grad()
    def _update_running(self, means: torch.Tensor, variances: torch.Tensor) -> None:
        self.num_batches_tracked += 1
        weight = torch.clamp(
            1.0 / self.num_batches_tracked.to(self.running_mean.dtype), min=self.momentum
        )
        self.running_mean.lerp_(means.mean(dim=0).to(self.running_mean.dtype), weight)
        self.running_var.lerp_(variances.mean(dim=0).to(self.running_var.dtype), weight)
