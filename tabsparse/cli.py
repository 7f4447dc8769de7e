"""The ``tabsparse`` command line: fit, predict, explain and inspect models on data files.

::

    tabsparse fit train.csv --target label -o model.tabsparse --param max_epochs=50 -v
    tabsparse predict model.tabsparse test.csv -o predictions.csv --proba
    tabsparse explain model.tabsparse test.csv -o importances.csv --plot masks.png --rows 20
    tabsparse info model.tabsparse

Data files are CSV (compressed CSV such as ``.csv.gz`` by extension) or Parquet (``.parquet``,
``.pq``; needs pyarrow). Model files are written and read by :mod:`tabsparse.io`. Expected
failures (a missing file or column, a bad parameter, a file that is not a model) end with one
line ``tabsparse: error: ...`` on stderr and exit status 1 (2 for a malformed command line);
``--debug`` shows the full traceback instead. See ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["infer_task", "main", "parse_param", "parse_value", "read_table"]

PROG = "tabsparse"
MAX_AUTO_CLASSES = 20  # a numeric target with at most this many integral values is classified
PARQUET_SUFFIXES = (".parquet", ".pq")
PYARROW_MISSING = "reading Parquet files needs pyarrow: pip install 'tabsparse[parquet]'"
NOT_SETTABLE = {"callbacks": "use --verbose for a progress bar"}

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An expected failure, reported as one ``tabsparse: error: ...`` line."""


class UsageError(CliError):
    """A malformed command line (exit status 2)."""


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _one_line(text: object) -> str:
    """Collapse a (possibly multi-line) message into one line."""
    parts = [line.strip() for line in str(text).splitlines()]
    return " ".join(part for part in parts if part)


def _short_list(names: Sequence[object], limit: int = 25) -> str:
    shown = ", ".join(str(n) for n in names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names) - limit} more)"
    return shown


def _suggest(name: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` when ``name`` is close to one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def _describe_exception(exc: BaseException) -> str:
    """One line about an expected exception, without its type's internals."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    if isinstance(exc, KeyError):
        return f"missing key or column {exc.args[0]!r}" if exc.args else "missing key"
    message = _one_line(exc)
    return message or type(exc).__name__


def _check_input_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CliError(f"{what} file not found: {path}")
    if p.is_dir():
        raise CliError(f"{what} is a directory, not a file: {path}")
    return p


def _check_output_file(path: str, what: str) -> None:
    if path == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise CliError(f"cannot write the {what} to {path}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise CliError(f"cannot write the {what} to {path}: directory {parent} does not exist")


def _write_csv(frame: pd.DataFrame, path: str) -> None:
    """Write a CSV file (compressed by extension, e.g. ``.csv.gz``), or to stdout for ``-``."""
    if path == "-":
        frame.to_csv(sys.stdout, index=False)
    else:
        frame.to_csv(path, index=False)


# --------------------------------------------------------------------------------------------
# Data files
# --------------------------------------------------------------------------------------------


def read_table(path: str) -> pd.DataFrame:
    """Read a data file: Parquet by extension (``.parquet``, ``.pq``), CSV otherwise.

    Parameters
    ----------
    path : str
        The file. CSV may be compressed; the compression is inferred from the extension
        (``.gz``, ``.bz2``, ``.zip``, ``.xz``, ``.zst``).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    CliError
        The file does not exist, is empty, or Parquet support (pyarrow) is missing.
    OSError, ValueError
        The file cannot be read or parsed.
    """
    import pandas as pd

    p = _check_input_file(path, "data")
    if p.suffix.lower() in PARQUET_SUFFIXES:
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise CliError(PYARROW_MISSING) from exc
        return pd.read_parquet(p, engine="pyarrow")
    try:
        return pd.read_csv(p)
    except pd.errors.EmptyDataError as exc:
        raise CliError(f"data file {path} is empty") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"data file {path} is not a text CSV file ({exc.reason})") from exc


def _missing_columns(names: Sequence[str], frame: pd.DataFrame, path: str, what: str) -> None:
    available = [str(c) for c in frame.columns]
    missing = [n for n in names if n not in frame.columns]
    if not missing:
        return
    hint = _suggest(missing[0], available) if len(missing) == 1 else ""
    raise CliError(
        f"{what} {_short_list([repr(m) for m in missing])} not in {path} "
        f"(available columns: {_short_list(available)}){hint}"
    )


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


# --------------------------------------------------------------------------------------------
# --param NAME=VALUE
# --------------------------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """Read a ``--param`` value: None, a bool, an int, a float, JSON, or else the string itself.

    ``none``/``null`` (any case) give None, ``true``/``false`` give booleans, numbers give int or
    float, text starting with ``[``, ``{`` or ``"`` is read as JSON (e.g. ``[["a","b"]]`` or
    ``{"yes": 2}``); anything else is kept as a string (e.g. ``cosine``).

    Raises
    ------
    ValueError
        The text looks like JSON but is not valid JSON.
    """
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        return float(stripped)
    except ValueError:
        pass
    if stripped[:1] in ("[", "{", '"'):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{text!r} is not valid JSON ({exc.msg} at character {exc.pos})"
            ) from None
    return text


def parse_param(item: str, valid: Sequence[str], owner: str) -> tuple[str, Any]:
    """Split and check one ``NAME=VALUE`` item of ``--param``.

    Parameters
    ----------
    item : str
        The text after ``--param``.
    valid : sequence of str
        The parameter names of the estimator.
    owner : str
        The estimator's class name, for messages.

    Returns
    -------
    (str, object)
        The name and the parsed value (see :func:`parse_value`).

    Raises
    ------
    CliError
        Malformed item, unknown name (with close matches) or bad JSON.
    """
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or not name:
        raise CliError(f"--param expects NAME=VALUE, got {item!r}")
    if name not in valid:
        hint = _suggest(name, valid) or f"; its parameters are: {', '.join(sorted(valid))}"
        raise CliError(f"unknown parameter {name!r} for {owner}{hint}")
    if name in NOT_SETTABLE:
        raise CliError(
            f"parameter {name!r} cannot be set on the command line; {NOT_SETTABLE[name]}"
        )
    try:
        return name, parse_value(text)
    except ValueError as exc:
        raise CliError(f"bad value for parameter {name!r}: {exc}") from exc


def _parse_params(items: Sequence[str], estimator_class: type) -> dict[str, Any]:
    valid = sorted(estimator_class().get_params())
    params: dict[str, Any] = {}
    for item in items:
        name, value = parse_param(item, valid, estimator_class.__name__)
        if name in params:
            raise CliError(f"parameter {name!r} is given more than once")
        params[name] = value
    return params


# --------------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------------


def _model_io() -> Any:
    try:
        io = importlib.import_module("tabsparse.io")
    except ImportError as exc:
        raise CliError(
            f"model files are not available in this installation of tabsparse ({exc})"
        ) from exc
    return io


def _load_model(path: str, *, predicts: bool = True) -> Any:
    """A fitted estimator from a model file; ``predicts``: it must have ``predict`` (a
    ``TabNetPretrainer`` has not: it can be explained and inspected only)."""
    _check_input_file(path, "model")
    io = _model_io()
    try:
        model = io.load(path)
    except io.ModelFileError as exc:  # its message names the file and the problem
        raise CliError(_one_line(exc)) from exc
    if not hasattr(model, "encoder_"):
        raise CliError(f"{path} does not hold a fitted tabsparse estimator")
    if predicts and not hasattr(model, "predict"):
        raise CliError(
            f"{path} holds a {type(model).__name__}, which makes no predictions "
            "(use 'tabsparse explain' or 'tabsparse info', or transform in Python)"
        )
    return model


def _model_features(model: Any, frame: pd.DataFrame, path: str) -> Any:
    """The columns of ``frame`` the model was fitted on (others, such as the target, dropped)."""
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        names = [str(n) for n in names]
        _missing_columns(names, frame, path, "column(s) the model needs")
        return frame[names]
    n_features = int(model.n_features_in_)
    if frame.shape[1] != n_features:
        raise CliError(
            f"{path} has {frame.shape[1]} columns, but the model (fitted without column names) "
            f"expects {n_features}"
        )
    return frame.to_numpy()


# --------------------------------------------------------------------------------------------
# Subcommands
# --------------------------------------------------------------------------------------------


def _cmd_fit(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from tabsparse import TabNetClassifier, TabNetRegressor

    _check_output_file(args.output, "model")
    if args.output == "-":
        raise CliError("the model cannot be written to stdout; give a file name with -o")
    data = read_table(args.data)
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


def _cmd_predict(args: argparse.Namespace) -> int:
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


def _cmd_explain(args: argparse.Namespace) -> int:
    _check_output_file(args.output, "importances")
    if args.plot is not None:
        from tabsparse.plotting import _require_matplotlib

        _require_matplotlib()
        _check_output_file(args.plot, "plot")
        if args.plot == "-":
            raise CliError("the plot cannot be written to stdout; give a file name to --plot")
    model = _load_model(args.model, predicts=False)
    X = _model_features(model, read_table(args.data), args.data)
    explanation = model.explain(X)
    _write_csv(explanation.to_frame(), args.output)
    if args.plot is not None:
        from matplotlib.figure import Figure

        from tabsparse.plotting import _masks_figsize, plot_masks

        rows = list(range(min(args.rows, len(explanation))))
        n_steps, _, n_features = explanation.masks.shape
        fig = Figure(figsize=_masks_figsize(n_steps, len(rows), n_features), layout="constrained")
        plot_masks(explanation, rows, fig=fig)
        fig.savefig(args.plot, dpi=100)
    return EXIT_OK


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
    for c in columns:
        kind = c["kind"]
        if kind == "categorical":
            kind += f" ({c['n_categories']} categories)"
        imp = importances.get(c["name"])
        share = "" if imp is None else f"importance {imp:.3f}"
        line(f"  {c['name']:<{width}}  {kind:<28} {share}".rstrip())
    line("parameters")
    for name, value in summary["parameters"].items():
        line(f"  {name} = {value!r}" if isinstance(value, str) else f"  {name} = {value}")


def _cmd_info(args: argparse.Namespace) -> int:
    model = _load_model(args.model, predicts=False)
    summary = _model_summary(model)
    if args.json:
        json.dump(summary, sys.stdout, indent=2, default=_jsonable)
        sys.stdout.write("\n")
    else:
        _print_summary(summary, sys.stdout)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Parser and entry point
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (raised, so :func:`main` can return)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{_one_line(message)} (see '{self.prog} --help')")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tabsparse`` command."""
    from tabsparse import __version__

    parser = _Parser(
        prog=PROG,
        description="Fit TabNet models on CSV or Parquet files, predict and explain with them.",
        epilog="Run 'tabsparse COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks instead of one-line errors"
    )
    common = _Parser(add_help=False)
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show full tracebacks instead of one-line errors",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    fit = sub.add_parser(
        "fit",
        parents=[common],
        help="fit a model on a data file and save it",
        description="Fit a TabNetClassifier or TabNetRegressor on DATA and write it to MODEL.",
    )
    fit.add_argument("data", metavar="DATA", help="training data (CSV, CSV.GZ or Parquet)")
    fit.add_argument("-t", "--target", required=True, metavar="COL", help="the target column")
    fit.add_argument(
        "--task",
        choices=("auto", "classification", "regression"),
        default="auto",
        help="auto (default): classification for a non-numeric target or a numeric one with at "
        f"most {MAX_AUTO_CLASSES} distinct whole-number values, regression otherwise",
    )
    fit.add_argument(
        "-p",
        "--param",
        action="extend",
        nargs="+",
        metavar="NAME=VALUE",
        help="an estimator parameter, e.g. max_epochs=50 (repeatable)",
    )
    fit.add_argument(
        "--drop", action="extend", nargs="+", metavar="COL", help="columns not to use (repeatable)"
    )
    fit.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write")
    fit.add_argument(
        "-v", "--verbose", action="count", default=0, help="show a progress bar on stderr"
    )
    fit.set_defaults(handler=_cmd_fit)

    predict = sub.add_parser(
        "predict",
        parents=[common],
        help="predict with a saved model",
        description="Write the predictions of MODEL for the rows of DATA to a CSV file.",
    )
    predict.add_argument("model", metavar="MODEL", help="model file written by 'tabsparse fit'")
    predict.add_argument("data", metavar="DATA", help="data file (CSV, CSV.GZ or Parquet)")
    predict.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="CSV file to write ('-': stdout)"
    )
    predict.add_argument(
        "--proba", action="store_true", help="class probabilities, one column per class"
    )
    predict.set_defaults(handler=_cmd_predict)

    explain = sub.add_parser(
        "explain",
        parents=[common],
        help="per-row feature importances",
        description="Write the per-row feature importances of MODEL on DATA to a CSV file "
        "(one column per feature, rows summing to one), and optionally plot the attention masks.",
    )
    explain.add_argument("model", metavar="MODEL", help="model file written by 'tabsparse fit'")
    explain.add_argument("data", metavar="DATA", help="data file (CSV, CSV.GZ or Parquet)")
    explain.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="CSV file to write ('-': stdout)"
    )
    explain.add_argument(
        "--plot", metavar="PNG", help="also draw the attention masks (needs matplotlib)"
    )
    explain.add_argument(
        "--rows",
        type=_positive_int,
        default=10,
        metavar="N",
        help="number of rows (the first N) shown in the plot (default: 10)",
    )
    explain.set_defaults(handler=_cmd_explain)

    info = sub.add_parser(
        "info",
        parents=[common],
        help="describe a saved model",
        description="Print the estimator, classes, columns, training summary and parameters.",
    )
    info.add_argument("model", metavar="MODEL", help="model file written by 'tabsparse fit'")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.set_defaults(handler=_cmd_info)
    return parser


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    CliError,
    OSError,
    ValueError,
    TypeError,
    ImportError,
    KeyError,
    ArithmeticError,  # tabsparse.training.TrainingError: the loss became non-finite
)


def _error(message: str) -> None:
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at the null device, so that flushing it at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tabsparse`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (without the program name); ``sys.argv[1:]`` by default.

    Returns
    -------
    int
        The exit status: 0 on success, 1 after an error, 2 for a malformed command line, 130
        after Ctrl-C.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    debug = bool(getattr(args, "debug", False))
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return int(args.handler(args))
        except KeyboardInterrupt:
            if debug:
                raise
            _error("interrupted")
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # e.g. `tabsparse info MODEL | head`: stop quietly
            _silence_stdout()
            return EXIT_ERROR
        except EXPECTED_ERRORS as exc:
            if debug:
                raise
            _error(str(exc) if isinstance(exc, CliError) else _describe_exception(exc))
            return EXIT_ERROR
        except Exception as exc:
            if debug:
                raise
            _error(
                f"unexpected {type(exc).__name__}: {_describe_exception(exc)} "
                "(rerun with --debug to see the traceback)"
            )
            return EXIT_ERROR
