"""One column of class labels (binary or multi-class): the ``"single"`` kind."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets

import tabsparse.estimators._multioutput as mo
from tabsparse.estimators._targets._base import (
    Target,
    check_labels,
    check_n_outputs,
    json_label,
    labels_1d,
    labels_from_json,
    labels_to_json,
)
from tabsparse.training import LossFn

__all__ = ["ClassLabels"]


class ClassLabels(Target):
    """One column of class labels, binary or multi-class: ``len(classes)`` logits (two for a
    binary target), softmax probabilities and the cross-entropy."""

    name = "single"

    def __init__(self, classes: np.ndarray) -> None:
        self.classes = classes

    @classmethod
    def fit(cls, y: Any) -> tuple[ClassLabels, np.ndarray]:
        y = labels_1d(y)
        check_classification_targets(y)
        # LabelEncoder sorts the labels as np.unique does
        classes = LabelEncoder().fit(y).classes_
        if len(classes) < 2:
            raise ValueError(
                "TabNetClassifier needs samples of at least 2 classes in y; "
                f"got only one class: {classes.tolist()[0]!r}"
            )
        target = cls(classes)
        return target, target._codes(y)

    def encode(self, y: Any) -> np.ndarray:
        if mo.is_multi_column(y):
            raise ValueError(
                f"y has {mo.n_columns(y)} columns, but the classifier was fitted on "
                f"{mo.describe(self.name)}"
            )
        y = labels_1d(y)
        check_classification_targets(y)
        return self._codes(y)

    def _codes(self, y: np.ndarray) -> np.ndarray:
        codes = np.clip(np.searchsorted(self.classes, y), 0, len(self.classes) - 1)
        unseen = self.classes[codes] != y
        if np.any(unseen):
            bad = np.unique(y[unseen])[:5].tolist()
            raise ValueError(
                f"y contains labels not seen in training: {bad}; "
                f"known classes: {self.classes.tolist()[:20]}"
            )
        return codes.astype(np.int64)

    @property
    def n_network_outputs(self) -> int:
        return len(self.classes)

    @property
    def output_groups(self) -> list[list[int]]:
        return [list(range(len(self.classes)))]  # one softmax

    def explained(self, logits: torch.Tensor) -> torch.Tensor:
        """Binary: the log-odds of the second class, one output (as LightGBM and XGBoost
        explain); multi-class: the logits centred over the classes, one output per class."""
        z = logits.to(torch.float64)
        if len(self.classes) == 2:
            return (z[:, 1] - z[:, 0]).unsqueeze(1)
        return z - z.mean(dim=1, keepdim=True)

    def explained_names(self) -> list[str]:
        labels = [str(c) for c in self.classes.tolist()]
        return labels[1:] if len(labels) == 2 else labels

    def loss(self) -> LossFn:
        def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(logits, target, reduction="none")

        return cross_entropy

    def stratify(self, encoded: np.ndarray) -> np.ndarray | None:
        return encoded

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        proba = mo.softmax(logits.float()).cpu().numpy().astype(np.float64)
        proba /= proba.sum(axis=1, keepdims=True)
        return {"predict_proba": proba, "predict": self.classes[proba.argmax(axis=1)]}

    def log_proba(self, logits: torch.Tensor) -> np.ndarray:
        return torch.log_softmax(logits.double(), dim=1).cpu().numpy()

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        return self.classes[target.cpu().numpy()]

    def attributes(self) -> dict[str, Any]:
        return {"classes_": self.classes, "n_outputs_": 1, "_target_kind": self.name}

    @classmethod
    def from_attributes(cls, estimator: Any) -> ClassLabels:
        return cls(estimator.classes_)

    @classmethod
    def check_attributes(cls, estimator: Any) -> None:
        check_n_outputs(estimator, cls.name, single=True, mean_label_count=False)
        check_labels(estimator.classes_, "classes_")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.name, "classes": labels_to_json(self.classes)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ClassLabels:
        return cls(labels_from_json(doc.get("classes"), "classes"))

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits.float(), dim=1)

    def export_spec(self) -> dict[str, Any]:
        return {"classes": self.classes.tolist()}

    def export_sections(self) -> dict[str, Any]:
        labels = [json_label(v) for v in self.classes.tolist()]
        return {
            "outputs": {
                "name": "probabilities",
                "dtype": "float32",
                "shape": ["batch", len(labels)],
                "description": "class probabilities in the order of 'classes'; rows sum to 1",
            },
            "classes": [v for v, _ in labels],
            "class_types": [t for _, t in labels],
            "target": None,
        }
