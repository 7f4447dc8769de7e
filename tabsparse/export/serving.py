"""The module that export traces: a fitted network with its input and output handling.

:func:`serving_module` checks the estimator by duck typing (serving does not import the
estimators), copies its network to the CPU in float32 and eval mode, and sets the attentive
transformers' mask function to the branch-free sort-based forms, so that the network's own
functional code traces with a dynamic batch dimension.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from tabsparse.data import CODE_OFFSET, CODE_UNSEEN
from tabsparse.nn.functional import sorted_masks
from tabsparse.nn.network import TabNet
from tabsparse.nn.transformers import AttentiveTransformer

__all__ = ["serving_module"]


class _Serving(nn.Module):
    """Network plus output handling; the subclasses fix the input signature.

    Parameters
    ----------
    network : TabNet
        A private, eval-mode float32 CPU copy with branch-free attention.
    head : nn.Module
        The target's output transform (its ``serving_head()``): raw network outputs to the
        served output (softmax probabilities; a regressor's link, scale and sorted quantiles).
    masks : bool
        Also return the column masks and the per-row importances.
    """

    cardinality: torch.Tensor

    def __init__(self, network: TabNet, *, head: nn.Module, masks: bool) -> None:
        super().__init__()
        self.head = head
        self.network = network
        self.masks = masks
        self.n_numeric = int(network.inputs.n_numeric)
        self.n_categorical = int(network.inputs.n_categorical)
        cards = torch.as_tensor(network.inputs.cardinalities or [CODE_OFFSET], dtype=torch.int64)
        self.register_buffer("cardinality", cards.reshape(1, -1))

    def _run(
        self, numeric: torch.Tensor, codes: torch.Tensor
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.n_categorical:
            valid = (codes >= 0) & (codes < self.cardinality)
            codes = torch.where(valid, codes, torch.full_like(codes, CODE_UNSEEN))
        out = self.network(numeric, codes)
        first = self.head(out.logits)
        if not self.masks:
            return first
        net = self.network
        column_masks = net.column_masks(out.masks).float()
        importances = net.importances(out.masks, out.step_importance).float()
        return first, column_masks, importances


class _NumericAndCodes(_Serving):
    def forward(
        self, numeric: torch.Tensor, codes: torch.Tensor
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self._run(numeric, codes)


class _NumericOnly(_Serving):
    def forward(
        self, numeric: torch.Tensor
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        codes = torch.zeros((numeric.shape[0], 0), dtype=torch.int64, device=numeric.device)
        return self._run(numeric, codes)


class _CodesOnly(_Serving):
    def forward(
        self, codes: torch.Tensor
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        numeric = torch.zeros((codes.shape[0], 0), dtype=torch.float32, device=codes.device)
        return self._run(numeric, codes)


_TASKS = {"classifier": "classification", "regressor": "regression"}


def _estimator_type(estimator: Any) -> str | None:
    """scikit-learn's estimator type (``"classifier"``, ``"regressor"``, ...) from the
    estimator's tags, or None for an object that has none."""
    tags = getattr(estimator, "__sklearn_tags__", None)
    if not callable(tags):
        return None
    try:
        return getattr(tags(), "estimator_type", None)
    except Exception:  # an object whose tags cannot be built is not one we export
        return None


def _check_estimator(estimator: Any) -> Any:
    """Return the estimator's target object, or raise for anything else.

    Duck typing (serving does not import the estimators): a scikit-learn classifier or
    regressor whose fitted ``network_`` is a :class:`~tabsparse.nn.TabNet`, which has the
    fitted table encoder ``encoder_`` and gives its target object with ``_target()``. The
    target object (see ``tabsparse.estimators._targets``) refuses kinds that have no serving
    spec (``check_exportable``: ``NotImplementedError``) and gives the task name
    (``export_task``), the output transform (``serving_head()``) and the spec's target
    sections (``export_sections()``)."""
    from sklearn.utils.validation import check_is_fitted

    task = _TASKS.get(_estimator_type(estimator) or "")
    wanted = "export needs a fitted TabNetClassifier or TabNetRegressor, got "
    if task is None:
        raise TypeError(wanted + type(estimator).__name__)
    check_is_fitted(estimator)
    if (
        not isinstance(getattr(estimator, "network_", None), TabNet)
        or not hasattr(estimator, "encoder_")
        or not callable(getattr(estimator, "_target", None))
    ):
        raise TypeError(wanted + type(estimator).__name__)
    target = estimator._target()
    target.check_exportable()
    return target


def serving_module(estimator: Any, *, masks: bool = False) -> nn.Module:
    """The module that :func:`export_model` traces: raw encoded inputs to served outputs.

    Parameters
    ----------
    estimator : TabNetClassifier or TabNetRegressor
        A fitted estimator; it is not modified (the module holds a CPU copy of its network).
    masks : bool, default=False
        Also return the per-step column masks and the per-row importances.

    Returns
    -------
    torch.nn.Module
        In eval mode, on the CPU, float32. ``forward(numeric, codes)``, or only
        ``forward(numeric)`` / ``forward(codes)`` when the model has no categorical / no
        numeric columns. Returns the probabilities (classifier) or predictions (regressor), or
        with ``masks=True`` the tuple ``(that, masks, importances)``.

    Raises
    ------
    TypeError
        If ``estimator`` is not a TabNetClassifier or TabNetRegressor.
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    """
    return _serving_module(estimator, masks=masks)


def _drop_empty_tensors(module: nn.Module) -> None:
    """Remove 0-element parameters and buffers from a private copy; forward never reads them.

    They exist for absent column kinds (e.g. ``TabularInput.offsets`` without categorical
    columns). That one is an empty *view* of a 1-element storage, and ``torch.export.save``
    (torch 2.13) fails on such a tensor ("numel: integer multiplication overflow") while it
    reassembles tensors that share a storage.
    """
    for sub in module.modules():
        for store in (sub._parameters, sub._buffers):
            for name in [n for n, t in store.items() if t is not None and t.numel() == 0]:
                del store[name]


def _serving_module(estimator: Any, *, masks: bool) -> _Serving:
    target = _check_estimator(estimator)
    network = copy.deepcopy(estimator.network_).cpu().float().eval()
    for attentive in network.encoder.attention:
        if not isinstance(attentive, AttentiveTransformer):  # pragma: no cover - defensive
            raise TypeError(f"cannot export attention module {type(attentive).__name__}")
        attentive.mask_fn = sorted_masks  # branch-free: traces with a dynamic batch
    _drop_empty_tensors(network)
    n_num, n_cat = network.inputs.n_numeric, network.inputs.n_categorical
    cls: type[_Serving]
    if n_num and n_cat:
        cls = _NumericAndCodes
    elif n_num:
        cls = _NumericOnly
    else:
        cls = _CodesOnly
    module = cls(network, head=target.serving_head(), masks=masks)
    module.requires_grad_(False)
    return module.eval()
