"""A TabNet encoder's training step as one autograd node with a hand-written backward.

Recorded op by op, a training step of the encoder is some hundred and fifty graph nodes, and at
tabular sizes (a 1024 x 32 activation) each node's bookkeeping costs as much as its arithmetic.
:class:`EncoderStep` runs :func:`tabsparse.nn.functional.encoder_training` (the same code that
autograd differentiates everywhere else) without recording, keeps the tensors that function
hands it, and differentiates the whole encoder by hand: per GLU layer a GLU's backward
(:mod:`tabsparse.nn.glu`), PyTorch's ``native_batch_norm_backward`` and two matrix products; per
step the sparsemax / entmax vector-Jacobian product and the prior's and masked input's products.
``tests/test_encoder_step.py`` checks it against autograd over the functional code and with
``gradcheck`` in float64.

It applies to a training step where nothing reads the masks, no transformer
has hooks, the batch splits into equal virtual batches of two rows or more in every batch norm
(the trainer makes batch sizes such multiples), float32 / float64 without autocast, outside
``torch.compile``. :func:`encoder_plan` says whether it does; the encoder keeps the plan on itself
and checks, by identity, that the modules and parameters it was built from are still in place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from tabsparse.nn import functional as F
from tabsparse.nn.ghost_bn import GhostBatchNorm
from tabsparse.nn.glu import glu_backward
from tabsparse.sparsemax import _entmax15_vjp, _sparsemax_vjp
from tabsparse.sparsemax import _forward as _mask_forward

__all__ = ["EncoderPlan", "EncoderStep", "apply", "encoder_plan", "raw_masks"]

_bn_backward = torch.ops.aten.native_batch_norm_backward


def raw_masks(z: torch.Tensor, entmax: bool) -> torch.Tensor:
    """The library's sparsemax / entmax-1.5 forward over the last dimension, unrecorded."""
    return _mask_forward(z, -1, entmax)


def apply(fn: type[torch.autograd.Function], *args: Any) -> Any:
    """``fn.apply(*args)`` without the argument scan that ``Function.apply`` does in Python on
    every call; the public ``apply`` where functorch transforms need it."""
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return fn.apply(*args)
    return super(torch.autograd.Function, fn).apply(*args)  # type: ignore[misc]


@dataclass(frozen=True)
class EncoderPlan:
    """What :class:`EncoderStep` runs: the encoder's parameters (each once), its
    :class:`~tabsparse.nn.functional.EncoderLayout`, its batch norms in the order the layout
    produces statistics, and the virtual batches ``(size, k)`` of the batch."""

    params: tuple[torch.Tensor, ...]
    layout: F.EncoderLayout
    batch_norms: tuple[GhostBatchNorm, ...]
    size: int
    k: int


def encoder_plan(
    x: torch.Tensor,
    transformers: Sequence[Sequence[tuple[nn.Linear, GhostBatchNorm, bool]]],
    attention: Sequence[tuple[nn.Linear, GhostBatchNorm, bool]],
    *,
    n_d: int,
    gamma: float,
    epsilon: float,
    group_index: torch.Tensor | None,
) -> EncoderPlan | None:
    """The plan of an encoder whose feature transformers have the GLU layers ``(linear, batch
    norm, residual)`` of ``transformers`` (the initial one first, an empty list with a shared
    first mask) and whose steps attend with ``(linear, batch norm, entmax)``, for the input
    ``x``; None where the node does not apply."""
    if torch.compiler.is_compiling() or torch.is_autocast_enabled(x.device.type):
        return None
    if x.dim() != 2 or x.dtype not in (torch.float32, torch.float64):
        return None
    layers = [(fc, bn) for t in transformers for fc, bn, _ in t]
    layers += [(fc, bn) for fc, bn, _ in attention]
    if any(fc.bias is not None or fc.weight.dtype != x.dtype for fc, _ in layers):
        return None
    vbs = layers[0][1].virtual_batch_size
    if any(bn.virtual_batch_size != vbs or not bn.training for _, bn in layers):
        return None
    shape = F.even_batches(x.shape[0], vbs)
    if shape is None:
        return None
    params: list[torch.Tensor] = []
    position: dict[int, int] = {}

    def index(fc: nn.Linear, bn: GhostBatchNorm) -> tuple[int, ...]:
        out = []
        for t in (fc.weight, bn.weight, bn.bias):
            if id(t) not in position:
                position[id(t)] = len(params)
                params.append(t)
            out.append(position[id(t)])
        return tuple(out)

    layout = F.EncoderLayout(
        transformers=tuple(
            (
                tuple(res for _, _, res in t),
                tuple(bn.eps for _, bn, _ in t),
                sum((index(fc, bn) for fc, bn, _ in t), ()),
            )
            for t in transformers
        ),
        attention=tuple((index(fc, bn), bn.eps, entmax) for fc, bn, entmax in attention),
        n_d=n_d,
        gamma=gamma,
        epsilon=epsilon,
        group_index=group_index,
        virtual_batch_size=vbs,
    )
    bns: list[GhostBatchNorm] = [bn for _, bn, _ in transformers[0]]
    for (_, bn, _), t in zip(attention, transformers[1:], strict=True):
        bns += [bn, *(b for _, b, _ in t)]
    return EncoderPlan(tuple(params), layout, tuple(bns), *shape)


class EncoderStep(torch.autograd.Function):
    """``apply(x, plan, keep_decisions, *plan.params)`` returns ``(summed decisions, sparsity
    loss, decisions)`` of a TabNet encoder in training mode
    (:func:`tabsparse.nn.functional.encoder_training`), recording the batch norms'
    statistics; ``decisions`` ``(n_steps, n, n_d)`` holds each step's decision with
    ``keep_decisions`` (the pretraining decoder reads them), else it is empty. What the
    backward needs is saved on this node, so autograd frees it as usual and refuses a backward
    after an in-place change of a saved tensor."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, x: torch.Tensor, plan: EncoderPlan, keep_decisions: bool, *params: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        stats: list[F.Stats] = []
        saved: list[torch.Tensor | None] = []
        decisions: list[torch.Tensor] | None = [] if keep_decisions else None
        output, entropy = F.encoder_training(
            x, params, plan.layout, raw_masks, stats=stats, saved=saved, decisions=decisions
        )
        for bn, st in zip(plan.batch_norms, stats, strict=True):
            bn.record(st)
        ctx.save_for_backward(*saved)
        ctx.plan = plan
        ctx.n_rows = x.shape[0]
        ctx.set_materialize_grads(False)
        stacked = x.new_empty(0) if decisions is None else torch.stack(decisions)
        return output, entropy, stacked

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: Any,
        grad_output: torch.Tensor | None,
        grad_entropy: torch.Tensor | None,
        grad_decisions: torch.Tensor | None,
    ) -> tuple[torch.Tensor | None, ...]:
        plan: EncoderPlan = ctx.plan
        layout = plan.layout
        saved = ctx.saved_tensors
        x_grad = ctx.needs_input_grad[0]
        # cut the saved tensors back into the parts of the forward, in order
        cursor = iter(saved)
        first = len(layout.transformers[0][0])  # 0: a shared first mask, no initial transformer
        parts_t = [_take(cursor, 8 * first + 1) if first else []]
        parts_a = []
        for spec in layout.transformers[1:]:
            parts_a.append(_take(cursor, 14))
            parts_t.append(_take(cursor, 8 * len(spec[0]) + 1))
        grads: list[torch.Tensor | None] = [None] * len(plan.params)

        def add(index: Sequence[int], found: Sequence[torch.Tensor | None]) -> None:
            for i, g in zip(index, found, strict=True):
                if g is not None:
                    grads[i] = g if grads[i] is None else grads[i].add_(g)  # type: ignore[union-attr]

        dx: torch.Tensor | None = None
        d_att: torch.Tensor | None = None
        d_prior: torch.Tensor | None = None
        n_steps = len(layout.attention)
        rows = n_steps * ctx.n_rows
        for j in range(n_steps - 1, -1, -1):
            spec = layout.transformers[j + 1]
            grad_decision = grad_output
            if grad_decisions is not None and grad_decisions.numel():
                step = grad_decisions[j]
                grad_decision = step if grad_output is None else grad_output + step
            d_masked, found = _glu_stack_backward(
                parts_t[j + 1], spec, plan.k, grad_decision, d_att, layout.n_d, True
            )
            add(spec[2], found)
            index, eps, entmax = layout.attention[j]
            d_att, d_prior, d_x, found = _mask_step_backward(
                parts_a[j], layout, eps, entmax, plan.k, d_prior, d_masked, grad_entropy,
                rows, x_grad,
            )  # fmt: skip
            add(index, found)
            if d_x is not None:
                dx = d_x if dx is None else dx.add_(d_x)
        spec = layout.transformers[0]
        if first:
            d_in, found = _glu_stack_backward(
                parts_t[0], spec, plan.k, None, d_att, layout.n_d, x_grad
            )
            add(spec[2], found)
            if d_in is not None:
                dx = d_in if dx is None else dx.add_(d_in)
        return (dx if x_grad else None, None, None, *grads)


def _take(cursor: Iterator[torch.Tensor | None], count: int) -> list[torch.Tensor | None]:
    return [next(cursor) for _ in range(count)]


def _glu_stack_backward(
    part: Sequence[Any],
    spec: tuple[tuple[bool, ...], tuple[float, ...], tuple[int, ...]],
    k: int,
    grad_decision: torch.Tensor | None,
    grad_att: torch.Tensor | None,
    n_d: int,
    input_grad: bool,
) -> tuple[torch.Tensor | None, list[torch.Tensor | None]]:
    """Gradients of a feature transformer's input and of its ``W, gamma, beta`` per layer,
    from those of its decision and attention features (None where none)."""
    residual, eps, _ = spec
    m = len(residual)
    if grad_decision is None and grad_att is None:
        return None, [None] * (3 * m)
    decision = part[-1]
    assert decision is not None
    width = part[2].shape[1]  # type: ignore[union-attr]
    if grad_decision is None:
        gd = torch.zeros_like(decision)
    else:
        gd = torch.ops.aten.threshold_backward(grad_decision, decision, 0)
    ga = grad_att if grad_att is not None else gd.new_zeros(gd.shape[0], width // 2 - n_d)
    d: torch.Tensor | None = torch.cat([gd, ga], dim=1)
    grads: list[torch.Tensor | None] = [None] * (3 * m)
    affine: list[torch.Tensor] = [gd] * (2 * m)  # per virtual batch: weights, then biases
    for j in range(m - 1, -1, -1):
        h_in, w, y, gate, side, weight_k, mean, invstd = part[8 * j : 8 * j + 8]
        assert d is not None and h_in is not None and w is not None and y is not None
        dy = glu_backward(d, y, gate)
        dh, affine[j], affine[m + j] = _bn_backward(
            dy.view(side.shape), side, weight_k, None, None, mean, invstd, True, eps[j],
            [True, True, True],
        )  # fmt: skip
        dh = dh.view(dy.shape[0], -1)
        grads[3 * j] = torch.mm(h_in.t(), dh).t()  # the faster layout of the product
        if j == 0 and not input_grad:
            d = None
            break
        dx = dh.mm(w)
        d = dx.add_(d, alpha=F.SQRT_HALF) if residual[j] else dx
    # summed over the virtual batches of all layers in one operation, then scaled as the
    # batch norms' weights and biases were in the forward
    sums = torch.stack(affine).view(2 * m, k, -1).sum(1)
    if any(residual):
        sums.mul_(F.residual_scale(residual, sums.shape[-1], sums.dtype, sums.device))
    split = sums.unbind(0)
    grads[1::3], grads[2::3] = split[:m], split[m:]
    return d, grads


def _mask_step_backward(
    part: Sequence[Any],
    layout: F.EncoderLayout,
    eps: float,
    entmax: bool,
    k: int,
    grad_prior: torch.Tensor | None,
    grad_masked: torch.Tensor | None,
    grad_entropy: torch.Tensor | None,
    rows: int,
    x_grad: bool,
) -> tuple[
    torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, list[torch.Tensor | None]
]:
    """Gradients of a step's attention features, prior and input ``x`` and of its ``W, gamma,
    beta``, from those of the next prior, the masked input and the sparsity loss."""
    att, w, side, weight_k, mean, invstd, logits, prior = part[:8]
    mask, relax, spread, x, shifted, log = part[8:]
    assert att is not None and w is not None and mask is not None and x is not None
    dm: torch.Tensor | None = None
    dx = None
    if grad_masked is not None:
        dm = grad_masked * x
        if layout.group_index is not None:
            dm = torch.zeros_like(mask).index_add_(1, layout.group_index, dm)
        if x_grad:
            dx = grad_masked * spread
    d_prior = None
    if grad_prior is not None:
        if prior is None:
            dm = grad_prior.neg() if dm is None else dm.sub_(grad_prior)
        else:
            dm = (
                torch.mul(grad_prior, prior).neg_()
                if dm is None
                else dm.addcmul_(grad_prior, prior, value=-1.0)
            )
            d_prior = relax * grad_prior
    if grad_entropy is not None:  # d/dm of -m log(m + eps) / rows
        term = torch.div(mask, shifted).add_(log)
        coef = grad_entropy / -rows
        dm = term.mul_(coef) if dm is None else dm.addcmul_(term, coef)
    if dm is None:
        return None, None, dx, [None] * 3
    # the mask's vector-Jacobian product, in place: the gradient of logits * prior
    vjp = _entmax15_vjp if entmax else _sparsemax_vjp
    vjp(mask, dm, 1, dm, torch.empty_like(mask))
    if prior is None:
        d_logits = dm
    else:
        d_logits = dm * prior
        d_prior = dm.mul_(logits) if d_prior is None else d_prior.addcmul_(dm, logits)
    dh, dg, db = _bn_backward(
        d_logits.view(side.shape), side, weight_k, None, None, mean, invstd, True, eps,
        [True, True, True],
    )  # fmt: skip
    c = mask.shape[1]
    dh = dh.view(mask.shape[0], c)
    d_att = torch.mm(w.t(), dh.t()).t()
    dw = torch.mm(att.t(), dh).t()
    return d_att, d_prior, dx, [dw, dg.view(k, c).sum(0), db.view(k, c).sum(0)]
