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

import math
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from tabsparse.nn.fused import GLUStack, LinearGhostBN, apply, stack_shape
from tabsparse.nn.ghost_bn import GhostBatchNorm
from tabsparse.nn.glu import glu
from tabsparse.sparsemax import entmax15, sparsemax

SQRT_HALF = math.sqrt(0.5)
MASK_FUNCTIONS = {"sparsemax": sparsemax, "entmax": entmax15}


def linear_bn(fc: nn.Linear, bn: GhostBatchNorm, x: torch.Tensor) -> torch.Tensor:
    """``bn(fc(x))``; in eval mode the batch norm is folded into the (bias-free) linear layer,
    one ``addmm`` instead of a matrix product and a pass over its output."""
    if bn.training or fc.bias is not None:
        return bn(fc(x))
    scale, shift = bn.eval_affine()
    return torch.addmm(shift, x, (fc.weight * scale.unsqueeze(1)).t())


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
        return glu(linear_bn(self.fc, self.bn, x))


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            if i == 0 and self.first:
                x = layer(x)
            else:
                x = (x + layer(x)) * SQRT_HALF
        return x


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
        if self.training:
            fused = self._fused(x)
            if fused is not None:
                return cast(torch.Tensor, fused)
        if self.shared is not None:
            x = self.shared(x)
        if self.independent is not None:
            x = self.independent(x)
        return x

    def forward_split(self, x: torch.Tensor, split: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(relu(out[:, :split]), out[:, split:])`` of ``out = self(x)`` (a TabNet step's
        decision and attention features), in training mode from one autograd node. Runs no
        hooks: the caller calls the module instead where it has some."""
        if self.training:
            fused = self._fused(x, split)
            if fused is not None:
                return cast("tuple[torch.Tensor, torch.Tensor]", fused)
        out = self.forward(x)
        return torch.relu(out[:, :split]), out[:, split:]

    def _fused(
        self, x: torch.Tensor, split: int | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None:
        """Training-mode forward as one autograd node (:class:`~tabsparse.nn.fused.GLUStack`),
        or None where that path does not apply."""
        layers = self.glu_layers()
        shape = stack_shape(x, [(fc, bn) for fc, bn, _ in layers])
        if shape is None:
            return None
        params = [p for fc, bn, _ in layers for p in (fc.weight, bn.weight, bn.bias)]
        residual = tuple(res for _, _, res in layers)
        out: torch.Tensor | tuple[torch.Tensor, torch.Tensor]
        out = apply(GLUStack, x, residual, [bn for _, bn, _ in layers], *shape, split, *params)
        return out

    def glu_layers(self) -> list[tuple[nn.Linear, GhostBatchNorm, bool]]:
        """``(linear, batch norm, residual)`` of each GLU layer in order, shared ones first;
        ``residual`` says whether the layer adds its input (all but the very first)."""
        layers = []
        for block in (self.shared, self.independent):
            if block is not None:
                for i, layer in enumerate(block.layers):
                    assert isinstance(layer, GLULayer)
                    layers.append((layer.fc, layer.bn, not (i == 0 and block.first)))
        return layers


class AttentiveTransformer(nn.Module):
    """Mask for one step: ``mask_fn(prior * GBN(Linear(a)))`` over feature groups.

    ``(n, n_a), (n, n_groups) -> (n, n_groups)``; each row of the mask sums to one.
    """

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
        if mask_type not in MASK_FUNCTIONS:
            raise ValueError(f"{mask_type=} must be one of {sorted(MASK_FUNCTIONS)}")
        self.mask_type = mask_type
        self.fc = nn.Linear(n_a, n_groups, bias=False)
        self.bn = GhostBatchNorm(n_groups, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, a: torch.Tensor, prior: torch.Tensor | None = None) -> torch.Tensor:
        """``prior=None`` stands for a prior of ones (the first step)."""
        shape = stack_shape(a, [(self.fc, self.bn)]) if self.training else None
        if shape is None:
            logits = linear_bn(self.fc, self.bn, a)
        else:  # one autograd node (tabsparse.nn.fused)
            logits = apply(
                LinearGhostBN, a, self.bn, *shape, self.fc.weight, self.bn.weight, self.bn.bias
            )
        return MASK_FUNCTIONS[self.mask_type](logits if prior is None else logits * prior, dim=-1)
