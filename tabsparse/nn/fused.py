"""In training mode, a feature transformer's GLU layers, a step's attention and the whole
encoder as single autograd nodes.

A GLU layer is ``Linear -> GhostBatchNorm -> GLU`` (plus a ``sqrt(0.5)``-scaled residual); a
feature transformer chains four of them and a TabNet of three steps runs four transformers per
batch. Recorded by autograd op by op, that is some thirty graph nodes per transformer, and at
tabular sizes (a 1024 x 32 activation) each node's bookkeeping costs as much as its arithmetic.
:class:`GLUStack` runs the same operations without recording them and differentiates the whole
stack by hand: per layer the backward is a GLU's (:mod:`tabsparse.nn.glu`), PyTorch's own
``native_batch_norm_backward`` kernel and two matrix products. The result equals the layer-by-
layer graph to rounding (``tests/test_nn.py`` checks values and gradients in float64).

:class:`MaskStep` does the same for each decision step's attention: the attentive layer, the
prior, the sparsemax mask, the next prior, the masked input and the mask's share of the sparsity
loss as one node (``tests/test_nn.py`` checks it against the modules in float64 too).

:class:`EncoderStep` goes one level up for a training step, where nothing reads the masks: the
whole encoder, from the input to the summed decisions and the sparsity loss, is one node that
runs the forward and backward functions of the two nodes above in sequence.

Only the common case takes these paths: training mode, a batch that splits into equal virtual
batches of at least two rows (the trainer makes batch sizes such multiples), no autocast, float32
or float64. Everything else runs the modules one by one.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from tabsparse.nn.ghost_bn import GhostBatchNorm, virtual_batches
from tabsparse.nn.glu import glu_backward, glu_with_gate
from tabsparse.sparsemax import _entmax15_vjp, _sparsemax_vjp
from tabsparse.sparsemax import _forward as _mask_forward

SQRT_HALF = math.sqrt(0.5)
_bn_backward = torch.ops.aten.native_batch_norm_backward


def stack_shape(
    x: torch.Tensor, layers: Sequence[tuple[nn.Linear, GhostBatchNorm]]
) -> tuple[int, int] | None:
    """``(rows per virtual batch, virtual batches)`` when the fused path applies to ``x``
    through these ``Linear -> GhostBatchNorm`` layers, else None (the caller runs the modules).

    It applies to a 2-d float32 / float64 input outside autocast, bias-free Linear layers of
    the input's dtype, and a batch that every batch norm splits into equal virtual batches of
    two rows or more; never while ``torch.compile`` traces (the compiler fuses the modules'
    operations itself, and the hand-written backward hides them from it)."""
    if torch.compiler.is_compiling():
        return None
    if x.dim() != 2 or x.dtype not in (torch.float32, torch.float64):
        return None
    if torch.is_autocast_enabled(x.device.type):
        return None
    if any(fc.bias is not None or fc.weight.dtype != x.dtype for fc, _ in layers):
        return None
    vbs = layers[0][1].virtual_batch_size
    if any(bn.virtual_batch_size != vbs for _, bn in layers):
        return None
    k, size, extra = virtual_batches(x.shape[0], vbs)
    if extra or size < 2:
        return None
    return size, k


def apply(fn: type[torch.autograd.Function], *args: Any) -> Any:
    """``fn.apply(*args)`` without the argument scan that ``Function.apply`` does in Python on
    every call (15 us for the seventeen arguments of a :class:`GLUStack`, a dozen calls per
    training step); the public ``apply`` where functorch transforms need it."""
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return fn.apply(*args)
    return super(torch.autograd.Function, fn).apply(*args)  # type: ignore[misc]


def _linear_bn(
    x: torch.Tensor,
    weight: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    bn: GhostBatchNorm,
    size: int,
    k: int,
) -> tuple[torch.Tensor, ...]:
    """``GhostBatchNorm(x @ weight.T)`` without recording; records the statistics in ``bn``.

    The batch norm's affine runs inside the fused kernel: its weight and bias repeated for the
    ``k`` virtual batches, which are ``k`` channel blocks of the ``(size, k * c)`` view. Returns
    the output ``(n, c)`` and what :func:`_linear_bn_backward` needs: the pre-norm ``(size, k *
    c)`` matrix, the repeated weight, the means and the inverse standard deviations."""
    c = weight.shape[0]
    return _linear_bn_k(
        x, weight, gamma.expand(k, c).reshape(-1), beta.expand(k, c).reshape(-1), bn, size, k
    )


def _linear_bn_k(
    x: torch.Tensor,
    weight: torch.Tensor,
    gamma_k: torch.Tensor,
    beta_k: torch.Tensor,
    bn: GhostBatchNorm,
    size: int,
    k: int,
) -> tuple[torch.Tensor, ...]:
    """:func:`_linear_bn` with the batch norm's weight and bias already repeated ``k`` times."""
    c = weight.shape[0]
    h = torch.mm(x, weight.t()).view(size, k * c)
    y, mean, invstd = torch.native_batch_norm(h, gamma_k, beta_k, None, None, True, 0.0, bn.eps)
    bn.record([(mean.view(k, c), invstd.view(k, c), size)])
    return y.view(x.shape[0], c), h, gamma_k, mean, invstd


def _repeat_affine(
    params: Sequence[torch.Tensor], scale: torch.Tensor, k: int
) -> tuple[torch.Tensor, ...]:
    """The batch-norm weights and biases of ``m`` layers (``params`` = ``W_1, gamma_1,
    beta_1, ...``; the layers of a feature transformer all have one output width ``c``),
    multiplied by ``scale`` ``(2m, c)`` (see :func:`_residual_scale`) and each repeated ``k``
    times: ``gamma_1^k, ..., gamma_m^k, beta_1^k, ..., beta_m^k``, from one copy instead of one
    per tensor (a dozen fewer operations per call)."""
    affine = torch.stack([*params[1::3], *params[2::3]]).mul_(scale)  # (2m, c)
    m2, c = affine.shape
    return affine.unsqueeze(1).expand(m2, k, c).reshape(m2, -1).unbind(0)


@functools.lru_cache(maxsize=64)
def _residual_scale(
    residual: tuple[bool, ...], c: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """``(2m, c)`` factors for the batch-norm weights and biases of ``m`` GLU layers: a residual
    layer's ``(x + glu(y)) * sqrt(0.5)`` is computed as ``glu(y') + sqrt(0.5) * x``, with ``y'``
    the batch norm's output under weights and biases scaled by ``sqrt(0.5)`` on the GLU's linear
    half (its first ``c / 2`` channels), which scales ``glu(y)`` by ``sqrt(0.5)``. That folds
    the scaling into the affine of the fused batch norm (one multiplication fewer per layer,
    forward and backward); the gradients of the unscaled weights are those of the scaled ones
    times the same factors. Cached: never modify the result."""
    scale = torch.ones(len(residual), c, dtype=dtype, device=device)
    for j, res in enumerate(residual):
        if res:
            scale[j, : c // 2] = SQRT_HALF
    return scale.repeat(2, 1)


def _linear_bn_backward(
    dy: torch.Tensor,
    saved: tuple[torch.Tensor, ...],
    eps: float,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of the batch norm of :func:`_linear_bn` (``saved`` = its last four results):
    with respect to the pre-norm values ``(n, c)``, the weight and the bias."""
    dh, dgamma_k, dbeta_k = _linear_bn_backward_k(dy, saved, eps)
    c = dh.shape[1]
    return dh, dgamma_k.view(k, c).sum(0), dbeta_k.view(k, c).sum(0)


def _linear_bn_backward_k(
    dy: torch.Tensor, saved: tuple[torch.Tensor, ...], eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_linear_bn_backward` with the weight's and bias's gradients per virtual batch
    (``k * c`` each), for the caller to sum."""
    h, gamma_k, mean, invstd = saved
    dh, dgamma, dbeta = _bn_backward(
        dy.reshape(h.shape), h, gamma_k, None, None, mean, invstd, True, eps, [True, True, True]
    )
    return dh.view(dy.shape[0], -1), dgamma, dbeta


class GLUStack(torch.autograd.Function):
    """``x -> layer_m(... layer_1(x))`` for GLU layers with ghost batch norm (training mode).

    ``apply(x, residual, bns, size, k, split, W_1, gamma_1, beta_1, ..., W_m, gamma_m,
    beta_m)``: ``residual[j]`` says whether layer ``j`` adds its input and scales by
    ``sqrt(0.5)``; ``bns`` are the layers' batch norms (their virtual-batch statistics are
    recorded as in :meth:`GhostBatchNorm.forward`); the ``n`` rows form ``k`` virtual batches of
    ``size`` rows (virtual batch ``i`` = rows ``i, i + k, ...``).

    ``split=None`` returns the output ``h``; an integer ``split`` returns what a TabNet step
    reads of it, ``(relu(h[:, :split]), h[:, split:])`` (the decision and the attention
    features), which spares the graph two slices, a ReLU and their backward nodes (each
    slice's backward fills a zero tensor of ``h``'s size). An output nothing reads gets no
    gradient buffer.
    """

    # the work is in module-level functions, which EncoderStep runs inside its own node
    @staticmethod
    def forward(ctx: Any, *args: Any) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return glu_stack_forward(ctx, *args)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grad_outputs: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        return glu_stack_backward(ctx, *grad_outputs)


def glu_stack_forward(
    ctx: Any,
    x: torch.Tensor,
    residual: tuple[bool, ...],
    bns: Sequence[GhostBatchNorm],
    size: int,
    k: int,
    split: int | None,
    *params: torch.Tensor,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """:meth:`GLUStack.forward` on any autograd context (or a :class:`Context`)."""
    saved: list[torch.Tensor] = []
    gates: list[torch.Tensor | None] = []  # the split GLU's sigmoids (tabsparse.nn.glu)
    h_in = x
    m = len(bns)
    scale = _residual_scale(residual, params[1].shape[0], x.dtype, x.device)
    affine = _repeat_affine(params, scale, k)
    for j, bn in enumerate(bns):
        y, *bn_saved = _linear_bn_k(h_in, params[3 * j], affine[j], affine[m + j], bn, size, k)
        g, gate = glu_with_gate(y)  # already scaled by sqrt(0.5) in a residual layer
        out = torch.add(g, h_in, alpha=SQRT_HALF) if residual[j] else g
        saved += [h_in, y, *bn_saved]
        gates.append(gate)
        h_in = out
    ctx.residual, ctx.eps, ctx.k, ctx.scale = residual, [bn.eps for bn in bns], k, scale
    ctx.split, ctx.width = split, h_in.shape[1]
    ctx.set_materialize_grads(False)
    if split is None:
        ctx.save_for_backward(*saved, *params[::3], *gates)
        return h_in
    decision = torch.relu(h_in[:, :split])
    ctx.save_for_backward(*saved, *params[::3], *gates, decision)
    return decision, h_in[:, split:]


def glu_stack_backward(
    ctx: Any, *grad_outputs: torch.Tensor | None
) -> tuple[torch.Tensor | None, ...]:
    """:meth:`GLUStack.backward` (without the no-grad wrapper) on the context of
    :func:`glu_stack_forward`."""
    tensors = ctx.saved_tensors
    m = len(ctx.residual)
    saved, weights, gates = tensors[: 6 * m], tensors[6 * m : 7 * m], tensors[7 * m : 8 * m]
    if ctx.split is None:
        grad_out = grad_outputs[0]
    else:  # the decision is saved last
        grad_out = _join_split_grads(grad_outputs, tensors[-1], ctx.split, ctx.width)
    if grad_out is None:  # no output has a gradient
        return (None,) * (6 + 3 * m)
    grads: list[torch.Tensor | None] = [None] * (3 * m)
    affine: list[torch.Tensor] = [grad_out] * (2 * m)  # per virtual batch, then summed
    d: torch.Tensor | None = grad_out.contiguous()
    for j in range(m - 1, -1, -1):
        h_in, y, *bn_saved = saved[6 * j : 6 * j + 6]
        weight = weights[j]
        assert d is not None
        dy = glu_backward(d, y, gates[j])
        dh, affine[j], affine[m + j] = _linear_bn_backward_k(dy, tuple(bn_saved), ctx.eps[j])
        grads[3 * j] = torch.mm(h_in.t(), dh).t()  # the faster layout of the product
        if j == 0 and not ctx.needs_input_grad[0]:
            d = None
            break
        dx = dh.mm(weight)
        d = dx.add_(d, alpha=SQRT_HALF) if ctx.residual[j] else dx
    # the batch-norm weights' and biases' gradients: summed over the virtual batches of all
    # layers in one operation, then scaled as the weights were
    sums = torch.stack(affine).view(2 * m, ctx.k, -1).sum(1).mul_(ctx.scale).unbind(0)
    grads[1::3], grads[2::3] = sums[:m], sums[m:]
    return (d, None, None, None, None, None, *grads)


def _join_split_grads(
    grad_outputs: Sequence[torch.Tensor | None],
    decision: torch.Tensor,
    split: int,
    width: int,
) -> torch.Tensor | None:
    """The gradient of :class:`GLUStack`'s output ``h`` (``width`` columns) from those of its
    two outputs (None where neither has one): the decision's (through the ReLU: ``decision``
    is its saved output) and the attention features' side by side, zeros for one that has
    none."""
    grad_decision, grad_att = grad_outputs
    if grad_decision is None and grad_att is None:
        return None
    if grad_decision is None:
        grad_decision = torch.zeros_like(decision)
    else:
        grad_decision = torch.ops.aten.threshold_backward(grad_decision, decision, 0)
    if grad_att is None:
        grad_att = grad_decision.new_zeros(decision.shape[0], width - split)
    return torch.cat([grad_decision, grad_att], dim=1)


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
        y, *bn_saved = _linear_bn(x, weight, gamma, beta, bn, size, k)
        ctx.save_for_backward(x, weight, *bn_saved)
        ctx.eps, ctx.k = bn.eps, k
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x, weight, *bn_saved = ctx.saved_tensors
        dh, dgamma, dbeta = _linear_bn_backward(
            grad_out.contiguous(), tuple(bn_saved), ctx.eps, ctx.k
        )
        dx = torch.mm(weight.t(), dh.t()).t() if ctx.needs_input_grad[0] else None
        dw = torch.mm(x.t(), dh).t()
        return (dx, None, None, None, dw, dgamma, dbeta)


class MaskStep(torch.autograd.Function):
    """One decision step's attention in training mode, from the attention features to what the
    step's feature transformer reads, as one autograd node.

    ``apply(att, prior, x, bn, size, k, gamma, entmax, group_index, eps, rows, weight,
    bn_weight, bn_bias)`` computes ``logits = GhostBatchNorm(att @ weight.T)`` (the attentive
    transformer's layer, as :class:`LinearGhostBN`), ``mask = mask_fn(logits * prior)``
    (sparsemax, or entmax-1.5 with ``entmax``) and returns

    * ``mask`` ``(n, n_groups)``;
    * the next prior ``prior * (gamma - mask)``;
    * the masked input ``x * mask`` (the mask spread over ``x``'s channels by ``group_index``,
      or applied as is when ``group_index`` is None: one group per channel);
    * the mask's share of the sparsity loss, ``-sum(mask * log(mask + eps)) / rows``.

    ``prior=None`` stands for a prior of ones (the first step). Recorded op by op this is a
    dozen graph nodes, with gradient accumulations for the mask (three uses) and the prior (two);
    the backward here sums the mask's gradients into one buffer, applies the sparsemax (or
    entmax) vector-Jacobian product in place, then the product with the prior and the layer's
    backward (:func:`_linear_bn_backward`). Outputs nothing reads get no gradient buffer
    (``set_materialize_grads(False)``). The gain is modest, about 1.5% of a training step of the
    speed benchmark's TabNet (CPU, one thread): the operations are the same, only their
    bookkeeping goes.
    """

    # the work is in module-level functions, which EncoderStep runs inside its own node
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, *args: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return mask_step_forward(ctx, *args)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grad_outputs: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        return mask_step_backward(ctx, *grad_outputs)


def mask_step_forward(
    ctx: Any,
    att: torch.Tensor,
    prior: torch.Tensor | None,
    x: torch.Tensor,
    bn: GhostBatchNorm,
    size: int,
    k: int,
    gamma: float,
    entmax: bool,
    group_index: torch.Tensor | None,
    eps: float,
    rows: int,
    weight: torch.Tensor,
    bn_weight: torch.Tensor,
    bn_bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:meth:`MaskStep.forward` on any autograd context (or a :class:`Context`)."""
    logits, *bn_saved = _linear_bn(att, weight, bn_weight, bn_bias, bn, size, k)
    mask = _mask_forward(logits if prior is None else logits * prior, 1, entmax)
    relax = torch.rsub(mask, gamma)  # gamma - mask, kept for the prior's gradient
    new_prior = relax if prior is None else relax * prior
    spread = mask if group_index is None else mask.index_select(1, group_index)
    shifted = torch.add(mask, eps)
    log = torch.log(shifted)
    entropy = torch.dot(mask.view(-1), log.view(-1)).div_(-rows)
    ctx.save_for_backward(
        att, weight, *bn_saved, logits, prior, mask, relax, spread, x, shifted, log
    )
    ctx.set_materialize_grads(False)
    ctx.eps, ctx.k, ctx.entmax = bn.eps, k, entmax
    ctx.group_index, ctx.rows = group_index, rows
    return mask, new_prior, x * spread, entropy


def mask_step_backward(
    ctx: Any,
    grad_mask: torch.Tensor | None,
    grad_prior: torch.Tensor | None,
    grad_x: torch.Tensor | None,
    grad_entropy: torch.Tensor | None,
) -> tuple[torch.Tensor | None, ...]:
    """:meth:`MaskStep.backward` (without the no-grad wrapper) on the context of
    :func:`mask_step_forward`."""
    (
        att,
        weight,
        h,
        gamma_k,
        mean,
        invstd,
        logits,
        prior,
        mask,
        relax,
        spread,
        x,
        shifted,
        log,
    ) = ctx.saved_tensors
    # the gradient reaching the mask, summed into one fresh buffer: from the masked input,
    # the next prior, the sparsity loss and the mask itself
    dm: torch.Tensor | None = None
    dx = None
    if grad_x is not None:
        dm = grad_x * x
        if ctx.group_index is not None:
            dm = torch.zeros_like(mask).index_add_(1, ctx.group_index, dm)
        if ctx.needs_input_grad[2]:
            dx = grad_x * spread
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
            if ctx.needs_input_grad[1]:
                d_prior = relax * grad_prior
    if grad_entropy is not None:  # d/dm of -m log(m + eps) / rows
        term = torch.div(mask, shifted).add_(log)
        coef = grad_entropy / -ctx.rows
        dm = term.mul_(coef) if dm is None else dm.addcmul_(term, coef)
    if grad_mask is not None:
        dm = grad_mask.clone() if dm is None else dm.add_(grad_mask)
    if dm is None:  # no output has a gradient
        return (None,) * 14
    # the mask's vector-Jacobian product, in place: the gradient of logits * prior
    vjp = _entmax15_vjp if ctx.entmax else _sparsemax_vjp
    vjp(mask, dm, 1, dm, torch.empty_like(mask))
    if prior is None:
        d_logits = dm
    else:
        d_logits = dm * prior
        if ctx.needs_input_grad[1]:
            d_prior = dm.mul_(logits) if d_prior is None else d_prior.addcmul_(dm, logits)
    dh, dgamma, dbeta = _linear_bn_backward(d_logits, (h, gamma_k, mean, invstd), ctx.eps, ctx.k)
    d_att = torch.mm(weight.t(), dh.t()).t() if ctx.needs_input_grad[0] else None
    dw = torch.mm(att.t(), dh).t()
    none = (None,) * 8
    return (d_att, d_prior, dx, *none, dw, dgamma, dbeta)


class Context:
    """What :func:`glu_stack_forward` and :func:`mask_step_forward` read and write on an
    autograd context, for running them inside another node (:class:`EncoderStep`): the saved
    tensors are kept as they are (no version checks: nothing outside that node sees them)."""

    saved_tensors: tuple[torch.Tensor | None, ...]

    def __init__(self, *needs_input_grad: bool) -> None:
        self.needs_input_grad = needs_input_grad

    def save_for_backward(self, *tensors: torch.Tensor | None) -> None:
        self.saved_tensors = tensors

    def release(self) -> tuple[torch.Tensor | None, ...]:
        """Hand the saved tensors over (to the enclosing node), keeping their number."""
        tensors, self.saved_tensors = self.saved_tensors, ()
        self._count = len(tensors)
        return tensors

    def restore(self, tensors: Iterator[torch.Tensor | None]) -> None:
        """Take back as many tensors as :meth:`release` handed over."""
        self.saved_tensors = tuple(itertools.islice(tensors, self._count))

    def set_materialize_grads(self, value: bool) -> None:
        """Gradients are passed as they are (None where an output has none)."""


@dataclass(frozen=True)
class EncoderPlan:
    """The structure of a TabNet encoder that :class:`EncoderStep` runs.

    ``params`` are the encoder's parameters, each once (the shared GLU layers' weights serve
    every feature transformer); the layers refer to them by position. ``transformers`` holds,
    for the initial feature transformer and then each step's, the residual flags, batch norms
    and parameter positions (``W, gamma, beta`` per layer) of :func:`glu_stack_forward`;
    ``attention`` holds each step's batch norm, whether its mask is entmax-1.5, and the
    positions of its linear weight and batch-norm weight and bias. The ``n`` rows of a batch
    form ``k`` virtual batches of ``size`` rows (every batch norm has ``virtual_batch_size``;
    ``batch_norms`` lists them all)."""

    params: tuple[torch.Tensor, ...]
    transformers: tuple[tuple[tuple[bool, ...], tuple[GhostBatchNorm, ...], tuple[int, ...]], ...]
    attention: tuple[tuple[GhostBatchNorm, bool, tuple[int, ...]], ...]
    n_d: int
    gamma: float
    epsilon: float
    group_index: torch.Tensor | None
    size: int
    k: int
    virtual_batch_size: int
    batch_norms: tuple[GhostBatchNorm, ...]


class EncoderStep(torch.autograd.Function):
    """A whole TabNet encoder in training mode, from the input to the summed decisions and the
    sparsity loss, as one autograd node: ``apply(x, plan, *plan.params)`` returns
    ``(output, sparsity_loss)``.

    Forward runs the initial feature transformer (:func:`glu_stack_forward`) and then, per
    step, the attention (:func:`mask_step_forward`) and the step's transformer; backward runs
    their hand-written backward functions in reverse order, passing the gradients of the
    attention features and the prior from step to step, and sums the gradients of the shared
    weights itself. The operations are exactly those of the per-transformer and per-step nodes
    (``tests/test_nn.py`` checks equality in float64); what goes is the autograd engine's
    work between them — a node per transformer and step, its outputs' gradient buffers and
    the accumulations — about 6% of the forward and backward of the speed benchmark's TabNet
    on the CPU (one thread, interleaved in one process). What the parts keep for the backward
    is saved on this node, so autograd frees it as usual and refuses a backward after an
    in-place change of a saved tensor.

    Used when nothing reads the masks or the step outputs (training steps), no transformer or
    attentive transformer has hooks, and the :func:`stack_shape` conditions hold; otherwise the
    encoder runs the per-step nodes or the modules.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, x: torch.Tensor, plan: EncoderPlan, *params: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        size, k, n_d = plan.size, plan.k, plan.n_d
        x_grad = ctx.needs_input_grad[0]
        residual, bns, index = plan.transformers[0]
        first = Context(x_grad)
        _, att = glu_stack_forward(first, x, residual, bns, size, k, n_d, *_pick(params, index))
        rows = len(plan.attention) * x.shape[0]
        chain: list[tuple[Context, Context]] = []
        prior: torch.Tensor | None = None
        output: torch.Tensor | None = None
        entropy: torch.Tensor | None = None
        for step, ((bn, entmax, att_index), (residual, bns, index)) in enumerate(
            zip(plan.attention, plan.transformers[1:], strict=True)
        ):
            attend = Context(True, prior is not None, x_grad)
            _, prior, masked, step_entropy = mask_step_forward(
                attend, att, prior, x, bn, size, k, plan.gamma, entmax, plan.group_index,
                plan.epsilon, rows, *_pick(params, att_index),
            )  # fmt: skip
            transform = Context(True)
            decision, att = glu_stack_forward(
                transform, masked, residual, bns, size, k, n_d, *_pick(params, index)
            )
            if output is None:
                output = decision
            else:  # never in place into the first decision: its node keeps it for the ReLU
                output = output + decision if step == 1 else output.add_(decision)
            entropy = step_entropy if entropy is None else entropy.add_(step_entropy)
            chain.append((attend, transform))
        assert output is not None and entropy is not None
        # what the parts keep is saved on this node, so that autograd frees it after the
        # backward (unless the graph is retained) and checks it for in-place changes
        parts = [first, *(part for pair in chain for part in pair)]
        ctx.save_for_backward(*(t for part in parts for t in part.release()))
        ctx.first, ctx.chain, ctx.plan = first, chain, plan
        ctx.set_materialize_grads(False)
        return output, entropy

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: Any, grad_output: torch.Tensor | None, grad_entropy: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        plan: EncoderPlan = ctx.plan
        saved = iter(ctx.saved_tensors)  # back to the parts, in the order they were saved
        for part in (ctx.first, *(part for pair in ctx.chain for part in pair)):
            part.restore(saved)
        grads: list[torch.Tensor | None] = [None] * len(plan.params)

        def add(index: Sequence[int], found: Sequence[torch.Tensor | None]) -> None:
            for i, g in zip(index, found, strict=True):
                if g is not None:
                    grads[i] = g if grads[i] is None else grads[i].add_(g)  # type: ignore[union-attr]

        dx: torch.Tensor | None = None
        d_att: torch.Tensor | None = None
        d_prior: torch.Tensor | None = None
        for j in range(len(ctx.chain) - 1, -1, -1):
            attend, transform = ctx.chain[j]
            found = glu_stack_backward(transform, grad_output, d_att)
            add(plan.transformers[j + 1][2], found[6:])
            found = mask_step_backward(attend, None, d_prior, found[0], grad_entropy)
            d_att, d_prior, d_x = found[0], found[1], found[2]
            add(plan.attention[j][2], found[11:])
            if d_x is not None:
                dx = d_x if dx is None else dx.add_(d_x)
        found = glu_stack_backward(ctx.first, None, d_att)
        add(plan.transformers[0][2], found[6:])
        if found[0] is not None:
            dx = found[0] if dx is None else dx.add_(found[0])
        for part in (ctx.first, *(part for pair in ctx.chain for part in pair)):
            part.release()
        return (dx, None, *grads)


def _pick(params: Sequence[torch.Tensor], index: Sequence[int]) -> list[torch.Tensor]:
    return [params[i] for i in index]


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
    """The :class:`EncoderPlan` of an encoder whose feature transformers have the GLU layers
    ``(linear, batch norm, residual)`` of ``transformers`` (the initial one first) and whose
    steps attend with ``(linear, batch norm, entmax)``, for the input ``x``; None where
    :func:`stack_shape` rules the fused path out."""
    layers = [(fc, bn) for t in transformers for fc, bn, _ in t]
    shape = stack_shape(x, layers + [(fc, bn) for fc, bn, _ in attention])
    if shape is None:
        return None
    params: list[torch.Tensor] = []
    position: dict[int, int] = {}

    def index(*tensors: torch.Tensor) -> tuple[int, ...]:
        out = []
        for t in tensors:
            if id(t) not in position:
                position[id(t)] = len(params)
                params.append(t)
            out.append(position[id(t)])
        return tuple(out)

    plan_t = tuple(
        (
            tuple(res for _, _, res in t),
            tuple(bn for _, bn, _ in t),
            sum((index(fc.weight, bn.weight, bn.bias) for fc, bn, _ in t), ()),
        )
        for t in transformers
    )
    plan_a = tuple(
        (bn, entmax, index(fc.weight, bn.weight, bn.bias)) for fc, bn, entmax in attention
    )
    bns = tuple(bn for _, bn in layers) + tuple(bn for _, bn, _ in attention)
    return EncoderPlan(
        tuple(params),
        plan_t,
        plan_a,
        n_d,
        gamma,
        epsilon,
        group_index,
        shape[0],
        shape[1],
        bns[0].virtual_batch_size,
        bns,
    )
