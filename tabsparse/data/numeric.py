"""Numeric columns: conversion to numbers and the float32 copy into the encoded block.

Values are converted (numeric strings parsed, nullable dtypes' ``<NA>`` made NaN), copied into
the C-ordered float32 output a block of rows at a time, and checked for infinite values and
values beyond the float32 range, which are refused naming the column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tabsparse.data.columns import Column, check_object_types

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_BLOCK_ROWS = 4096  # rows copied at a time into the output blocks


def numeric_values(col: Column) -> np.ndarray:
    """Return the column as a 1-D numeric array (NaN = missing), without copy if possible."""
    if col.form == "category":
        assert col.categories is not None
        cats = numeric_values(col.categories).astype(np.float64)
        out = cats[np.maximum(col.values, 0)] if cats.size else np.zeros(col.values.shape)
        out[col.values < 0] = np.nan
        return out
    if col.form == "object":
        values = col.values
        check_object_types(values, col.name)
        try:
            parsed = pd.to_numeric(values, errors="coerce")
            out = np.asarray(parsed, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"Column {col.name!r} is numeric but could not be converted to numbers: {exc}"
            ) from exc
        bad = np.isnan(out) & ~np.asarray(pd.isna(values), dtype=bool)
        if bad.any():
            example = values[np.flatnonzero(bad)[0]]
            raise ValueError(
                f"Column {col.name!r} is numeric but contains non-numeric values such as "
                f"{example!r}; list it in categorical_features or convert it to numbers."
            )
        return out
    if col.missing is not None and col.missing.any():
        out = col.values.astype(np.float64)
        out[col.missing] = np.nan
        return out
    return col.values


def fill_columns(out: np.ndarray, sources: Sequence[np.ndarray], check_inf: bool = False) -> bool:
    """Copy 1-D ``sources`` into the columns of C-ordered ``out``, block of rows by block.

    Returns whether ``check_inf`` was requested and ``out`` received an infinite value
    (tested while each block is still in cache).
    """
    n = out.shape[0]
    found = False
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, _BLOCK_ROWS):
            stop = min(n, start + _BLOCK_ROWS)
            block = out[start:stop]
            for j, src in enumerate(sources):
                block[:, j] = src[start:stop]
            if check_inf and not found:
                found = bool(np.isinf(block).any())
    return found


def check_finite_block(block: np.ndarray, sources: Sequence[np.ndarray], names: list[str]) -> None:
    """Raise for infinite values in the float32 ``block`` naming the column and the cause."""
    if block.size == 0 or not np.isinf(block).any():
        return
    bad = np.flatnonzero(np.isinf(block).any(axis=0))
    j = int(bad[0])
    src = np.asarray(sources[j])
    if src.dtype.kind == "f" and np.isinf(src).any():
        raise ValueError(
            f"Column {names[j]!r} contains infinite values (inf or -inf); replace them, "
            "e.g. with NaN to mark them missing."
        )
    with np.errstate(invalid="ignore"):
        example = src[np.abs(src.astype(np.float64)) > _FLOAT32_MAX]
    shown = f" such as {example[0]!r}" if example.size else ""
    raise ValueError(
        f"Column {names[j]!r} contains values beyond the float32 range (|x| > 3.4e38){shown}; "
        "rescale the column."
    )
