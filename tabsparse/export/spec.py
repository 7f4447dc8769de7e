"""The JSON specification written beside every export: how to feed the model and read it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from tabsparse.data import CODE_MISSING, CODE_OFFSET, CODE_UNSEEN
from tabsparse.export.serving import _check_estimator

__all__ = ["SPEC_FORMAT", "SPEC_VERSION", "ExportFormat", "export_spec", "spec_path"]

SPEC_FORMAT = "tabsparse.export"
"""Value of the ``"format"`` key of every export spec."""
SPEC_VERSION = 1
"""Version of the spec layout; bumped on incompatible changes."""

ExportFormat = Literal["onnx", "torch"]
_FORMATS = ("onnx", "torch")

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
    target = _check_estimator(estimator)
    task = target.export_task
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {list(_FORMATS)}, got {format!r}")
    from tabsparse import __version__

    enc = estimator.encoder_
    state = enc.to_dict()
    if state.get("datetime_columns"):
        raise ValueError(
            "export does not support expanded datetime columns "
            f"({[c['name'] for c in state['datetime_columns']]}): a consumer would have to "
            "compute their parts; give the model the parts as numeric columns instead"
        )
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
    sections = target.export_sections()
    outputs: list[dict[str, Any]] = [sections["outputs"]]
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
        "classes": sections["classes"],
        "class_types": sections["class_types"],
        "target": sections["target"],
        "encoder": state,
    }
