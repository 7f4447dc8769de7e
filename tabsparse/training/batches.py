"""Training rows on one device, and how they are cut into batches.

:class:`TensorData` holds encoded rows as tensors on the training device; each epoch draws one
permutation from a private :class:`torch.Generator` (the global RNG is never touched) and
slices it into ``ceil(n / batch_size)`` batches of near-equal size, so there is never a one-row
tail batch and never an epoch of zero batches. :class:`BatchSource` is what the trainer asks of
rows that are not all in memory (see :mod:`tabsparse.streaming`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch

from tabsparse.distributed import DistContext

__all__ = [
    "AUTO_BATCH_MAX",
    "AUTO_BATCH_MIN",
    "AUTO_STEPS_PER_EPOCH",
    "BatchSource",
    "TensorData",
    "auto_batch_size",
    "batch_bounds",
    "batch_multiple",
    "inference_batch_size",
    "iter_batches",
]


@dataclass(frozen=True)
class TensorData:
    """Encoded rows on one device: numeric ``(n, n_num)``, codes ``(n, n_cat)``, optional target
    and per-row weight.

    With ``rows``, the data is the subset ``rows`` of those tensors (e.g. the training part of a
    table whose other rows validate) without copying it; :meth:`take` and batches read through
    it.

    ``numeric`` may instead be a :class:`~tabsparse.training.sparse_rows.SparseRows` (the rows of
    a sparse matrix kept sparse): :meth:`take` then densifies only the rows taken, so batches,
    validation chunks and samples are dense while the whole table never is.
    """

    numeric: torch.Tensor
    codes: torch.Tensor
    target: torch.Tensor | None = None
    weight: torch.Tensor | None = None
    rows: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.numeric.shape[0] if self.rows is None else self.rows.shape[0])

    def take(self, idx: torch.Tensor | slice) -> TensorData:
        """The rows ``idx`` (positions in this data) as a new, compact TensorData."""
        if self.rows is not None:
            idx = self.rows[idx]

        def select(t: torch.Tensor) -> torch.Tensor:
            # index_select, not t[idx]: advanced indexing costs several times as much on the
            # CPU, once per training step
            if isinstance(idx, torch.Tensor) and idx.dtype in (torch.int64, torch.int32):
                return t.index_select(0, idx)
            return t[idx]

        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else select(t)

        return TensorData(
            select(self.numeric), select(self.codes), pick(self.target), pick(self.weight)
        )

    @property
    def device(self) -> torch.device:
        return self.numeric.device

    def mean_weight(self) -> float:
        """Mean sample weight (1 without weights)."""
        if self.weight is None:
            return 1.0
        return float((self.weight if self.rows is None else self.weight[self.rows]).mean())

    def n_batches(self, batch_size: int) -> int:
        return len(batch_bounds(len(self), batch_size))

    def iter_batches(
        self,
        batch_size: int,
        generator: torch.Generator,
        ctx: DistContext | None = None,
        multiple: int = 1,
    ) -> Iterator[tuple[TensorData, int]]:
        """Shuffled batches; see :func:`iter_batches`."""
        return iter_batches(self, batch_size, generator, ctx, multiple)

    def to(self, device: torch.device) -> TensorData:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=True)

        return TensorData(
            self.numeric.to(device),
            self.codes.to(device),
            move(self.target),
            move(self.weight),
            move(self.rows),
        )


class BatchSource(Protocol):
    """Training rows that are not all in memory (see :mod:`tabsparse.streaming`)."""

    @property
    def device(self) -> torch.device: ...

    def __len__(self) -> int: ...

    def mean_weight(self) -> float: ...

    def n_batches(self, batch_size: int) -> int: ...

    def iter_batches(
        self, batch_size: int, generator: torch.Generator, ctx: DistContext | None = None
    ) -> Iterator[tuple[TensorData, int]]: ...


def batch_bounds(n: int, batch_size: int, multiple: int = 1) -> list[tuple[int, int]]:
    """``ceil(n / batch_size)`` contiguous ``(start, stop)`` ranges of near-equal size.

    With ``multiple > 1`` every range but the last starts and stops on a multiple of it (so ghost
    batch norm can split each batch into equal virtual batches without copying); the sizes then
    differ by at most ``multiple`` rows. It is ignored when the batches are too small for it.
    """
    if n <= 0:
        return []
    n_batches = math.ceil(n / batch_size)
    if multiple > 1 and n >= 2 * multiple * n_batches:
        edges = [round(i * n / n_batches / multiple) * multiple for i in range(n_batches)]
        edges.append(n)
    else:
        edges = [round(i * n / n_batches) for i in range(n_batches + 1)]
    return list(itertools.pairwise(edges))


def batch_multiple(n: int, batch_size: int, virtual_batch_size: int, world_size: int = 1) -> int:
    """The ``multiple`` for :func:`batch_bounds` that lets every rank's share of a batch split
    into equal virtual batches of about ``virtual_batch_size`` rows."""
    if n <= 0:
        return 1
    rows_per_rank = n / math.ceil(n / batch_size) / world_size
    return math.ceil(rows_per_rank / virtual_batch_size) * world_size


def iter_batches(
    data: TensorData,
    batch_size: int,
    generator: torch.Generator,
    ctx: DistContext | None = None,
    multiple: int = 1,
) -> Iterator[tuple[TensorData, int]]:
    """Shuffled batches of ``data`` (one permutation drawn from ``generator``), with the size of
    the global batch; in a distributed fit, each rank gets its shard of every global batch.

    Rank ``r`` of ``W`` takes rows ``r, r + W, ...`` of each global batch: ghost batch norm's
    virtual batches (rows ``i::k``) of the shards are then exactly those of the global batch,
    so ``W`` processes train the same model as one.
    """
    perm = torch.randperm(len(data), generator=generator).to(data.device)
    for start, stop in batch_bounds(len(data), batch_size, multiple):
        rows = perm[start:stop] if ctx is None else perm[start + ctx.rank : stop : ctx.world_size]
        yield data.take(rows), stop - start


#: ``batch_size="auto"``: the largest batch, and the smallest, that the rule below picks
AUTO_BATCH_MAX = 1024
AUTO_BATCH_MIN = 128
#: ... and the number of optimiser steps per epoch it aims for at least
AUTO_STEPS_PER_EPOCH = 16


def auto_batch_size(n_rows: int, virtual_batch_size: int | None = None) -> int:
    """The training batch for ``batch_size="auto"``: 1024 rows (pytorch-tabnet's default) from
    16k training rows on; below that the largest power of two giving at least 16 steps per
    epoch, but not under 128 rows (nor under one virtual batch). A table of 2,000 rows trained
    in batches of 1024 gets two optimiser steps per epoch, a few hundred in a whole fit, and
    stays underfitted; in batches of 128 it gets sixteen.

    >>> [auto_batch_size(n) for n in (50_000, 5_000, 2_000, 300)]
    [1024, 256, 128, 128]
    """
    low = max(AUTO_BATCH_MIN, virtual_batch_size or 0)
    target = max(1, n_rows // AUTO_STEPS_PER_EPOCH)
    size = 1 << (target.bit_length() - 1)  # the largest power of two <= target
    return max(low, min(AUTO_BATCH_MAX, size))


def inference_batch_size(batch_size: int | str) -> int:
    """Rows per forward pass for predict / explain / transform: large batches (at least 16,384
    rows) amortise the per-operation cost; memory stays a few tens of MB at TabNet's widths."""
    return max(batch_size if isinstance(batch_size, int) else AUTO_BATCH_MAX, 16384)
