"""``tabsparse predict``: predictions (or class probabilities) of a saved model on a data file."""

from __future__ import annotations

import argparse
from typing import Any

from tabsparse.cli._errors import EXIT_OK, CliError
from tabsparse.cli._models import _load_model, _model_features
from tabsparse.cli._output import _check_output_file, _write_csv
from tabsparse.cli._tables import read_table


def run(args: argparse.Namespace) -> int:
    """Run ``tabsparse predict``; returns the exit status."""
    import pandas as pd

    _check_output_file(args.output, "predictions")
    model = _load_model(args.model)
    if args.proba and not hasattr(model, "predict_proba"):
        raise CliError(
            f"--proba needs a classifier, but {args.model} holds a {type(model).__name__}"
        )
    X = _model_features(model, read_table(args.data, args.sep), args.data)
    if len(X) == 0:  # a header-only file: the columns of the output, no rows
        frame = pd.DataFrame(columns=_output_columns(model, args.proba))
    elif args.proba:
        proba = model.predict_proba(X)
        if isinstance(proba, list):  # multi-task: one block of columns per task, "task:class"
            frame = pd.concat([pd.DataFrame(p) for p in proba], axis=1)
        else:
            frame = pd.DataFrame(proba)
        frame.columns = _output_columns(model, proba=True)
    else:
        pred = model.predict(X)
        frame = pd.DataFrame(pred.reshape(len(pred), -1))
        frame.columns = _output_columns(model, proba=False)
    _write_csv(frame, args.output)
    return EXIT_OK


def _output_columns(model: Any, proba: bool) -> list[str]:
    """Column names of the output: one per class with ``proba`` (``task:class`` for multi-task
    models), else ``prediction`` for one output and ``prediction_k`` for several."""
    if proba:
        classes = model.classes_
        if isinstance(classes, list):  # multi-task: one list of classes per task
            return [f"{j}:{c}" for j, task in enumerate(classes) for c in task]
        return [str(c) for c in classes]
    n_outputs = int(getattr(model, "n_outputs_", 1))
    return ["prediction"] if n_outputs == 1 else [f"prediction_{k}" for k in range(n_outputs)]
