"""Targets of :class:`TabNetClassifier` beyond one column of labels.

Two kinds of 2-D ``y`` are recognised (scikit-learn's conventions,
:func:`sklearn.utils.multiclass.type_of_target`):

* **multi-label**: an indicator matrix ``(n_samples, n_labels)`` of 0 / 1 (``bool`` allowed).
  ``classes_`` is ``np.arange(n_labels)`` and ``predict_proba`` one array
  ``(n_samples, n_labels)`` of per-label scores, as for
  :class:`sklearn.neural_network.MLPClassifier`.
  Two losses:

  - ``"sparsemax"``: the sparsemax loss of Martins & Astudillo (2016, section 3) with target
    ``q = y / |y|_1``, and a sparsemax output: scores are a sparse distribution over the labels,
    with exact zeros. A row with no label at all cannot be written as such a ``q``; the network
    gets one extra output, a "no label" pseudo-label, and such a row's target is that
    pseudo-label alone (it counts as one label below). ``predict_proba`` drops the
    pseudo-label, so a row's scores sum to at most 1; the rest is the mass on "no label".

    Scores and decision rule: the expected sparsemax loss is minimised by
    ``sparsemax(z) = E[q]`` (its gradient is ``sparsemax(z) - q``), so the sparsemax output
    estimates ``s_j = E[y_j / |y|]``. If every row had ``m`` labels, ``P(y_j = 1) = m s_j``.
    ``predict_proba`` returns that estimate, ``min(1, m s_j)``, with ``m`` the mean number of
    labels of a training row (``mean_label_count_``); it keeps the exact zeros of sparsemax.
    ``predict`` keeps the labels with ``predict_proba >= 0.5``, the rule that minimises the
    expected Hamming loss (the same rule as for "bce"), i.e. ``s_j >= 1 / (2 m)``, so only
    labels in the support (``s_j > 0``) can be predicted. The bare support (the paper's
    "predict the support") was measured too and is a poor rule on noisy data: under
    uncertainty ``E[q]`` spreads over every label that might be present (12.5 of 14 labels
    predicted per row on yeast, micro-F1 0.49 against 0.59 with this rule).
  - ``"bce"``: one independent sigmoid per label with the binary cross-entropy (mean over
    labels); a label is predicted when its probability is at least 0.5.

* **multi-task**: any other 2-D array (or DataFrame) of class labels, one column per task, each
  with its own classes (``type_of_target == "multiclass-multioutput"``, or binary columns that
  are not 0 / 1). One head per task shares the encoder: a single output layer of
  ``sum(n_classes_j)`` units, sliced per task; the loss is the mean over tasks of each task's
  cross-entropy. ``classes_`` is a list of arrays and ``predict_proba`` a list of arrays,
  one per task, as for :class:`sklearn.multioutput.MultiOutputClassifier`.

Nothing here imports the estimator: these are the plain functions that parse and encode 2-D
targets; the target objects of :mod:`tabsparse.estimators._targets` use them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array

SINGLE = "single"
MULTILABEL_SPARSEMAX = "multilabel-sparsemax"
MULTILABEL_BCE = "multilabel-bce"
MULTITASK = "multitask"
KINDS = (SINGLE, MULTILABEL_SPARSEMAX, MULTILABEL_BCE, MULTITASK)
MULTILABEL = (MULTILABEL_SPARSEMAX, MULTILABEL_BCE)

_DESCRIBE = {
    SINGLE: "a single column of class labels",
    MULTILABEL_SPARSEMAX: "a multi-label indicator matrix",
    MULTILABEL_BCE: "a multi-label indicator matrix",
    MULTITASK: "a multi-task target (one column of labels per task)",
}


def describe(kind: str) -> str:
    """Words for a target kind, for error messages."""
    return _DESCRIBE[kind]


def n_columns(y: Any) -> int | None:
    """Number of target columns of ``y`` (1 for a 1-D ``y``), or None if it has no clear shape."""
    shape = getattr(y, "shape", None)
    if shape is None:
        try:
            shape = np.asarray(y).shape  # lists, and objects with __array__
        except (ValueError, TypeError):
            return None
    if len(shape) == 1:
        return 1
    if len(shape) == 2:
        return int(shape[1])
    return None


def is_multi_column(y: Any) -> bool:
    """True for a 2-D ``y`` with at least two columns (a multi-label or multi-task target)."""
    cols = n_columns(y)
    return cols is not None and cols >= 2


def label_columns(y: Any) -> list[np.ndarray]:
    """The columns of a 2-D ``y`` as 1-D arrays; DataFrame columns keep their own dtypes."""
    if sp.issparse(y):
        y = y.toarray()
    if isinstance(y, pd.DataFrame):
        check_array(y, ensure_2d=True, dtype=None, ensure_all_finite=True, input_name="y")
        return [
            check_array(
                y.iloc[:, [j]], ensure_2d=True, dtype=None, ensure_all_finite=True, input_name="y"
            )[:, 0]
            for j in range(y.shape[1])
        ]
    arr = check_array(y, ensure_2d=True, dtype=None, ensure_all_finite=True, input_name="y")
    return [arr[:, j] for j in range(arr.shape[1])]


def _is_indicator(columns: list[np.ndarray]) -> bool:
    for col in columns:
        if col.dtype.kind == "b":
            continue
        if col.dtype.kind not in "iuf":
            return False
        if not np.all((col == 0) | (col == 1)):
            return False
    return True


def infer_kind(columns: list[np.ndarray], multilabel_loss: str) -> str:
    """Multi-label (0 / 1 indicator) or multi-task (labels per column); ValueError otherwise."""
    for j, col in enumerate(columns):
        kind = type_of_target(col, input_name="y")
        if kind not in ("binary", "multiclass"):
            bad = col[:5].tolist()
            raise ValueError(
                f"column {j} of y is not a column of class labels (type_of_target gives "
                f"{kind!r}; first values {bad}); TabNetClassifier takes a 0/1 indicator matrix "
                "(multi-label) or columns of class labels (multi-task). For continuous targets "
                "use TabNetRegressor."
            )
    if _is_indicator(columns):
        return MULTILABEL_SPARSEMAX if multilabel_loss == "sparsemax" else MULTILABEL_BCE
    return MULTITASK


def indicator(columns: list[np.ndarray], n_labels: int, *, fitting: bool) -> np.ndarray:
    """The 0 / 1 matrix ``(n_samples, n_labels)`` as float32, checked."""
    if len(columns) != n_labels:
        raise ValueError(
            f"y has {len(columns)} columns, but the classifier was fitted on a multi-label "
            f"target with {n_labels} labels"
        )
    if not _is_indicator(columns):
        for j, col in enumerate(columns):
            if not _is_indicator([col]):
                values = np.unique(col.astype(object).astype(str))[:5].tolist()
                raise ValueError(
                    f"column {j} of the multi-label y holds values other than 0 and 1: {values}"
                )
    y = np.column_stack([col.astype(np.float32) for col in columns])
    if fitting:
        for j, col in enumerate(y.T):
            if col.min() == col.max():
                raise ValueError(
                    f"column {j} of the multi-label y is constant (always {int(col[0])}): "
                    "there is nothing to learn for that label; drop the column"
                )
    return y


def encode_tasks(
    columns: list[np.ndarray], classes: list[np.ndarray] | None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Per-task classes (found when ``classes`` is None) and codes ``(n_samples, n_tasks)``."""
    if classes is None:
        classes = []
        for j, col in enumerate(columns):
            found = np.unique(col)
            if len(found) < 2:
                raise ValueError(
                    f"column {j} of the multi-task y has only one class ({found.tolist()[0]!r}); "
                    "every task needs samples of at least 2 classes"
                )
            classes.append(found)
    elif len(columns) != len(classes):
        raise ValueError(
            f"y has {len(columns)} columns, but the classifier was fitted on a multi-task target "
            f"with {len(classes)} tasks"
        )
    codes = np.empty((len(columns[0]), len(columns)), dtype=np.int64)
    for j, (col, known) in enumerate(zip(columns, classes, strict=True)):
        try:
            pos = np.clip(np.searchsorted(known, col), 0, len(known) - 1)
            unseen = known[pos] != col
        except TypeError as exc:  # labels of a type that cannot be compared with the known ones
            raise ValueError(
                f"column {j} of y holds labels of another type than at fit: known classes "
                f"{known.tolist()[:20]}"
            ) from exc
        if np.any(unseen):
            bad = np.unique(col[unseen])[:5].tolist()
            raise ValueError(
                f"column {j} of y contains labels not seen in training: {bad}; known classes: "
                f"{known.tolist()[:20]}"
            )
        codes[:, j] = pos
    return classes, codes


def task_offsets(classes: list[np.ndarray]) -> list[int]:
    """Where each task's outputs start in the shared output layer (plus the total at the end)."""
    return [0, *np.cumsum([len(c) for c in classes]).tolist()]


def with_empty_label(target: torch.Tensor) -> torch.Tensor:
    """Append the "no label" column: 1 for rows without any label, else 0."""
    empty = (target.sum(dim=1, keepdim=True) <= 0).to(target.dtype)
    return torch.cat([target, empty], dim=1)


def mean_label_count(y: np.ndarray) -> float:
    """``m`` of the module notes: mean labels per row, an empty row counting its pseudo-label."""
    return float(np.maximum(y.sum(axis=1), 1.0).mean())


def stack_labels(classes: list[np.ndarray], codes: np.ndarray) -> np.ndarray:
    """Labels ``(n_samples, n_tasks)`` from codes: the common dtype of the tasks' classes when
    they are all of one kind (all strings, all integers, ...), else ``object``."""
    kinds = {c.dtype.kind for c in classes}
    dtype = np.result_type(*[c.dtype for c in classes]) if len(kinds) == 1 else np.dtype(object)
    out = np.empty(codes.shape, dtype=dtype)
    for j, known in enumerate(classes):
        out[:, j] = known[codes[:, j]]
    return out


#: Up to this many classes :func:`softmax` computes the softmax from whole-tensor operations.
_FEW_CLASSES = 8


def softmax(z: torch.Tensor) -> torch.Tensor:
    """``torch.softmax(z, dim=1)`` for a 2-d ``z``; for a few classes on the CPU from whole-
    tensor operations (row maximum, ``exp``, row sum, division), which vectorise: PyTorch's
    softmax kernel runs a row shorter than its SIMD width element by element. 40,000 rows x 7
    classes: 1.0 against 5.3 ms; x 2 classes on 1,024 rows 19 against 51 us (AVX-512, one
    thread). The same values to rounding (``tests/test_multioutput.py``)."""
    if z.device.type != "cpu" or z.dim() != 2 or z.shape[1] > _FEW_CLASSES:
        return torch.softmax(z, dim=1)
    e = torch.sub(z, z.amax(dim=1, keepdim=True)).exp_()
    return e.div_(e.sum(dim=1, keepdim=True))
