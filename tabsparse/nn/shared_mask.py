"""Reviving and pruning the columns of a shared first mask (edits made during training).

With ``first_mask="shared"`` the first step's attention reads zeros, so its batch norm outputs
its bias ``b`` in training and in eval alike, and the first mask is ``sparsemax(b)``: one
selection for every row (:class:`~tabsparse.nn.encoder.TabNetEncoder`). A column outside it gets
no gradient through it, so whether a column stays is settled in the first epochs, by chance as
much as by use: relevant columns that start unlucky die, irrelevant ones that survive are never
pushed out. Two edits of ``b`` undo that lottery:

:func:`revive`
    puts every column outside the mask back in, just above the sparsemax threshold ``tau`` (at
    ``b_j = tau + weight``), so that training can judge it;
:func:`prune`
    takes every column whose weight is below ``share`` (the uniform share ``1 / n_groups`` by
    default) out, just below the threshold of the columns that stay. Columns taken out of the
    shared mask can still be selected by the later, per-row steps.

Both return which columns they changed, so that the optimiser's state of those entries can be
reset. Thresholds come from the library's sparsemax itself: on the support ``p_j = b_j - tau``.
Encoders with a per-row first mask or entmax masks are left alone (:func:`editable_bias` returns
None).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor, nn

from tabsparse.sparsemax import sparsemax

__all__ = ["editable_bias", "prune", "revive", "shared_first_mask"]


def editable_bias(encoder: nn.Module) -> nn.Parameter | None:
    """The bias ``b`` whose sparsemax is ``encoder``'s shared first mask, or None where the
    encoder has no shared sparsemax first mask."""
    if getattr(encoder, "first_mask", None) != "shared":
        return None
    attentive: Any = encoder.attention[0]  # type: ignore[index]
    if attentive.mask_type != "sparsemax":
        return None
    return cast("nn.Parameter", attentive.bn.bias)


def shared_first_mask(encoder: nn.Module) -> Tensor | None:
    """The shared first mask ``(n_groups,)`` (the same for every row), or None."""
    bias = editable_bias(encoder)
    return None if bias is None else sparsemax(bias.detach())


def _threshold(b: Tensor, mask: Tensor) -> Tensor:
    top = int(torch.argmax(mask))
    return b[top] - mask[top]  # on the support, mask = b - tau


@torch.no_grad()
def revive(encoder: nn.Module, weight: float = 0.05) -> Tensor:
    """Put the columns outside the shared first mask back in at ``b_j = tau + weight``; returns
    the boolean ``(n_groups,)`` of the columns changed (none where :func:`editable_bias` is
    None). Putting ``m`` of ``n`` columns back raises the threshold by about
    ``weight * m / n``, so a column that was in with a weight below that can fall out (it is
    put back after the next epoch if the revival goes on)."""
    bias = editable_bias(encoder)
    if bias is None:
        return torch.zeros(0, dtype=torch.bool)
    mask = sparsemax(bias.detach())
    dead = mask == 0
    bias[dead] = _threshold(bias, mask) + weight
    return dead


@torch.no_grad()
def prune(encoder: nn.Module, share: float | None = None, margin: float = 0.05) -> Tensor:
    """Keep only the columns whose shared-mask weight is at least ``share`` (default ``1 /
    n_groups``; the heaviest column always stays): every other column's bias is lowered to
    ``tau' - margin``, where ``tau'`` is the threshold of the kept columns alone, so that the new
    mask is the sparsemax of the kept columns' biases. Returns the boolean ``(n_groups,)`` of
    the columns whose bias was lowered."""
    bias = editable_bias(encoder)
    if bias is None:
        return torch.zeros(0, dtype=torch.bool)
    if share is None:
        share = 1.0 / bias.numel()
    mask = sparsemax(bias.detach())
    kept = mask >= share
    kept[torch.argmax(mask)] = True
    b_kept = bias.detach()[kept]
    floor = _threshold(b_kept, sparsemax(b_kept)) - margin
    lowered = ~kept & (bias > floor)
    bias[lowered] = floor
    return lowered
