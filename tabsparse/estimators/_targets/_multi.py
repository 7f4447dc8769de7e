"""Multi-label (an indicator matrix, two losses) and multi-task (labels per column) targets.

The conventions (scores, decision rule, the "no label" pseudo-label) are documented in
:mod:`tabsparse.estimators._multioutput`, which parses these 2-D targets.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

import tabsparse.estimators._multioutput as mo
from tabsparse.estimators._targets._base import (
    Target,
    check_labels,
    check_n_outputs,
    int_field,
    labels_from_json,
    labels_to_json,
)
from tabsparse.losses import sparsemax_loss
from tabsparse.sparsemax import sparsemax
from tabsparse.training import LossFn

__all__ = ["BCEMultiLabel", "MultiLabel", "MultiTask", "SparsemaxMultiLabel"]


class _MultiColumn(Target):
    """A 2-D target of ``n_outputs`` columns."""

    n_outputs: int
    described: ClassVar[str]  # the kind in the words of export's refusal

    def _columns(self, y: Any) -> list[np.ndarray]:
        if not mo.is_multi_column(y):
            raise ValueError(
                f"y has {mo.n_columns(y)} column(s), but the classifier was fitted on "
                f"{mo.describe(self.name)} with {self.n_outputs} columns"
            )
        return mo.label_columns(y)

    def check_columns(self, y: Any) -> None:
        if not mo.is_multi_column(y) or mo.n_columns(y) != self.n_outputs:
            raise ValueError(
                f"y has {mo.n_columns(y)} column(s), but the classifier was fitted on "
                f"{mo.describe(self.name)} with {self.n_outputs} columns"
            )

    def check_exportable(self) -> None:
        raise NotImplementedError(
            "export supports single-output models only; this classifier was fitted on a "
            f"{self.described} "
            "target (its outputs, sliced per task or with a sparsemax over labels, have no "
            "serving spec yet). Use tabsparse.save / tabsparse.load, or predict in Python."
        )

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        self.check_exportable()
        raise AssertionError  # pragma: no cover

    def export_spec(self) -> dict[str, Any]:
        self.check_exportable()
        raise AssertionError  # pragma: no cover

    def export_sections(self) -> dict[str, Any]:
        self.check_exportable()
        raise AssertionError  # pragma: no cover


class MultiLabel(_MultiColumn):
    """A 0 / 1 indicator matrix ``(n_samples, n_labels)``; ``classes_`` is ``arange(n_labels)``.
    The two losses are the subclasses; ``predict`` keeps the labels with a probability of at
    least 0.5."""

    loss_name: ClassVar[str]
    described = "multi-label"
    has_mean_label_count: ClassVar[bool] = False

    def __init__(self, n_labels: int) -> None:
        self.n_outputs = n_labels

    @classmethod
    def fit(cls, y: Any) -> tuple[MultiLabel, np.ndarray]:
        columns = mo.label_columns(y)
        encoded = mo.indicator(columns, len(columns), fitting=True)
        return cls._fitted(encoded), encoded

    @classmethod
    def _fitted(cls, encoded: np.ndarray) -> MultiLabel:
        return cls(encoded.shape[1])

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        loss = params.get("multilabel_loss", cls.loss_name)
        if loss != cls.loss_name:
            raise ValueError(
                f"multilabel_loss={loss!r}, but the network was fitted with "
                f"multilabel_loss={cls.loss_name!r}; a warm start cannot change it"
            )

    def encode(self, y: Any) -> np.ndarray:
        return mo.indicator(self._columns(y), self.n_outputs, fitting=False)

    def tensor(self, encoded: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(encoded, dtype=np.float32)).to(device)

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        return target.cpu().numpy().astype(np.int64)

    def log_proba(self, logits: torch.Tensor) -> np.ndarray:
        proba = self.outputs(logits)["predict_proba"]
        with np.errstate(divide="ignore"):
            return np.log(proba)

    def attributes(self) -> dict[str, Any]:
        return {
            "classes_": np.arange(self.n_outputs),
            "n_outputs_": self.n_outputs,
            "_target_kind": self.name,
        }

    @classmethod
    def from_attributes(cls, estimator: Any) -> MultiLabel:
        return cls(int(estimator.n_outputs_))

    @classmethod
    def check_attributes(cls, estimator: Any) -> None:
        """``classes_`` is ``arange(n_outputs_)`` and ``multilabel_loss`` the fitted loss."""
        n = check_n_outputs(
            estimator, cls.name, single=False, mean_label_count=cls.has_mean_label_count
        )
        classes = estimator.classes_
        if not isinstance(classes, np.ndarray) or classes.tolist() != list(range(n)):
            raise ValueError(f"classes_ of a multi-label model must be arange({n})")
        if estimator.multilabel_loss != cls.loss_name:
            raise ValueError(
                f"multilabel_loss={estimator.multilabel_loss!r} disagrees with {cls.name}"
            )

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.name, "n_labels": self.n_outputs}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MultiLabel:
        return cls(int_field(doc, "n_labels", 2))


class SparsemaxMultiLabel(MultiLabel):
    """Multi-label with the sparsemax loss and a "no label" pseudo-label (see
    :mod:`~tabsparse.estimators._multioutput`); probabilities are the sparsemax scores times
    ``mean_label_count``, the mean number of labels of a training row."""

    name = mo.MULTILABEL_SPARSEMAX
    loss_name = "sparsemax"
    has_mean_label_count = True

    def __init__(self, n_labels: int, mean_label_count: float = 1.0) -> None:
        super().__init__(n_labels)
        self.mean_label_count = mean_label_count

    @classmethod
    def _fitted(cls, encoded: np.ndarray) -> MultiLabel:
        return cls(encoded.shape[1], mo.mean_label_count(encoded))

    @property
    def n_network_outputs(self) -> int:
        return self.n_outputs + 1  # the "no label" pseudo-label

    @property
    def output_groups(self) -> list[list[int]]:
        return [list(range(self.n_outputs + 1))]  # one sparsemax over the labels

    def explained(self, logits: torch.Tensor) -> torch.Tensor:
        """The labels' logits centred within the sparsemax (the pseudo-label left out)."""
        return super().explained(logits)[:, : self.n_outputs]

    def explained_names(self) -> list[str]:
        return [str(j) for j in range(self.n_outputs)]

    def loss(self) -> LossFn:
        def sparse(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return sparsemax_loss(logits, mo.with_empty_label(target), reduction="none")

        return sparse

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        full = sparsemax(logits.float(), dim=1).cpu().numpy().astype(np.float64)
        share = full[:, : self.n_outputs]  # the last column is the "no label" pseudo-label
        proba = np.minimum(share * self.mean_label_count, 1.0)
        labels = (proba >= 0.5) & (share > 0.0)
        return {"predict_proba": proba, "predict": labels.astype(np.int64)}

    def attributes(self) -> dict[str, Any]:
        return {**super().attributes(), "mean_label_count_": self.mean_label_count}

    @classmethod
    def from_attributes(cls, estimator: Any) -> MultiLabel:
        return cls(int(estimator.n_outputs_), getattr(estimator, "mean_label_count_", 1.0))

    @classmethod
    def check_attributes(cls, estimator: Any) -> None:
        super().check_attributes(estimator)
        n = estimator.n_outputs_
        m = getattr(estimator, "mean_label_count_", None)
        if not isinstance(m, float) or not 1.0 <= m <= n + 1:
            raise ValueError(f"mean_label_count_={m!r} must be a float in [1, {n + 1}]")

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "mean_label_count": self.mean_label_count}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MultiLabel:
        n = int_field(doc, "n_labels", 2)
        m = doc.get("mean_label_count")
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 1.0 <= m <= n + 1:
            raise ValueError(f"mean_label_count={m!r} must be a number in [1, {n + 1}]")
        return cls(n, float(m))


class BCEMultiLabel(MultiLabel):
    """Multi-label with one independent sigmoid per label and the binary cross-entropy (mean
    over labels)."""

    name = mo.MULTILABEL_BCE
    loss_name = "bce"

    @property
    def n_network_outputs(self) -> int:
        return self.n_outputs

    def loss(self) -> LossFn:
        def bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            per_label = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
            return per_label.mean(dim=1)

        return bce

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        proba = torch.sigmoid(logits.float().double()).cpu().numpy()
        return {"predict_proba": proba, "predict": (proba >= 0.5).astype(np.int64)}


class MultiTask(_MultiColumn):
    """One column of class labels per task: one softmax head per task over a shared output
    layer of ``sum(n_classes_j)`` units; the loss is the mean of the tasks' cross-entropies.
    ``classes_`` and ``predict_proba`` are lists with one array per task."""

    name = mo.MULTITASK
    described = "multi-task"

    def __init__(self, classes: list[np.ndarray]) -> None:
        self.classes = classes
        self.n_outputs = len(classes)
        self.offsets = mo.task_offsets(classes)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """scikit-learn's metrics do not take multiclass-multioutput labels."""
        scoring = params.get("scoring")
        if isinstance(scoring, str) and scoring != "loss":
            raise ValueError(
                f"scoring={scoring!r} cannot score a multi-task target: scikit-learn's "
                "metrics do not take multiclass-multioutput labels; use scoring='loss' or a "
                "callable scorer(estimator, X, y)"
            )

    @classmethod
    def fit(cls, y: Any) -> tuple[MultiTask, np.ndarray]:
        classes, codes = mo.encode_tasks(mo.label_columns(y), None)
        return cls(classes), codes

    def encode(self, y: Any) -> np.ndarray:
        return mo.encode_tasks(self._columns(y), self.classes)[1]

    @property
    def n_network_outputs(self) -> int:
        return self.offsets[-1]

    def explained_names(self) -> list[str]:
        return [f"{j}={c}" for j, classes in enumerate(self.classes) for c in classes.tolist()]

    @property
    def output_groups(self) -> list[list[int]]:
        bounds = self.offsets
        return [list(range(bounds[j], bounds[j + 1])) for j in range(len(bounds) - 1)]

    def loss(self) -> LossFn:
        offsets = self.offsets

        def tasks(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            total = logits.new_zeros(logits.shape[0])
            for j in range(len(offsets) - 1):
                part = logits[:, offsets[j] : offsets[j + 1]]
                total = total + F.cross_entropy(part, target[:, j], reduction="none")
            return total / (len(offsets) - 1)

        return tasks

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        z = logits.float()
        probas = []
        for j in range(self.n_outputs):
            p = mo.softmax(z[:, self.offsets[j] : self.offsets[j + 1]]).cpu().numpy()
            p = p.astype(np.float64)
            probas.append(p / p.sum(axis=1, keepdims=True))
        codes = np.column_stack([p.argmax(axis=1) for p in probas])
        return {"predict_proba": probas, "predict": mo.stack_labels(self.classes, codes)}

    def log_proba(self, logits: torch.Tensor) -> list[np.ndarray]:
        z = logits.double()
        return [
            torch.log_softmax(z[:, self.offsets[j] : self.offsets[j + 1]], dim=1).cpu().numpy()
            for j in range(self.n_outputs)
        ]

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        return mo.stack_labels(self.classes, target.cpu().numpy())

    def score(self, y: Any, y_pred: Any, sample_weight: Any = None) -> float:
        """Subset accuracy: a row counts only when every task is right."""
        y_true = np.column_stack(mo.label_columns(y)).astype(object)
        correct = np.all(y_true == np.asarray(y_pred).astype(object), axis=1)
        return float(np.average(correct, weights=sample_weight))

    def attributes(self) -> dict[str, Any]:
        return {"classes_": self.classes, "n_outputs_": self.n_outputs, "_target_kind": self.name}

    @classmethod
    def from_attributes(cls, estimator: Any) -> MultiTask:
        return cls(list(estimator.classes_))

    @classmethod
    def check_attributes(cls, estimator: Any) -> None:
        n = check_n_outputs(estimator, cls.name, single=False, mean_label_count=False)
        if not isinstance(estimator.classes_, list) or len(estimator.classes_) != n:
            raise ValueError(f"classes_ of a multi-task model must be a list of {n} arrays")
        for j, classes in enumerate(estimator.classes_):
            check_labels(classes, f"classes_[{j}]")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.name, "classes": [labels_to_json(c) for c in self.classes]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MultiTask:
        tasks = doc.get("classes")
        if not isinstance(tasks, list) or len(tasks) < 2:
            raise ValueError(f"classes of a multi-task target must list >= 2 tasks, got {tasks!r}")
        return cls([labels_from_json(c, f"classes[{j}]") for j, c in enumerate(tasks)])
