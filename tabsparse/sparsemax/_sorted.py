"""Sort-based sparsemax and entmax-1.5 (``O(d log d)`` per row, no data-dependent branches).

Two uses: the exact thresholds :func:`_sparsemax_tau_sort` / :func:`_entmax15_tau_sort` are the
fallback of the iterative search (and its algorithm for tiny inputs, where sorting costs fewer
operations); :func:`sparsemax_sorted` / :func:`entmax15_sorted` are the forms that exported and
compiled graphs run, since a traced graph cannot decide on the host how many search passes a
batch needs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["entmax15_sorted", "sparsemax_sorted"]


def _sparsemax_tau_sort(z: Tensor) -> Tensor:
    """Sort-based sparsemax threshold along the last dimension.

    Parameters
    ----------
    z : Tensor
        Scores of shape ``(n, w)``; ``-inf`` entries are allowed.

    Returns
    -------
    Tensor
        Threshold ``tau`` of shape ``(n, 1)``.
    """
    w = z.shape[-1]
    zs = torch.sort(z, dim=-1, descending=True).values
    csum = zs.cumsum(dim=-1)
    k = torch.arange(1, w + 1, device=z.device, dtype=z.dtype)
    cond = 1.0 + k * zs > csum
    kk = cond.sum(dim=-1, keepdim=True).clamp_(min=1).to(z.dtype)
    zero = torch.zeros((), dtype=z.dtype, device=z.device)
    ssum = torch.where(cond, zs, zero).sum(dim=-1, keepdim=True)
    return (ssum - 1.0) / kk


def _entmax15_tau_sort(u: Tensor) -> Tensor:
    """Sort-based entmax-1.5 threshold along the last dimension.

    Parameters
    ----------
    u : Tensor
        Half scores of shape ``(n, w)``; ``-inf`` entries are allowed.

    Returns
    -------
    Tensor
        Threshold ``tau`` of shape ``(n, 1)`` with ``sum([u - tau]_+ ** 2) == 1``.
    """
    w = u.shape[-1]
    us = torch.sort(u, dim=-1, descending=True).values
    k = torch.arange(1, w + 1, device=u.device, dtype=u.dtype)
    zero = torch.zeros((), dtype=u.dtype, device=u.device)
    finite = torch.isfinite(us)
    usf = torch.where(finite, us, zero)
    mean = usf.cumsum(dim=-1) / k
    msq = (usf * usf).cumsum(dim=-1) / k
    delta = (1.0 - k * (msq - mean * mean)) / k
    tau_k = mean - torch.sqrt(delta.clamp(min=0.0))
    cond = (tau_k <= us) & finite
    kk = cond.sum(dim=-1, keepdim=True).clamp_(min=1).to(u.dtype)
    s1 = torch.where(cond, us, zero).sum(dim=-1, keepdim=True)
    s2 = torch.where(cond, us * us, zero).sum(dim=-1, keepdim=True)
    m = s1 / kk
    dl = (1.0 - (s2 - s1 * m)) / kk
    return m - torch.sqrt(dl.clamp(min=0.0))


def sparsemax_sorted(x: Tensor) -> Tensor:
    """Sparsemax along the last dimension by sorting: no data- or size-dependent branches.

    Parameters
    ----------
    x : Tensor
        Floating point scores ``(..., d)`` with finite entries.

    Returns
    -------
    Tensor
        ``[x - tau]_+`` with ``tau`` such that each row sums to one; same shape and dtype.

    Notes
    -----
    With the row sorted in decreasing order ``z_(1) >= ... >= z_(d)``, the support is the
    ``k*`` largest scores, where ``k*`` counts the ``k`` with ``1 + k z_(k) > z_(1) + ... +
    z_(k)`` (these ``k`` form a prefix), and ``tau = (z_(1) + ... + z_(k*) - 1) / k*``. Tied
    scores share one value of the condition, so ties are never split. Scores are shifted by the
    row maximum first, which changes nothing mathematically and keeps the sums small.

    Examples
    --------
    >>> sparsemax_sorted(torch.tensor([[1.0, 0.5, -1.0]]))
    tensor([[0.7500, 0.2500, 0.0000]])
    """
    d = x.shape[-1]
    z = x - x.amax(dim=-1, keepdim=True)
    zs = torch.sort(z, dim=-1, descending=True).values
    csum = zs.cumsum(dim=-1)
    k = torch.arange(1, d + 1, dtype=z.dtype, device=z.device)
    size = (1.0 + k * zs > csum).sum(dim=-1, keepdim=True)  # >= 1: the maximum always counts
    tau = (csum.gather(-1, size - 1) - 1.0) / size.to(z.dtype)
    return (z - tau).clamp(min=0.0)


def entmax15_sorted(x: Tensor) -> Tensor:
    """Entmax-1.5 along the last dimension by sorting: no data- or size-dependent branches.

    Parameters
    ----------
    x : Tensor
        Floating point scores ``(..., d)`` with finite entries.

    Returns
    -------
    Tensor
        ``[x / 2 - tau]_+ ** 2`` with ``tau`` such that each row sums to one.

    Notes
    -----
    On the half scores ``u = (x - max x) / 2`` sorted in decreasing order, the candidate
    threshold of support size ``k`` is the smaller root of ``sum_{i <= k} (u_(i) - t) ** 2 =
    1``: ``t_k = m_k - sqrt(max(0, (1 - k (q_k - m_k ** 2)) / k))`` with ``m_k``, ``q_k`` the
    means of the ``k`` largest ``u`` and of their squares. The support size is the number of
    ``k`` with ``t_k <= u_(k)``, and ``tau`` is the candidate of that size.

    Examples
    --------
    >>> entmax15_sorted(torch.tensor([[2.0, 0.5, -1.0]]))
    tensor([[0.9496, 0.0504, 0.0000]])
    """
    d = x.shape[-1]
    u = (x - x.amax(dim=-1, keepdim=True)) * 0.5
    us = torch.sort(u, dim=-1, descending=True).values
    k = torch.arange(1, d + 1, dtype=u.dtype, device=u.device)
    mean = us.cumsum(dim=-1) / k
    mean_sq = (us * us).cumsum(dim=-1) / k
    delta = (1.0 - k * (mean_sq - mean * mean)) / k
    tau_k = mean - delta.clamp(min=0.0).sqrt()
    size = (tau_k <= us).sum(dim=-1, keepdim=True)  # >= 1: t_1 = u_(1) - 1
    tau = tau_k.gather(-1, size - 1)
    return (u - tau).clamp(min=0.0).square()
