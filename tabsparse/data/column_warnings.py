"""Warnings about text columns that are probably not features: identifiers and dates as strings.

At fit (:meth:`TableEncoder.fit`, ``fit_transform`` and the first :meth:`partial_fit` chunk)
each categorical column holding text (object or string dtype) is checked once, and at most one
:class:`ColumnWarning` is issued per column, naming it and saying what to do:

* **dates stored as strings**: at least :data:`DATE_FRACTION` of a sample of up to
  :data:`DATE_SAMPLE` non-missing values (evenly spaced over the column; at least
  :data:`DATE_MIN_VALUES` of them) are strings of a date, optionally with a time: ISO 8601
  (``2024-03-01``, ``2024-03-01T12:30:00Z``, ``2024/03/01 12:30``), day/month/year style
  (``01/03/2024``, ``1.3.2024``) or with English month names (``05-Jan-2024``,
  ``Jan 5, 2024``, ``5 January 2024``). As categories, dates cannot generalise to new dates: convert
  the column with ``pandas.to_datetime`` and fit with ``datetime_features="expand"``, or drop it.
* **nearly unique values** (identifiers, titles, free text): more than
  :data:`UNIQUE_FRACTION` of the non-missing values are distinct, over at least
  :data:`UNIQUE_MIN_ROWS` non-missing values. Each category is then seen about once, so the
  column cannot generalise to new rows: drop it.

The check is a regular expression over a sample and the vocabulary size the fit computes
anyway: no per-element date parsing, and no pandas format-guessing warnings.
"""

from __future__ import annotations

import re
import sys
import warnings
from types import FrameType

import numpy as np

from tabsparse.data.columns import Column

UNIQUE_FRACTION = 0.95
"""A text column with more than this fraction of distinct non-missing values is nearly unique."""
UNIQUE_MIN_ROWS = 50
"""Nearly-unique columns are reported only from this many non-missing values on."""
DATE_SAMPLE = 200
"""At most this many non-missing values are tested for dates."""
DATE_FRACTION = 0.9
"""A text column is date-like when at least this fraction of the tested values are dates."""
DATE_MIN_VALUES = 5
"""Date-like columns are reported only from this many non-missing values on."""

_TIME = r"(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[AaPp][Mm])?(?:Z|[+-]\d{2}:?\d{2})?)?"
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_DATE = re.compile(
    r"\s*(?:"
    r"\d{4}[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])"  # year first
    r"|(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|[12]\d|3[01])[-/.]\d{4}"  # day or month first
    r"|\d{4}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])T\d{4,6}Z?"  # compact ISO with a time
    r"|(?:0?[1-9]|[12]\d|3[01])[- ]" + _MONTH + r"[- ,]+\d{4}"  # 05-Jan-2021, 5 January 2021
    r"|" + _MONTH + r" (?:0?[1-9]|[12]\d|3[01]),? \d{4}"  # Jan 5, 2021
    r")" + _TIME + r"\s*"
)


class ColumnWarning(UserWarning):
    """A column of the fitted table is probably not a useful feature (see
    :mod:`tabsparse.data.column_warnings`)."""


def _looks_like_dates(values: np.ndarray) -> str | None:
    """An example date string when most of a sample of ``values`` are dates, else None."""
    n = values.shape[0]
    if n < DATE_MIN_VALUES:
        return None
    picks = values[np.unique(np.linspace(0, n - 1, min(n, DATE_SAMPLE)).astype(np.intp))]
    hits = [v for v in picks if isinstance(v, str) and _DATE.fullmatch(v)]
    if len(hits) >= DATE_FRACTION * len(picks):
        return hits[0]
    return None


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside tabsparse, seen from a function here that
    calls ``warnings.warn`` (so the warning points at the user's line, through an estimator
    or not)."""
    level = 2
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("tabsparse."):
        level, frame = level + 1, frame.f_back
    return level


def warn_unlikely_features(col: Column, n_distinct: int) -> None:
    """Issue at most one :class:`ColumnWarning` for the categorical text column ``col``.

    ``n_distinct`` is the number of distinct non-missing values (the vocabulary size).
    Columns that are not text (numbers, bools, a declared ``category`` dtype) are not checked.
    The warning points at the first caller outside tabsparse.
    """
    if col.form != "object":
        return
    values = col.values[~col.missing_mask()]
    example = _looks_like_dates(values)
    if example is not None:
        warnings.warn(
            f"Column {col.name!r} looks like dates stored as strings (e.g. {example!r}); as "
            "categories they cannot generalise to new dates. Convert it with "
            "pandas.to_datetime and pass datetime_features='expand' to use its parts "
            "(year, month, day of week, ...), or drop it.",
            ColumnWarning,
            stacklevel=_caller_stacklevel(),
        )
        return
    n = values.shape[0]
    if n >= UNIQUE_MIN_ROWS and n_distinct > UNIQUE_FRACTION * n:
        warnings.warn(
            f"Column {col.name!r} is nearly unique per row ({n_distinct} distinct values in "
            f"{n} rows), like an identifier or free text; as a categorical feature it cannot "
            "generalise to new rows. Drop it from X (or convert it to numbers if it is a "
            "quantity).",
            ColumnWarning,
            stacklevel=_caller_stacklevel(),
        )
