"""Export a fitted estimator for serving: ONNX or ``torch.export``, plus a JSON spec.

:func:`export_model` writes the network *with its input handling* (standardisation, the learned
missing value of numeric columns, the embeddings of categorical codes) as one graph with a
dynamic batch dimension, and beside it a JSON specification (:func:`spec_path`) that tells any
consumer, Python or not, how to turn raw rows into the graph's inputs:

* ``numeric``: float32 ``(batch, n_numeric)``, the numeric columns in the order of the spec,
  NaN for a missing value (the graph replaces it with the learned value);
* ``codes``: int64 ``(batch, n_categorical)``, one integer code per categorical column:
  ``0`` missing, ``1`` not seen at fit, ``k + 2`` for entry ``k`` of the column's vocabulary.
  Codes outside ``[0, cardinality)`` are treated as ``1`` (unseen) inside the graph.

A model without numeric columns has no ``numeric`` input and one without categorical columns no
``codes`` input. The outputs are ``probabilities`` float32 ``(batch, n_classes)`` (classifier,
in the order of ``classes_``) or ``predictions`` float64 ``(batch, n_outputs)`` on the original
target scale (regressor), and with ``masks=True`` also ``masks`` float32
``(n_steps, batch, n_features)`` and ``importances`` float32 ``(batch, n_features)`` over the
original columns, equal to :meth:`explain`'s ``masks`` and ``importances``.

Sparsemax (and entmax-1.5) inside the graph
-------------------------------------------
The library's :func:`tabsparse.sparsemax.sparsemax` chooses its algorithm from the input size and
stops its threshold search as soon as every row converged: both are host-side decisions that
depend on the batch size and on the data, so ``torch.export`` cannot trace it with a dynamic
batch dimension (it fails on a guard on the batch size). The exported graph runs the network's
own code with the exact sort-based formulation instead (the attentive transformers' ``mask_fn``
set to :func:`tabsparse.nn.functional.sorted_masks`: :func:`sparsemax_sorted`,
:func:`entmax15_sorted`): sort each row,
find the support size from the cumulative sums, compute the threshold in closed form. It has no
branches at all and gives the same masks as the library up to float rounding. Everything else in
the network already is branch-free in eval mode (ghost batch norm is a plain affine batch norm).

The ONNX route needs the optional packages ``onnx`` and ``onnxscript`` (``pip install
'tabsparse[export]'``; running the model needs ``onnxruntime``). The ``torch`` route needs only
torch.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from tabsparse.data import CODE_MISSING, CODE_OFFSET, CODE_UNSEEN
from tabsparse.nn.functional import sorted_masks
from tabsparse.nn.network import TabNet
from tabsparse.nn.transformers import AttentiveTransformer
from tabsparse.sparsemax import entmax15_sorted, sparsemax_sorted

__all__ = [
    "SPEC_FORMAT",
    "SPEC_VERSION",
    "entmax15_sorted",
    "export_model",
    "export_spec",
    "serving_module",
    "sparsemax_sorted",
    "spec_path",
]

SPEC_FORMAT = "tabsparse.export"
"""Value of the ``"format"`` key of every export spec."""
SPEC_VERSION = 1
"""Version of the spec layout; bumped on incompatible changes."""

ExportFormat = Literal["onnx", "torch"]
_FORMATS = ("onnx", "torch")
_EXAMPLE_ROWS = 3  # rows of the example batch used for tracing (>= 2: 0 and 1 are specialised)

_MATCHING_RULES = [
    "Missing (null, None, NaN) -> code 0.",
    "A value equal to vocabulary entry k -> code k + 2; anything else -> code 1 (unseen).",
    "Integral floats are the same category as ints (1.0 == 1); infinite values are errors.",
    "bool: if the vocabulary holds bools, match bool entries only; otherwise, if it holds "
    "numbers, match as the number 0 or 1; otherwise unseen.",
    "number: if the vocabulary holds numbers, match number entries by value (a non-integral "
    "number never equals an int entry); otherwise, if it holds bools, 0 -> false and "
    "1 -> true; otherwise, if it holds strings, match the number's canonical text: an "
    "integral value as an integer without decimal point ('7'), else Python's repr(float(x)) "
    "('2.5'); otherwise unseen.",
    "string: if the vocabulary holds strings, match string entries exactly (case and "
    "whitespace count); otherwise, if it holds numbers and no bools, parse the string as a "
    "decimal number ('7', '7.0', '1e3') and match it as a number (unparsable or non-finite "
    "-> unseen); otherwise unseen.",
]
_NUMERIC_RULES = [
    "A number -> float32 (round to nearest); a bool -> 0.0 or 1.0.",
    "Missing (null, None, NaN) -> NaN; the model replaces it with a learned value.",
    "A string that parses as a decimal number -> that number.",
    "Infinite values and finite values beyond the float32 range (|x| > 3.4e38) are rejected "
    "by tabsparse (ValueError); reject them too (or send NaN if they mean missing).",
]


# --------------------------------------------------------------------------------------------
# The serving module
# --------------------------------------------------------------------------------------------


class _Serving(nn.Module):
    """Network plus output handling; the subclasses fix the input signature.

    Parameters
    ----------
    network : TabNet
        A private, eval-mode float32 CPU copy with branch-free attention.
    task : {"classification", "regression"}
    target_mean, target_scale : array-like or None
        The regressor's target standardisation (float64).
    masks : bool
        Also return the column masks and the per-row importances.
    """

    cardinality: torch.Tensor
    target_mean: torch.Tensor
    target_scale: torch.Tensor

    def __init__(
        self,
        network: TabNet,
        *,
        task: str,
        target_mean: Any,
        target_scale: Any,
        masks: bool,
    ) -> None:
        super().__init__()
        self.network = network
        self.task = task
        self.masks = masks
        self.n_numeric = int(network.inputs.n_numeric)
        self.n_categorical = int(network.inputs.n_categorical)
        cards = torch.as_tensor(network.inputs.cardinalities or [CODE_OFFSET], dtype=torch.int64)
        self.register_buffer("cardinality", cards.reshape(1, -1))
        mean = torch.as_tensor(np.asarray(target_mean if target_mean is not None else [0.0]))
        scale = torch.as_tensor(np.asarray(target_scale if target_scale is not None else [1.0]))
        self.register_buffer("target_mean", mean.to(torch.float64).reshape(1, -1))
        self.register_buffer("target_scale", scale.to(torch.float64).reshape(1, -1))

    def _run(
        self, numeric: torch.Tensor, codes: torch.Tensor
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.n_categorical:
            valid = (codes >= 0) & (codes < self.cardinality)
            codes = torch.where(valid, codes, torch.full_like(codes, CODE_UNSEEN))
        out = self.network(numeric, codes)
        if self.task == "classification":
            first = torch.softmax(out.logits.float(), dim=1)
        else:
            first = out.logits.to(torch.float64) * self.target_scale + self.target_mean
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


def _target_kind(estimator: Any) -> str:
    """The kind of target a classifier was fitted on (``"single"`` for one column of
    classes); read from the estimator, whose layer owns the notion."""
    kind = getattr(estimator, "_target_kind", "single")
    return str(getattr(kind, "name", kind))


def _check_estimator(estimator: Any) -> str:
    """Return ``"classification"`` or ``"regression"``, or raise for anything else.

    Duck typing (serving does not import the estimators): a scikit-learn classifier or
    regressor whose fitted ``network_`` is a :class:`~tabsparse.nn.TabNet` and which has the
    fitted table encoder ``encoder_``."""
    from sklearn.utils.validation import check_is_fitted

    task = _TASKS.get(_estimator_type(estimator) or "")
    wanted = "export needs a fitted TabNetClassifier or TabNetRegressor, got "
    if task is None:
        raise TypeError(wanted + type(estimator).__name__)
    check_is_fitted(estimator)
    if not isinstance(getattr(estimator, "network_", None), TabNet) or not hasattr(
        estimator, "encoder_"
    ):
        raise TypeError(wanted + type(estimator).__name__)
    kind = _target_kind(estimator)
    if task == "classification" and kind != "single":
        what = "multi-task" if kind == "multitask" else "multi-label"
        raise NotImplementedError(
            f"export supports single-output models only; this classifier was fitted on a {what} "
            "target (its outputs, sliced per task or with a sparsemax over labels, have no "
            "serving spec yet). Use tabsparse.save / tabsparse.load, or predict in Python."
        )
    return task


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
    task = _check_estimator(estimator)
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
    module = cls(
        network,
        task=task,
        target_mean=getattr(estimator, "target_mean_", None),
        target_scale=getattr(estimator, "target_scale_", None),
        masks=masks,
    )
    module.requires_grad_(False)
    return module.eval()


# --------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------


def spec_path(path: str | os.PathLike[str]) -> Path:
    """Where :func:`export_model` writes the spec of the model at ``path``: ``<path>.json``.

    The full model file name is kept (``model.onnx`` -> ``model.onnx.json``), so an ONNX and a
    torch export of the same model can sit side by side.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.

    Returns
    -------
    pathlib.Path
    """
    p = Path(path)
    return p.with_name(p.name + ".json")


def _json_label(value: Any) -> tuple[Any, str]:
    """A class label as a JSON scalar and its type name."""
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


def export_spec(
    estimator: Any, *, format: ExportFormat = "onnx", masks: bool = False
) -> dict[str, Any]:
    """The JSON-able description of an export: how to feed the model and read its outputs.

    Parameters
    ----------
    estimator : TabNetClassifier or TabNetRegressor
        A fitted estimator.
    format : {"onnx", "torch"}, default="onnx"
        The model format the spec describes.
    masks : bool, default=False
        Whether the model also returns masks and importances.

    Returns
    -------
    dict
        See ``docs/deployment.md`` for every key. ``json.dumps`` accepts it.
    """
    task = _check_estimator(estimator)
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {list(_FORMATS)}, got {format!r}")
    from tabsparse import __version__

    enc = estimator.encoder_
    state = enc.to_dict()
    names = list(state["feature_names"])
    num_cols = list(state["numeric_columns"])
    cat_cols = list(state["categorical_columns"])
    net = estimator.network_
    n_steps = int(net.encoder.n_steps)

    numeric_spec = [
        {"name": names[j], "position": j, "mean": state["numeric_mean"][i]}
        for i, j in enumerate(num_cols)
    ]
    for entry, std in zip(numeric_spec, state["numeric_std"], strict=True):
        entry["std"] = std
    categorical_spec = []
    for i, j in enumerate(cat_cols):
        types = list(state["category_types"][i])
        categorical_spec.append(
            {
                "name": names[j],
                "position": j,
                "vocabulary": list(state["categories"][i]),
                "types": types,
                "cardinality": int(state["cardinalities"][i]),
                "holds": sorted({"number" if t in ("int", "float") else t for t in types}),
            }
        )

    inputs = []
    if num_cols:
        inputs.append(
            {
                "name": "numeric",
                "dtype": "float32",
                "shape": ["batch", len(num_cols)],
                "columns": [names[j] for j in num_cols],
            }
        )
    if cat_cols:
        inputs.append(
            {
                "name": "codes",
                "dtype": "int64",
                "shape": ["batch", len(cat_cols)],
                "columns": [names[j] for j in cat_cols],
            }
        )

    n_features = len(names)
    outputs: list[dict[str, Any]] = []
    target: dict[str, Any] | None = None
    classes: list[Any] | None = None
    class_types: list[str] | None = None
    if task == "classification":
        labels = [_json_label(v) for v in estimator.classes_.tolist()]
        classes = [v for v, _ in labels]
        class_types = [t for _, t in labels]
        outputs.append(
            {
                "name": "probabilities",
                "dtype": "float32",
                "shape": ["batch", len(classes)],
                "description": "class probabilities in the order of 'classes'; rows sum to 1",
            }
        )
    else:
        n_out = int(estimator.n_outputs_)
        target = {
            "n_outputs": n_out,
            "ndim": int(estimator._y_ndim),
            "mean": [float(v) for v in estimator.target_mean_],
            "scale": [float(v) for v in estimator.target_scale_],
        }
        outputs.append(
            {
                "name": "predictions",
                "dtype": "float64",
                "shape": ["batch", n_out],
                "description": "predictions on the original target scale (column 0 is the "
                "prediction when the model was fitted on a 1-D target)",
            }
        )
    if masks:
        outputs.append(
            {
                "name": "masks",
                "dtype": "float32",
                "shape": [n_steps, "batch", n_features],
                "description": "attention mask of each decision step over the original "
                "columns (order of 'feature_names'); each row of each step sums to 1",
            }
        )
        outputs.append(
            {
                "name": "importances",
                "dtype": "float32",
                "shape": ["batch", n_features],
                "description": "per-row feature importances (aggregate mask) over the "
                "original columns; rows sum to 1",
            }
        )

    return {
        "format": SPEC_FORMAT,
        "format_version": SPEC_VERSION,
        "tabsparse_version": __version__,
        "model_format": format,
        "estimator": type(estimator).__name__,
        "task": task,
        "n_features": n_features,
        "feature_names": names,
        "columns_matched_by": "name" if state["has_feature_names"] else "position",
        "kinds": list(state["kinds"]),
        "n_steps": n_steps,
        "batch_dimension": "dynamic (any number of rows, at least 1)",
        "inputs": inputs,
        "outputs": outputs,
        "numeric": {"columns": numeric_spec, "rules": list(_NUMERIC_RULES)},
        "categorical": {
            "columns": categorical_spec,
            "codes": {"missing": CODE_MISSING, "unseen": CODE_UNSEEN, "offset": CODE_OFFSET},
            "out_of_range_codes": "treated as unseen (1) inside the model",
            "rules": list(_MATCHING_RULES),
        },
        "classes": classes,
        "class_types": class_types,
        "target": target,
        "encoder": state,
    }


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def _require_onnx() -> None:
    missing = []
    for name in ("onnx", "onnxscript"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ImportError(
            f"format='onnx' needs the optional package(s) {' and '.join(missing)}, which are "
            "not installed; install the extra with: pip install 'tabsparse[export]' "
            "(onnx, onnxscript, and onnxruntime to run the model), or use format='torch'"
        )


def _example_inputs(module: _Serving) -> tuple[torch.Tensor, ...]:
    """A small batch of valid inputs in the order of ``module.forward``."""
    numeric = torch.zeros((_EXAMPLE_ROWS, module.n_numeric), dtype=torch.float32)
    numeric[0] = float("nan")
    codes = torch.zeros((_EXAMPLE_ROWS, module.n_categorical), dtype=torch.int64)
    codes[1] = CODE_UNSEEN
    if isinstance(module, _NumericAndCodes):
        return numeric, codes
    if isinstance(module, _NumericOnly):
        return (numeric,)
    return (codes,)


def _input_names(module: _Serving) -> list[str]:
    if isinstance(module, _NumericAndCodes):
        return ["numeric", "codes"]
    if isinstance(module, _NumericOnly):
        return ["numeric"]
    return ["codes"]


def _dynamic_shapes(module: _Serving) -> dict[str, dict[int, Any]]:
    batch = torch.export.Dim("batch", min=1)
    return {name: {0: batch} for name in _input_names(module)}


def _trace(module: _Serving) -> torch.export.ExportedProgram:
    """``torch.export`` the module with a dynamic batch dimension shared by all inputs."""
    with torch.no_grad():
        return torch.export.export(
            module, _example_inputs(module), dynamic_shapes=_dynamic_shapes(module)
        )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporters' progress messages, warnings and log records (library code)."""
    sink = io.StringIO()
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "onnxscript")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with (
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _write_onnx(module: _Serving, path: Path, spec: dict[str, Any]) -> None:
    """Export with the dynamo exporter (it runs ``torch.export`` itself) to one file."""
    with _quiet(), torch.no_grad():
        onnx_program = torch.onnx.export(
            module,
            _example_inputs(module),
            dynamo=True,
            dynamic_shapes=_dynamic_shapes(module),
            input_names=_input_names(module),
            output_names=[out["name"] for out in spec["outputs"]],
            external_data=False,
            verbose=False,
        )
        if onnx_program is None:  # pragma: no cover - only the TorchScript exporter returns None
            raise RuntimeError("torch.onnx.export returned no program")
        onnx_program.save(str(path), external_data=False)
    opsets = {
        op.domain or "ai.onnx": int(op.version) for op in onnx_program.model_proto.opset_import
    }
    spec["onnx_opset"] = opsets.get("ai.onnx")


def export_model(
    estimator: Any,
    path: str | os.PathLike[str],
    format: ExportFormat = "onnx",
    *,
    masks: bool = False,
) -> Path:
    """Export a fitted estimator for serving, and write its JSON spec beside it.

    Parameters
    ----------
    estimator : TabNetClassifier or TabNetRegressor
        A fitted estimator (on any device; the export is made from a CPU copy).
    path : str or os.PathLike
        The model file to write (``.onnx`` or ``.pt2`` by convention); its folder must exist.
        The spec goes to :func:`spec_path` ``(path)``, i.e. ``<path>.json``. Existing files are
        overwritten.
    format : {"onnx", "torch"}, default="onnx"
        ``"onnx"``: an ONNX model from the dynamo exporter (``torch.onnx.export(...,
        dynamo=True)``), one self-contained file, to run with onnxruntime; needs the
        ``export`` extra (onnx, onnxscript). ``"torch"``: a ``torch.export`` program saved with
        :func:`torch.export.save`; load it with ``torch.export.load(path).module()``.
    masks : bool, default=False
        Also output the per-step masks ``(n_steps, batch, n_features)`` and the per-row
        importances ``(batch, n_features)`` over the original columns.

    Returns
    -------
    pathlib.Path
        The path of the model file.

    Raises
    ------
    ValueError
        For an unknown ``format``.
    ImportError
        For ``format="onnx"`` without onnx / onnxscript installed.
    TypeError, sklearn.exceptions.NotFittedError
        For an estimator that is not a fitted TabNetClassifier / TabNetRegressor.

    Notes
    -----
    Inputs: ``numeric`` float32 ``(batch, n_numeric)`` with NaN for missing values, and
    ``codes`` int64 ``(batch, n_categorical)`` (0 missing, 1 unseen, ``k + 2`` vocabulary
    entry ``k``); a model without numeric (categorical) columns has no ``numeric``
    (``codes``) input. Outputs: ``probabilities`` float32 ``(batch, n_classes)`` or
    ``predictions`` float64 ``(batch, n_outputs)``, then with ``masks=True`` ``masks`` and
    ``importances``. The batch dimension is dynamic.

    Examples
    --------
    >>> export_model(clf, "model.onnx")  # doctest: +SKIP
    PosixPath('model.onnx')
    """
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {list(_FORMATS)}, got {format!r}")
    if format == "onnx":
        _require_onnx()
    path = Path(path)
    spec = export_spec(estimator, format=format, masks=masks)
    module = _serving_module(estimator, masks=masks)
    if format == "torch":
        with _quiet():
            torch.export.save(_trace(module), str(path))
    else:
        _write_onnx(module, path, spec)
    spec["torch_version"] = torch.__version__
    spec["model_file"] = path.name
    text = json.dumps(spec, indent=2, ensure_ascii=False, allow_nan=False)
    spec_path(path).write_text(text + "\n", encoding="utf-8")
    return path
