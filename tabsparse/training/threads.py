"""How many intra-op threads training and inference use on the CPU.

Operations on a few thousand values gain nothing from a second thread, and split operations
wait for every thread at each step, which costs milliseconds when other processes hold the
cores. :func:`training_threads` picks the count for a fit, :func:`intra_op_threads` applies it
to a block and restores PyTorch's setting afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from tabsparse.distributed import DistContext

__all__ = [
    "INFERENCE_GRAIN",
    "THREAD_GRAIN",
    "inference_threads",
    "intra_op_threads",
    "training_threads",
]

#: Values per operation from which a second intra-op thread pays off during training and
#: during inference.
THREAD_GRAIN = 1 << 17
INFERENCE_GRAIN = 1 << 20


def training_threads(
    batch_size: int, n_rows: int, network: nn.Module, ctx: DistContext | None = None
) -> int:
    """Intra-op threads for training on the CPU: one per ``THREAD_GRAIN`` values of the widest
    activation of a batch (rows of a rank's batch x the widest layer), at least one, at most
    PyTorch's current setting. TabNet's default batches (1024 rows, tens of channels) get one
    thread: their operations are too small to split."""
    world = 1 if ctx is None else ctx.world_size
    return _threads_for(max(1, min(batch_size, n_rows) // world), network, THREAD_GRAIN)


def inference_threads(rows: int, network: nn.Module) -> int:
    """Intra-op threads for forward passes of ``rows`` rows on the CPU: one per
    ``INFERENCE_GRAIN`` values of the widest activation, 1 to PyTorch's setting."""
    return _threads_for(rows, network, INFERENCE_GRAIN)


def _threads_for(rows: int, network: nn.Module, grain: int) -> int:
    """One thread per ``grain`` values of a batch's widest activation, 1 to the setting."""
    return max(1, min(torch.get_num_threads(), rows * _width(network) // grain))


def _width(network: nn.Module) -> int:
    """Widest activation (channels) of a TabNet-like network (64 for anything else)."""
    encoder = getattr(network, "encoder", None)
    if encoder is None:
        return 64
    return max(int(encoder.input_dim), 2 * (int(encoder.n_d) + int(encoder.n_a)))


_THREADS_LOCK = threading.Lock()
_THREADS_SAVED: list[int] = []  # the setting before the outermost active block


@contextmanager
def intra_op_threads(n: int) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)``; the setting found before the first of
    any overlapping blocks (other threads predicting at the same time) is restored when the
    last one ends."""
    with _THREADS_LOCK:
        if not _THREADS_SAVED:
            _THREADS_SAVED.append(torch.get_num_threads())
        _THREADS_SAVED.append(n)
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_SAVED.pop()
            if len(_THREADS_SAVED) == 1:
                restore = _THREADS_SAVED.pop()
                if torch.get_num_threads() != restore:
                    torch.set_num_threads(restore)
