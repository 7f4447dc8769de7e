"""The sparsemax loss of Martins & Astudillo (2016), section 3.

For logits ``z`` and a target distribution ``q`` on the simplex,

.. math::

    L(z; q) = -q^\\top z + \\tfrac12 \\sum_{j \\in S(z)} (z_j^2 - \\tau(z)^2) + \\tfrac12 \\|q\\|^2,

where ``S(z)`` and ``tau(z)`` are the support and threshold of ``sparsemax(z)``. It is convex,
non-negative, zero exactly when ``sparsemax(z) == q``, and its gradient is
``sparsemax(z) - q``. For two classes with margin ``t = z_true - z_other`` it is the Huber-like
function ``0`` if ``t >= 1``, ``-t`` if ``t <= -1`` and ``(t - 1)**2 / 4`` otherwise.

It is evaluated through the equivalent, shift-invariant form
``(p - q)^T (z - max z) - |p|^2 / 2 + |q|^2 / 2`` with ``p = sparsemax(z)``.

:func:`smoothed_cross_entropy` is the softmax cross-entropy of a single-label classifier, with
label smoothing (Szegedy et al., 2016). The regression losses at the end
(:func:`poisson_deviance`, :func:`gamma_deviance`, :func:`tweedie_deviance`,
:func:`pinball_loss`) return one value per row, the mean over the row's columns; the
deviances take the raw output ``eta`` of a log link (the mean is ``exp(eta)``) and equal
scikit-learn's ``mean_*_deviance`` of ``exp(eta)`` (the unit deviance with its factor 2).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tabsparse.sparsemax import _forward as _sparse_forward
from tabsparse.sparsemax import _work_dtype, sparsemax_sorted

__all__ = [
    "SparsemaxLoss",
    "gamma_deviance",
    "pinball_loss",
    "poisson_deviance",
    "smoothed_cross_entropy",
    "sparsemax_loss",
    "tweedie_deviance",
]

_REDUCTIONS = ("none", "mean", "sum")


class _SparsemaxLossFunction(torch.autograd.Function):
    """Per-sample sparsemax loss with the exact gradient ``sparsemax(z) - q``."""

    @staticmethod
    def forward(ctx: Any, z: Tensor, q: Tensor) -> Tensor:  # type: ignore[override]
        # z: (n, k) logits in working precision; q: (n, k) target distribution.
        # traced graphs (torch.compile) cannot run the threshold search's host-side decisions
        compiling = torch.compiler.is_compiling()
        p = sparsemax_sorted(z) if compiling else _sparse_forward(z, 1, entmax=False)
        zs = z - z.amax(dim=1, keepdim=True)
        # A -inf logit that is not a target has p = q = 0: it contributes 0, not 0 * inf.
        zs = zs.masked_fill(torch.isneginf(zs) & (q == 0), 0.0)
        diff = p - q
        loss = (diff * zs).sum(dim=1) - 0.5 * (p * p).sum(dim=1) + 0.5 * (q * q).sum(dim=1)
        ctx.save_for_backward(diff)
        return loss.clamp_(min=0.0)  # the loss is non-negative; remove rounding noise

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (diff,) = ctx.saved_tensors
        return grad_loss.unsqueeze(1) * diff, None


def _target_distribution(target: Tensor, n: int, k: int, dtype: torch.dtype) -> Tensor:
    """Turn class indices or a multi-hot / probability matrix into ``q`` of shape ``(n, k)``.

    Parameters
    ----------
    target : Tensor
        Integer class indices of shape ``(n,)`` or a non-negative matrix of shape ``(n, k)``.
    n, k : int
        Number of samples and classes of the logits.
    dtype : torch.dtype
        Floating dtype of ``q``.

    Returns
    -------
    Tensor
        Target distribution ``q``, each row summing to one.
    """
    if not isinstance(target, Tensor):
        raise TypeError(f"target must be a torch.Tensor, got {type(target).__name__}")
    if target.dim() == 1:
        if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
            raise ValueError(
                "a 1-D target must hold integer class indices, got dtype "
                f"{target.dtype}; pass a 2-D (n, k) matrix for multi-label targets"
            )
        if target.shape[0] != n:
            raise ValueError(
                f"target has shape {tuple(target.shape)}, expected ({n},) to match logits "
                f"of shape ({n}, {k})"
            )
        if n > 0 and not torch.compiler.is_compiling():  # a graph cannot check values
            lo, hi = int(target.min()), int(target.max())
            if lo < 0 or hi >= k:
                raise ValueError(f"target class indices must lie in [0, {k}), got [{lo}, {hi}]")
        q = torch.zeros((n, k), dtype=dtype, device=target.device)
        q.scatter_(1, target.long().unsqueeze(1), 1.0)
        return q
    if target.dim() == 2:
        if tuple(target.shape) != (n, k):
            raise ValueError(
                f"target has shape {tuple(target.shape)}, expected ({n}, {k}) to match the logits"
            )
        y = target.to(dtype)
        if torch.compiler.is_compiling():  # a graph cannot check values (the estimators did)
            return y / y.sum(dim=1, keepdim=True)
        if n > 0 and k > 0:
            if bool(torch.isnan(y).any()) or bool((y < 0).any()):
                raise ValueError("a 2-D target must be non-negative and free of NaN")
            total = y.sum(dim=1, keepdim=True)
            empty = (total <= 0).view(-1).nonzero().view(-1)
            if empty.numel() > 0:
                rows = empty[:5].tolist()
                raise ValueError(
                    f"target rows {rows}{'...' if empty.numel() > 5 else ''} are all zero; "
                    "the sparsemax loss needs at least one positive label per row"
                )
            return y / total
        return y
    raise ValueError(
        f"target must be 1-D class indices of shape ({n},) or a 2-D matrix of shape ({n}, {k}), "
        f"got shape {tuple(target.shape)}"
    )


def sparsemax_loss(
    logits: Tensor,
    target: Tensor,
    reduction: str = "mean",
    dim: int = -1,
    weight: Tensor | None = None,
) -> Tensor:
    """Sparsemax loss (Martins & Astudillo, 2016) for multi-class or multi-label targets.

    Parameters
    ----------
    logits : Tensor
        Floating point scores of shape ``(n, k)``.
    target : Tensor
        Either integer class indices of shape ``(n,)`` (multi-class, ``q`` is one-hot) or a
        non-negative multi-hot / probability matrix of shape ``(n, k)`` (multi-label,
        ``q = target / target.sum(1)``). Rows of a 2-D target must not be all zero
        (``ValueError``).
    reduction : {"mean", "sum", "none"}, default "mean"
        How to reduce the per-sample losses.
    dim : int, default -1
        Class dimension of ``logits`` (``-1`` / ``1``, or ``0`` / ``-2`` for ``(k, n)``
        logits; a 2-D target is then read as ``(k, n)`` as well).
    weight : Tensor, optional
        Non-negative per-sample weights of shape ``(n,)``. With ``reduction="mean"`` the
        result is ``sum(w * loss) / sum(w)``.

    Returns
    -------
    Tensor
        Per-sample losses ``(n,)`` for ``"none"``, a scalar otherwise, in the dtype of
        ``logits``.

    Notes
    -----
    The gradient with respect to ``logits`` is exactly ``sparsemax(logits) - q`` (scaled by
    the reduction and weights); no gradient flows to ``target``. A ``-inf`` logit of a class
    that is not a target contributes 0 to the loss and gets 0 gradient. If a target class has a
    ``-inf`` logit the loss of that sample is ``+inf`` (other samples are unaffected). A sample
    with NaN logits has a NaN loss. ``float16`` / ``bfloat16`` logits are computed in float32.
    While ``torch.compile`` traces the loss, the values of ``target`` are not checked (a graph
    cannot raise on data) and the sparsemax is the sort-based one; the result is the same.

    Examples
    --------
    >>> z = torch.tensor([[2.0, 0.0, -1.0], [0.0, 0.5, 0.0]])
    >>> sparsemax_loss(z, torch.tensor([0, 1]), reduction="none")
    tensor([0.0000, 0.1250])
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        raise TypeError("logits must be a floating point torch.Tensor")
    if logits.dim() != 2:
        raise ValueError(
            f"logits must be 2-D (n, k), got {logits.dim()}-D with shape {tuple(logits.shape)}"
        )
    if dim not in (-2, -1, 0, 1):
        raise IndexError(f"dim {dim} is out of range for 2-D logits")
    if dim % 2 == 0:
        logits = logits.t()
        if isinstance(target, Tensor) and target.dim() == 2:
            target = target.t()
    n, k = logits.shape
    if k == 0:
        raise ValueError(f"logits must have at least one class, got shape {tuple(logits.shape)}")
    out_dtype = logits.dtype
    work = _work_dtype(out_dtype)
    q = _target_distribution(target, n, k, work)
    z = logits.to(work).contiguous()
    loss: Tensor = _SparsemaxLossFunction.apply(z, q)
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != (n,):
            got = tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
            raise ValueError(f"weight must have shape ({n},) (one per sample), got {got}")
        loss = loss * weight.to(work)
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / weight.to(work).sum() if weight is not None else loss.mean()
    return loss.to(out_dtype)


class SparsemaxLoss(nn.Module):
    """Module wrapper of :func:`sparsemax_loss`.

    Parameters
    ----------
    reduction : {"mean", "sum", "none"}, default "mean"
        How to reduce the per-sample losses.
    dim : int, default -1
        Class dimension of the logits.
    """

    def __init__(self, reduction: str = "mean", dim: int = -1) -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.reduction = reduction
        self.dim = dim

    def forward(self, logits: Tensor, target: Tensor, weight: Tensor | None = None) -> Tensor:
        """Compute the sparsemax loss.

        Parameters
        ----------
        logits : Tensor
            Scores of shape ``(n, k)``.
        target : Tensor
            Class indices ``(n,)`` or multi-hot / probability matrix ``(n, k)``.
        weight : Tensor, optional
            Per-sample weights ``(n,)``.

        Returns
        -------
        Tensor
            The reduced loss.
        """
        return sparsemax_loss(logits, target, self.reduction, dim=self.dim, weight=weight)

    def extra_repr(self) -> str:
        """Describe the module configuration."""
        return f"reduction={self.reduction!r}, dim={self.dim}"


def smoothed_cross_entropy(logits: Tensor, target: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Per-row softmax cross-entropy against a smoothed one-hot target.

    For logits ``z`` of ``k`` classes, true class ``c`` and smoothing ``eps`` the target puts
    ``1 - eps + eps / k`` on ``c`` and ``eps / k`` on every other class:

    .. math::

        L(z; c) = -(1 - \\varepsilon) \\log p_c - \\tfrac{\\varepsilon}{k} \\sum_j \\log p_j,
        \\qquad p = \\operatorname{softmax}(z).

    At ``eps = 0`` this is the plain cross-entropy (computed by the very same call, so a fit
    without smoothing is unchanged). The smoothing term pulls the logits of a row towards each
    other, so the loss no longer rewards ever larger margins on rows already classified right.

    Parameters
    ----------
    logits : Tensor
        Scores of shape ``(n, k)``.
    target : Tensor
        Integer class indices of shape ``(n,)``.
    label_smoothing : float in [0, 1), default 0
        ``eps`` above.

    Returns
    -------
    Tensor
        The loss of each row, shape ``(n,)``.
    """
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    if label_smoothing == 0.0:
        return F.cross_entropy(logits, target, reduction="none")
    return F.cross_entropy(logits, target, reduction="none", label_smoothing=label_smoothing)


# ---- regression losses (one value per row) -------------------------------------------------------


def poisson_deviance(eta: Tensor, y: Tensor) -> Tensor:
    """Poisson deviance ``2 (y log(y / mu) - y + mu)`` with ``mu = exp(eta)``, per row.

    ``eta`` and ``y`` are ``(n, k)``, ``y >= 0``; returns ``(n,)``, the mean over the ``k``
    columns (``0 log 0 = 0``)."""
    return (2.0 * (torch.xlogy(y, y) - y * eta - y + torch.exp(eta))).mean(dim=1)


def gamma_deviance(eta: Tensor, y: Tensor) -> Tensor:
    """Gamma deviance ``2 (log(mu / y) + y / mu - 1)`` with ``mu = exp(eta)``, per row
    (``y > 0``); shapes as :func:`poisson_deviance`."""
    return (2.0 * (eta - torch.log(y) + y * torch.exp(-eta) - 1.0)).mean(dim=1)


def tweedie_deviance(eta: Tensor, y: Tensor, power: float) -> Tensor:
    """Tweedie deviance of power ``p >= 1`` with ``mu = exp(eta)``, per row.

    ``2 (y^(2-p) / ((1-p)(2-p)) - y mu^(1-p) / (1-p) + mu^(2-p) / (2-p))``; ``p = 1`` is
    :func:`poisson_deviance`, ``p = 2`` :func:`gamma_deviance`. ``y >= 0`` for ``p < 2``,
    ``y > 0`` for ``p >= 2``; shapes as :func:`poisson_deviance`."""
    if power < 1:
        raise ValueError(f"power={power} must be >= 1")
    if power == 1:
        return poisson_deviance(eta, y)
    if power == 2:
        return gamma_deviance(eta, y)
    a, b = 1.0 - power, 2.0 - power
    dev = torch.pow(y, b) / (a * b) - y * torch.exp(a * eta) / a + torch.exp(b * eta) / b
    return (2.0 * dev).mean(dim=1)


def pinball_loss(pred: Tensor, y: Tensor, quantiles: Tensor) -> Tensor:
    """Pinball (quantile) loss ``max(q (y - pred), (q - 1) (y - pred))``, per row.

    ``pred`` is ``(n, m)``; ``y`` is ``(n, m)`` or ``(n, 1)`` (one target against ``m``
    quantiles); ``quantiles`` broadcasts against ``pred`` (a scalar or ``(m,)``). Returns
    ``(n,)``, the mean over the ``m`` columns: scikit-learn's ``mean_pinball_loss`` averaged
    over the quantiles."""
    diff = y - pred
    return torch.maximum(quantiles * diff, (quantiles - 1.0) * diff).mean(dim=1)
