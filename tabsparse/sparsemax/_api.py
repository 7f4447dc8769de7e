"""The public sparsemax / entmax-1.5 API: autograd Functions, functions and modules.

:func:`sparsemax` and :func:`entmax15` validate their input and run the closed-form autograd
Functions eagerly; while ``torch.compile`` or ``torch.export`` traces them they run the
branch-free sort-based forms instead. :class:`Sparsemax` and :class:`Entmax15` wrap them as
modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from tabsparse.sparsemax._backward_pass import _backward
from tabsparse.sparsemax._forward_pass import _forward, _work_dtype
from tabsparse.sparsemax._sorted import entmax15_sorted, sparsemax_sorted

__all__ = ["Entmax15", "Sparsemax", "entmax15", "sparsemax"]


class _SparsemaxFunction(torch.autograd.Function):
    """Autograd function for sparsemax with the closed-form backward."""

    @staticmethod
    def forward(x: Tensor, dim: int) -> Tensor:  # type: ignore[override]
        return _forward(x, dim, entmax=False)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _backward(y, grad_out, ctx.dim, entmax=False), None


class _Entmax15Function(torch.autograd.Function):
    """Autograd function for entmax-1.5 with the closed-form backward."""

    @staticmethod
    def forward(x: Tensor, dim: int) -> Tensor:  # type: ignore[override]
        return _forward(x, dim, entmax=True)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _backward(y, grad_out, ctx.dim, entmax=True), None


def _apply(fn: type[torch.autograd.Function], x: Tensor, dim: int) -> Any:
    """``fn.apply(x, dim)`` without the signature inspection that ``Function.apply`` does on
    every call for functions with ``setup_context``; the public ``apply`` where functorch
    transforms need it."""
    if torch._C._are_functorch_transforms_active():
        return fn.apply(x, dim)
    return super(torch.autograd.Function, fn).apply(x, dim)  # type: ignore[misc]


def _check(x: Tensor, dim: int) -> int:
    """Validate the input and return ``dim`` as a non-negative index."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating point tensor, got dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension, got a 0-d tensor")
    ndim = x.dim()
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} is out of range for a tensor with {ndim} dimensions")
    return dim % ndim


def _traced(fn: Callable[[Tensor], Tensor], x: Tensor, dim: int) -> Tensor:
    """``fn`` (a sort-based form) along ``dim`` in float32 or wider, back in the dtype of
    ``x``: what :func:`sparsemax` and :func:`entmax15` run while ``torch.compile`` or
    ``torch.export`` traces them. The library's own search decides on the host how many passes
    a batch needs, which a traced graph cannot do; the sort-based form has no branches, and
    autograd through its closed-form threshold gives the exact Jacobian (for sparsemax: each
    score of the support moves the threshold by ``1 / |support|``)."""
    return fn(x.movedim(dim, -1).to(_work_dtype(x.dtype))).movedim(-1, dim).to(x.dtype)


def sparsemax(x: Tensor, dim: int = -1) -> Tensor:
    """Sparsemax: Euclidean projection of ``x`` onto the probability simplex along ``dim``.

    Parameters
    ----------
    x : Tensor
        Floating point scores of any shape.
    dim : int, default -1
        Dimension along which the output sums to one.

    Returns
    -------
    Tensor
        Sparse probabilities with the shape and dtype of ``x``.

    Notes
    -----
    Exact (equal to the sort-based algorithm of Martins & Astudillo up to floating point
    rounding) but sort-free in the common case. Rows containing NaN or ``+inf``, and rows of
    only ``-inf``, give NaN rows; ``-inf`` entries get zero probability and zero gradient.
    ``float16`` / ``bfloat16`` inputs are computed in float32. The input is never modified.

    Examples
    --------
    >>> sparsemax(torch.tensor([1.0, 0.5, -1.0]))
    tensor([0.7500, 0.2500, 0.0000])
    """
    d = _check(x, dim)
    if torch.compiler.is_compiling():
        return _traced(sparsemax_sorted, x, d)
    out: Tensor = _apply(_SparsemaxFunction, x, d)
    return out


def entmax15(x: Tensor, dim: int = -1) -> Tensor:
    """Entmax-1.5 of ``x`` along ``dim``: ``[x / 2 - tau]_+ ** 2``, summing to one.

    Parameters
    ----------
    x : Tensor
        Floating point scores of any shape.
    dim : int, default -1
        Dimension along which the output sums to one.

    Returns
    -------
    Tensor
        Sparse probabilities with the shape and dtype of ``x``.

    Notes
    -----
    Exact and sort-free in the common case; same edge-case behaviour as :func:`sparsemax`.

    Examples
    --------
    >>> entmax15(torch.tensor([2.0, 0.5, -1.0]))
    tensor([0.9496, 0.0504, 0.0000])
    """
    d = _check(x, dim)
    if torch.compiler.is_compiling():
        return _traced(entmax15_sorted, x, d)
    out: Tensor = _apply(_Entmax15Function, x, d)
    return out


class Sparsemax(nn.Module):
    """Module wrapper of :func:`sparsemax`.

    Parameters
    ----------
    dim : int, default -1
        Dimension along which the output sums to one.
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        """Apply sparsemax along ``self.dim``.

        Parameters
        ----------
        x : Tensor
            Floating point scores.

        Returns
        -------
        Tensor
            Sparse probabilities shaped like ``x``.
        """
        return sparsemax(x, dim=self.dim)

    def extra_repr(self) -> str:
        """Describe the module configuration."""
        return f"dim={self.dim}"


class Entmax15(nn.Module):
    """Module wrapper of :func:`entmax15`.

    Parameters
    ----------
    dim : int, default -1
        Dimension along which the output sums to one.
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        """Apply entmax-1.5 along ``self.dim``.

        Parameters
        ----------
        x : Tensor
            Floating point scores.

        Returns
        -------
        Tensor
            Sparse probabilities shaped like ``x``.
        """
        return entmax15(x, dim=self.dim)

    def extra_repr(self) -> str:
        """Describe the module configuration."""
        return f"dim={self.dim}"
