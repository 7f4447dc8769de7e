"""Category vocabularies and codes.

Vocabulary entries are JSON-able scalars (bool, number, str) kept apart by kind and sorted
(bools, numbers, strings); :func:`vocab_update` collects them from a column, :class:`CodeLookup`
maps a column's values to codes with pandas hash tables, converting between kinds where that is
unambiguous (see :mod:`tabsparse.data` for the rules).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, TypeAlias, cast

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from tabsparse.data.columns import INFERRED_SINGLE_KIND, Column, check_object_types
from tabsparse.data.encoded import CODE_MISSING, CODE_OFFSET, CODE_UNSEEN

Category: TypeAlias = bool | int | float | str
"""A vocabulary entry: a JSON-able Python scalar."""

INT64_LIMIT = 2.0**63  # integral floats in [-INT64_LIMIT, INT64_LIMIT) are stored as ints


def in_int64(v: float) -> bool:
    """Whether a number lies in the int64 range ``[-2**63, 2**63)``."""
    return bool(-INT64_LIMIT <= v < INT64_LIMIT)


# Kind ranks, used as the first element of the vocabulary sort key.
_RANK_BOOL = 0
_RANK_NUMBER = 1
_RANK_STR = 2
TYPE_NAMES = ("bool", "int", "float", "str")


_Group = tuple[str, np.ndarray, np.ndarray]  # (kind, row positions, typed values)


def _canonical_float(v: float) -> int | float:
    return int(v) if v.is_integer() and in_int64(v) else float(v)


def value_key(v: Category) -> tuple[int, Category]:
    if isinstance(v, bool):
        return (_RANK_BOOL, v)
    if isinstance(v, str):
        return (_RANK_STR, v)
    return (_RANK_NUMBER, v)


def type_name(v: Category) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return "str"


def _raise_inf(name: str) -> None:
    raise ValueError(
        f"Column {name!r} contains infinite values (inf or -inf); replace them, "
        "e.g. with NaN to mark them missing."
    )


def _split_object(values: np.ndarray) -> tuple[list[_Group], np.ndarray]:
    """Split non-missing object values by kind.

    Returns the groups ``(kind, positions, typed values)`` with kind ``"bool"``,
    ``"int"``, ``"float"`` or ``"str"``, and the positions of values of any
    other type.
    """
    n = values.shape[0]
    everything = np.arange(n)
    inferred = str(infer_dtype(values, skipna=False))
    if inferred == "empty" or n == 0:
        return [], np.zeros(0, dtype=np.intp)
    if inferred == "string":
        return [("str", everything, values)], np.zeros(0, dtype=np.intp)
    if inferred == "boolean":
        return [("bool", everything, values.astype(bool))], np.zeros(0, dtype=np.intp)
    if inferred == "integer":
        try:
            return [("int", everything, values.astype(np.int64))], np.zeros(0, dtype=np.intp)
        except OverflowError:
            pass
    if inferred in ("integer", "floating", "decimal"):
        try:
            return [("float", everything, values.astype(np.float64))], np.zeros(0, dtype=np.intp)
        except (OverflowError, TypeError, ValueError):
            pass
    # Several kinds of values, or ints next to floats (one float64 array would round ints
    # beyond 2**53 into each other): classify them one by one.
    tags = np.fromiter((_tag(v) for v in values), dtype=np.int8, count=n)
    groups: list[_Group] = []
    for tag, kind in ((1, "bool"), (2, "int"), (3, "float"), (4, "str")):
        pos = np.flatnonzero(tags == tag)
        if pos.size:
            sub = values[pos]
            typed: np.ndarray
            if kind == "bool":
                typed = sub.astype(bool)
            elif kind == "int":
                try:
                    typed = sub.astype(np.int64)
                except OverflowError:
                    kind, typed = "float", sub.astype(np.float64)
            elif kind == "float":
                typed = sub.astype(np.float64)
            else:
                typed = sub
            groups.append((kind, pos, typed))
    return groups, np.flatnonzero(tags == 0)


def _tag(v: object) -> int:
    if isinstance(v, (bool, np.bool_)):
        return 1
    if isinstance(v, numbers.Integral):
        return 2
    if isinstance(v, numbers.Real):
        return 3
    if isinstance(v, str):
        return 4
    return 0


def vocab_update(keys: set[tuple[int, Category]], col: Column) -> None:
    """Add the distinct non-missing values of ``col`` to the set of vocabulary keys."""
    if col.form == "category":
        assert col.categories is not None
        vocab_update(keys, col.categories)
        return
    if col.form == "object":
        inferred = check_object_types(col.values, col.name)
        if inferred in INFERRED_SINGLE_KIND:
            # pd.unique is exact here: no bools next to numbers (True == 1 in Python).
            present = np.asarray(pd.unique(col.values), dtype=object)
        else:
            present = col.values
        present = present[~np.asarray(pd.isna(present), dtype=bool)]
        groups, others = _split_object(present)
        if others.size:
            example = present[others[0]]
            raise TypeError(
                f"Column {col.name!r} contains a value of type {type(example).__name__} "
                f"({example!r}), which cannot be a category: each cell's argument must be a "
                "string or a number (str, int, float or bool). Convert the column (e.g. with "
                ".astype(str)) first."
            )
    else:
        missing = col.missing_mask()
        values = col.values[~missing] if missing.any() else col.values
        groups = [(col.form, np.zeros(0, dtype=np.intp), values)]
    for kind, _, typed in groups:
        if kind == "str":
            keys.update((_RANK_STR, str(v)) for v in pd.unique(typed))
        elif kind == "bool":
            keys.update((_RANK_BOOL, bool(v)) for v in np.unique(typed))
        elif kind == "int":
            keys.update((_RANK_NUMBER, int(v)) for v in pd.unique(typed))
        else:
            if np.isinf(typed).any():
                _raise_inf(col.name)
            keys.update((_RANK_NUMBER, _canonical_float(float(v))) for v in np.unique(typed))


class CodeLookup:
    """Vectorised mapping of column values to codes for one vocabulary."""

    def __init__(self, vocab: Sequence[Category]) -> None:
        self.size = len(vocab)
        self.bool_codes = np.full(2, CODE_UNSEEN, dtype=np.int64)
        nums: list[tuple[int | float, int]] = []
        strs: list[tuple[str, int]] = []
        for i, v in enumerate(vocab):
            if isinstance(v, bool):
                self.bool_codes[int(v)] = i + CODE_OFFSET
            elif isinstance(v, str):
                strs.append((v, i + CODE_OFFSET))
            else:
                nums.append((v, i + CODE_OFFSET))
        self.has_bool = bool((self.bool_codes != CODE_UNSEEN).any())
        self.has_num = bool(nums)
        self.has_str = bool(strs)
        # Numbers in two exact hash tables: ints within int64, and the other numbers as floats
        # (non-integral values, and the rare integral ones beyond int64). One float64 table would
        # merge distinct ints beyond 2**53 (2**60 and 2**60 + 1 round to the same float).
        ints: dict[int, int] = {}
        floats: dict[float, int] = {}
        for v, c in nums:
            if isinstance(v, int) and in_int64(v):
                ints.setdefault(int(v), c)
            else:
                floats.setdefault(float(v), c)
        self.int_index = pd.Index(np.array(list(ints), dtype=np.int64))
        self.int_codes = np.array(list(ints.values()), dtype=np.int64)
        self.float_index = pd.Index(np.array(list(floats), dtype=np.float64))
        self.float_codes = np.array(list(floats.values()), dtype=np.int64)
        self.str_index = pd.Index(np.array([v for v, _ in strs], dtype=object), dtype=object)
        self.str_codes = np.array([c for _, c in strs], dtype=np.int64)
        # Python equality lookup is exact unless bools and numbers share the vocabulary.
        self.obj_index: pd.Index | None = None
        if not (self.has_bool and self.has_num):
            self.obj_index = pd.Index(np.array(list(vocab), dtype=object), dtype=object)

    @staticmethod
    def _index(index: pd.Index, codes: np.ndarray, values: np.ndarray) -> np.ndarray:
        if codes.size == 0 or values.size == 0:
            return np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)
        pos = np.asarray(cast(Any, index).get_indexer(_as_index(values)))
        return np.where(pos >= 0, codes[pos], CODE_UNSEEN)

    def lookup_bool(self, values: np.ndarray) -> np.ndarray:
        if self.has_bool:
            return self.bool_codes[values.astype(np.intp)]
        if self.has_num:
            return self.lookup_number(np.asarray(values, dtype=np.int64))
        return np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)

    def lookup_number(self, values: np.ndarray) -> np.ndarray:
        """Codes of numbers (no NaN expected; NaN gives unseen).

        Integers are matched exactly against the vocabulary's ints; floats that are integral
        and within int64 are matched as those ints, the others against its floats."""
        n = values.shape[0]
        if self.has_num:
            if values.dtype.kind in "iu":
                if values.dtype == np.uint64:
                    big = values > np.iinfo(np.int64).max
                    codes = self._index(self.int_index, self.int_codes, values.astype(np.int64))
                    codes[big] = CODE_UNSEEN
                    return codes
                return self._index(self.int_index, self.int_codes, values.astype(np.int64))
            v = values.astype(np.float64)
            with np.errstate(invalid="ignore"):
                integral = _integral_int64(v)
            codes = self._index(
                self.int_index, self.int_codes, np.where(integral, v, 0.0).astype(np.int64)
            )
            codes[~integral] = CODE_UNSEEN
            rest = np.flatnonzero(~integral)
            if rest.size and self.float_codes.size:
                codes[rest] = self._index(self.float_index, self.float_codes, v[rest])
            return codes
        if self.has_bool:
            codes = np.full(n, CODE_UNSEEN, dtype=np.int64)
            codes[values == 0] = self.bool_codes[0]
            codes[values == 1] = self.bool_codes[1]
            return codes
        if self.has_str:
            return self._index(self.str_index, self.str_codes, _number_text(values))
        return np.full(n, CODE_UNSEEN, dtype=np.int64)

    def lookup_str(self, values: np.ndarray) -> np.ndarray:
        if self.has_str:
            return self._index(self.str_index, self.str_codes, values)
        if self.has_num and not self.has_bool:
            parsed = np.asarray(pd.to_numeric(values, errors="coerce"), dtype=np.float64)
            codes = self.lookup_number(np.where(np.isfinite(parsed), parsed, np.nan))
            codes[~np.isfinite(parsed)] = CODE_UNSEEN
            return codes
        return np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)

    def lookup_exact(self, values: np.ndarray, name: str) -> np.ndarray:
        """Codes of object values, classified by kind."""
        codes = np.full(values.shape[0], CODE_UNSEEN, dtype=np.int64)
        missing = np.asarray(pd.isna(values), dtype=bool)
        codes[missing] = CODE_MISSING
        present = np.flatnonzero(~missing)
        groups, _ = _split_object(values[present])
        for kind, pos, typed in groups:
            if kind == "str":
                sub = self.lookup_str(typed)
            elif kind == "bool":
                sub = self.lookup_bool(typed)
            else:
                if kind == "float" and np.isinf(typed).any():
                    _raise_inf(name)
                sub = self.lookup_number(typed)
            codes[present[pos]] = sub
        return codes

    def encode(self, col: Column) -> np.ndarray:
        """Codes of a whole column (missing -> 0, unseen -> 1)."""
        if col.form == "category":
            assert col.categories is not None
            mapped = self.encode(col.categories)
            if mapped.size == 0:
                return np.zeros(col.values.shape[0], dtype=np.int64)
            codes = mapped[np.maximum(col.values, 0)]
            codes[col.values < 0] = CODE_MISSING
            return codes
        if col.form == "object":
            values = col.values
            if self.obj_index is None:
                codes = self.lookup_exact(values, col.name)
            else:
                try:
                    target = _as_index(values)
                    pos = np.asarray(cast(Any, self.obj_index).get_indexer(target), dtype=np.int64)
                except TypeError:  # unhashable values: classify them one by one
                    pos = np.full(values.shape[0], -1, dtype=np.int64)
                codes = pos + CODE_OFFSET
                rest = np.flatnonzero(pos < 0)
                if rest.size:
                    codes[rest] = self.lookup_exact(values[rest], col.name)
        elif col.form == "bool":
            codes = self.lookup_bool(col.values)
        elif col.form == "int":
            codes = self.lookup_number(col.values)
        else:
            values = col.values
            if np.isinf(values).any():
                _raise_inf(col.name)
            codes = self.lookup_number(values)
            codes[np.isnan(values)] = CODE_MISSING
        if col.missing is not None:
            codes[col.missing] = CODE_MISSING
        return codes


def _integral_int64(v: np.ndarray) -> np.ndarray:
    """Mask of the float64 values that are integral and in the int64 range (stored as ints)."""
    return np.isfinite(v) & (np.floor(v) == v) & (v >= -INT64_LIMIT) & (v < INT64_LIMIT)


def _as_index(values: np.ndarray) -> pd.Index:
    """Wrap an array as an Index without copying it or inferring another dtype."""
    return pd.Index(values, dtype=values.dtype, copy=False)


def _number_text(values: np.ndarray) -> np.ndarray:
    """Canonical text of numbers: integral values without a decimal point."""
    if values.dtype.kind in "iu":
        return values.astype(str).astype(object)
    v = values.astype(np.float64)
    with np.errstate(invalid="ignore"):
        integral = _integral_int64(v)
    text = v.astype(str).astype(object)
    if integral.any():
        text[integral] = v[integral].astype(np.int64).astype(str).astype(object)
    return text
