"""The TabNet encoder (Arik & Pfister, section 3) over feature groups.

Attention chooses among *groups* of input channels: by default every original column is a group
(so a categorical column's embedding channels are selected together) and ``grouped_features`` can
merge columns. ``group_index[c]`` names the group of input channel ``c``; masks are
``(n, n_groups)`` and are expanded to channels with one ``index_select``.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from tabsparse.nn.fused import EncoderPlan, EncoderStep, MaskStep, apply, encoder_plan, stack_shape
from tabsparse.nn.transformers import AttentiveTransformer, FeatureTransformer, make_linears

# Plans of the one-node training path (tabsparse.nn.fused.EncoderStep), one per encoder:
# building one walks some sixty modules and parameters (0.3 ms, 2% of a training step of the
# speed benchmark's TabNet), so it is kept while nothing it depends on changes. A parameter,
# buffer or submodule assigned anywhere bumps _STRUCTURE (global registration hooks, where
# this torch has them; without them nothing is cached); moving or converting the encoder
# drops its plan (TabNetEncoder._apply); the batch's rows, dtype and device, autocast and
# the settings the plan reads are part of the key.
_PLANS: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], EncoderPlan | None]]
_PLANS = weakref.WeakKeyDictionary()
_STRUCTURE = [0]


def _structure_changed(*args: Any) -> None:
    _STRUCTURE[0] += 1


_HOOKS = [
    getattr(nn.modules.module, f"register_module_{kind}_registration_hook", None)
    for kind in ("parameter", "buffer", "module")
]
_CACHE_PLANS = all(hook is not None for hook in _HOOKS)
if _CACHE_PLANS:
    for _register in _HOOKS:
        _register(_structure_changed)  # type: ignore[misc]


class EncoderOutput(NamedTuple):
    """What :class:`TabNetEncoder` returns.

    output : (n, n_d) — sum over steps of the ReLU'd decision halves.
    masks : (n_steps, n, n_groups) — the attention masks (rows sum to one).
    sparsity_loss : scalar — mean over steps and rows of the mask entropy.
    step_importance : (n_steps, n) — sum of each step's decision output (the paper's eta).
    decisions : (n_steps, n, n_d) — each step's ReLU'd decision output, only when the encoder is
        called with ``keep_decisions=True`` (the pretraining decoder reads them); else None.
    """

    output: torch.Tensor
    masks: torch.Tensor
    sparsity_loss: torch.Tensor
    step_importance: torch.Tensor
    decisions: torch.Tensor | None = None


class MaskEntropy(torch.autograd.Function):
    """``-mean over rows (and steps) of sum_j m_j log(m_j + eps)``: the sparsity loss.

    One autograd node over the stacked masks: three operations forward (the log and one dot
    product) and three backward, where the graph of the formula takes a dozen passes over
    the masks. Gradient: ``-(log(m + eps) + m / (m + eps)) / rows``.
    """

    @staticmethod
    def forward(ctx: Any, masks: torch.Tensor, eps: float) -> torch.Tensor:  # type: ignore[override]
        shifted = masks + eps
        log = torch.log(shifted)
        rows = masks.numel() // max(1, masks.shape[-1])
        ctx.save_for_backward(masks, shifted, log)
        ctx.rows = rows
        return torch.dot(masks.reshape(-1), log.reshape(-1)).neg_().div_(max(1, rows))

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        masks, shifted, log = ctx.saved_tensors
        out = torch.div(masks, shifted).add_(log)
        return out.mul_(grad.neg() / max(1, ctx.rows)), None


class TabNetEncoder(nn.Module):
    """Sequential attention over feature groups with shared and step-specific transformers.

    Parameters
    ----------
    input_dim : int
        Channels of the input vector.
    group_index : sequence of int
        Group id (``0 .. n_groups-1``) of each input channel.
    n_d, n_a : int
        Widths of the decision and attention halves.
    n_steps : int
        Decision steps.
    gamma : float
        Relaxation: ``prior *= gamma - mask`` after each step (1 = a group is used at most once).
    n_independent, n_shared : int
        Step-specific and shared GLU layers per feature transformer.
    mask_type : {"sparsemax", "entmax"}
    virtual_batch_size : int
    momentum : float
        Batch-norm momentum (PyTorch convention).

    Examples
    --------
    >>> enc = TabNetEncoder(input_dim=5, group_index=[0, 1, 2, 3, 4], n_d=4, n_a=4, n_steps=2)
    >>> out = enc(torch.randn(16, 5))
    >>> out.output.shape, out.masks.shape
    (torch.Size([16, 4]), torch.Size([2, 16, 5]))
    """

    group_index: torch.Tensor

    def __init__(
        self,
        *,
        input_dim: int,
        group_index: list[int],
        n_d: int = 8,
        n_a: int = 8,
        n_steps: int = 3,
        gamma: float = 1.3,
        n_independent: int = 2,
        n_shared: int = 2,
        mask_type: str = "sparsemax",
        virtual_batch_size: int = 128,
        momentum: float = 0.02,
        epsilon: float = 1e-15,
    ) -> None:
        super().__init__()
        for name, value, low in (
            ("input_dim", input_dim, 1),
            ("n_d", n_d, 1),
            ("n_a", n_a, 1),
            ("n_steps", n_steps, 1),
            ("n_independent", n_independent, 0),
            ("n_shared", n_shared, 0),
        ):
            if value < low:
                raise ValueError(f"{name}={value!r} must be >= {low}")
        if n_independent + n_shared < 1:
            raise ValueError(f"{n_independent=} + {n_shared=} must be >= 1")
        if len(group_index) != input_dim:
            raise ValueError(f"group_index has {len(group_index)} entries, expected {input_dim=}")
        n_groups = max(group_index) + 1
        if sorted(set(group_index)) != list(range(n_groups)):
            raise ValueError("group_index must use every group id 0 .. n_groups-1")
        self.input_dim = input_dim
        self.n_groups = n_groups
        self.n_d = n_d
        self.n_a = n_a
        self.n_steps = n_steps
        self.gamma = gamma
        self.epsilon = epsilon
        self.register_buffer("group_index", torch.as_tensor(group_index, dtype=torch.int64))
        # one group per channel in order (plain numeric tables): masks apply without a gather
        self.identity_groups = list(group_index) == list(range(input_dim))
        width = n_d + n_a
        shared = make_linears(input_dim, width, n_shared)
        self.shared = nn.ModuleList(shared)

        def feature_transformer() -> FeatureTransformer:
            return FeatureTransformer(
                shared=shared,
                n_in=input_dim,
                n_out=width,
                n_independent=n_independent,
                virtual_batch_size=virtual_batch_size,
                momentum=momentum,
            )

        self.initial = feature_transformer()
        self.steps = nn.ModuleList(feature_transformer() for _ in range(n_steps))
        self.attention = nn.ModuleList(
            AttentiveTransformer(
                n_a=n_a,
                n_groups=n_groups,
                mask_type=mask_type,
                virtual_batch_size=virtual_batch_size,
                momentum=momentum,
            )
            for _ in range(n_steps)
        )

    def forward(
        self, x: torch.Tensor, *, keep_decisions: bool = False, with_masks: bool = True
    ) -> EncoderOutput:
        """Run the steps. The sparsity loss is computed in training mode only (0 in eval mode,
        where nothing trains on it); every step's work is kept to as few operations as the
        algorithm allows, because at tabular sizes each operation costs more than its math.

        ``with_masks=False`` (prediction, and training steps that read only the output and
        the sparsity loss) leaves ``masks`` and ``step_importance`` empty instead of stacking
        them."""
        # training: each transformer returns its decision and attention features from one
        # autograd node (unless a transformer has hooks, which must see its whole output)
        split = self.training and not any(_has_hooks(t) for t in (self.initial, *self.steps))
        if split and not (with_masks or keep_decisions):  # a training step: one node for all
            plan = self._plan(x)
            if plan is not None:
                summed, sparsity_loss = apply(EncoderStep, x, plan, *plan.params)
                empty = x.new_empty(0)
                return EncoderOutput(summed, empty, sparsity_loss, empty)
        if split:
            att = self.initial.forward_split(x, self.n_d)[1]
        else:
            att = self.initial(x)[:, self.n_d :]
        identity = getattr(self, "identity_groups", False)  # absent in older pickles
        fused = self._fused_shape(att)
        prior: torch.Tensor | None = None  # all ones before the first step
        output: torch.Tensor | None = None
        masks: list[torch.Tensor] = []
        decisions: list[torch.Tensor] = []
        entropy: torch.Tensor | None = None  # the fused path's sparsity loss
        attention = cast("Sequence[AttentiveTransformer]", self.attention)
        steps = cast("Sequence[FeatureTransformer]", self.steps)
        for transformer, attentive in zip(steps, attention, strict=True):
            if fused is not None:  # one autograd node (tabsparse.nn.fused.MaskStep)
                mask, prior, masked, step_entropy = apply(
                    MaskStep,
                    att,
                    prior,
                    x,
                    attentive.bn,
                    *fused,
                    self.gamma,
                    attentive.mask_type == "entmax",
                    None if identity else self.group_index,
                    self.epsilon,
                    self.n_steps * x.shape[0],
                    attentive.fc.weight,
                    attentive.bn.weight,
                    attentive.bn.bias,
                )
                entropy = step_entropy if entropy is None else entropy + step_entropy
            else:
                mask = attentive(att, prior)
                prior = self.gamma - mask if prior is None else prior * (self.gamma - mask)
                masked = x * (mask if identity else mask.index_select(1, self.group_index))
            masks.append(mask)
            if split:
                decision, att = transformer.forward_split(masked, self.n_d)
            else:
                out = transformer(masked)
                decision, att = torch.relu(out[:, : self.n_d]), out[:, self.n_d :]
            output = decision if output is None else output + decision
            decisions.append(decision)
        assert output is not None
        if not (with_masks or keep_decisions) and (entropy is not None or not self.training):
            empty = x.new_empty(0)
            sparsity = x.new_zeros(()) if entropy is None else entropy
            return EncoderOutput(output, empty, sparsity, empty)
        stacked_masks = torch.stack(masks)
        stacked_decisions = torch.stack(decisions)
        if entropy is not None:
            sparsity = entropy
        elif self.training:  # mean over steps and rows of each mask's entropy
            sparsity = apply(MaskEntropy, stacked_masks, self.epsilon)
        else:
            sparsity = x.new_zeros(())
        return EncoderOutput(
            output=output,
            masks=stacked_masks,
            sparsity_loss=sparsity,
            step_importance=stacked_decisions.sum(dim=-1),
            decisions=stacked_decisions if keep_decisions else None,
        )

    def _plan(self, x: torch.Tensor) -> EncoderPlan | None:
        """The :class:`~tabsparse.nn.fused.EncoderPlan` that runs this encoder (in training
        mode, transformers without hooks) on ``x`` as one node, or None where the per-step
        nodes or the modules must run (hooks on an attentive transformer, or the
        :func:`~tabsparse.nn.fused.stack_shape` conditions). Cached (see ``_PLANS``)."""
        attention = cast("Sequence[AttentiveTransformer]", self.attention)
        if torch.compiler.is_compiling() or any(_has_hooks(a) for a in attention):
            return None
        key = (
            _STRUCTURE[0],
            x.shape[0],
            x.dtype,
            x.device,
            torch.is_autocast_enabled(x.device.type),
            self.gamma,
            self.epsilon,
            tuple(attentive.mask_type for attentive in attention),
        )
        cached = _PLANS.get(self)
        if cached is not None and cached[0] == key and _same_batching(cached[1]):
            return cached[1]
        plan = self._new_plan(x)
        if _CACHE_PLANS:
            _PLANS[self] = (key, plan)
        return plan

    def _apply(self, fn: Any, recurse: bool = True) -> TabNetEncoder:
        _PLANS.pop(self, None)  # conversions may replace the parameters in place
        return super()._apply(fn, recurse)  # type: ignore[no-any-return]

    def _new_plan(self, x: torch.Tensor) -> EncoderPlan | None:
        attention = cast("Sequence[AttentiveTransformer]", self.attention)
        steps = cast("Sequence[FeatureTransformer]", self.steps)
        return encoder_plan(
            x,
            [t.glu_layers() for t in (self.initial, *steps)],
            [(a.fc, a.bn, a.mask_type == "entmax") for a in attention],
            n_d=self.n_d,
            gamma=self.gamma,
            epsilon=self.epsilon,
            group_index=None if getattr(self, "identity_groups", False) else self.group_index,
        )

    def _fused_shape(self, att: torch.Tensor) -> tuple[int, int] | None:
        """The virtual batches ``(size, k)`` of :class:`~tabsparse.nn.fused.MaskStep` when each
        step's attention runs as that one node (training mode; the cases of
        :func:`~tabsparse.nn.fused.stack_shape`), else None: the modules run one by one, as
        they also do when an attentive transformer has hooks (so that the hooks see every
        call)."""
        if not self.training:
            return None
        attention = cast("Sequence[AttentiveTransformer]", self.attention)
        if any(_has_hooks(attentive) for attentive in attention):
            return None
        return stack_shape(att, [(attentive.fc, attentive.bn) for attentive in attention])


def _same_batching(plan: EncoderPlan | None) -> bool:
    """Whether the batch norms of a cached plan still split batches as when it was made."""
    return plan is None or all(
        bn.virtual_batch_size == plan.virtual_batch_size for bn in plan.batch_norms
    )


def _has_hooks(module: nn.Module) -> bool:
    """Whether calling ``module`` would run forward hooks (its own or global ones)."""
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or nn.modules.module._global_forward_hooks
        or nn.modules.module._global_forward_pre_hooks
    )
