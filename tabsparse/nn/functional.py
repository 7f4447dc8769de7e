"""TabNet's forward math, once, as functions of tensors.

Every piece of the encoder is written here with differentiable torch operations: autograd over
these functions is the reference for the whole library. The ``nn.Module`` s of
:mod:`tabsparse.nn` call them with their parameters, the one-node training step
(:mod:`tabsparse.nn.encoder_step`) runs them without recording and differentiates them by hand,
``torch.compile`` traces them through the modules, and export runs them with the branch-free
mask functions.

Ghost batch norm in training
    ``n`` rows make ``k = ceil(n / virtual_batch_size)`` virtual batches; virtual batch ``i``
    holds rows ``i, i + k, i + 2k, ...``. When ``k`` divides ``n`` the ``(n, C)`` batch is the
    ``(n / k, k * C)`` matrix with one column per virtual batch and channel, and one call of
    PyTorch's fused batch norm (its weight and bias repeated ``k`` times) normalises all of
    them. Other batch sizes (the *ragged* case) take two calls. Functions that normalise return
    the statistics of their virtual batches, ``(mean (k, C), 1 / sqrt(biased var + eps)
    (k, C), rows)`` per part, for :class:`~tabsparse.nn.ghost_bn.GhostBatchNorm` to fold into
    its running statistics.
Ghost batch norm in eval
    The affine ``x * scale + shift`` of the running statistics, folded into the preceding
    bias-free linear layer (one ``addmm``).
GLU layer
    ``glu(BN(x @ W.T))``; a residual layer returns ``(x + glu(y)) * sqrt(0.5)``, computed as
    ``glu(y') + sqrt(0.5) * x`` where ``y'`` is the batch norm's output with weight and bias
    scaled by ``sqrt(0.5)`` on the GLU's linear half (equal in exact arithmetic).
Attentive step
    ``mask = mask_fn(prior * BN(att @ W.T))``, the next prior ``prior * (gamma - mask)``, the
    masked input ``x * mask`` (the mask spread over input channels by ``group_index``) and the
    step's share ``-sum(mask * log(mask + eps)) / rows`` of the sparsity loss.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from tabsparse.nn.glu import glu_with_gate
from tabsparse.sparsemax import entmax15, entmax15_sorted, sparsemax, sparsemax_sorted

SQRT_HALF = math.sqrt(0.5)

#: Statistics of one training call of a ghost batch norm: ``(mean, invstd, rows)`` per part.
Stats = list[tuple[Tensor, Tensor, int]]
#: A mask function: scores ``(n, groups)`` to rows on the simplex, and whether it is entmax-1.5.
MaskFn = Callable[[Tensor, bool], Tensor]


def search_masks(z: Tensor, entmax: bool) -> Tensor:
    """The library's sparsemax / entmax-1.5 over the last dimension (differentiable)."""
    return entmax15(z, dim=-1) if entmax else sparsemax(z, dim=-1)


def sorted_masks(z: Tensor, entmax: bool) -> Tensor:
    """The branch-free sort-based forms (exported and traced graphs)."""
    return entmax15_sorted(z) if entmax else sparsemax_sorted(z)


class Norm(NamedTuple):
    """How one ghost batch norm normalises: in training from virtual batches of
    ``virtual_batch_size`` rows, in eval with the running statistics."""

    training: bool
    virtual_batch_size: int
    eps: float
    running_mean: Tensor | None = None
    running_var: Tensor | None = None


def virtual_batches(n: int, virtual_batch_size: int) -> tuple[int, int, int]:
    """``(k, size, extra)``: ``n`` rows make ``k = ceil(n / virtual_batch_size)`` virtual
    batches; ``extra`` of them hold ``size + 1`` rows, the others ``size``."""
    k = max(1, math.ceil(n / virtual_batch_size))
    size, extra = divmod(n, k)
    return k, size, extra


def even_batches(n: int, virtual_batch_size: int) -> tuple[int, int] | None:
    """``(size, k)`` when ``n`` rows make ``k`` equal virtual batches of ``size >= 2`` rows."""
    k, size, extra = virtual_batches(n, virtual_batch_size)
    return None if extra or size < 2 else (size, k)


def eval_affine(
    weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    """``(scale, shift)`` of a batch norm in eval mode: ``out = x * scale + shift``."""
    scale = weight * torch.rsqrt(running_var + eps)
    return scale, bias - running_mean * scale


def _repeat(t: Tensor, k: int) -> Tensor:
    return t.expand(k, t.shape[-1]).reshape(-1)


def bn_even(
    h: Tensor, weight_k: Tensor, bias_k: Tensor, size: int, k: int, eps: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Ghost batch norm of ``h`` ``(n, c)`` in ``k`` equal virtual batches of ``size`` rows,
    with the weight and bias already repeated ``k`` times: ``(out (n, c), the (size, k * c)
    view of h, mean, invstd)``."""
    side = h.view(size, -1) if h.is_contiguous() else h.reshape(size, -1)
    out, mean, invstd = torch.native_batch_norm(side, weight_k, bias_k, None, None, True, 0.0, eps)
    return out.view(h.shape), side, mean, invstd


def ghost_batch_norm(
    x: Tensor, weight: Tensor, bias: Tensor, virtual_batch_size: int, eps: float
) -> tuple[Tensor, Stats]:
    """Training-mode ghost batch norm of ``x`` ``(n, c)``; returns the output and the virtual
    batches' statistics. One-row virtual batches normalise to zero (the output is the bias)
    and teach no statistics."""
    n, c = x.shape
    k, size, extra = virtual_batches(n, virtual_batch_size)
    if size == 1 and extra == 0:
        return bias.expand(n, c) + 0.0 * x, []
    if extra == 0:
        out, _, mean, invstd = bn_even(x, _repeat(weight, k), _repeat(bias, k), size, k, eps)
        return out, [(mean.view(k, c), invstd.view(k, c), size)]
    head = x[: size * k].reshape(size, k, c)
    tail = x[size * k :].reshape(1, extra, c)
    big = torch.cat([head[:, :extra], tail]).reshape(size + 1, extra * c)
    out_big, mean, invstd = torch.native_batch_norm(big, None, None, None, None, True, 0.0, eps)
    stats: Stats = [(mean.view(-1, c), invstd.view(-1, c), size + 1)]
    out_big = out_big.view(size + 1, extra, c)
    small = head[:, extra:]
    if size == 1:
        out_small = small * 0.0
    else:
        flat = small.reshape(size, -1)
        out_flat, mean, invstd = torch.native_batch_norm(
            flat, None, None, None, None, True, 0.0, eps
        )
        out_small = out_flat.view(size, k - extra, c)
        stats.append((mean.view(-1, c), invstd.view(-1, c), size))
    body = torch.cat([out_big[:size], out_small], dim=1)
    normed = torch.cat([body.view(size * k, c), out_big[size]])
    return torch.addcmul(bias, normed, weight), stats


def batch_norm(x: Tensor, weight: Tensor, bias: Tensor, norm: Norm) -> tuple[Tensor, Stats]:
    """Ghost batch norm of ``x`` ``(n, c)`` as ``norm`` says (training or eval)."""
    if norm.training:
        return ghost_batch_norm(x, weight, bias, norm.virtual_batch_size, norm.eps)
    assert norm.running_mean is not None and norm.running_var is not None
    scale, shift = eval_affine(weight, bias, norm.running_mean, norm.running_var, norm.eps)
    return torch.addcmul(shift, x, scale), []


def linear_bn(
    x: Tensor, weight: Tensor, bn_weight: Tensor, bn_bias: Tensor, norm: Norm
) -> tuple[Tensor, Stats]:
    """``BN(x @ weight.T)``; in eval the batch norm is folded into the linear layer."""
    if norm.training:
        return batch_norm(torch.mm(x, weight.t()), bn_weight, bn_bias, norm)
    assert norm.running_mean is not None and norm.running_var is not None
    scale, shift = eval_affine(bn_weight, bn_bias, norm.running_mean, norm.running_var, norm.eps)
    return torch.addmm(shift, x, (weight * scale.unsqueeze(1)).t()), []


def _half_scale(c: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``(c,)``: ``sqrt(0.5)`` on the GLU's linear half, 1 on its gate. Cached: read only."""
    return _constant(_make_half_scale, c, dtype, device)


def residual_scale(
    residual: tuple[bool, ...], c: int, dtype: torch.dtype, device: torch.device
) -> Tensor:
    """``(2m, c)`` factors of the batch-norm weights (rows ``0..m-1``) and biases (rows
    ``m..2m-1``) of ``m`` GLU layers: :func:`_half_scale` for a residual layer, else ones.
    Cached: read only."""
    return _constant(_make_residual_scale, residual, c, dtype, device)


def _constant(make: Callable[..., Tensor], *args: Any) -> Tensor:
    """``make(*args)``, cached per arguments. Never cached while ``torch.export`` or
    ``torch.compile`` traces (the cache would keep the tracer's placeholder tensor for later
    eager calls), and made outside inference mode (so that a constant first needed by a
    prediction under ``torch.inference_mode`` can later be saved for a training step's
    backward, which inference tensors cannot)."""
    if torch.compiler.is_compiling():
        return make(*args)
    if torch.is_inference_mode_enabled():
        with torch.inference_mode(False):
            return _cached(make, *args)
    return _cached(make, *args)


@functools.lru_cache(maxsize=128)
def _cached(make: Callable[..., Tensor], *args: Any) -> Tensor:
    return make(*args)


def _make_half_scale(c: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    scale = torch.ones(c, dtype=dtype, device=device)
    scale[: c // 2] = SQRT_HALF
    return scale


def _make_residual_scale(
    residual: tuple[bool, ...], c: int, dtype: torch.dtype, device: torch.device
) -> Tensor:
    ones = torch.ones(c, dtype=dtype, device=device)
    half = _make_half_scale(c, dtype, device)
    rows = [half if res else ones for res in residual]
    return torch.stack(rows + rows)


GLUParams = tuple[Tensor, Tensor, Tensor]  # linear weight, batch-norm weight, batch-norm bias


def glu_stack(
    x: Tensor,
    layers: Sequence[GLUParams],
    residual: Sequence[bool],
    norms: Sequence[Norm],
    *,
    stats: list[Stats] | None = None,
    saved: list[Tensor | None] | None = None,
) -> Tensor:
    """GLU layers in sequence: ``x -> layer_m(... layer_1(x))`` (see the module docstring).

    ``residual[j]`` says whether layer ``j`` adds its input. In training the virtual-batch
    statistics of each layer are appended to ``stats`` (one entry per layer, in order). When
    every batch norm splits the batch into equal virtual batches the layers run on the fused
    batch norm with their (residual-scaled) affines repeated for the ``k`` virtual batches,
    made from one stacked tensor; then, if ``saved`` is a list, what the hand-written backward
    needs is appended to it, per layer ``input, W, y, gate, h, weight_k, mean, invstd``.
    """
    m = len(layers)
    c = layers[0][1].shape[0]
    shape = _shared_even(x.shape[0], norms)
    if shape is None:
        assert saved is None
        for j, ((w, g, b), norm) in enumerate(zip(layers, norms, strict=True)):
            if residual[j]:
                half = _half_scale(c, g.dtype, g.device)
                g, b = g * half, b * half
            y, st = linear_bn(x, w, g, b, norm)
            if stats is not None and norm.training:
                stats.append(st)
            out = glu_with_gate(y)[0]
            x = torch.add(out, x, alpha=SQRT_HALF) if residual[j] else out
        return x
    size, k = shape
    affine = torch.stack([*(p[1] for p in layers), *(p[2] for p in layers)])
    if any(residual):
        affine = affine * residual_scale(tuple(residual), c, x.dtype, x.device)
    affine_k = affine.unsqueeze(1).expand(2 * m, k, c).reshape(2 * m, -1).unbind(0)
    for j, ((w, _, _), norm) in enumerate(zip(layers, norms, strict=True)):
        h = torch.mm(x, w.t())
        y, side, mean, invstd = bn_even(h, affine_k[j], affine_k[m + j], size, k, norm.eps)
        if stats is not None:
            stats.append([(mean.view(k, c), invstd.view(k, c), size)])
        out, gate = glu_with_gate(y)
        if saved is not None:
            saved += [x, w, y, gate, side, affine_k[j], mean, invstd]
        x = torch.add(out, x, alpha=SQRT_HALF) if residual[j] else out
    return x


def _shared_even(n: int, norms: Sequence[Norm]) -> tuple[int, int] | None:
    """The even virtual batches ``(size, k)`` shared by every batch norm in training."""
    if not norms[0].training:
        return None
    vbs = norms[0].virtual_batch_size
    if any(not norm.training or norm.virtual_batch_size != vbs for norm in norms):
        return None
    return even_batches(n, vbs)


def split_decision(h: Tensor, n_d: int) -> tuple[Tensor, Tensor]:
    """A step's decision ``relu(h[:, :n_d])`` and attention features ``h[:, n_d:]``."""
    return torch.relu(h[:, :n_d]), h[:, n_d:]


def attention_mask(
    att: Tensor,
    prior: Tensor | None,
    layer: GLUParams,
    norm: Norm,
    mask_fn: MaskFn,
    entmax: bool,
    *,
    stats: list[Stats] | None = None,
    saved: list[Tensor | None] | None = None,
) -> Tensor:
    """``mask_fn(prior * BN(att @ W.T))``; ``prior=None`` stands for a prior of ones. With
    ``saved`` (training, even virtual batches), appends ``att, W, h, weight_k, mean, invstd,
    logits, prior``."""
    w, g, b = layer
    shape = _shared_even(att.shape[0], [norm]) if saved is not None else None
    if shape is None or saved is None:
        assert saved is None
        logits, st = linear_bn(att, w, g, b, norm)
    else:
        size, k = shape
        c = g.shape[0]
        h = torch.mm(att, w.t())
        weight_k = _repeat(g, k)
        logits, side, mean, invstd = bn_even(h, weight_k, _repeat(b, k), size, k, norm.eps)
        st = [(mean.view(k, c), invstd.view(k, c), size)]
        saved += [att, w, side, weight_k, mean, invstd, logits, prior]
    if stats is not None and norm.training:
        stats.append(st)
    return mask_fn(logits if prior is None else logits * prior, entmax)


def mask_outputs(
    mask: Tensor,
    prior: Tensor | None,
    x: Tensor,
    gamma: float,
    group_index: Tensor | None,
    epsilon: float | None,
    rows: int,
    *,
    saved: list[Tensor | None] | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """What a step's mask gives: ``(next prior, masked input, entropy share)``.

    ``group_index`` spreads the mask over ``x``'s channels (None: one group per channel, in
    order). The entropy share ``-sum(mask * log(mask + epsilon)) / rows`` is None when
    ``epsilon`` is None (eval). With ``saved``, appends ``mask, gamma - mask, spread mask, x,
    mask + eps, log(mask + eps)``."""
    relax = torch.rsub(mask, gamma)
    new_prior = relax if prior is None else relax * prior
    spread = mask if group_index is None else mask.index_select(1, group_index)
    entropy = None
    if epsilon is not None:
        shifted = torch.add(mask, epsilon)
        log = torch.log(shifted)
        flat = mask.view(-1) if mask.is_contiguous() else mask.reshape(-1)
        entropy = torch.dot(flat, log.view(-1)).div(-rows)
        if saved is not None:
            saved += [mask, relax, spread, x, shifted, log]
    return new_prior, x * spread, entropy


class EncoderLayout(NamedTuple):
    """The structure of a TabNet encoder over a flat tuple of its parameters (each once).

    ``transformers``: for the initial feature transformer (no layers with a shared first mask)
    and then each step's, the residual flags, the batch norms' eps and the positions of ``W, bn
    weight, bn bias`` per layer.
    ``attention``: per step, the positions of its ``W, bn weight, bn bias``, its eps and whether
    its mask is entmax-1.5."""

    transformers: tuple[tuple[tuple[bool, ...], tuple[float, ...], tuple[int, ...]], ...]
    attention: tuple[tuple[tuple[int, ...], float, bool], ...]
    n_d: int
    gamma: float
    epsilon: float
    group_index: Tensor | None
    virtual_batch_size: int


def _pick(params: Sequence[Tensor], index: Sequence[int]) -> list[GLUParams]:
    return [
        (params[index[i]], params[index[i + 1]], params[index[i + 2]])
        for i in range(0, len(index), 3)
    ]


def encoder_training(
    x: Tensor,
    params: Sequence[Tensor],
    layout: EncoderLayout,
    mask_fn: MaskFn,
    *,
    stats: list[Stats] | None = None,
    saved: list[Tensor | None] | None = None,
    decisions: list[Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """A TabNet encoder in training mode: ``(summed decisions (n, n_d), sparsity loss)``.

    Statistics are appended to ``stats`` in the order initial transformer, then per step
    attention and transformer; ``saved`` collects what :mod:`tabsparse.nn.encoder_step`
    needs, in the same order (each transformer's list ends with its decision); each step's
    decision is appended to ``decisions``."""
    vbs, n_d = layout.virtual_batch_size, layout.n_d

    def transform(
        inp: Tensor, spec: tuple[tuple[bool, ...], tuple[float, ...], tuple[int, ...]]
    ) -> tuple[Tensor, Tensor]:
        residual, eps, index = spec
        norms = [Norm(True, vbs, e) for e in eps]
        h = glu_stack(inp, _pick(params, index), residual, norms, stats=stats, saved=saved)
        decision, att = split_decision(h, n_d)
        if saved is not None:
            saved.append(decision)
        return decision, att

    if layout.transformers[0][0]:
        _, att = transform(x, layout.transformers[0])
    else:  # a shared first mask: the first attention reads zeros
        att = x.new_zeros(x.shape[0], params[layout.attention[0][0][0]].shape[1])
    rows = len(layout.attention) * x.shape[0]
    prior: Tensor | None = None
    output: Tensor | None = None
    entropy: Tensor | None = None
    for (index, eps, entmax), spec in zip(layout.attention, layout.transformers[1:], strict=True):
        norm = Norm(True, vbs, eps)
        layer = _pick(params, index)[0]
        mask = attention_mask(att, prior, layer, norm, mask_fn, entmax, stats=stats, saved=saved)
        prior, masked, step_entropy = mask_outputs(
            mask, prior, x, layout.gamma, layout.group_index, layout.epsilon, rows, saved=saved
        )
        decision, att = transform(masked, spec)
        if decisions is not None:
            decisions.append(decision)
        output = decision if output is None else output + decision
        assert step_entropy is not None
        entropy = step_entropy if entropy is None else entropy + step_entropy
    assert output is not None and entropy is not None
    return output, entropy


def step_effects(decisions: Tensor, weight: Tensor, centre: Tensor | None) -> Tensor:
    """How far each step moves each row's outputs through a linear head: ``(n_steps, k, n)``.

    The head's outputs are ``bias + sum_b W d_b``, so ``W d_b`` is exactly step ``b``'s share
    of them; its size, ``sum_o |(C W d_b)_o|``, weights the step's mask in the importances.
    ``decisions`` ``(n_steps, k, n, n_d)`` (the ReLU'd decision of each step, ``k`` members of
    ``n`` rows each), ``weight`` ``(k, n_outputs, n_d)`` (each member's block of the head),
    ``centre`` ``(n_outputs, n_outputs)`` or None: the projection that subtracts, within each
    group of outputs whose common shift changes no prediction (a softmax's logits), the group's
    mean, so that only what tells the outputs apart counts."""
    return output_size(torch.einsum("skni,koi->skno", decisions, weight), centre)


def output_size(change: Tensor, centre: Tensor | None) -> Tensor:
    """The size ``sum_o |(change @ C)_o|`` of a change of the outputs (last dimension), centred
    by ``centre`` (:func:`centring`; None: as it is): what a step's share of the outputs
    (:func:`step_effects`) and the column selector (:mod:`tabsparse.training.selection`)
    are measured by."""
    if centre is not None:  # a no-op cast where they already match
        change = change @ centre.to(device=change.device, dtype=change.dtype)
    return change.abs().sum(dim=-1)


def centring(groups: Sequence[Sequence[int]], n_outputs: int) -> Tensor | None:
    """The ``(n_outputs, n_outputs)`` matrix ``C`` with ``y @ C`` = ``y`` less the mean of each
    of ``groups`` (lists of output indices) within it; None for no groups."""
    if not groups:
        return None
    centre = torch.eye(n_outputs)
    for group in groups:
        index = torch.as_tensor(list(group), dtype=torch.int64)
        centre[index.unsqueeze(1), index] -= 1.0 / len(index)
    return centre


def importances(masks: Tensor, step_importance: Tensor) -> Tensor:
    """Per-row importances over groups ``(n, n_groups)`` (the paper's aggregate mask):
    ``sum_b eta_b M_b`` normalised per row, where ``eta_b`` is step ``b``'s weight (the size of
    its effect on the outputs, :func:`step_effects`, or without a head the paper's sum of its
    decision); a row whose steps all weigh zero falls back to the plain mean of its masks.
    ``masks`` ``(n_steps, n, n_groups)``, ``step_importance`` ``(n_steps, n)``. For reading,
    not differentiating (in place)."""
    agg = masks[0] * step_importance[0].unsqueeze(-1)
    for mask, eta in zip(masks[1:], step_importance[1:], strict=True):
        agg.addcmul_(mask, eta.unsqueeze(-1))
    total = agg.sum(dim=1, keepdim=True)
    dead = total <= 0
    agg.div_(total.clamp_min_(1e-30))
    if torch.compiler.is_compiling() or bool(dead.any()):  # exported programs: no branch
        agg = torch.where(dead, masks.mean(dim=0), agg)
    return agg
