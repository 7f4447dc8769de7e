"""Fine-tuning from a pretrainer: what ``pretrained=`` does in a supervised estimator's fit.

:func:`adopt_pretrained` checks the pretrainer against the estimator and gives the estimator its
column schema; :func:`load_pretrained_weights` copies the input-layer and encoder weights into
the new network; :func:`clone_keeping_pretrained` is the estimators' ``__sklearn_clone__`` when
``pretrained`` is set.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
import torch
from sklearn.base import clone

from tabsparse.estimators._base import TabNetBase
from tabsparse.estimators.pretrainer import TabNetPretrainer

if TYPE_CHECKING:
    from tabsparse.nn.transformers import FeatureTransformer

__all__ = [
    "ARCHITECTURE_PARAMS",
    "adopt_pretrained",
    "clone_keeping_pretrained",
    "load_pretrained_weights",
]

#: Settings that decide the shapes of the encoder weights: a fine-tuned estimator must use the
#: pretrainer's values (the first mask and the categorical width, fixed choices, follow it).
ARCHITECTURE_PARAMS = (
    "n_d",
    "n_a",
    "n_steps",
    "n_independent",
    "n_shared",
    "first_mask",
    "cat_emb_dim",
    "grouped_features",
)


def adopt_pretrained(estimator: TabNetBase, X: Any) -> TabNetPretrainer:
    """Check ``estimator.pretrained`` against the estimator and ``X``; give the estimator the
    pretrainer's column schema (a copy of its ``encoder_``). The pretrainer is not changed."""
    pre = estimator.pretrained  # type: ignore[attr-defined]
    if not isinstance(pre, TabNetPretrainer):
        raise TypeError(f"pretrained must be a fitted TabNetPretrainer, got {type(pre).__name__}")
    if not pre.__sklearn_is_fitted__():
        raise ValueError(
            "pretrained is an unfitted TabNetPretrainer; fit it first (pretrainer.fit(X)) and "
            "pass the fitted object"
        )
    built = _built_architecture(pre)
    # a parameter, or a fixed choice whose "auto" (first mask, categorical width) takes the
    # pretrainer's value
    asked = {n: getattr(estimator, n, getattr(estimator._fixed, n, None)) for n in built}
    wrong = [
        f"{name}={built[name]!r} in the pretrainer but {name}={asked[name]!r} here"
        for name in ARCHITECTURE_PARAMS
        if built[name] != asked[name] and asked[name] != "auto"
    ]
    if wrong:
        raise ValueError(
            f"{type(estimator).__name__} does not match the architecture of pretrained: "
            + "; ".join(wrong)
            + ". Use the pretrainer's values for these parameters."
        )
    _check_columns(pre, X)
    estimator.encoder_ = copy.deepcopy(pre.encoder_)
    estimator._set_feature_attributes()
    return pre


def _built_architecture(pre: TabNetPretrainer) -> dict[str, Any]:
    """The architecture the pretrainer's network was built with, read from the network (so a
    ``set_params`` on the pretrainer after its fit cannot make the check pass wrongly)."""
    net = pre.network_
    enc = net.encoder
    independent = cast("FeatureTransformer", enc.steps[0]).independent
    return {
        "n_d": enc.n_d,
        "n_a": enc.n_a,
        "n_steps": enc.n_steps,
        "n_independent": 0 if independent is None else len(independent.layers),
        "n_shared": len(enc.shared),
        "first_mask": getattr(enc, "first_mask", "per_row"),
        "cat_emb_dim": net.inputs.cat_emb_dim,
        "grouped_features": pre.grouped_features,  # the group layout is compared at the copy
    }


def _check_columns(pre: TabNetPretrainer, X: Any) -> None:
    names = list(pre.encoder_.input_names)  # the input columns (datetime parts expanded later)
    if isinstance(X, pd.DataFrame) and pre.encoder_.has_feature_names:
        given = [str(c) for c in X.columns]
        missing = [c for c in names if c not in given]
        extra = [c for c in given if c not in names]
        if missing or extra:
            raise ValueError(
                "X does not have the columns pretrained was fitted on: "
                f"missing {missing[:20]}, unexpected {extra[:20]}"
            )
        return
    n = X.shape[1] if hasattr(X, "shape") and len(X.shape) == 2 else None
    if n is not None and n != len(names):
        raise ValueError(f"X has {n} columns, but pretrained was fitted on {len(names)} columns")


def load_pretrained_weights(network: torch.nn.Module, pre: TabNetPretrainer) -> None:
    """Copy the pretrainer's input-layer and encoder weights (and buffers) into ``network``."""
    source = pre.network_
    for part in ("inputs", "encoder"):
        target_module = getattr(network, part)
        state = getattr(source, part).state_dict()
        mine = target_module.state_dict()
        bad = [
            f"{name}: {tuple(t.shape)} vs {tuple(mine[name].shape)}"
            for name, t in state.items()
            if name in mine and mine[name].shape != t.shape
        ]
        if bad or set(state) != set(mine):
            raise ValueError(f"cannot copy the pretrained {part} weights: {bad[:5]}")
        layout = [  # integer buffers describe the layout (groups, offsets): they must agree
            name
            for name, t in state.items()
            if not t.is_floating_point()
            and name != "num_batches_tracked"
            and not name.endswith(".num_batches_tracked")
            and not torch.equal(t.cpu(), mine[name].cpu())
        ]
        if layout:
            raise ValueError(
                f"cannot copy the pretrained {part} weights: the column layout differs "
                f"({layout}); check grouped_features and the columns"
            )
        target_module.load_state_dict(state)


def clone_keeping_pretrained(estimator: TabNetBase) -> TabNetBase:
    """scikit-learn's clone, except that the ``pretrained`` parameter is passed on as it is.

    ``sklearn.base.clone`` would clone a fitted pretrainer into an *unfitted* one; the
    pretrained weights are only read at fit (never changed), so sharing the object is safe and
    makes ``clone``, ``GridSearchCV`` and ``cross_val_score`` work with ``pretrained=``.
    """
    params = estimator.get_params(deep=False)
    new_params = {
        name: value if name == "pretrained" else clone(value, safe=False)
        for name, value in params.items()
    }
    new = type(estimator)(**new_params)
    for attr in ("_metadata_request", "_sklearn_output_config"):
        if hasattr(estimator, attr):
            setattr(new, attr, copy.deepcopy(getattr(estimator, attr)))
    return new
