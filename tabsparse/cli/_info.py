"""``tabsparse info``: describe a saved model: estimator, classes, columns, training, parameters."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, TextIO

from tabsparse.cli._errors import EXIT_OK, _short_list
from tabsparse.cli._models import _load_model


def _jsonable(value: Any) -> Any:
    """JSON-friendly form of a parameter or attribute value."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value)


def _model_summary(model: Any) -> dict[str, Any]:
    import numpy as np

    from tabsparse.data import describe_columns

    summary: dict[str, Any] = {"estimator": type(model).__name__}
    if hasattr(model, "classes_"):
        classes = model.classes_
        groups = classes if isinstance(classes, list) else [classes]  # multi-task: one per task
        plain = [[c.item() if isinstance(c, np.generic) else c for c in g] for g in groups]
        summary["classes"] = plain if isinstance(classes, list) else plain[0]
    elif hasattr(model, "n_outputs_"):
        summary["n_outputs"] = int(model.n_outputs_)
    summary["columns"] = [
        {"name": name, "kind": kind, "n_categories": int(n_cat)}
        for name, kind, n_cat in describe_columns(model.encoder_)
    ]
    importances = getattr(model, "feature_importances_", None)
    if importances is not None:
        names = [c["name"] for c in summary["columns"]]
        order = np.argsort(-np.asarray(importances), kind="stable")
        summary["feature_importances"] = {names[j]: float(importances[j]) for j in order}
        std = getattr(model, "feature_importances_std_", None)
        if std is not None:  # models saved before the spread existed have none
            summary["feature_importances_std"] = {names[j]: float(std[j]) for j in order}
    history = list(getattr(model, "history_", []))
    training: dict[str, Any] = {
        "epochs": len(history),
        "best_epoch": getattr(model, "best_iteration_", None),
    }
    if history:
        last = history[-1]
        training["final_train_loss"] = float(last["train_loss"])
        if "val_loss" in last:
            training["final_val_loss"] = float(last["val_loss"])
        scores = [float(rec["val_score"]) for rec in history if "val_score" in rec]
        if scores:
            training["best_val_score"] = max(scores)
        training["seconds"] = float(sum(float(rec.get("seconds", 0.0)) for rec in history))
    summary["training"] = training
    summary["parameters"] = {
        name: value
        if value is None or isinstance(value, (bool, int, float, str, list, dict))
        else _jsonable(value)
        for name, value in sorted(model.get_params(deep=False).items())
    }
    return summary


def _importance_text(importance: float | None, std: float | None) -> str:
    """``importance 0.123 +/- 0.004`` (the standard error), then ``(~0)`` when the rule of
    :func:`tabsparse.importance.negligible` calls it indistinguishable from zero."""
    if importance is None:
        return ""
    if std is None:
        return f"importance {importance:.3f}"
    import numpy as np

    from tabsparse.importance import negligible

    flat = "  (~0)" if negligible(np.array([importance]), np.array([std]))[0] else ""
    return f"importance {importance:.3f} +/- {std:.3f}{flat}"


def _print_summary(summary: dict[str, Any], out: TextIO) -> None:
    def line(text: str = "") -> None:
        print(text, file=out)

    line(f"estimator   {summary['estimator']}")
    if "classes" in summary:
        classes = summary["classes"]
        line(f"classes     {len(classes)}: {_short_list([str(c) for c in classes], 20)}")
    if "n_outputs" in summary:
        line(f"outputs     {summary['n_outputs']}")
    training = summary["training"]
    best = training["best_epoch"]
    line(
        f"training    {training['epochs']} epoch(s); best epoch {best} (0-based)"
        + (f"; {training['seconds']:.1f} s" if "seconds" in training else "")
    )
    for key, label in (
        ("final_train_loss", "final train loss"),
        ("final_val_loss", "final validation loss"),
        ("best_val_score", "best validation score"),
    ):
        if key in training:
            line(f"  {label:<22} {training[key]:.6g}")
    columns = summary["columns"]
    line(f"columns     {len(columns)}")
    width = max(len(c["name"]) for c in columns)
    importances = summary.get("feature_importances", {})
    spread = summary.get("feature_importances_std", {})
    for c in columns:
        kind = c["kind"]
        if kind == "categorical":
            kind += f" ({c['n_categories']} categories)"
        share = _importance_text(importances.get(c["name"]), spread.get(c["name"]))
        line(f"  {c['name']:<{width}}  {kind:<28} {share}".rstrip())
    line("parameters")
    for name, value in summary["parameters"].items():
        line(f"  {name} = {value!r}" if isinstance(value, str) else f"  {name} = {value}")


def run(args: argparse.Namespace) -> int:
    """Run ``tabsparse info``; returns the exit status."""
    model = _load_model(args.model, predicts=False)
    summary = _model_summary(model)
    if args.json:
        json.dump(summary, sys.stdout, indent=2, default=_jsonable)
        sys.stdout.write("\n")
    else:
        _print_summary(summary, sys.stdout)
    return EXIT_OK
