"""Reading data files: CSV (compressed by extension) or Parquet, and checking their columns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tabsparse.cli._errors import CliError, _short_list, _suggest

if TYPE_CHECKING:
    import pandas as pd

PARQUET_SUFFIXES = (".parquet", ".pq")
PYARROW_MISSING = "reading Parquet files needs pyarrow: pip install 'tabsparse[parquet]'"
#: Separators recognised when a CSV file's header line holds none of the default commas.
SNIFFED_SEPARATORS = (";", "\t", "|")


def _check_input_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CliError(f"{what} file not found: {path}")
    if p.is_dir():
        raise CliError(f"{what} is a directory, not a file: {path}")
    return p


def read_table(path: str, sep: str | None = None) -> pd.DataFrame:
    """Read a data file: Parquet by extension (``.parquet``, ``.pq``), CSV otherwise.

    Parameters
    ----------
    path : str
        The file. CSV may be compressed; the compression is inferred from the extension
        (``.gz``, ``.bz2``, ``.zip``, ``.xz``, ``.zst``).
    sep : str, optional
        The field separator of a CSV file (ignored for Parquet). By default a comma, unless
        the header line read with commas is one column whose name holds ``;``, a tab or ``|``:
        then the most frequent of these (see :func:`sniff_separator`).

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
        return pd.read_csv(p, sep=sniff_separator(p) if sep is None else sep)
    except pd.errors.EmptyDataError as exc:
        raise CliError(f"data file {path} is empty") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"data file {path} is not a text CSV file ({exc.reason})") from exc


def sniff_separator(path: Path) -> str:
    """The separator of a CSV file: ``,`` unless its header line, read with commas, is a single
    column whose name holds one of :data:`SNIFFED_SEPARATORS`; then the most frequent of them
    (so ``a;b;c`` gives ``;``). A one-column file whose name holds none of them keeps ``,``."""
    import pandas as pd

    names = pd.read_csv(path, nrows=0).columns
    if len(names) != 1:
        return ","
    counts = {sep: str(names[0]).count(sep) for sep in SNIFFED_SEPARATORS}
    best = max(counts, key=lambda sep: counts[sep])
    return best if counts[best] > 0 else ","


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
