"""Datetime columns expanded into numeric parts (``TableEncoder(datetime_features="expand")``).

A datetime column (numpy ``datetime64``, pandas ``datetime64[ns]`` or ``datetime64[ns, tz]``,
or an object column of ``datetime`` / ``date`` / ``Timestamp`` values) becomes one numeric
feature per part, in this fixed order (:data:`DATETIME_PARTS`):

==============  ==========================================  ==========
part            value                                       range
==============  ==========================================  ==========
``year``        the year                                    e.g. 2024
``month``       the month                                   1 - 12
``day``         the day of the month                        1 - 31
``dayofweek``   the day of the week, Monday = 0             0 - 6
``dayofyear``   the day of the year                         1 - 366
``hour``        the hour                                    0 - 23
``minute``      the minute                                  0 - 59
``second``      the second (fractions dropped)              0 - 59
==============  ==========================================  ==========

Only the parts that take more than one value among the non-missing values of the training
data are kept (a column of dates at midnight gets no ``hour``, ``minute`` or ``second``), or
``year`` alone when no part varies, so every datetime column gives at least one feature (with
:meth:`~tabsparse.data.TableEncoder.partial_fit`, the first chunk decides, as for kinds). The
features are named ``"<column>__<part>"`` (``"when__year"``). A missing value (``NaT``) is
missing (NaN) in every part.

Time zones: the parts are the local wall-clock time of the zone the column had at fit. A
timezone-aware column at transform is converted to that zone first (so the same instant gives
the same parts whatever zone it arrives in); a naive column where an aware one was fitted, or
the reverse, raises ``ValueError`` (there is no right guess for the missing zone). A column
whose values are all missing at transform (``None``, ``NaN``, ``NaT``, whatever its dtype) has
no zone to compare: it is missing in every part, whatever the fitted zone. A column of numbers
or bools where datetimes were fitted raises ``ValueError`` naming it, rather than being read
as nanoseconds since 1970.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from tabsparse.data.columns import Column

DATETIME_PARTS = ("year", "month", "day", "dayofweek", "dayofyear", "hour", "minute", "second")
"""The parts a datetime column can expand into, in the order its features appear."""

_ATTRIBUTES = {
    "year": "year",
    "month": "month",
    "day": "day",
    "dayofweek": "day_of_week",
    "dayofyear": "day_of_year",
    "hour": "hour",
    "minute": "minute",
    "second": "second",
}
_OBJECT_DATETIMES = {"datetime", "datetime64", "date"}


def is_datetime_column(values: pd.Series | np.ndarray) -> bool:
    """Whether a raw column holds datetimes (dtype, or object values that are all datetimes)."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind == "M":
        return True
    if isinstance(values, pd.Series) and pd.api.types.is_datetime64_any_dtype(dtype):
        return True
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return str(infer_dtype(values, skipna=True)) in _OBJECT_DATETIMES
    return False


def part_name(column: str, part: str) -> str:
    """The feature name of one part of a datetime column: ``"<column>__<part>"``."""
    return f"{column}__{part}"


def datetime_index(
    values: pd.Series | np.ndarray, name: str, *, fitted: bool = False
) -> pd.DatetimeIndex:
    """The column as a :class:`pandas.DatetimeIndex` (``NaT`` where missing); ``fitted``: the
    column was a datetime column at fit and is read for a transform (the message says so)."""
    try:
        if isinstance(values, pd.Series) or values.dtype.kind == "M":
            return pd.DatetimeIndex(values)
        return pd.DatetimeIndex(pd.to_datetime(values))
    except (TypeError, ValueError, OverflowError) as exc:
        if fitted:
            raise ValueError(
                f"Column {name!r} held datetimes at fit, but its values here could not be read "
                f"as datetimes ({exc}); pass datetimes in one time zone, or missing values."
            ) from exc
        raise ValueError(
            f"Column {name!r} holds datetimes that could not be read as one datetime column "
            f"({exc}); values in several time zones need converting to one zone first."
        ) from exc


def zone_of(index: pd.DatetimeIndex) -> str | None:
    """The time zone of ``index`` as a string (``"UTC"``, ``"Europe/Paris"``), None if naive."""
    return None if index.tz is None else str(index.tz)


def part_values(index: pd.DatetimeIndex, part: str) -> np.ndarray:
    """One part as float64, NaN where the datetime is missing."""
    return np.asarray(getattr(index, _ATTRIBUTES[part]), dtype=np.float64)


def varying_parts(index: pd.DatetimeIndex) -> list[str]:
    """The parts of :data:`DATETIME_PARTS` that take more than one value, or ``["year"]``."""
    parts = []
    for part in DATETIME_PARTS:
        values = part_values(index, part)
        values = values[~np.isnan(values)]
        if values.size and values.min() < values.max():
            parts.append(part)
    return parts or ["year"]


def in_zone(index: pd.DatetimeIndex, zone: str | None, name: str) -> pd.DatetimeIndex:
    """``index`` in the fitted ``zone`` (see the module documentation), or ValueError.

    An index with no values (all ``NaT``) carries no zone worth checking: it is returned as it
    is, since every part of a missing datetime is missing in any zone."""
    have = zone_of(index)
    if have != zone and bool(index.isna().all()):
        return index
    if (have is None) != (zone is None):
        fitted = "timezone-naive" if zone is None else f"in time zone {zone!r}"
        given = "timezone-naive" if have is None else f"in time zone {have!r}"
        raise ValueError(
            f"Datetime column {name!r} was {fitted} at fit but is {given} here; "
            "convert it (tz_localize / tz_convert) to match."
        )
    if zone is not None and have != zone:
        return index.tz_convert(zone)
    return index


def _holds_numbers(values: pd.Series | np.ndarray) -> bool:
    """Whether a raw column has a number or bool dtype and at least one non-missing value."""
    numeric = pd.api.types.is_numeric_dtype(values.dtype)
    return bool(numeric and not pd.isna(values).all())


def expand_column(values: Any, name: str, parts: list[str], zone: str | None) -> list[Column]:
    """The fitted ``parts`` of a raw datetime column as float :class:`Column` objects."""
    if _holds_numbers(values):
        raise ValueError(
            f"Column {name!r} held datetimes at fit but holds numbers (dtype {values.dtype}) here; "
            "pass the datetimes (e.g. pandas.to_datetime of the column) or missing values."
        )
    index = in_zone(datetime_index(values, name, fitted=True), zone, name)
    return [Column(part_name(name, part), "float", part_values(index, part)) for part in parts]
