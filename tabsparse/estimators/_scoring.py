"""The validation score early stopping watches when ``scoring`` names a scikit-learn scorer:
the scorer applied to the network's outputs on the validation rows, through a stand-in
estimator that answers with them (no second forward pass)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator

from tabsparse.training import TensorData

__all__ = ["ValidationScore"]


class ValidationScore:
    """The trainer's score function for a scikit-learn scorer: ``(logits, data) -> score`` of
    the validation rows. ``name`` (the ``scoring`` string, or "val_score" for a callable) is what
    the progress bar shows the score as."""

    def __init__(self, owner: Any, scorer: Any, name: str) -> None:
        self.target = owner._target()
        self.owner = owner
        self.scorer = scorer
        self.name = name

    def __call__(self, logits: torch.Tensor, data: TensorData) -> float:
        assert data.target is not None
        y_true = self.target.true_values(data.target)
        view = _FrozenOutputs(self.owner, self.target.outputs(logits))
        weight = None if data.weight is None else data.weight.cpu().numpy()
        kwargs = {} if weight is None else {"sample_weight": weight}
        return float(self.scorer(view, np.empty((len(y_true), 0)), y_true, **kwargs))


class _FrozenOutputs(BaseEstimator):
    """Stands in for the estimator inside a scorer, answering with precomputed outputs."""

    def __init__(self, owner: Any = None, outputs: dict[str, np.ndarray] | None = None) -> None:
        self.owner = owner
        self.outputs = outputs

    def __getattr__(self, name: str) -> Any:
        outputs = self.__dict__.get("outputs") or {}
        if name in outputs:
            value = outputs[name]

            def respond(X: Any) -> np.ndarray:
                return value

            respond.__name__ = name
            return respond
        if name == "classes_" and hasattr(self.__dict__.get("owner"), "classes_"):
            return self.__dict__["owner"].classes_
        raise AttributeError(name)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        return self.owner.__sklearn_tags__()  # type: ignore[union-attr]
