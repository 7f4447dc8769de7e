"""Training on tables larger than memory: batches read from a 2-D array on disk.

:class:`DiskRows` reads contiguous row ranges of a C-ordered ``numpy.memmap`` (or any 2-D array)
with plain file reads — the file is never mapped as a whole, so the pages read do not stay in the
process's resident memory. :func:`scan` makes one streaming pass to gather what the estimators need
before training: the :class:`~tabsparse.data.TableEncoder` statistics and vocabularies (through
``partial_fit``) and bounded random samples of rows (validation rows, rows for importances).
:class:`StreamingSource` then serves shuffled batches epoch after epoch: the order of blocks of
``block_rows`` rows is shuffled, ``blocks_per_buffer`` blocks are read into a buffer, the buffer
is shuffled and cut into batches — so memory stays at a few blocks whatever the file size.

Numpy and torch only (no scikit-learn).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from tabsparse.data import EncodedTable, TableEncoder
from tabsparse.distributed import DistContext, shard
from tabsparse.training import TensorData

DEFAULT_BLOCK_ROWS = 32_768


def even_bounds(n: int, count: int) -> list[tuple[int, int]]:
    """``count`` contiguous ranges of near-equal size covering ``n`` rows (none empty)."""
    count = max(1, min(count, n))
    edges = [round(i * n / count) for i in range(count + 1)]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


class DiskRows:
    """Read row ranges of a 2-D array without loading it.

    Parameters
    ----------
    array : numpy.memmap or ndarray of shape (n_rows, n_columns)
        A C-ordered memmap is read with file reads; anything else is sliced.
    """

    def __init__(self, array: np.ndarray) -> None:
        if array.ndim != 2:
            raise ValueError(f"expected a 2-D array on disk, got shape {array.shape}")
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self._file = None
        if isinstance(array, np.memmap) and array.filename and array.flags.c_contiguous:
            self._file = str(array.filename)
            self._offset = int(array.offset)
            self._row_bytes = array.shape[1] * array.dtype.itemsize

    def __len__(self) -> int:
        return int(self.shape[0])

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as an in-memory array."""
        if self._file is None:
            return np.array(self.array[start:stop])
        count = (stop - start) * self.shape[1]
        with open(self._file, "rb") as f:
            f.seek(self._offset + start * self._row_bytes)
            data = np.fromfile(f, dtype=self.dtype, count=count)
        return data.reshape(stop - start, self.shape[1])

    def blocks(self, block_rows: int) -> list[tuple[int, int]]:
        """Contiguous ``(start, stop)`` blocks covering all rows."""
        n = len(self)
        return [(a, min(a + block_rows, n)) for a in range(0, n, block_rows)]


class ParquetRows:
    """Row groups of one or more Parquet files as the blocks of a table (needs pyarrow).

    Parameters
    ----------
    paths : sequence of paths
        The files, read in this order; they must have the same columns.
    columns : sequence of str, optional
        The columns to read (default: all).
    """

    def __init__(
        self, paths: Sequence[str | os.PathLike[str]], columns: Sequence[str] | None = None
    ):
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(
                "reading Parquet files needs pyarrow: pip install 'tabsparse[parquet]'"
            ) from exc
        if not paths:
            raise ValueError("no Parquet files were given")
        self.files = [pq.ParquetFile(str(p)) for p in paths]
        names = self.files[0].schema_arrow.names
        for path, f in zip(paths, self.files, strict=True):
            if f.schema_arrow.names != names:
                raise ValueError(f"{path} has columns {f.schema_arrow.names}, expected {names}")
        self.columns = list(columns) if columns is not None else list(names)
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ValueError(f"columns not in the Parquet files: {missing}")
        self._groups: list[tuple[int, int, int, int]] = []  # (file, group, start, stop)
        start = 0
        for fi, f in enumerate(self.files):
            for gi in range(f.num_row_groups):
                stop = start + f.metadata.row_group(gi).num_rows
                self._groups.append((fi, gi, start, stop))
                start = stop
        self.shape = (start, len(self.columns))
        self.dtype = None

    def __len__(self) -> int:
        return int(self.shape[0])

    def blocks(self, block_rows: int) -> list[tuple[int, int]]:
        """One block per row group (``block_rows`` is ignored: row groups are the unit read)."""
        return [(a, b) for _, _, a, b in self._groups if b > a]

    def read(self, start: int, stop: int) -> pd.DataFrame:
        """The row group that spans ``start:stop`` as a DataFrame."""
        for fi, gi, a, b in self._groups:
            if (a, b) == (start, stop):
                table = self.files[fi].read_row_group(gi, columns=self.columns)
                return table.to_pandas()
        raise ValueError(f"rows {start}:{stop} are not a row group")

    def read_column(self, name: str) -> np.ndarray:
        """One whole column (for the target)."""
        parts = [f.read(columns=[name]).column(0).to_numpy() for f in self.files]
        return np.concatenate(parts)


def _concat(parts: list[Any]) -> Any:
    if isinstance(parts[0], pd.DataFrame):
        return pd.concat(parts, ignore_index=True)
    return np.concatenate(parts)


def _take(block: Any, idx: np.ndarray) -> Any:
    return block.iloc[idx].reset_index(drop=True) if isinstance(block, pd.DataFrame) else block[idx]


@dataclass
class ScanResult:
    """What one streaming pass gathered: fitted encoder and sampled row ids with their rows."""

    encoder: TableEncoder
    val_rows: np.ndarray
    val_table: EncodedTable | None
    sample_rows: np.ndarray
    sample_table: EncodedTable


def scan(
    rows: DiskRows | ParquetRows,
    encoder: TableEncoder,
    *,
    n_val: int,
    n_sample: int,
    rng: np.random.Generator,
    fit_encoder: bool = True,
    block_rows: int = DEFAULT_BLOCK_ROWS,
) -> ScanResult:
    """One pass over the file: fit the encoder chunk by chunk and keep two random row samples
    (``n_val`` validation rows, excluded from training, and ``n_sample`` training rows)."""
    n = len(rows)
    chosen = np.sort(rng.choice(n, size=min(n, n_val + n_sample), replace=False))
    is_val = np.zeros(len(chosen), dtype=bool)
    is_val[rng.choice(len(chosen), size=min(n_val, len(chosen)), replace=False)] = True
    raw_parts: list[np.ndarray] = []
    for start, stop in rows.blocks(block_rows):
        block = rows.read(start, stop)
        if fit_encoder:
            encoder.partial_fit(block)
        lo, hi = np.searchsorted(chosen, [start, stop])
        if hi > lo:
            raw_parts.append(_take(block, chosen[lo:hi] - start))
    encoded = encoder.transform(_concat(raw_parts)) if raw_parts else None
    val_rows, sample_rows = chosen[is_val], chosen[~is_val]
    if encoded is None:
        raise ValueError("the array on disk has no rows")
    return ScanResult(
        encoder=encoder,
        val_rows=val_rows,
        val_table=encoded.take(np.flatnonzero(is_val)) if n_val else None,
        sample_rows=sample_rows,
        sample_table=encoded.take(np.flatnonzero(~is_val)),
    )


class StreamingSource:
    """Shuffled training batches read from disk, buffer by buffer (a :class:`BatchSource`).

    Parameters
    ----------
    rows : DiskRows
    encoder : TableEncoder
        Fitted; turns each raw block into numeric values and category codes.
    target : callable
        ``(row ids) -> target tensor`` on ``device``.
    weight : ndarray of shape (n_rows,), optional
    exclude : ndarray of int, optional
        Row ids never trained on (the validation rows).
    device : torch.device
    block_rows, blocks_per_buffer : int
        Rows per contiguous read, and reads shuffled together.
    """

    def __init__(
        self,
        rows: DiskRows | ParquetRows,
        encoder: TableEncoder,
        target: Callable[[np.ndarray], torch.Tensor],
        *,
        weight: np.ndarray | None,
        exclude: np.ndarray | None,
        device: torch.device,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        blocks_per_buffer: int = 4,
    ) -> None:
        self.rows = rows
        self.encoder = encoder
        self.target = target
        self.weight = weight
        self._device = device
        self.block_rows = block_rows
        self.blocks_per_buffer = blocks_per_buffer
        self.keep = np.ones(len(rows), dtype=bool)
        if exclude is not None:
            self.keep[exclude] = False
        self._blocks = rows.blocks(block_rows)
        self._kept = [int(self.keep[a:b].sum()) for a, b in self._blocks]

    @property
    def device(self) -> torch.device:
        return self._device

    def __len__(self) -> int:
        return int(sum(self._kept))

    def mean_weight(self) -> float:
        if self.weight is None:
            return 1.0
        return float(self.weight[self.keep].mean())

    def fingerprint(self) -> str:
        """A hash (BLAKE2b, hex) of the rows' raw values, the targets, the weights and which rows
        are held out, for the resume check of :func:`tabsparse.training.data_fingerprint`; one
        pass over the file (the trainer asks for it only when a fit checkpoints or resumes)."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(self.keep.tobytes())
        for start, stop in self._blocks:
            block = self.rows.read(start, stop)
            if isinstance(block, pd.DataFrame):
                digest.update(repr(list(block.columns)).encode())
                block = pd.util.hash_pandas_object(block, index=False).to_numpy()
            digest.update(np.ascontiguousarray(block).tobytes())
        target = self.target(np.arange(len(self.keep))).detach().cpu().contiguous()
        digest.update(f"{target.dtype}:{tuple(target.shape)};".encode())
        digest.update(target.reshape(-1).view(torch.uint8).numpy().tobytes())
        if self.weight is not None:
            digest.update(np.ascontiguousarray(self.weight).tobytes())
        return digest.hexdigest()

    def _buffers(self, order: list[int]) -> list[list[int]]:
        k = self.blocks_per_buffer
        return [order[i : i + k] for i in range(0, len(order), k)]

    def _batches_per_buffer(self, batch_size: int) -> list[int]:
        # fixed per buffer position from the nominal block sizes (all blocks are full but the
        # last, which always comes last), so every epoch has the same number of steps
        sizes = [b - a for a, b in self._blocks]
        groups = self._buffers(list(range(len(sizes))))
        return [max(1, math.ceil(sum(sizes[i] for i in g) / batch_size)) for g in groups]

    def n_batches(self, batch_size: int) -> int:
        return sum(self._batches_per_buffer(batch_size))

    def iter_batches(
        self, batch_size: int, generator: torch.Generator, ctx: DistContext | None = None
    ) -> Iterator[tuple[TensorData, int]]:
        order = torch.randperm(len(self._blocks), generator=generator).tolist()
        # keep the (possibly short) last block last so every epoch has the same batch count
        last = len(self._blocks) - 1
        order = [b for b in order if b != last] + [last]
        counts = self._batches_per_buffer(batch_size)
        for group, count in zip(self._buffers(order), counts, strict=True):
            spans = [self._blocks[b] for b in group]
            keep = np.concatenate([self.keep[a:b] for a, b in spans])
            ids = np.concatenate([np.arange(a, b) for a, b in spans])[keep]
            raw = _concat([self.rows.read(a, b) for a, b in spans])
            if not keep.all():
                raw = _take(raw, np.flatnonzero(keep))
            enc = self.encoder.transform(raw)
            del raw  # only the encoded buffer stays alive while its batches are served
            numeric = torch.from_numpy(enc.numeric).to(self._device)
            codes = torch.from_numpy(enc.codes).to(self._device)
            perm = torch.randperm(len(ids), generator=generator)
            for start, stop in even_bounds(len(ids), count):
                lo, hi = shard(start, stop, ctx)
                take = perm[lo:hi]
                rows = ids[take.numpy()]
                w = None if self.weight is None else self.weight[rows]
                take = take.to(self._device)
                yield (
                    TensorData(
                        numeric[take],
                        codes[take],
                        self.target(rows),
                        None if w is None else torch.from_numpy(w).to(self._device),
                    ),
                    stop - start,
                )
