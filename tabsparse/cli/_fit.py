"""``tabsparse fit``: fit a classifier or regressor on a data file and save it."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from tabsparse.cli._errors import EXIT_OK, PROG, CliError, Interrupted
from tabsparse.cli._models import _model_io
from tabsparse.cli._output import _check_output_file
from tabsparse.cli._params import _parse_params
from tabsparse.cli._tables import _missing_columns, read_table

if TYPE_CHECKING:
    import pandas as pd

MAX_AUTO_CLASSES = 20  # a numeric target with at most this many integral values is classified


def infer_task(y: pd.Series) -> str:
    """Guess ``"classification"`` or ``"regression"`` from a target column.

    The rule: a target that is not numeric (strings, categories, booleans) is a classification
    target; a numeric target (int or float) is a classification target when all its values are
    whole numbers and there are at most ``MAX_AUTO_CLASSES`` (20) distinct ones; any other target
    is a regression target.

    Parameters
    ----------
    y : pandas.Series
        The target column, without missing values.

    Returns
    -------
    {"classification", "regression"}
    """
    import numpy as np
    import pandas as pd

    if pd.api.types.is_bool_dtype(y) or not pd.api.types.is_numeric_dtype(y):
        return "classification"
    values = y.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)):
        return "regression"
    integral = bool(np.all(values == np.round(values)))
    if integral and len(np.unique(values)) <= MAX_AUTO_CLASSES:
        return "classification"
    return "regression"


def run(args: argparse.Namespace) -> int:
    """Run ``tabsparse fit``; returns the exit status."""
    import numpy as np
    import pandas as pd

    from tabsparse.estimators import TabNetClassifier, TabNetRegressor

    _check_output_file(args.output, "model")
    if args.output == "-":
        raise CliError("the model cannot be written to stdout; give a file name with -o")
    data = read_table(args.data, args.sep)
    _missing_columns([args.target], data, args.data, "target column")
    drop = list(dict.fromkeys(args.drop or []))
    _missing_columns(drop, data, args.data, "column(s) to drop")
    if args.target in drop:
        raise CliError(f"--drop names the target column {args.target!r}")
    y = data[args.target]
    X = data.drop(columns=[args.target, *drop])
    if X.shape[1] == 0:
        raise CliError(f"no feature columns left in {args.data} after removing the target")
    n_missing = int(y.isna().sum())
    if n_missing:
        raise CliError(
            f"target column {args.target!r} has {n_missing} missing value(s); "
            "remove or fill those rows first"
        )
    task = infer_task(y) if args.task == "auto" else args.task
    if task == "regression" and (
        pd.api.types.is_bool_dtype(y) or not pd.api.types.is_numeric_dtype(y)
    ):
        raise CliError(f"regression needs a numeric target, but column {args.target!r} is not")
    if task == "classification" and pd.api.types.is_float_dtype(y):
        values = y.to_numpy(dtype=np.float64)
        if np.all(values == np.round(values)):
            y = y.astype(np.int64)  # labels 0, 1, ... rather than 0.0, 1.0, ...
    estimator_class = TabNetClassifier if task == "classification" else TabNetRegressor
    params = _parse_params(args.param or [], estimator_class)
    estimator = estimator_class(**params)
    if hasattr(estimator, "_validate_params"):
        estimator._validate_params()  # a bad value is reported before any training
    io = _model_io()
    bar = None
    if args.verbose:
        from tabsparse.progress import ProgressBar

        bar = ProgressBar()
        estimator.set_params(callbacks=[bar])
    tic = time.perf_counter()
    try:
        estimator.fit(X, y)
    except KeyboardInterrupt:
        # A fit interrupted after its first epoch keeps the best weights so far: save them.
        if hasattr(estimator, "n_iter_"):
            estimator.set_params(callbacks=None)
            io.save(estimator, args.output)
            raise Interrupted(
                f"interrupted; saved the best epoch's model so far to {args.output}"
            ) from None
        raise
    finally:
        if bar is not None:
            bar.close()  # also when the fit raised
        estimator.set_params(callbacks=None)  # the progress bar is not part of the model
    seconds = time.perf_counter() - tic
    io.save(estimator, args.output)
    if args.verbose:
        what = f"{len(estimator.classes_)} classes" if task == "classification" else "regression"
        print(
            f"{PROG}: fitted {estimator_class.__name__} ({what}) on {X.shape[0]} rows x "
            f"{X.shape[1]} columns in {len(estimator.history_)} epochs ({seconds:.1f} s); "
            f"wrote {args.output}",
            file=sys.stderr,
        )
    return EXIT_OK
