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

Its modules:

===============  =================================================================
:mod:`.serving`  the module that export traces: network with input/output handling
:mod:`.spec`     the JSON specification written beside every export
===============  =================================================================
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from tabsparse.data import CODE_UNSEEN
from tabsparse.export.serving import (
    _NumericAndCodes,
    _NumericOnly,
    _Serving,
    _serving_module,
    serving_module,
)
from tabsparse.export.spec import (
    _FORMATS,
    SPEC_FORMAT,
    SPEC_VERSION,
    ExportFormat,
    export_spec,
    spec_path,
)
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

_EXAMPLE_ROWS = 3  # rows of the example batch used for tracing (>= 2: 0 and 1 are specialised)


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
