"""The interface every kind of target implements, and the JSON form of label arrays."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.metrics import accuracy_score
from sklearn.utils import column_or_1d
from sklearn.utils.validation import check_array
from torch import nn

from tabsparse.io._values import is_int
from tabsparse.training import LossFn

__all__ = [
    "ServeHead",
    "Target",
    "check_labels",
    "check_n_outputs",
    "int_field",
    "json_label",
    "labels_1d",
    "labels_from_json",
    "labels_to_json",
]


class Target:
    """Base of the target kinds; the interface is described in
    :mod:`tabsparse.estimators._targets`."""

    name: ClassVar[str]
    export_task: ClassVar[str] = "classification"

    @property
    def n_network_outputs(self) -> int:
        raise NotImplementedError

    @property
    def output_groups(self) -> list[list[int]]:
        """Groups of network outputs whose common shift changes no prediction (a softmax's or a
        sparsemax's logits): the network centres each step's effect within them before
        weighting the step's mask by its size (:func:`tabsparse.nn.functional.step_effects`).
        No groups by default: every output counts as it is (regression, independent sigmoids)."""
        return []

    def explained(self, logits: torch.Tensor) -> torch.Tensor:
        """The outputs that attributions are in, ``(m, k)`` float64 (traceable torch): by
        default the logits, centred within each of :attr:`output_groups` (a common shift of a
        softmax's logits changes nothing, so it is not attributed)."""
        z = logits.to(torch.float64).clone()
        for group in self.output_groups:
            index = torch.as_tensor(group, device=z.device)
            z[:, index] -= z[:, index].mean(dim=1, keepdim=True)
        return z

    def explained_names(self) -> list[str]:
        """A name for each of :meth:`explained`'s outputs."""
        return [str(i) for i in range(self.n_network_outputs)]

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

    @classmethod
    def from_attributes(cls, estimator: Any) -> Target:
        """The target of a fitted estimator of this kind, from its :meth:`attributes`."""
        raise NotImplementedError

    @classmethod
    def check_attributes(cls, estimator: Any) -> None:
        """``ValueError`` (or ``TypeError``) when the estimator's fitted target attributes
        (read from a model file) are not those of a target of this kind."""
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

    def serving_head(self) -> nn.Module:
        """The traceable module export runs after the network: :meth:`serve`."""
        return ServeHead(self.serve)

    def export_spec(self) -> dict[str, Any]:
        raise NotImplementedError

    def export_sections(self) -> dict[str, Any]:
        """The serving spec's target sections: ``outputs`` (the description of the first
        output, the served one), ``classes``, ``class_types`` and ``target`` (None where the
        kind has none)."""
        raise NotImplementedError


class ServeHead(nn.Module):
    """A target's :meth:`Target.serve` as a module (it holds no tensors)."""

    def __init__(self, serve: Any) -> None:
        super().__init__()
        self.serve = serve

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return self.serve(logits)  # type: ignore[no-any-return]


# ---- JSON of label arrays -------------------------------------------------------------------


def labels_to_json(labels: np.ndarray) -> dict[str, Any]:
    values = labels.tolist()
    for v in values:
        if not isinstance(v, (str, int, float, bool)):
            raise TypeError(f"class label {v!r} of type {type(v).__name__} is not JSON data")
    return {"dtype": labels.dtype.str, "values": values}


def labels_from_json(doc: Any, what: str) -> np.ndarray:
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


def json_label(value: Any) -> tuple[Any, str]:
    """A class label as a JSON scalar and its type name (non-finite floats and other objects
    become their string)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return value, "bool"
    if isinstance(value, int):
        return value, "int"
    if isinstance(value, float):
        if math.isfinite(value):
            return value, "float"
        return str(value), "str"
    if isinstance(value, str):
        return value, "str"
    return str(value), "str"


def check_labels(classes: Any, what: str) -> None:
    """``ValueError`` unless ``classes`` is a 1-D array of at least 2 distinct labels."""
    if not isinstance(classes, np.ndarray) or classes.ndim != 1 or len(classes) < 2:
        raise ValueError(f"{what} must be a 1-D array of at least 2 labels")
    if classes.dtype.kind not in "biufUO":
        raise ValueError(f"{what} has unsupported dtype {classes.dtype}")
    if len(np.unique(classes)) != len(classes):
        raise ValueError(f"{what} contains duplicates")


def check_n_outputs(estimator: Any, kind: str, single: bool, mean_label_count: bool) -> int:
    """A classifier's ``n_outputs_`` (1 when absent, as in files from before multi-output
    support): an integer, 1 exactly for a single column; and ``mean_label_count_`` present
    exactly when ``mean_label_count``."""
    n = getattr(estimator, "n_outputs_", 1)
    if not is_int(n) or n < 1 or (n == 1) != single:
        raise ValueError(f"n_outputs_={n!r} does not fit a {kind} target")
    if not mean_label_count and hasattr(estimator, "mean_label_count_"):
        raise ValueError("mean_label_count_ belongs to sparsemax multi-label models only")
    return int(n)


def int_field(doc: dict[str, Any], name: str, low: int) -> int:
    v = doc.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name}={v!r} must be an integer >= {low}")
    return v


def labels_1d(y: Any) -> np.ndarray:
    """``y`` as one column of labels (finite; a column vector is raveled with a warning)."""
    y = check_array(y, ensure_2d=False, dtype=None, ensure_all_finite=True, input_name="y")
    return column_or_1d(y, warn=True)
