"""Ghost batch normalisation as a module: parameters and running statistics.

In training a batch is normalised over virtual batches of about ``virtual_batch_size`` rows
(:func:`tabsparse.nn.functional.ghost_batch_norm` holds the math); in eval mode the layer is an
ordinary batch norm with the running statistics and never branches on the batch size, so it
exports with a dynamic batch dimension. This module keeps the running statistics: each training
call records its virtual batches' statistics, folded in lazily (:meth:`flush_statistics`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from tabsparse.nn import functional as F
from tabsparse.nn.functional import virtual_batches

__all__ = [
    "GhostBatchNorm",
    "flush_statistics",
    "fresh_statistics",
    "statistics_state",
    "virtual_batches",
]

_STAT_BUFFERS = frozenset({"running_mean", "running_var", "num_batches_tracked"})
_FLUSH_EVERY = 64  # bounds the memory held by recorded statistics

# statistics of one training call: (mean (k, C), 1 / sqrt(biased var + eps) (k, C), rows) per part
_Update = F.Stats


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
        return F.eval_affine(self.weight, self.bias, self.running_mean, self.running_var, self.eps)

    def norm(self) -> F.Norm:
        """How this layer normalises now, for the functions of :mod:`tabsparse.nn.functional`
        (training: virtual batches; eval: the running statistics)."""
        if self.training:
            return F.Norm(True, self.virtual_batch_size, self.eps)
        return F.Norm(False, self.virtual_batch_size, self.eps, self.running_mean, self.running_var)

    # ---- forward -----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, stats = F.batch_norm(x, self.weight, self.bias, self.norm())
        if stats:
            self.record(stats)
        return out

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


def statistics_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the running statistics of every ghost batch norm in ``module`` (recorded ones
    folded in), keyed as in its ``state_dict``: ``module.load_state_dict(saved, strict=False)``
    puts them back."""
    return {
        key: value.clone()
        for key, value in module.state_dict().items()
        if key.rsplit(".", 1)[-1] in _STAT_BUFFERS
    }


# the momentum fresh_statistics sets: any positive value below 1 / (calls made) gives every
# call the weight 1 / t, an equal-weight average
_EQUAL_WEIGHTS = 1e-12


@contextmanager
def fresh_statistics(module: nn.Module) -> Iterator[list[GhostBatchNorm]]:
    """Running statistics recomputed from scratch for the weights ``module`` holds now.

    Inside the block every ghost batch norm of ``module`` starts from empty statistics, and
    each training-mode call made there (forward passes without gradients are enough) counts
    with equal weight; on leaving, the buffers hold the average over those calls' virtual
    batches and the layers keep their momentum again. Weights that training did not produce
    step by step (an average of the weights, see :mod:`tabsparse.averaging`) need this: the
    statistics gathered during training describe the activations of other weights. Layers with
    ``momentum=0`` (frozen statistics) are left alone.

    >>> net = nn.Sequential(nn.Linear(3, 4), GhostBatchNorm(4, virtual_batch_size=8))
    >>> x = torch.randn(64, 3)
    >>> with torch.no_grad(), fresh_statistics(net):
    ...     _ = net(x)
    >>> h = net[0](x)
    >>> torch.allclose(net[1].running_mean, h.reshape(8, 8, 4).mean(1).mean(0), atol=1e-6)
    True
    """
    layers = [m for m in module.modules() if isinstance(m, GhostBatchNorm) and m.momentum > 0]
    momenta = [m.momentum for m in layers]
    for m in layers:
        m.flush_statistics()
        m.running_mean.zero_()
        m.running_var.fill_(1.0)
        m.num_batches_tracked.zero_()
        m.momentum = _EQUAL_WEIGHTS
    try:
        yield layers
    finally:
        for m, momentum in zip(layers, momenta, strict=True):
            m.flush_statistics()
            m.momentum = momentum
