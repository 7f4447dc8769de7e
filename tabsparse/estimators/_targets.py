"""The kinds of target an estimator is fitted on: one object per kind.

A target object holds what a fit learned about ``y`` (the classes, the standardisation, ...) and
everything that follows from it: how ``y`` is encoded for the network, the width of the network's
output layer, the loss, how network outputs become predictions and probabilities, the default
score, its serialisation and what export needs. The estimators call these objects instead of
branching on the kind of target; model files and export can do the same.

=========================  ==============================================  ======================
kind (``name``)            ``y``                                           head / loss
=========================  ==============================================  ======================
``"single"``               one column of class labels (binary or           ``n_classes`` logits,
                           multi-class, :class:`ClassLabels`)              softmax cross-entropy
``"multilabel-sparsemax"`` 0 / 1 indicator matrix (:class:`SparsemaxMulti  ``n_labels + 1``,
                           Label`)                                         sparsemax loss
``"multilabel-bce"``       0 / 1 indicator matrix (:class:`BCEMultiLabel`) ``n_labels`` sigmoids
``"multitask"``            one column of labels per task (:class:`Multi    ``sum(n_classes_j)``,
                           Task`)                                          mean cross-entropy
``"regression"``           1-D or 2-D numbers, one or more outputs         ``n_outputs``, MSE on
                           (:class:`Regression`)                           the standardised y
=========================  ==============================================  ======================

The multi-label and multi-task conventions (scores, decision rule, "no label" pseudo-label) are
documented in :mod:`tabsparse.estimators._multioutput`, which parses 2-D targets.

Interface of a target object ``t`` (every kind):

* ``Kind.fit(y) -> (t, encoded)``: learn from a fit's ``y`` and encode it (a classmethod;
  :func:`classification_kind` picks the kind of a classifier's ``y``).
* ``t.encode(y) -> encoded``: encode another ``y`` (validation data, a warm start) with what
  was learned; ``ValueError`` when it does not fit.
* ``Kind.check_params(params)``: ``ValueError`` when the estimator's parameters cannot serve
  the kind (a string scorer for a multi-task target, another ``multilabel_loss`` on a warm
  start).
* ``t.n_network_outputs``; ``t.loss() -> LossFn``; ``t.tensor(encoded, device)``;
  ``t.stratify(encoded)``: the labels the validation split is stratified on, or None.
* ``t.outputs(logits) -> {"predict": ..., "predict_proba": ...}`` (no ``predict_proba`` for
  regression); ``t.log_proba(logits)``; ``t.true_values(target_tensor)``: ``y`` as a scorer
  sees it; ``t.score(y, y_pred, sample_weight)``: the estimator's default ``score``.
* ``t.attributes() -> dict``: the estimator's fitted attributes that hold the learned state
  (``classes_``, ``n_outputs_``, ...); :func:`target_of` reads them back from an estimator.
* ``t.to_json() -> dict`` (plain JSON, ``"kind"`` included); :func:`target_from_json` reverses
  it and checks it.
* export: ``t.export_task`` (``"classification"`` or ``"regression"``),
  ``t.check_exportable()`` (``NotImplementedError`` for kinds without a serving spec),
  ``t.serve(logits)`` (the served output, traceable torch) and ``t.export_spec()`` (the
  target part of the serving spec).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import accuracy_score, r2_score
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array

from tabsparse.estimators import _multioutput as mo
from tabsparse.losses import sparsemax_loss
from tabsparse.sparsemax import sparsemax
from tabsparse.training import LossFn

__all__ = [
    "BCEMultiLabel",
    "ClassLabels",
    "MultiLabel",
    "MultiTask",
    "Regression",
    "SparsemaxMultiLabel",
    "Target",
    "classification_kind",
    "target_from_json",
    "target_of",
]


class Target:
    """Base of the target kinds; see the module docstring for the interface."""

    name: ClassVar[str]
    export_task: ClassVar[str] = "classification"

    @property
    def n_network_outputs(self) -> int:
        raise NotImplementedError

    @classmethod
    def fit(cls, y: Any) -> tuple[Target, np.ndarray]:
        """Learn the target from a fit's ``y``; return it and the encoded ``y``."""
        raise NotImplementedError

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Raise ``ValueError`` when the estimator's parameters cannot serve this kind (checked
        at fit, and again on a warm start or with ``y_val``)."""

    def encode(self, y: Any) -> np.ndarray:
        raise NotImplementedError

    def loss(self) -> LossFn:
        raise NotImplementedError

    def tensor(self, encoded: np.ndarray, device: torch.device) -> torch.Tensor:
        """The encoded target as a tensor on ``device`` (int64 codes, or float32)."""
        return torch.from_numpy(np.ascontiguousarray(encoded, dtype=np.int64)).to(device)

    def stratify(self, encoded: np.ndarray) -> np.ndarray | None:
        return None

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        raise NotImplementedError

    def log_proba(self, logits: torch.Tensor) -> Any:
        raise NotImplementedError

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        raise NotImplementedError

    def check_columns(self, y: Any) -> None:
        """Raise ``ValueError`` when ``y`` has not the columns of the fitted target."""

    def score(self, y: Any, y_pred: Any, sample_weight: Any = None) -> float:
        """Accuracy (subset accuracy for multi-column targets)."""
        return float(accuracy_score(y, y_pred, sample_weight=sample_weight))

    def attributes(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Target:
        raise NotImplementedError

    def check_exportable(self) -> None:
        """Raise ``NotImplementedError`` when export has no serving spec for this kind."""

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def export_spec(self) -> dict[str, Any]:
        raise NotImplementedError


# ---- JSON of label arrays -------------------------------------------------------------------


def _labels_to_json(labels: np.ndarray) -> dict[str, Any]:
    values = labels.tolist()
    for v in values:
        if not isinstance(v, (str, int, float, bool)):
            raise TypeError(f"class label {v!r} of type {type(v).__name__} is not JSON data")
    return {"dtype": labels.dtype.str, "values": values}


def _labels_from_json(doc: Any, what: str) -> np.ndarray:
    if not isinstance(doc, dict) or not isinstance(doc.get("values"), list):
        raise ValueError(f"{what} must be {{'dtype': ..., 'values': [...]}}, got {doc!r}")
    dtype = np.dtype(doc.get("dtype", "O"))
    values = doc["values"]
    if dtype.kind == "O":
        out = np.empty(len(values), dtype=object)
        out[:] = values
    else:
        out = np.asarray(values, dtype=dtype)
    if out.ndim != 1 or len(out) < 2 or len(np.unique(out.astype(str))) != len(out):
        raise ValueError(f"{what} must hold at least 2 distinct labels, got {values!r}")
    return out


def _int_field(doc: dict[str, Any], name: str, low: int) -> int:
    v = doc.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name}={v!r} must be an integer >= {low}")
    return v


# ---- one column of class labels -------------------------------------------------------------


def labels_1d(y: Any) -> np.ndarray:
    """``y`` as one column of labels (finite; a column vector is raveled with a warning)."""
    y = check_array(y, ensure_2d=False, dtype=None, ensure_all_finite=True, input_name="y")
    return column_or_1d(y, warn=True)


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
                f"y contains labels not seen when the classifier was first fitted: {bad}; "
                f"known classes: {self.classes.tolist()[:20]}"
            )
        return codes.astype(np.int64)

    @property
    def n_network_outputs(self) -> int:
        return len(self.classes)

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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.name, "classes": _labels_to_json(self.classes)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ClassLabels:
        return cls(_labels_from_json(doc.get("classes"), "classes"))

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits.float(), dim=1)

    def export_spec(self) -> dict[str, Any]:
        return {"classes": self.classes.tolist()}


# ---- multi-label and multi-task -------------------------------------------------------------


class _MultiColumn(Target):
    """A 2-D target of ``n_outputs`` columns."""

    n_outputs: int

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
        what = "multi-task" if self.name == mo.MULTITASK else "multi-label"
        raise NotImplementedError(
            f"export supports single-output models only; this classifier was fitted on a {what} "
            "target (its outputs, sliced per task or with a sparsemax over labels, have no "
            "serving spec yet). Use tabsparse.save / tabsparse.load, or predict in Python."
        )

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        self.check_exportable()
        raise AssertionError  # pragma: no cover

    def export_spec(self) -> dict[str, Any]:
        self.check_exportable()
        raise AssertionError  # pragma: no cover


class MultiLabel(_MultiColumn):
    """A 0 / 1 indicator matrix ``(n_samples, n_labels)``; ``classes_`` is ``arange(n_labels)``.
    The two losses are the subclasses; ``predict`` keeps the labels with a probability of at
    least 0.5."""

    loss_name: ClassVar[str]

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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.name, "n_labels": self.n_outputs}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MultiLabel:
        return cls(_int_field(doc, "n_labels", 2))


class SparsemaxMultiLabel(MultiLabel):
    """Multi-label with the sparsemax loss and a "no label" pseudo-label (see
    :mod:`~tabsparse.estimators._multioutput`); probabilities are the sparsemax scores times
    ``mean_label_count``, the mean number of labels of a training row."""

    name = mo.MULTILABEL_SPARSEMAX
    loss_name = "sparsemax"

    def __init__(self, n_labels: int, mean_label_count: float = 1.0) -> None:
        super().__init__(n_labels)
        self.mean_label_count = mean_label_count

    @classmethod
    def _fitted(cls, encoded: np.ndarray) -> MultiLabel:
        return cls(encoded.shape[1], mo.mean_label_count(encoded))

    @property
    def n_network_outputs(self) -> int:
        return self.n_outputs + 1  # the "no label" pseudo-label

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

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "mean_label_count": self.mean_label_count}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MultiLabel:
        n = _int_field(doc, "n_labels", 2)
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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.name, "classes": [_labels_to_json(c) for c in self.classes]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> MultiTask:
        tasks = doc.get("classes")
        if not isinstance(tasks, list) or len(tasks) < 2:
            raise ValueError(f"classes of a multi-task target must list >= 2 tasks, got {tasks!r}")
        return cls([_labels_from_json(c, f"classes[{j}]") for j, c in enumerate(tasks)])


def classification_kind(y: Any, multilabel_loss: str) -> type[Target]:
    """The kind of a classifier's ``y``: one column of labels, a multi-label indicator matrix
    or a multi-task target (``ValueError`` for columns that are not class labels)."""
    if not mo.is_multi_column(y):
        return ClassLabels
    kind = mo.infer_kind(mo.label_columns(y), multilabel_loss)
    return {
        mo.MULTILABEL_SPARSEMAX: SparsemaxMultiLabel,
        mo.MULTILABEL_BCE: BCEMultiLabel,
        mo.MULTITASK: MultiTask,
    }[kind]


# ---- regression -----------------------------------------------------------------------------


class Regression(Target):
    """Numbers, 1-D (one output) or 2-D ``(n_samples, n_outputs)``: the network predicts the
    standardised target (``(y - mean) / scale`` per output, ``scale`` 1 for a constant output)
    under the mean squared error; predictions are returned on the original scale, 1-D for a
    1-D ``y``."""

    name = "regression"
    export_task = "regression"

    def __init__(self, mean: np.ndarray, scale: np.ndarray, ndim: int) -> None:
        self.mean = mean
        self.scale = scale
        self.ndim = ndim

    @staticmethod
    def _as_2d(y: Any) -> tuple[np.ndarray, int]:
        y = check_array(
            y, ensure_2d=False, dtype=np.float64, ensure_all_finite=True, input_name="y"
        )
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
        return y.reshape(len(y), -1), y.ndim

    @classmethod
    def fit(cls, y: Any) -> tuple[Regression, np.ndarray]:
        y2, ndim = cls._as_2d(y)
        scale = y2.std(axis=0)
        target = cls(y2.mean(axis=0), np.where(scale > 0, scale, 1.0), ndim)
        return target, target._standardise(y2)

    def encode(self, y: Any) -> np.ndarray:
        y2, _ = self._as_2d(y)
        if y2.shape[1] != self.n_outputs:
            raise ValueError(f"y has {y2.shape[1]} outputs, but the model has {self.n_outputs}")
        return self._standardise(y2)

    def _standardise(self, y2: np.ndarray) -> np.ndarray:
        return ((y2 - self.mean) / self.scale).astype(np.float32)

    def unscale(self, z: np.ndarray) -> np.ndarray:
        """Network outputs (standardised) to predictions on the original scale."""
        out = z.astype(np.float64) * self.scale + self.mean
        return out[:, 0] if self.ndim == 1 else out

    @property
    def n_outputs(self) -> int:
        return len(self.mean)

    @property
    def n_network_outputs(self) -> int:
        return self.n_outputs

    def loss(self) -> LossFn:
        def squared_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return ((pred - target) ** 2).mean(dim=1)

        return squared_error

    def tensor(self, encoded: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(encoded, dtype=np.float32)).to(device)

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        return {"predict": self.unscale(logits.float().cpu().numpy())}

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        return self.unscale(target.cpu().numpy())

    def score(self, y: Any, y_pred: Any, sample_weight: Any = None) -> float:
        """R2, as :meth:`sklearn.base.RegressorMixin.score`."""
        return float(r2_score(y, y_pred, sample_weight=sample_weight))

    def attributes(self) -> dict[str, Any]:
        return {
            "n_outputs_": self.n_outputs,
            "target_mean_": self.mean,
            "target_scale_": self.scale,
            "_y_ndim": self.ndim,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "ndim": self.ndim,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Regression:
        ndim = doc.get("ndim")
        mean, scale = doc.get("mean"), doc.get("scale")
        if ndim not in (1, 2) or isinstance(ndim, bool):
            raise ValueError(f"ndim={ndim!r} must be 1 or 2")
        ok = (
            isinstance(mean, list)
            and isinstance(scale, list)
            and len(mean) == len(scale) >= 1
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in mean + scale)
        )
        if not ok:
            raise ValueError("mean and scale must be lists of numbers of the same length >= 1")
        m, s = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s)) and np.all(s > 0)):
            raise ValueError("mean must be finite and scale finite and positive")
        if ndim == 1 and len(m) != 1:
            raise ValueError("ndim=1 needs one output")
        return cls(m, s, int(ndim))

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        mean = torch.as_tensor(self.mean, dtype=torch.float64, device=logits.device)
        scale = torch.as_tensor(self.scale, dtype=torch.float64, device=logits.device)
        return logits.to(torch.float64) * scale.reshape(1, -1) + mean.reshape(1, -1)

    def export_spec(self) -> dict[str, Any]:
        return {
            "n_outputs": self.n_outputs,
            "ndim": self.ndim,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
        }


# ---- reading targets back -------------------------------------------------------------------

_KINDS: dict[str, type[Target]] = {
    k.name: k for k in (ClassLabels, SparsemaxMultiLabel, BCEMultiLabel, MultiTask, Regression)
}


def target_from_json(doc: Any) -> Target:
    """The target that ``Target.to_json`` wrote; ``ValueError`` for anything else."""
    if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
        raise ValueError(f"not a target: 'kind' must be one of {list(_KINDS)}, got {doc!r}")
    return _KINDS[doc["kind"]].from_json(doc)


def target_of(estimator: Any) -> Target:
    """The target a fitted estimator learned, from its fitted attributes (:meth:`Target.
    attributes`). A classifier without ``_target_kind`` (model files from before multi-output
    support) has a single column of labels; a regressor is told by its ``target_mean_``."""
    if hasattr(estimator, "target_mean_"):
        return Regression(estimator.target_mean_, estimator.target_scale_, estimator._y_ndim)
    kind = getattr(estimator, "_target_kind", ClassLabels.name)
    if kind == ClassLabels.name:
        return ClassLabels(estimator.classes_)
    if kind == MultiTask.name:
        return MultiTask(list(estimator.classes_))
    if kind == SparsemaxMultiLabel.name:
        return SparsemaxMultiLabel(
            int(estimator.n_outputs_), getattr(estimator, "mean_label_count_", 1.0)
        )
    if kind == BCEMultiLabel.name:
        return BCEMultiLabel(int(estimator.n_outputs_))
    raise ValueError(f"_target_kind={kind!r} must be one of {list(_KINDS)}")
