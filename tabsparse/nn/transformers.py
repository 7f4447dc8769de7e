"""Feature and attentive transformers: the per-step blocks of the TabNet encoder.

A *GLU layer* is ``Linear (no bias) -> GhostBatchNorm -> GLU``. A *GLU block* chains layers with
residual connections scaled by ``sqrt(0.5)`` (the first layer of the first block has no residual
because its input width differs). A *feature transformer* is a block of ``n_shared`` layers whose
Linear weights are shared by every step, followed by ``n_independent`` step-specific layers; batch
norms are always per step. An *attentive transformer* maps the attention half of the previous step
to one logit per feature group, batch-normalises it, multiplies by the prior and applies sparsemax
or entmax-1.5.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tabsparse.nn import functional as F
from tabsparse.nn.functional import SQRT_HALF
from tabsparse.nn.ghost_bn import GhostBatchNorm

__all__ = [
    "SQRT_HALF",
    "AttentiveTransformer",
    "FeatureTransformer",
    "GLUBlock",
    "GLULayer",
    "make_linears",
    "run_glu_layers",
]
MASK_TYPES = ("sparsemax", "entmax")


def run_glu_layers(
    x: torch.Tensor, layers: Sequence[tuple[nn.Linear, GhostBatchNorm, bool]]
) -> torch.Tensor:
    """:func:`tabsparse.nn.functional.glu_stack` over ``(linear, batch norm, residual)``
    modules; records the batch norms' training statistics in them."""
    stats: list[F.Stats] = []
    out = F.glu_stack(
        x,
        [(fc.weight, bn.weight, bn.bias) for fc, bn, _ in layers],
        [res for _, _, res in layers],
        [bn.norm() for _, bn, _ in layers],
        stats=stats,
    )
    for (_, bn, _), st in zip(layers, stats, strict=False):  # no statistics in eval
        if st:
            bn.record(st)
    return out


class GLULayer(nn.Module):
    """``Linear(in, 2 * out, bias=False) -> GhostBatchNorm -> GLU``; ``(n, in) -> (n, out)``."""

    def __init__(
        self,
        fc: nn.Linear,
        *,
        virtual_batch_size: int,
        momentum: float,
    ) -> None:
        super().__init__()
        if fc.out_features % 2:
            raise ValueError(f"{fc.out_features=} must be even for a GLU")
        self.fc = fc
        self.bn = GhostBatchNorm(
            fc.out_features, virtual_batch_size=virtual_batch_size, momentum=momentum
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_glu_layers(x, [(self.fc, self.bn, False)])


class GLUBlock(nn.Module):
    """GLU layers with ``sqrt(0.5)``-scaled residuals; the first has none when ``first=True``."""

    def __init__(
        self,
        fcs: Sequence[nn.Linear],
        *,
        first: bool,
        virtual_batch_size: int,
        momentum: float,
    ) -> None:
        super().__init__()
        self.first = first
        self.layers = nn.ModuleList(
            GLULayer(fc, virtual_batch_size=virtual_batch_size, momentum=momentum) for fc in fcs
        )

    def glu_layers(self) -> list[tuple[nn.Linear, GhostBatchNorm, bool]]:
        """``(linear, batch norm, residual)`` of each layer in order."""
        layers = []
        for i, layer in enumerate(self.layers):
            assert isinstance(layer, GLULayer)
            layers.append((layer.fc, layer.bn, not (i == 0 and self.first)))
        return layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_glu_layers(x, self.glu_layers())


def make_linears(n_in: int, n_out: int, n_layers: int) -> list[nn.Linear]:
    """``n_layers`` bias-free Linear layers for a GLU stack producing ``n_out`` channels."""
    fcs = []
    for i in range(n_layers):
        fc = nn.Linear(n_in if i == 0 else n_out, 2 * n_out, bias=False)
        fcs.append(fc)
    return fcs


class FeatureTransformer(nn.Module):
    """Shared then step-specific GLU layers: ``(n, n_in) -> (n, n_out)``.

    Parameters
    ----------
    shared : sequence of nn.Linear
        The shared Linear layers (the same objects are passed to every step's transformer).
    n_in, n_out : int
        Input width and output width (``n_d + n_a``).
    n_independent : int
        Number of step-specific GLU layers.
    """

    def __init__(
        self,
        *,
        shared: Sequence[nn.Linear],
        n_in: int,
        n_out: int,
        n_independent: int,
        virtual_batch_size: int,
        momentum: float,
    ) -> None:
        super().__init__()
        if not shared and n_independent == 0:
            raise ValueError("a feature transformer needs n_shared + n_independent >= 1")
        self.shared = (
            GLUBlock(
                list(shared),
                first=True,
                virtual_batch_size=virtual_batch_size,
                momentum=momentum,
            )
            if shared
            else None
        )
        independent_in = n_out if shared else n_in
        self.independent = (
            GLUBlock(
                make_linears(independent_in, n_out, n_independent),
                first=not shared,
                virtual_batch_size=virtual_batch_size,
                momentum=momentum,
            )
            if n_independent
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_glu_layers(x, self.glu_layers())

    def glu_layers(self) -> list[tuple[nn.Linear, GhostBatchNorm, bool]]:
        """``(linear, batch norm, residual)`` of each GLU layer in order, shared ones first;
        ``residual`` says whether the layer adds its input (all but the very first)."""
        layers = []
        for block in (self.shared, self.independent):
            if block is not None:
                assert isinstance(block, GLUBlock)
                layers += block.glu_layers()
        return layers


class AttentiveTransformer(nn.Module):
    """Mask for one step: ``mask_fn(prior * GBN(Linear(a)))`` over feature groups.

    ``(n, n_a), (n, n_groups) -> (n, n_groups)``; each row of the mask sums to one.
    ``mask_fn`` (an attribute) computes sparsemax / entmax-1.5: the library's search by
    default; export sets :func:`tabsparse.nn.functional.sorted_masks` (branch-free) on its copy.
    """

    mask_fn: F.MaskFn = staticmethod(F.search_masks)  # type: ignore[assignment]

    def __init__(
        self,
        *,
        n_a: int,
        n_groups: int,
        mask_type: str,
        virtual_batch_size: int,
        momentum: float,
    ) -> None:
        super().__init__()
        if mask_type not in MASK_TYPES:
            raise ValueError(f"{mask_type=} must be one of {sorted(MASK_TYPES)}")
        self.mask_type = mask_type
        self.fc = nn.Linear(n_a, n_groups, bias=False)
        self.bn = GhostBatchNorm(n_groups, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, a: torch.Tensor, prior: torch.Tensor | None = None) -> torch.Tensor:
        """``prior=None`` stands for a prior of ones (the first step)."""
        stats: list[F.Stats] = []
        mask = F.attention_mask(
            a,
            prior,
            (self.fc.weight, self.bn.weight, self.bn.bias),
            self.bn.norm(),
            self.mask_fn,
            self.mask_type == "entmax",
            stats=stats,
        )
        if stats and stats[0]:
            self.bn.record(stats[0])
        return mask
