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
``--debug`` shows the full traceback instead; Ctrl-C ends with one line and exit status 130.
See ``docs/cli.md``.

The package holds one job per module: ``_main`` (the entry point), ``_parser`` (the command line),
one module per command (``_fit``, ``_predict``, ``_explain``, ``_info``), ``_tables`` (reading
data files), ``_output`` (writing results), ``_params`` (``--param``), ``_models`` (model files)
and ``_errors`` (exit statuses and one-line messages). Nothing heavy (pandas, torch) is imported
before a command runs, so ``tabsparse --version`` and ``--help`` answer at once.

Its modules:

================  ========================================================
:mod:`._main`     the entry point: parse, run, turn failures into one line
:mod:`._parser`   the argument parser (standard library only)
:mod:`._fit`      ``tabsparse fit``
:mod:`._predict`  ``tabsparse predict``
:mod:`._explain`  ``tabsparse explain``
:mod:`._info`     ``tabsparse info``
:mod:`._params`   ``--param NAME=VALUE``: values and names
:mod:`._models`   loading model files and selecting their columns
:mod:`._tables`   reading data files (CSV, Parquet) and checking columns
:mod:`._output`   checking output paths and writing CSV
:mod:`._errors`   exit statuses and one-line messages
================  ========================================================
"""

from tabsparse.cli._errors import CliError, UsageError
from tabsparse.cli._fit import infer_task
from tabsparse.cli._main import main
from tabsparse.cli._params import parse_param, parse_value
from tabsparse.cli._parser import build_parser
from tabsparse.cli._tables import read_table

__all__ = [
    "CliError",
    "UsageError",
    "build_parser",
    "infer_task",
    "main",
    "parse_param",
    "parse_value",
    "read_table",
]
