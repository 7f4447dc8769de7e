"""``tabsparse predict``: predictions (or class probabilities) of a saved model on a data file."""

from __future__ import annotations

import argparse

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
    X = _model_features(model, read_table(args.data), args.data)
    if args.proba:
        proba = model.predict_proba(X)
        if isinstance(proba, list):  # multi-task: one block of columns per task, "task:class"
            blocks = [
                pd.DataFrame(p, columns=[f"{j}:{c}" for c in classes])
                for j, (p, classes) in enumerate(zip(proba, model.classes_, strict=True))
            ]
            frame = pd.concat(blocks, axis=1)
        else:
            frame = pd.DataFrame(proba, columns=[str(c) for c in model.classes_])
    else:
        pred = model.predict(X)
        if pred.ndim == 1:
            frame = pd.DataFrame({"prediction": pred})
        else:
            frame = pd.DataFrame(pred, columns=[f"prediction_{k}" for k in range(pred.shape[1])])
    _write_csv(frame, args.output)
    return EXIT_OK
