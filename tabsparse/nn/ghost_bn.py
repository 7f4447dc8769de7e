"""Ghost batch normalisation: batch norm over small virtual batches.

During training a batch of ``n`` rows is cut into ``k = ceil(n / virtual_batch_size)`` virtual
batches of near-equal size (sizes differ by at most one row, so there is never a ragged one-row
tail) and each one is normalised with its own statistics. Virtual batch ``i`` holds rows ``i, i + k,
i + 2k, ...`` (batches are shuffled, so any fixed assignment is as random as another): when ``k``
divides ``n`` the ``(n, C)`` batch *is* a ``(n / k, k * C)`` matrix with one column per virtual
batch and channel, and a single call of PyTorch's fused batch norm normalises all of them without
copying anything. The trainer makes batch sizes multiples of ``k`` where it can; other sizes take
two calls and a few copies. No Python loop over virtual batches either way.

In eval mode the layer is an ordinary batch norm with the running statistics and never branches on
the batch size, so it exports with a dynamic batch dimension.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

_STAT_BUFFERS = frozenset({"running_mean", "running_var", "num_batches_tracked"})
_FLUSH_EVERY = 64  # bounds the memory held by recorded statistics

# statistics of one training call: (mean (k, C), 1 / sqrt(biased var + eps) (k, C), rows) per part
_Update = list[tuple[torch.Tensor, torch.Tensor, int]]


def virtual_batches(n: int, virtual_batch_size: int) -> tuple[int, int, int]:
    """``(k, size, extra)``: ``n`` rows make ``k = ceil(n / virtual_batch_size)`` virtual
    batches; ``extra`` of them hold ``size + 1`` rows, the others ``size``."""
    k = max(1, math.ceil(n / virtual_batch_size))
    size, extra = divmod(n, k)
    return k, size, extra


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
        self._pending: list[_Update] = []
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
        self.__dict__["_pending"] = []
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

    # ---- running statistics, updated lazily ---------------------------------------------------
    # Each training call only records its virtual batches' statistics (tensors batch norm
    # computed anyway); they are folded into the running buffers in one closed-form update when
    # anything reads them (eval mode, state_dict, attribute access, moving the module) or every
    # ``_FLUSH_EVERY`` calls. The result equals updating after every call.

    def __getattr__(self, name: str) -> Any:
        if name in _STAT_BUFFERS and self.__dict__.get("_pending"):
            self.flush_statistics()
        return super().__getattr__(name)

    def train(self, mode: bool = True) -> GhostBatchNorm:
        if not mode:
            self.flush_statistics()
        return super().train(mode)

    def _apply(self, fn: Any, recurse: bool = True) -> GhostBatchNorm:
        self.flush_statistics()
        return super()._apply(fn, recurse)

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        self.flush_statistics()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__["_pending"] = []  # statistics of the replaced state are void
        super()._load_from_state_dict(*args, **kwargs)

    @torch.no_grad()
    def flush_statistics(self) -> None:
        """Fold the recorded virtual-batch statistics into ``running_mean`` / ``running_var``.

        Update ``t`` (of ``T``) has weight ``w_t = max(momentum, 1 / (tracked + t))``; the
        sequence ``r <- (1 - w_t) r + w_t m_t`` is applied in closed form:
        ``r_T = r_0 prod(1 - w) + sum_t w_t prod_{s > t}(1 - w_s) m_t``.
        """
        pending = self.__dict__.get("_pending")
        if not pending:
            return
        self.__dict__["_pending"] = []
        buffers = self._buffers
        running_mean, running_var = buffers["running_mean"], buffers["running_var"]
        tracked = buffers["num_batches_tracked"]
        assert running_mean is not None and running_var is not None and tracked is not None
        start = int(tracked)
        weights = [max(self.momentum, 1.0 / (start + t)) for t in range(1, len(pending) + 1)]
        keep = 1.0
        coefs = [0.0] * len(pending)
        for t in range(len(pending) - 1, -1, -1):
            coefs[t] = weights[t] * keep
            keep *= 1.0 - weights[t]
        steps = self._uniform_steps if _uniform(pending) else self._general_steps
        mean_step, var_step = steps(pending, coefs, running_mean.dtype)
        running_mean.mul_(keep).add_(mean_step)
        running_var.mul_(keep).add_(var_step)
        tracked.add_(len(pending))

    def _uniform_steps(
        self, pending: list[_Update], coefs: list[float], dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The weighted sums of the recorded means and variances that :meth:`flush_statistics`
        adds, when every recorded call is one ``(k, C)`` part of the same row count (the
        trainer's batches): stacked tensors instead of per-row lists."""
        first_mean, _, rows = pending[0][0]
        k = first_mean.shape[0]
        # each call's weight spread evenly over its k virtual batches
        weights = torch.tensor(coefs, dtype=dtype, device=first_mean.device).div_(k)
        means = torch.stack([update[0][0] for update in pending]).to(dtype)
        inv = torch.stack([update[0][1] for update in pending]).to(dtype)
        variances = inv.pow_(-2).sub_(self.eps).clamp_(min=0.0).mul_(rows / (rows - 1))
        return weights @ means.sum(1), weights @ variances.sum(1)

    def _general_steps(
        self, pending: list[_Update], coefs: list[float], dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`_uniform_steps` for calls of any shapes: one row per virtual batch (its mean,
        1 / sqrt(biased variance + eps) and row count); update ``t`` spreads its weight evenly
        over its virtual batches."""
        row_coefs: list[float] = []
        unbias: list[float] = []
        for c, update in zip(coefs, pending, strict=True):
            per_batch = c / sum(part[0].shape[0] for part in update)
            for mean, _, rows in update:
                row_coefs += [per_batch] * mean.shape[0]
                unbias += [rows / (rows - 1)] * mean.shape[0]
        parts = [part for update in pending for part in update]
        means = torch.cat([part[0] for part in parts]).to(dtype)
        inv = torch.cat([part[1] for part in parts]).to(dtype)
        device = means.device
        weights_t = torch.tensor(row_coefs, dtype=dtype, device=device)
        unbias_t = torch.tensor(unbias, dtype=dtype, device=device).unsqueeze(1)
        variances = (inv.pow(-2) - self.eps).clamp_(min=0.0) * unbias_t
        return weights_t @ means, weights_t @ variances

    def eval_affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(scale, shift)`` with ``eval_output = x * scale + shift`` (running statistics)."""
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        return scale, self.bias - self.running_mean * scale

    # ---- forward -----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            scale, shift = self.eval_affine()
            return torch.addcmul(shift, x, scale)
        n, c = x.shape
        k, size, extra = virtual_batches(n, self.virtual_batch_size)
        if size == 1 and extra == 0:  # one-row virtual batches normalise to zero
            return self.bias.expand(n, c) + 0.0 * x
        if extra == 0:  # virtual batch i = rows i, i + k, ...: a free (size, k * c) view
            out, part = self._normalise(x.reshape(size, k * c), c)
            out, update = out.view(n, c), [part]
        else:
            out, update = self._normalise_ragged(x, k, size, extra)
        self.record(update)
        return torch.addcmul(self.bias, out, self.weight)

    def record(self, update: _Update) -> None:
        """Record one training call's virtual-batch statistics (``(mean, invstd, rows)`` per
        part, as the fused batch norm returns them) for the lazy running-statistics update."""
        if self.momentum > 0 and torch.compiler.is_compiling():
            self._update_now(update)
        elif self.momentum > 0:
            pending = self.__dict__.setdefault("_pending", [])
            pending.append(update)
            if len(pending) >= _FLUSH_EVERY:
                self.flush_statistics()

    def _update_now(self, update: _Update) -> None:
        """Fold one call's statistics into the running buffers at once, with tensor operations
        only: the same update as :meth:`flush_statistics` with one recorded call (weight
        ``max(momentum, 1 / (tracked + 1))``), for compiled graphs, which cannot keep Python
        lists of tensors between calls."""
        running_mean, running_var = self.running_mean, self.running_var
        tracked, dtype = self.num_batches_tracked, self.running_mean.dtype
        w = (tracked + 1).reciprocal().to(dtype).clamp(min=self.momentum)
        means = torch.cat([mean for mean, _, _ in update]).to(dtype)  # one row per batch
        variances = torch.cat(
            [
                (inv.to(dtype).pow(-2) - self.eps).clamp(min=0.0) * (rows / (rows - 1))
                for _, inv, rows in update
            ]
        )
        running_mean.lerp_(means.mean(0), w)
        running_var.lerp_(variances.mean(0), w)
        tracked.add_(1)

    def _normalise(
        self, side: torch.Tensor, c: int
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, int]]:
        """Batch-normalise each column of ``side`` (no affine) with one fused call; also return
        the statistics of its virtual batches (``c`` channels each)."""
        out, mean, invstd = torch.native_batch_norm(
            side, None, None, None, None, True, 0.0, self.eps
        )
        return out, (mean.view(-1, c), invstd.view(-1, c), side.shape[0])

    def _normalise_ragged(
        self, x: torch.Tensor, k: int, size: int, extra: int
    ) -> tuple[torch.Tensor, _Update]:
        """Virtual batches ``i::k`` when ``k`` does not divide the batch: the first ``extra``
        hold ``size + 1`` rows (the last rows of the batch), the others ``size``."""
        c = x.shape[1]
        head = x[: size * k].reshape(size, k, c)
        tail = x[size * k :].reshape(1, extra, c)
        big = torch.cat([head[:, :extra], tail]).reshape(size + 1, extra * c)
        out_big, part = self._normalise(big, c)
        out_big = out_big.view(size + 1, extra, c)
        update = [part]
        small = head[:, extra:]
        if size == 1:  # one-row virtual batches normalise to zero (and teach no statistics)
            out_small = small * 0.0
        else:
            out_small, part = self._normalise(small.reshape(size, -1), c)
            out_small = out_small.view(size, k - extra, c)
            update.append(part)
        body = torch.cat([out_big[:size], out_small], dim=1)
        return torch.cat([body.view(size * k, c), out_big[size]]), update


def _uniform(pending: list[_Update]) -> bool:
    """Whether every recorded call is one part with the same shape and row count."""
    first = pending[0]
    if len(first) != 1:
        return False
    shape, rows = first[0][0].shape, first[0][2]
    return all(len(u) == 1 and u[0][2] == rows and u[0][0].shape == shape for u in pending)


def flush_statistics(module: nn.Module) -> None:
    """Fold recorded statistics into the running buffers of every ghost batch norm in
    ``module`` (needed only before reading buffers through ``module.buffers()``)."""
    for m in module.modules():
        if isinstance(m, GhostBatchNorm):
            m.flush_statistics()
