"""Multi-process training on torch.distributed (DistributedDataParallel), launched by torchrun.

Nothing here launches processes: tabsparse speaks the process group that torchrun, SLURM
recipes, Ray Train or accelerate set up. ``detect("auto")`` returns a :class:`DistContext` when
the process is part of a group — an initialised one, or the environment a launcher sets
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), in which case the
group is initialised here (gloo on CPU, nccl on CUDA) with a timeout, so that a rank that dies
cannot leave the others waiting forever.

How one model is trained on many ranks (see :class:`tabsparse.training.Trainer`): every rank
draws the same global permutation and batch boundaries; each takes its shard of every global
batch (rows ``rank, rank + world_size, ...`` of an in-memory batch, a contiguous range of a
streamed one); ghost batch norm normalises per shard; gradients are averaged by DDP and each rank
scales its loss so that the average equals the loss of the whole global batch. Batch-norm running
statistics are averaged across ranks at the end of every epoch (their update is linear, so this
equals one process seeing all shards), then every rank validates the same model and rank 0's
score and stop decision are broadcast, so all ranks stop together.
"""

from __future__ import annotations

import atexit
import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class DistContext:
    """The process group a fit runs in."""

    rank: int
    world_size: int
    local_rank: int
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True when the environment of a distributed launcher with more than one process is set."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


def detect(
    mode: str | bool = "auto", *, device_type: str = "cpu", timeout_s: float = DEFAULT_TIMEOUT_S
) -> DistContext | None:
    """The distributed context to train in, or None for a single process.

    Parameters
    ----------
    mode : "auto", True or False
        "auto": distributed when a process group is initialised or a launcher's environment is
        set; True: the same, but an error when neither is the case; False: never.
    device_type : "cpu" or "cuda"
        Chooses the backend when the group is initialised here (gloo or nccl).
    timeout_s : float
        Collective timeout when the group is initialised here.
    """
    if mode is False:
        return None
    if not dist.is_available():
        if mode is True:
            raise ValueError("distributed=True but torch.distributed is not available")
        return None
    if not dist.is_initialized():
        if not launched_by_torchrun():
            if mode is True:
                raise ValueError(
                    "distributed=True but this process is not part of a process group: launch "
                    "the script with torchrun (e.g. torchrun --nproc_per_node=2 train.py)"
                )
            return None
        backend = "nccl" if device_type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
        atexit.register(_destroy)
    if dist.get_world_size() == 1 and mode == "auto":
        return None
    return DistContext(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        backend=str(dist.get_backend()),
    )


def _destroy() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def shard(start: int, stop: int, ctx: DistContext | None) -> tuple[int, int]:
    """This rank's contiguous part of the rows ``start:stop`` (sizes differ by at most one)."""
    if ctx is None:
        return start, stop
    n = stop - start
    lo = start + (n * ctx.rank) // ctx.world_size
    hi = start + (n * (ctx.rank + 1)) // ctx.world_size
    return lo, hi


def all_reduce_sum(value: torch.Tensor, ctx: DistContext | None) -> torch.Tensor:
    """Sum of ``value`` over ranks (``value`` itself for a single process)."""
    if ctx is not None:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def broadcast_floats(
    values: list[float], ctx: DistContext | None, device: torch.device
) -> list[float]:
    """Rank 0's ``values`` on every rank."""
    if ctx is None:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.broadcast(t, src=0)
    return [float(v) for v in t.tolist()]


def broadcast_int(value: int, ctx: DistContext | None, device: torch.device) -> int:
    """Rank 0's ``value`` on every rank."""
    if ctx is None:
        return value
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.broadcast(t, src=0)
    return int(t.item())


@torch.no_grad()
def average_buffers(module: nn.Module, ctx: DistContext | None) -> None:
    """Average the floating-point buffers (batch-norm running statistics) over ranks."""
    if ctx is None:
        return
    buffers = [b for b in module.buffers() if b.is_floating_point()]
    if not buffers:
        return
    flat = torch.cat([b.reshape(-1).to(torch.float64) for b in buffers])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= ctx.world_size
    offset = 0
    for b in buffers:
        b.copy_(flat[offset : offset + b.numel()].view_as(b))
        offset += b.numel()
