"""A feature transformer's GLU layers in training mode as one autograd node.

A GLU layer is ``Linear -> GhostBatchNorm -> GLU`` (plus a ``sqrt(0.5)``-scaled residual); a
feature transformer chains four of them and a TabNet of three steps runs four transformers per
batch. Recorded by autograd op by op, that is some thirty graph nodes per transformer, and at
tabular sizes (a 1024 x 32 activation) each node's bookkeeping costs as much as its arithmetic.
:class:`GLUStack` runs the same operations without recording them and differentiates the whole
stack by hand: per layer the backward is PyTorch's own ``glu_backward`` and
``native_batch_norm_backward`` kernels and two matrix products. The result equals the layer-by-
layer graph to rounding (``tests/test_nn.py`` checks values and gradients in float64).

Only the common case takes this path: training mode, a batch that splits into equal virtual
batches of at least two rows (the trainer makes batch sizes such multiples), no autocast, float32
or float64. Everything else runs the modules one by one.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from tabsparse.nn.ghost_bn import GhostBatchNorm

SQRT_HALF = math.sqrt(0.5)
_glu_backward = torch.ops.aten.glu_backward
_bn_backward = torch.ops.aten.native_batch_norm_backward


def stack_shape(n: int, bns: list[GhostBatchNorm]) -> tuple[int, int] | None:
    """``(rows per virtual batch, virtual batches)`` when every batch norm splits ``n`` rows into
    equal virtual batches of two rows or more, else None (the caller runs the modules)."""
    vbs = bns[0].virtual_batch_size
    if any(bn.virtual_batch_size != vbs for bn in bns):
        return None
    k = max(1, math.ceil(n / vbs))
    size, extra = divmod(n, k)
    if extra or size < 2:
        return None
    return size, k


def _sqrt_half(like: torch.Tensor) -> torch.Tensor:
    """``sqrt(0.5)`` as a 0-d tensor of ``like``'s dtype and device: multiplying by it skips
    the conversion of a Python number that every ``mul`` with one pays."""
    return torch.full((), SQRT_HALF, dtype=like.dtype, device=like.device)


class GLUStack(torch.autograd.Function):
    """``x -> layer_m(... layer_1(x))`` for GLU layers with ghost batch norm (training mode).

    ``apply(x, residual, bns, size, k, W_1, gamma_1, beta_1, ..., W_m, gamma_m, beta_m)``:
    ``residual[j]`` says whether layer ``j`` adds its input and scales by ``sqrt(0.5)``; ``bns``
    are the layers' batch norms (their virtual-batch statistics are recorded as in
    :meth:`GhostBatchNorm.forward`); the ``n`` rows form ``k`` virtual batches of ``size`` rows
    (virtual batch ``i`` = rows ``i, i + k, ...``).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        residual: tuple[bool, ...],
        bns: list[GhostBatchNorm],
        size: int,
        k: int,
        *params: torch.Tensor,
    ) -> torch.Tensor:
        # the batch norm's affine runs inside the fused kernel: its weight and bias repeated for
        # the k virtual batches, which are k channel blocks of the (size, k * c2) view
        n = x.shape[0]
        saved: list[torch.Tensor] = []
        h_in = x
        half = _sqrt_half(x)
        for j, bn in enumerate(bns):
            weight, gamma, beta = params[3 * j : 3 * j + 3]
            c2 = weight.shape[0]
            gamma_k = gamma.expand(k, c2).reshape(-1)
            h = torch.mm(h_in, weight.t()).view(size, k * c2)
            y, mean, invstd = torch.native_batch_norm(
                h, gamma_k, beta.expand(k, c2).reshape(-1), None, None, True, 0.0, bn.eps
            )
            bn.record([(mean.view(k, c2), invstd.view(k, c2), size)])
            y = y.view(n, c2)
            g = torch._C._nn.glu(y, -1)
            out = torch.add(h_in, g).mul_(half) if residual[j] else g
            saved += [h_in, h, y, gamma_k, mean, invstd]
            h_in = out
        ctx.save_for_backward(*saved, *params[::3])
        ctx.residual, ctx.eps, ctx.shape = residual, [bn.eps for bn in bns], (n, size, k)
        return h_in

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        tensors = ctx.saved_tensors
        m = len(ctx.residual)
        saved, weights = tensors[: 6 * m], tensors[6 * m :]
        n, size, k = ctx.shape
        grads: list[torch.Tensor | None] = [None] * (3 * m)
        d: torch.Tensor | None = grad_out.contiguous()
        half = _sqrt_half(grad_out)
        for j in range(m - 1, -1, -1):
            h_in, h, y, gamma_k, mean, invstd = saved[6 * j : 6 * j + 6]
            weight = weights[j]
            c2 = weight.shape[0]
            assert d is not None
            if ctx.residual[j]:
                d = d * half  # the gradient of the GLU output and of the skip connection
            dy = _glu_backward(d, y, -1).view(size, k * c2)
            dh, dgamma, dbeta = _bn_backward(
                dy, h, gamma_k, None, None, mean, invstd, True, ctx.eps[j], [True, True, True]
            )
            grads[3 * j + 1] = dgamma.view(k, c2).sum(0)
            grads[3 * j + 2] = dbeta.view(k, c2).sum(0)
            dh = dh.view(n, c2)
            grads[3 * j] = torch.mm(h_in.t(), dh).t()  # the faster layout of the product
            if j == 0 and not ctx.needs_input_grad[0]:
                d = None
                break
            dx = dh.mm(weight)
            d = dx.add_(d) if ctx.residual[j] else dx
        return (d, None, None, None, None, *grads)


class LinearGhostBN(torch.autograd.Function):
    """``GhostBatchNorm(x @ weight.T)`` in training mode as one autograd node (the attentive
    transformer's layer): ``apply(x, bn, size, k, weight, gamma, beta)`` with the virtual
    batches of :class:`GLUStack`. The backward products are taken in the layouts that the
    matrix library runs fastest for a narrow input and a wide output (3-4x faster than the
    default ones for 8 -> 54 channels)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        bn: GhostBatchNorm,
        size: int,
        k: int,
        weight: torch.Tensor,
        gamma: torch.Tensor,
        beta: torch.Tensor,
    ) -> torch.Tensor:
        n, c = x.shape[0], weight.shape[0]
        gamma_k = gamma.expand(k, c).reshape(-1)
        h = torch.mm(x, weight.t()).view(size, k * c)
        y, mean, invstd = torch.native_batch_norm(
            h, gamma_k, beta.expand(k, c).reshape(-1), None, None, True, 0.0, bn.eps
        )
        bn.record([(mean.view(k, c), invstd.view(k, c), size)])
        ctx.save_for_backward(x, weight, h, gamma_k, mean, invstd)
        ctx.eps, ctx.shape = bn.eps, (n, size, k)
        return y.view(n, c)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x, weight, h, gamma_k, mean, invstd = ctx.saved_tensors
        n, size, k = ctx.shape
        c = weight.shape[0]
        dh, dgamma, dbeta = _bn_backward(
            grad_out.contiguous().view(size, k * c),
            h,
            gamma_k,
            None,
            None,
            mean,
            invstd,
            True,
            ctx.eps,
            [True, True, True],
        )
        dh = dh.view(n, c)
        dx = torch.mm(weight.t(), dh.t()).t() if ctx.needs_input_grad[0] else None
        dw = torch.mm(x.t(), dh).t()
        return (dx, None, None, None, dw, dgamma.view(k, c).sum(0), dbeta.view(k, c).sum(0))
