"""Writing results: checking an output path early and writing CSV files (or stdout for ``-``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tabsparse.cli._errors import CliError

if TYPE_CHECKING:
    import pandas as pd


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
