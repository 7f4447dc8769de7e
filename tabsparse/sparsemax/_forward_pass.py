"""The forward computation: any shape and ``dim`` reduced to rows, the threshold, the output.

:func:`_forward` chooses the algorithm from the input: the sort-based threshold for tiny inputs,
candidate pruning for wide rows on the CPU, the iterative search otherwise.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tabsparse.sparsemax._iterative import (
    _FIRST_CHECK,
    _entmax15_step,
    _is_adaptive,
    _narrow_sparsemax_threshold,
    _search,
    _sparsemax_step,
    _Step,
)
from tabsparse.sparsemax._pruning import (
    _PRUNE_MIN_WIDTH,
    _block_bound,
    _block_max,
    _block_size,
    _wide_forward,
)
from tabsparse.sparsemax._sorted import _entmax15_tau_sort, _sparsemax_tau_sort

#: Inputs with ``numel * log2(d)`` up to this use the sort-based algorithm (fewer operations).
_SORT_MAX_WORK = 1 << 17


def _threshold(z: Tensor, entmax: bool) -> Tensor:
    """Exact threshold of each row of ``z`` (full-width search).

    Parameters
    ----------
    z : Tensor
        Scores ``(n, w)``, contiguous, row maxima 0 (NaN rows allowed). For entmax-1.5 these
        are the half scores ``u``.
    entmax : bool
        Entmax-1.5 threshold if true, sparsemax threshold otherwise.

    Returns
    -------
    Tensor
        Threshold ``(n, 1)``.
    """
    step: _Step = _entmax15_step if entmax else _sparsemax_step
    fallback = _entmax15_tau_sort if entmax else _sparsemax_tau_sort
    n, w = z.shape
    if not entmax and w < _PRUNE_MIN_WIDTH and _is_adaptive(z.device):
        return _narrow_sparsemax_threshold(z)
    if w >= _PRUNE_MIN_WIDTH:
        tau = _block_bound(_block_max(z, _block_size(w)), entmax)  # better than max - 1
    else:
        tau = torch.full((n, 1), -1.0, dtype=z.dtype, device=z.device)
    first = 1 if w >= _PRUNE_MIN_WIDTH else _FIRST_CHECK
    return _search(z, tau, step, fallback, _is_adaptive(z.device), first)


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the computation runs in: float32 for half precision, else ``dtype``."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _restore(y: Tensor, shape: torch.Size, dim: int, dtype: torch.dtype) -> Tensor:
    """Rows ``(n, d)`` back to the input layout (contiguous, like softmax) and dtype."""
    out = y.view(shape).movedim(-1, dim)
    if dim != len(shape) - 1:
        out = out.contiguous()
    return out.to(dtype)


def _forward(x: Tensor, dim: int, entmax: bool) -> Tensor:
    """Sparsemax or entmax-1.5 of ``x`` along ``dim``, in the dtype of ``x``.

    Parameters
    ----------
    x : Tensor
        Input scores (never modified).
    dim : int
        Non-negative dimension.
    entmax : bool
        Entmax-1.5 if true, sparsemax otherwise.

    Returns
    -------
    Tensor
        Output with the shape and dtype of ``x``.
    """
    if x.numel() == 0:
        return torch.zeros_like(x)
    xt = x.movedim(dim, -1)
    shape = xt.shape
    d = shape[-1]
    x2 = xt.reshape(-1, d).to(_work_dtype(x.dtype))
    if x2.stride(-1) != 1 or (x2.shape[0] > 1 and x2.stride(0) != d):
        x2 = x2.contiguous()
    small = x2.numel() * math.log2(max(d, 2)) <= _SORT_MAX_WORK
    if d >= _PRUNE_MIN_WIDTH and not small and _is_adaptive(x2.device):
        return _restore(_wide_forward(x2, entmax), shape, dim, x.dtype)
    m = x2.amax(dim=1, keepdim=True)
    z = torch.sub(x2, m)
    if entmax:  # half scores u = (x - max) / 2
        z.mul_(0.5)
    if small:  # a handful of operations: sorting beats the iterative search
        tau = _entmax15_tau_sort(z) if entmax else _sparsemax_tau_sort(z)
    else:
        tau = _threshold(z, entmax)
    tau = tau + (m - m)  # NaN for rows with a non-finite maximum (NaN, +inf, all -inf)
    z.sub_(tau).clamp_(min=0.0)
    if entmax:
        z.square_()
    return _restore(z, shape, dim, x.dtype)
