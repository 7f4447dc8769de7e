"""The TabNet encoder (Arik & Pfister, section 3) over feature groups.

Attention chooses among *groups* of input channels: by default every original column is a group
(so a categorical column's embedding channels are selected together) and ``grouped_features`` can
merge columns. ``group_index[c]`` names the group of input channel ``c``; masks are
``(n, n_groups)`` and are expanded to channels with one ``index_select``.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import torch
from torch import nn

from tabsparse.nn import functional as F
from tabsparse.nn.encoder_step import EncoderPlan, EncoderStep, apply, encoder_plan
from tabsparse.nn.ghost_bn import GhostBatchNorm
from tabsparse.nn.transformers import AttentiveTransformer, FeatureTransformer, make_linears

_MISSING = object()

#: Values of ``first_mask``: where the first step's attention features come from.
FIRST_MASKS = ("per_row", "shared")


class _CachedPlan(NamedTuple):
    """An :class:`EncoderPlan` (or None: the node does not apply) for batches described by
    ``key``, valid while ``dicts[i].get(names[i]) is objects[i]`` for every ``i`` (the
    submodules, parameters, buffers and settings it was built from)."""

    key: tuple[Any, ...]
    plan: EncoderPlan | None
    dicts: tuple[dict[str, Any], ...]
    names: tuple[str, ...]
    objects: tuple[Any, ...]

    def valid(self) -> bool:
        found = map(dict.get, self.dicts, self.names, itertools.repeat(_MISSING))
        return all(map(operator.is_, found, self.objects))


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
        Relaxation: ``prior *= gamma - mask`` after each step; the prior multiplies the
        logits, so at 1 a used-up group gets logit 0 and can still be selected (docs/user_guide.md).
    n_independent, n_shared : int
        Step-specific and shared GLU layers per feature transformer.
    mask_type : {"sparsemax", "entmax"}
    first_mask : {"per_row", "shared"}
        Where the first step's attention features come from. ``"per_row"`` (the paper): an
        initial feature transformer over the whole unmasked row, so the first mask, and through
        it the prediction, can depend on features no mask selects. ``"shared"``: the first
        step's attention reads zeros, so its mask is the mask function of its batch norm's
        bias, one learned selection for every row; each later mask depends only on what earlier
        masks let through, so every feature a row's prediction depends on has a non-zero mask
        weight in some step of that row. No initial transformer is built.
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
        first_mask: str = "per_row",
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
        if first_mask not in FIRST_MASKS:
            raise ValueError(f"first_mask={first_mask!r} must be one of {FIRST_MASKS}")
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
        self.first_mask = first_mask
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

        # the paper's initial transformer; None with a shared first mask
        self.initial = feature_transformer() if first_mask == "per_row" else None
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
        """Run the steps (:mod:`tabsparse.nn.functional`). The sparsity loss is computed in
        training mode only (0 in eval mode, where nothing trains on it).

        ``with_masks=False`` (prediction, and training steps that read only the output, the
        sparsity loss and with ``keep_decisions`` the decisions) leaves ``masks`` and
        ``step_importance`` empty instead of stacking them; a training step then runs as one
        autograd node
        (:class:`~tabsparse.nn.encoder_step.EncoderStep`) where that applies."""
        if self.training and not with_masks:
            plan = self._plan(x)
            if plan is not None:
                summed, sparsity_loss, step_decisions = apply(
                    EncoderStep, x, plan, keep_decisions, *plan.params
                )
                empty = x.new_empty(0)
                kept = step_decisions if keep_decisions else None
                return EncoderOutput(summed, empty, sparsity_loss, empty, kept)
        if self.initial is None:
            att = x.new_zeros(x.shape[0], self.n_a)
        else:
            att = self.initial(x)[:, self.n_d :]
        identity = getattr(self, "identity_groups", False)  # absent in older pickles
        group_index = None if identity else self.group_index
        epsilon = self.epsilon if self.training else None
        rows = self.n_steps * x.shape[0]
        prior: torch.Tensor | None = None  # all ones before the first step
        output: torch.Tensor | None = None
        entropy: torch.Tensor | None = None
        masks: list[torch.Tensor] = []
        decisions: list[torch.Tensor] = []
        attention = cast("Sequence[AttentiveTransformer]", self.attention)
        steps = cast("Sequence[FeatureTransformer]", self.steps)
        for transformer, attentive in zip(steps, attention, strict=True):
            mask = attentive(att, prior)
            prior, masked, step_entropy = F.mask_outputs(
                mask, prior, x, self.gamma, group_index, epsilon, rows
            )
            decision, att = F.split_decision(transformer(masked), self.n_d)
            output = decision if output is None else output + decision
            if step_entropy is not None:
                entropy = step_entropy if entropy is None else entropy + step_entropy
            masks.append(mask)
            decisions.append(decision)
        assert output is not None
        sparsity = x.new_zeros(()) if entropy is None else entropy
        if not with_masks:
            empty = x.new_empty(0)
            kept = torch.stack(decisions) if keep_decisions else None
            return EncoderOutput(output, empty, sparsity, empty, kept)
        stacked_decisions = torch.stack(decisions)
        return EncoderOutput(
            output=output,
            masks=torch.stack(masks),
            sparsity_loss=sparsity,
            step_importance=stacked_decisions.sum(dim=-1),
            decisions=stacked_decisions if keep_decisions else None,
        )

    def _plan(self, x: torch.Tensor) -> EncoderPlan | None:
        """The :class:`~tabsparse.nn.encoder_step.EncoderPlan` that runs this encoder on ``x``
        as one node, or None where the modules must run (hooks on a transformer, or the
        conditions of :func:`~tabsparse.nn.encoder_step.encoder_plan`). Kept on the encoder
        while the batch's description and every module, parameter and setting it was built
        from stay the same (checked by identity on each call)."""
        if torch.compiler.is_compiling() or any(
            _has_hooks(m) for m in (self.initial, *self.steps, *self.attention) if m is not None
        ):
            return None
        key = (
            x.shape[0],
            x.dtype,
            x.device,
            torch.is_autocast_enabled(x.device.type),
            self.gamma,
            self.epsilon,
        )
        cached = self.__dict__.get("_cached_plan")
        if cached is not None and cached.key == key and cached.valid():
            return cast("EncoderPlan | None", cached.plan)
        plan, sources = self._new_plan(x)
        dicts, names, objects = zip(*sources, strict=True)
        self.__dict__["_cached_plan"] = _CachedPlan(key, plan, dicts, names, objects)
        return plan

    def _apply(self, fn: Any, recurse: bool = True) -> TabNetEncoder:
        self.__dict__.pop("_cached_plan", None)  # conversions may change the parameters
        return super()._apply(fn, recurse)  # type: ignore[no-any-return]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("_cached_plan", None)
        return state

    def _new_plan(
        self, x: torch.Tensor
    ) -> tuple[EncoderPlan | None, tuple[tuple[dict[str, Any], str, Any], ...]]:
        attention = cast("Sequence[AttentiveTransformer]", self.attention)
        steps = cast("Sequence[FeatureTransformer]", self.steps)
        first = [] if self.initial is None else self.initial.glu_layers()
        transformers = [first, *(t.glu_layers() for t in steps)]
        plan = encoder_plan(
            x,
            transformers,
            [(a.fc, a.bn, a.mask_type == "entmax") for a in attention],
            n_d=self.n_d,
            gamma=self.gamma,
            epsilon=self.epsilon,
            group_index=None if getattr(self, "identity_groups", False) else self.group_index,
        )
        return plan, _sources(self)


_SETTINGS = {
    GhostBatchNorm: ("virtual_batch_size", "eps", "training"),
    AttentiveTransformer: ("mask_type", "mask_fn", "training"),
}


def _sources(module: nn.Module) -> tuple[tuple[dict[str, Any], str, Any], ...]:
    """Every ``(dict, name, object)`` a plan of the encoder ``module`` depends on: its group
    index, the submodule and parameter entries of it and all its descendants, and the settings
    the plan reads."""
    out: list[tuple[dict[str, Any], str, Any]] = [
        (module._buffers, "group_index", module._buffers["group_index"]),
        (module.__dict__, "identity_groups", module.__dict__.get("identity_groups", _MISSING)),
    ]
    for m in module.modules():
        out += [(m._modules, name, sub) for name, sub in m._modules.items()]
        out += [(m._parameters, name, p) for name, p in m._parameters.items()]
        for name in _SETTINGS.get(type(m), ()):
            out.append((m.__dict__, name, m.__dict__.get(name, _MISSING)))
    return tuple(out)


def _has_hooks(module: nn.Module) -> bool:
    """Whether calling ``module`` would run forward hooks (its own or global ones)."""
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or nn.modules.module._global_forward_hooks
        or nn.modules.module._global_forward_pre_hooks
    )
