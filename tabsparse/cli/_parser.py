"""The argument parser of the ``tabsparse`` command (standard library only: cheap to build)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from tabsparse.cli._errors import PROG, UsageError, _one_line
from tabsparse.cli._fit import MAX_AUTO_CLASSES


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


def _separator(text: str) -> str:
    """A ``--sep`` value: one character; ``tab`` or ``\\t`` for a tab."""
    if text.lower() in ("tab", "\\t"):
        return "\t"
    if len(text) != 1:
        raise argparse.ArgumentTypeError(f"expected one character (or 'tab'), got {text!r}")
    return text


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
    data_options = _Parser(add_help=False)
    data_options.add_argument(
        "--sep",
        type=_separator,
        metavar="CHAR",
        help="field separator of a CSV data file ('tab' for tabs); default: a comma, or ';', "
        "tab or '|' when the header line holds no comma but one of these",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    fit = sub.add_parser(
        "fit",
        parents=[common, data_options],
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

    predict = sub.add_parser(
        "predict",
        parents=[common, data_options],
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

    explain = sub.add_parser(
        "explain",
        parents=[common, data_options],
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
        "--selected",
        action="store_true",
        help="write each row's probability that its prediction needs each column (the "
        "model's column selector; a column is selected at 0.5 or more) instead of the "
        "attention importances",
    )
    explain.add_argument(
        "--attributions",
        action="store_true",
        help="write each column's signed Shapley attribution to the row's raw output "
        "(log-odds, centred logits or the prediction) and a base_value column, which add up "
        "to it, instead of the attention importances (several outputs: columns "
        "'<column>@<output>')",
    )
    explain.add_argument(
        "--permutations",
        type=_positive_int,
        metavar="N",
        help="with --attributions: sample N random column orders per row (an even number) "
        "instead of the default (exact for a few columns, else sampled)",
    )
    explain.add_argument(
        "--rows",
        type=_positive_int,
        default=10,
        metavar="N",
        help="number of rows (the first N) shown in the plot (default: 10)",
    )

    info = sub.add_parser(
        "info",
        parents=[common],
        help="describe a saved model",
        description="Print the estimator, classes, columns, training summary and parameters.",
    )
    info.add_argument("model", metavar="MODEL", help="model file written by 'tabsparse fit'")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser
