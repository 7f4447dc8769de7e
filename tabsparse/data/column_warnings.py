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

Columns without information: :meth:`TableEncoder.fit` and ``fit_transform`` (not
:meth:`~TableEncoder.partial_fit`, whose later chunks may fill a column) issue one
:class:`ColumnWarning` per feature (an input column, or a part of an expanded datetime column)
that is **missing in every row**, or **constant**: one value in all of at least 2 rows, none
missing (a column with one value and missing ones carries its missingness). A column already
named by one of the warnings above gets no second one; sparse matrices, whose all-zero columns are
common, are not checked. A feature missing in every fitted row stays missing at transform
whatever it holds there (NaN, or code 0 for a categorical column), so that filling it later
cannot move predictions: the model never learnt what its values mean.

Drift at transform: :meth:`TableEncoder.transform` (predictions, validation tables) of at least
:data:`DRIFT_MIN_ROWS` rows issues a :class:`DriftWarning` naming the column and the figures when
more than :data:`DRIFT_FRACTION` of its rows

* are categories the fit never saw (a spelling change such as ``"11-23%"`` for
  ``"11 - 23%"`` turns a whole column into the one "unseen" code);
* are missing in a column where at most :data:`FEW_MISSING_FRACTION` of the fitted rows were;
* have values in a column missing in every fitted row (they are treated as missing).
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


def warn_unlikely_features(col: Column, n_distinct: int) -> bool:
    """Issue at most one :class:`ColumnWarning` for the categorical text column ``col``;
    return whether it was issued.

    ``n_distinct`` is the number of distinct non-missing values (the vocabulary size).
    Columns that are not text (numbers, bools, a declared ``category`` dtype) are not checked.
    The warning points at the first caller outside tabsparse.
    """
    if col.form != "object":
        return False
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
        return True
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
        return True
    return False


# ---- columns that carry no information at fit, and drift at transform ------------------------

DRIFT_FRACTION = 0.5
"""A transform warns when more than this fraction of its rows are unseen categories of a column,
or are missing in a column where fit saw few missing values."""
DRIFT_MIN_ROWS = 20
"""Transforms of fewer rows are not checked for drift (a handful of rows proves nothing)."""
FEW_MISSING_FRACTION = 0.1
"""At fit, a column missing in at most this fraction of the rows "saw few missing values"."""


class DriftWarning(UserWarning):
    """Values of a column at transform (predict, validation) differ from those seen at fit in a
    way that silently changes predictions (see :mod:`tabsparse.data.column_warnings`)."""


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} rows ({100.0 * part / whole:.0f}%)"


def warn_all_missing(name: str, n_rows: int) -> None:
    """The fitted column ``name`` is missing in all its ``n_rows`` rows."""
    warnings.warn(
        f"Column {name!r} is missing in all {n_rows} rows at fit, so it carries no "
        "information; values it has at transform are treated as missing, so they cannot move "
        "predictions. Drop it from X.",
        ColumnWarning,
        stacklevel=_caller_stacklevel(),
    )


def warn_constant(name: str, n_rows: int, value: object) -> None:
    """The fitted column ``name`` holds ``value`` in all its ``n_rows`` rows (none missing)."""
    warnings.warn(
        f"Column {name!r} is constant at fit ({value!r} in all {n_rows} rows), so it carries "
        "no information; another value at transform is outside what the model was trained "
        "on. Drop it from X.",
        ColumnWarning,
        stacklevel=_caller_stacklevel(),
    )


def warn_unseen(name: str, n_unseen: int, n_rows: int, example: object, n_vocab: int) -> None:
    """Most rows of a transform hold categories of ``name`` that fit never saw."""
    warnings.warn(
        f"Column {name!r} has categories not seen at fit in {_share(n_unseen, n_rows)} here "
        f"(e.g. {example!r}; fit saw {n_vocab} categories); unseen categories are all encoded "
        "alike, so the model cannot tell these rows apart by this column. Check that the "
        "values are spelled and typed as in the training data.",
        DriftWarning,
        stacklevel=_caller_stacklevel(),
    )


def warn_filled(name: str, n_present: int, n_rows: int) -> None:
    """A column missing in every row at fit has values in a transform."""
    warnings.warn(
        f"Column {name!r} was missing in every row at fit but has values in "
        f"{_share(n_present, n_rows)} here; the model never learnt from it, so they are "
        "treated as missing.",
        DriftWarning,
        stacklevel=_caller_stacklevel(),
    )


def warn_missing_drift(
    name: str, n_missing: int, n_rows: int, fit_missing: int, fit_rows: int
) -> None:
    """Most rows of a transform are missing in a column where fit saw few missing values."""
    warnings.warn(
        f"Column {name!r} is missing in {_share(n_missing, n_rows)} here but was missing in "
        f"{_share(fit_missing, fit_rows)} at fit; predictions for these rows rest on the "
        "value the model learnt for a missing entry. Check how the column was produced.",
        DriftWarning,
        stacklevel=_caller_stacklevel(),
    )
