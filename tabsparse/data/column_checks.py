"""What a :class:`~tabsparse.data.TableEncoder` says about its columns: their kinds and sizes
(:func:`describe_columns`), a warning at fit for a
column without information (missing in every row, or constant), and at transform for drift
(mostly unseen categories, values where the fit saw none, or mostly missing values where the fit
saw few); the warnings themselves are :mod:`tabsparse.data.column_warnings`'.

:class:`ColumnChecks` is a mixin of the encoder: it reads the fitted statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tabsparse.data.column_warnings import (
    DRIFT_FRACTION,
    DRIFT_MIN_ROWS,
    FEW_MISSING_FRACTION,
    warn_all_missing,
    warn_constant,
    warn_filled,
    warn_missing_drift,
    warn_unseen,
)
from tabsparse.data.columns import Column
from tabsparse.data.encoded import CODE_MISSING, CODE_UNSEEN
from tabsparse.data.tables import Table

if TYPE_CHECKING:
    from tabsparse.data.encoder import TableEncoder

__all__ = ["ColumnChecks", "describe_columns"]


class ColumnChecks:
    """The encoder's column warnings (see the module docstring)."""

    if TYPE_CHECKING:  # the encoder's fitted state
        feature_names: list[str]
        numeric_columns: list[int]
        categorical_columns: list[int]
        categories: list[list[Any]]
        numeric_min: np.ndarray
        numeric_max: np.ndarray
        n_rows_seen: int
        _stats: Any
        _cat_missing: np.ndarray | None
        _warned: set[str]

        def _fit_all_missing(self) -> tuple[np.ndarray, np.ndarray]: ...

    def _warn_uninformative(self, table: Table, cols: list[Column]) -> None:
        """One :class:`ColumnWarning` per feature missing in every row or constant at fit
        (none for a column already named by :func:`warn_unlikely_features`)."""
        n = table.n_rows
        if table.sparse is not None:
            return
        count = self._stats[0]
        for k, j in enumerate(self.numeric_columns):
            name = self.feature_names[j]
            if count[k] == 0:
                warn_all_missing(name, n)
            elif n >= 2 and count[k] == n and self.numeric_min[k] == self.numeric_max[k]:
                value = float(self.numeric_min[k])
                warn_constant(name, n, int(value) if value.is_integer() else value)
        assert self._cat_missing is not None  # a fit counts them
        for k, j in enumerate(self.categorical_columns):
            name, col = self.feature_names[j], cols[j]
            if name in self._warned:  # at most one warning per column
                continue
            if self._cat_missing[k] == n:
                warn_all_missing(name, n)
                continue
            if n < 2 or self._cat_missing[k] > 0:
                continue
            if col.form == "category":
                assert col.categories is not None
                observed = np.unique(col.values)
                if observed.size == 1:
                    value = col.categories.values[observed[0]]
                    warn_constant(name, n, value.item() if hasattr(value, "item") else value)
            elif len(self.categories[k]) == 1:
                warn_constant(name, n, self.categories[k][0])

    def _drift(self, numeric: np.ndarray, codes: np.ndarray, cols: list[Column]) -> np.ndarray:
        """Warn (:class:`DriftWarning`) where most of the rows are unseen categories, values
        of a column missing at fit, or missing where fit saw few missing values; return the
        numeric block with the columns missing at fit set to missing (a copy if it changes)."""
        n = numeric.shape[0]
        empty_num, empty_cat = self._fit_all_missing()
        if n == 0:
            return numeric
        nan = np.isnan(numeric)
        n_missing = nan.sum(axis=0)
        fit_rows = self.n_rows_seen
        fit_count = self._stats[0]
        for k, j in enumerate(self.numeric_columns):
            name = self.feature_names[j]
            if empty_num[k]:
                present = n - int(n_missing[k])
                if present:
                    if not numeric.flags.writeable:
                        numeric = numeric.copy()
                    numeric[:, k] = np.nan
                    if n >= DRIFT_MIN_ROWS and present > DRIFT_FRACTION * n:
                        warn_filled(name, present, n)
                continue
            fit_missing = fit_rows - int(fit_count[k])
            if (
                n >= DRIFT_MIN_ROWS
                and n_missing[k] > DRIFT_FRACTION * n
                and fit_missing <= FEW_MISSING_FRACTION * fit_rows
            ):
                warn_missing_drift(name, int(n_missing[k]), n, fit_missing, fit_rows)
        if n < DRIFT_MIN_ROWS:
            return numeric
        for k, j in enumerate(self.categorical_columns):
            name, col = self.feature_names[j], cols[j]
            if empty_cat[k]:
                present = n - int(np.count_nonzero(col.missing_mask()))
                if present > DRIFT_FRACTION * n:
                    warn_filled(name, present, n)
                continue
            unseen = codes[:, k] == CODE_UNSEEN
            n_unseen = int(np.count_nonzero(unseen))
            if n_unseen > DRIFT_FRACTION * n:
                example = _value_at(col, int(np.argmax(unseen)))
                warn_unseen(name, n_unseen, n, example, len(self.categories[k]))
            n_miss = int(np.count_nonzero(codes[:, k] == CODE_MISSING))
            if self._cat_missing is not None and n_miss > DRIFT_FRACTION * n:
                fit_missing = int(self._cat_missing[k])
                if fit_missing <= FEW_MISSING_FRACTION * fit_rows:
                    warn_missing_drift(name, n_miss, n, fit_missing, fit_rows)
        return numeric


def _value_at(col: Column, i: int) -> object:
    """The value of row ``i`` of ``col`` as a plain Python scalar, for messages."""
    if col.form == "category":
        assert col.categories is not None
        return _value_at(col.categories, int(col.values[i]))
    value = col.values[i]
    return value.item() if isinstance(value, np.generic) else value


def describe_columns(enc: TableEncoder) -> list[tuple[str, str, int]]:
    """Describe the columns of a fitted encoder.

    Parameters
    ----------
    enc : TableEncoder
        A fitted encoder.

    Returns
    -------
    list of (str, str, int)
        ``(name, kind, n_categories)`` per feature (input column, or part of an
        expanded datetime column) in original order,
        ``n_categories`` being the vocabulary size of a categorical column
        (without the missing/unseen slots) and 0 for a numeric one.
    """
    enc._check_fitted()
    sizes = dict(zip(enc.categorical_columns, (len(c) for c in enc.categories), strict=True))
    return [
        (name, kind, sizes.get(j, 0))
        for j, (name, kind) in enumerate(zip(enc.feature_names, enc.kinds, strict=True))
    ]
