"""The backward computation: closed-form vector-Jacobian products from the saved output ``y``.

For sparsemax ``dx = s * (v - sum(s * v) / sum(s))`` with ``s = [y > 0]``; for entmax-1.5
``dx = g * v - g * sum(g * v) / sum(g)`` with ``g = sqrt(y)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tabsparse.sparsemax._pruning import _SCRATCH_ELEMENTS


def _sparsemax_vjp(y: Tensor, grad: Tensor, dim: int, out: Tensor, s: Tensor) -> None:
    """Write ``s * (v - mean_s(v))`` into ``out`` using ``s`` as scratch (``s = [y > 0]``)."""
    torch.sign(y, out=s)  # support indicator (y >= 0)
    torch.mul(grad, s, out=out)
    mean = out.sum(dim=dim, keepdim=True).div_(s.sum(dim=dim, keepdim=True))
    out.addcmul_(s, mean, value=-1.0)


def _entmax15_vjp(y: Tensor, grad: Tensor, dim: int, out: Tensor, g: Tensor) -> None:
    """Write ``g v - g sum(g v) / sum(g)`` (``g = sqrt(y)``) into ``out``, ``g`` as scratch."""
    # sqrt(y), avoiding torch.sqrt on zeros (a slow path of the vectorised CPU kernel, and
    # entmax outputs are mostly zeros): sqrt(max(y, tiny)) - sqrt(tiny) is exactly 0 at 0
    # and equal to sqrt(y) (to rounding) elsewhere.
    tiny = torch.finfo(y.dtype).tiny
    torch.clamp(y, min=tiny, out=g).sqrt_().sub_(math.sqrt(tiny))
    torch.mul(grad, g, out=out)
    q = out.sum(dim=dim, keepdim=True).div_(g.sum(dim=dim, keepdim=True))
    out.addcmul_(g, q, value=-1.0)


def _backward(y: Tensor, grad: Tensor, dim: int, entmax: bool) -> Tensor:
    """Closed-form vector-Jacobian product, in float32 for half precision.

    Large inputs reduced along their last dimension are processed in row chunks that share one
    small scratch buffer: fresh large buffers cost page faults.
    """
    dtype = grad.dtype
    if dtype in (torch.float16, torch.bfloat16):
        y, grad = y.float(), grad.float()
    else:
        y = y.to(dtype)
    vjp = _entmax15_vjp if entmax else _sparsemax_vjp
    last = dim == y.dim() - 1 and y.is_contiguous() and grad.is_contiguous()
    d = y.shape[-1] if y.dim() > 0 else 1
    if not last or y.numel() <= _SCRATCH_ELEMENTS or d == 0:
        out = torch.empty_like(y, memory_format=torch.contiguous_format)
        vjp(y, grad, dim, out, torch.empty_like(out))
        return out.to(dtype)
    y2, g2 = y.view(-1, d), grad.view(-1, d)
    out = torch.empty_like(y2)
    rows = max(1, _SCRATCH_ELEMENTS // d)
    scratch = torch.empty((min(rows, y2.shape[0]), d), dtype=y.dtype, device=y.device)
    for start in range(0, y2.shape[0], rows):
        stop = min(start + rows, y2.shape[0])
        vjp(y2[start:stop], g2[start:stop], 1, out[start:stop], scratch[: stop - start])
    return out.view(y.shape).to(dtype)
