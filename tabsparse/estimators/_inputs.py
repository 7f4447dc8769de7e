"""What the estimators accept as input, checked and turned into what the core takes.

Devices (``"auto" | "cpu" | "cuda" | "cuda:N"``), tables (DataFrames as they are, tables of
other libraries -- polars, pyarrow, anything with the Arrow or dataframe-interchange protocol --
converted once by :func:`tabsparse.data.as_pandas`, scipy sparse matrices as they are, anything
else through scikit-learn's ``check_array``), data on disk (a memmap, Parquet files), sample weights
and the zero-copy conversion of encoded arrays to tensors.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.utils.validation import check_array

from tabsparse._compat import _check_sample_weight
from tabsparse.data import as_pandas
from tabsparse.streaming import DiskRows, ParquetRows


def resolve_device(device: str) -> torch.device:
    """``"auto" | "cpu" | "cuda" | "cuda:N"`` -> a usable :class:`torch.device`, or ValueError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a device; expected 'auto', 'cpu', 'cuda' or 'cuda:N'"
        ) from exc
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"device={device!r} is not supported; expected 'auto', 'cpu' or 'cuda'")
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available here")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(
            f"device={device!r} does not exist: {torch.cuda.device_count()} CUDA device(s) found"
        )
    return dev


def check_table(X: Any, *, what: str = "X") -> Any:
    """Accept DataFrames as they are (a polars frame, pyarrow table or any Arrow / interchange
    table becomes a pandas DataFrame with the same names and dtypes first) and scipy sparse
    matrices as they are (never densified here); turn anything else into a 2-D array with
    sklearn's checks."""
    X = as_pandas(X)
    if isinstance(X, pd.DataFrame):
        if X.shape[1] == 0:
            raise ValueError(
                f"0 feature(s) (shape={X.shape}) while a minimum of 1 is required in {what}."
            )
        if X.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) in {what}.")
        return X
    return check_array(
        X,
        accept_sparse=True,
        dtype=None,
        ensure_all_finite=False,
        ensure_2d=True,
        allow_nd=False,
        input_name=what,
    )


def parquet_paths(X: Any) -> list[Path] | None:
    """The Parquet files ``X`` names (a folder, or a list of files), or None."""
    if isinstance(X, (str, os.PathLike)) and Path(X).is_dir():
        return sorted(Path(X).glob("*.parquet"))
    if (
        isinstance(X, (list, tuple))
        and X
        and all(isinstance(p, (str, os.PathLike)) and str(p).endswith(".parquet") for p in X)
    ):
        return [Path(p) for p in X]
    return None


def is_on_disk(X: Any) -> bool:
    """True for the inputs read from disk batch by batch: a memmap or Parquet files."""
    return isinstance(X, np.memmap) or parquet_paths(X) is not None


def open_on_disk(X: Any, y: Any) -> tuple[DiskRows | ParquetRows, Any]:
    """A memmap, or Parquet files (then ``y`` may name the target column)."""
    if isinstance(X, np.memmap):
        return DiskRows(X), y
    paths = parquet_paths(X)
    if not paths:
        raise ValueError(f"no .parquet files found in {X}")
    if isinstance(y, str):
        columns = [c for c in ParquetRows(paths[:1]).columns if c != y]
        rows = ParquetRows(paths, columns=columns)
        return rows, ParquetRows(paths, columns=[y]).read_column(y)
    return ParquetRows(paths), y


def check_weight(weight: Any, n: int, name: str) -> np.ndarray | None:
    """Row weights as float32 ``(n,)``: non-negative, finite, not all zero; None stays None."""
    if weight is None:
        return None
    arr = np.asarray(weight) if not np.isscalar(weight) else weight
    if not np.isscalar(arr) and np.ndim(arr) != 1:
        raise ValueError(f"{name} must be 1-D, got shape {np.shape(arr)}")
    w = _check_sample_weight(arr, np.empty((n, 0)), dtype=np.float64, ensure_non_negative=True)
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} contains NaN or infinity")
    if not w.sum() > 0:
        raise ValueError(f"{name} sums to zero; at least one row needs a positive weight")
    return w.astype(np.float32)


def to_tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A tensor over ``array`` without copying when it is C-ordered. Read-only arrays (encoded
    views of the caller's data) are shared as well: the library never writes to its inputs."""
    if array.flags.c_contiguous and not array.flags.writeable:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(array).to(device)
    return torch.from_numpy(np.require(array, requirements=["C", "W"])).to(device)
