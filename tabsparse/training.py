"""The training loop: tensor-resident batches, optimiser, schedule, early stopping, callbacks.

Pure torch (no scikit-learn). The data lives in tensors on the training device; each epoch draws
one permutation from a private :class:`torch.Generator` (the global RNG is never touched) and
slices it into ``ceil(n / batch_size)`` batches of near-equal size — so there is never a one-row
tail batch and never an epoch of zero batches. Losses are accumulated on the device and read back
once per epoch (no host synchronisation per batch).
"""

from __future__ import annotations

import collections
import copy
import itertools
import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from tabsparse.averaging import ExponentialAverage
from tabsparse.compiling import StepCompiler, state_index, state_name
from tabsparse.distributed import (
    DistContext,
    all_reduce_sum,
    average_buffers,
    broadcast_floats,
    broadcast_int,
)
from tabsparse.nn.ghost_bn import flush_statistics
from tabsparse.nn.network import NetworkOutput
from tabsparse.optim import SCHEDULES, AdamW, Schedule

logger = logging.getLogger("tabsparse")

LR_SCHEDULES = SCHEDULES


@dataclass(frozen=True)
class TensorData:
    """Encoded rows on one device: numeric ``(n, n_num)``, codes ``(n, n_cat)``, optional target
    and per-row weight.

    With ``rows``, the data is the subset ``rows`` of those tensors (e.g. the training part of a
    table whose other rows validate) without copying it; :meth:`take` and batches read through
    it.
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
            # index_select, not t[idx]: advanced indexing costs 4x as much on the CPU (78 vs
            # 19 us for a 1024-row batch of 54 columns), once per training step
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


@dataclass
class TrainConfig:
    """Settings of one :func:`train` call (the estimators fill it from their parameters)."""

    max_epochs: int = 100
    batch_size: int = 1024
    learning_rate: float = 0.02
    weight_decay: float = 0.0
    lr_schedule: str = "cosine"
    lambda_sparse: float = 1e-3
    clip_grad_norm: float | None = 1.0
    n_iter_no_change: int | None = 10
    tol: float = 1e-4
    seed: int = 0
    verbose: int = 0
    amp: bool = False
    checkpoint_dir: str | os.PathLike[str] | None = None
    checkpoint_every: int = 1
    checkpoint_meta: dict[str, Any] | None = None
    virtual_batch_size: int | None = None  # in-memory batches become multiples of the split
    ema_decay: float | None = None  # validate and keep an EMA of the weights (tabsparse.averaging)
    compile: bool | str = False  # torch.compile the training step (tabsparse.compiling)


CHECKPOINT_PREFIX = "tabsparse-training-checkpoint-"
CHECKPOINT_FORMAT = CHECKPOINT_PREFIX + "2"  # 2: tabsparse.optim state
CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(state: dict[str, Any], folder: str | os.PathLike[str]) -> Path:
    """Write ``state`` to ``folder/checkpoint.pt`` atomically (never a half-written file)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    target = path / CHECKPOINT_NAME
    tmp = path / f".{CHECKPOINT_NAME}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, target)
    return target


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint (a file, or a folder holding ``checkpoint.pt``) without unpickling
    arbitrary objects (``torch.load(weights_only=True)``)."""
    p = Path(path)
    if p.is_dir():
        p = p / CHECKPOINT_NAME
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise ValueError(f"{p} is not a readable tabsparse training checkpoint: {exc}") from exc
    if isinstance(state, dict) and str(state.get("format", "")).startswith(CHECKPOINT_PREFIX):
        if state["format"] != CHECKPOINT_FORMAT:
            raise ValueError(
                f"{p} was written by another version of tabsparse ({state['format']}; this "
                f"version reads {CHECKPOINT_FORMAT}): start a new fit"
            )
    else:
        raise ValueError(f"{p} is not a tabsparse training checkpoint")
    return state


def snapshot(module: nn.Module) -> dict[str, Any]:
    """A copy of ``module.state_dict()`` that later training does not change.

    Tensor by tensor, where ``copy.deepcopy`` takes ten times as long (8 ms for a TabNet,
    once per epoch); entries that are the same view of the same memory (a layer shared by
    several modules) stay one tensor, as they do in a deep copy. Keeps the state dict's
    ``_metadata`` for :meth:`~torch.nn.Module.load_state_dict`."""
    state = module.state_dict()
    copies: dict[tuple[Any, ...], torch.Tensor] = {}
    out: dict[str, Any] = collections.OrderedDict()
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            out[key] = copy.deepcopy(value)
            continue
        tag = (value.data_ptr(), value.dtype, value.device, tuple(value.shape), value.stride())
        if tag not in copies:
            copies[tag] = value.detach().clone()
        out[key] = copies[tag]
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = copy.deepcopy(metadata)  # type: ignore[attr-defined]
    return out


class Callback:
    """Base class for training callbacks; override any hook. Set ``trainer.stop = True`` to stop."""

    def on_fit_begin(self, trainer: Trainer) -> None:
        """Called once before the first epoch."""

    def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
        """Called after every epoch with that epoch's history record."""

    def on_fit_end(self, trainer: Trainer) -> None:
        """Called once after training ends (also after an interruption)."""


class TrainingError(FloatingPointError):
    """Training produced a non-finite loss; the network keeps the best weights seen before."""


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
    perm = torch.randperm(len(data), generator=generator).to(data.numeric.device)
    for start, stop in batch_bounds(len(data), batch_size, multiple):
        rows = perm[start:stop] if ctx is None else perm[start + ctx.rank : stop : ctx.world_size]
        yield data.take(rows), stop - start


#: Values per operation from which a second intra-op thread pays off during training and
#: during inference (see :func:`training_threads`).
THREAD_GRAIN = 1 << 17
INFERENCE_GRAIN = 1 << 20


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


@torch.inference_mode()
def predict_outputs(
    network: nn.Module, data: TensorData, *, batch_size: int = 16384, with_masks: bool = False
) -> NetworkOutput:
    """Eval-mode outputs for all rows in large batches; masks only when asked for."""
    was_training = network.training
    network.eval()
    logits, masks, importance = [], [], []
    threads = torch.get_num_threads()
    if data.device.type == "cpu":
        threads = _threads_for(min(batch_size, max(1, len(data))), network, INFERENCE_GRAIN)
    try:
        with intra_op_threads(threads):
            for start, stop in batch_bounds(len(data), batch_size) or [(0, 0)]:
                chunk = data.take(slice(start, stop))
                out = network(chunk.numeric, chunk.codes, with_masks=with_masks)
                logits.append(out.logits.float())
                if with_masks:
                    masks.append(out.masks.float())
                    importance.append(out.step_importance.float())
    finally:
        network.train(was_training)
    return NetworkOutput(
        logits=torch.cat(logits),
        masks=torch.cat(masks, dim=1) if with_masks else torch.empty(0),
        sparsity_loss=torch.zeros(()),
        step_importance=torch.cat(importance, dim=1) if with_masks else torch.empty(0),
    )


def training_threads(
    batch_size: int, n_rows: int, network: nn.Module, ctx: DistContext | None = None
) -> int:
    """Intra-op threads for training on the CPU: one per ``THREAD_GRAIN`` values of the widest
    activation of a batch (rows of a rank's batch x the widest layer), at least one, at most
    PyTorch's current setting. TabNet's default batches (1024 rows, tens of channels) get one
    thread: their operations are too small to split, and split operations wait for every
    thread at each step, which costs milliseconds when other processes hold the cores."""
    world = 1 if ctx is None else ctx.world_size
    return _threads_for(max(1, min(batch_size, n_rows) // world), network, THREAD_GRAIN)


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


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
ScoreFn = Callable[[torch.Tensor, TensorData], float]


@dataclass
class Trainer:
    """Runs the epochs; holds the history and the best weights.

    Parameters
    ----------
    network : nn.Module
        Returns :class:`NetworkOutput` from ``(numeric, codes)``.
    loss_fn : callable
        ``(logits, target) -> per-row loss (n,)``.
    config : TrainConfig
    score_fn : callable, optional
        ``(val_logits, val_data) -> score`` (higher is better) watched by early stopping;
        without it early stopping watches the validation loss.
    callbacks : sequence of Callback
    dist : DistContext, optional
        Train one model across the ranks of a process group (see :mod:`tabsparse.distributed`).
    transform_batch : callable, optional
        ``(batch, generator) -> batch`` applied to every training batch before the forward pass,
        drawing any randomness from the trainer's generator (so a fit stays reproducible and
        resumable); self-supervised pretraining masks cells and builds its targets here.
    """

    network: nn.Module
    loss_fn: LossFn
    config: TrainConfig
    score_fn: ScoreFn | None = None
    callbacks: Sequence[Callback] = ()
    history: list[dict[str, float]] = field(default_factory=list)
    dist: DistContext | None = None
    best_iteration: int | None = None
    stop: bool = False
    interrupted: bool = False
    transform_batch: Callable[[TensorData, torch.Generator], TensorData] | None = None

    def _optimizer(self) -> AdamW:
        # tabsparse.optim, not torch.optim: the first torch optimiser of a process imports
        # torch._dynamo (seconds); the update is PyTorch's fused AdamW kernel all the same
        cfg = self.config
        # flat buffers (one clip / zero / update operation each) except under DDP, whose
        # reducer manages the gradients itself
        return AdamW(
            self.network.parameters(),
            lr=cfg.learning_rate,
            weight_decay=cfg.weight_decay,
            flat=self.dist is None,
        )

    def _scheduler(self, opt: AdamW, steps_per_epoch: int) -> Schedule | None:
        cfg = self.config
        if cfg.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule={cfg.lr_schedule!r} must be one of {LR_SCHEDULES}")
        if cfg.lr_schedule == "constant":
            return None
        total = max(1, cfg.max_epochs * steps_per_epoch)
        gamma = 0.95 ** (1.0 / max(1, steps_per_epoch))  # exponential: x0.95 per epoch
        # plateau: cut the rate after 40% of early stopping's patience without improvement, so
        # that a stalled fit gets two cuts (x0.04) before it stops
        patience = max(1, round(0.4 * (cfg.n_iter_no_change or 10)))
        return Schedule(opt, cfg.lr_schedule, total=total, gamma=gamma, patience=patience)

    def fit(
        self,
        train: TensorData | BatchSource,
        val: TensorData | None = None,
        *,
        mean_weight: float | None = None,
        resume: dict[str, Any] | None = None,
    ) -> Trainer:
        """Train on ``train``; with ``val``, keep the best epoch's weights and stop early.

        ``resume`` is a state written by :meth:`checkpoint_state` (see
        :func:`load_checkpoint`): training continues exactly where that state was taken.

        On the CPU, training uses fewer intra-op threads than PyTorch's setting when the
        batches are small (see :func:`training_threads`): operations on a few thousand values
        gain nothing from a second thread, and lose a great deal when cores are shared.
        """
        threads = torch.get_num_threads()
        if train.device.type == "cpu":
            threads = training_threads(self.config.batch_size, len(train), self.network, self.dist)
        with intra_op_threads(threads):
            return self._fit(train, val, mean_weight=mean_weight, resume=resume)

    def _fit(
        self,
        train: TensorData | BatchSource,
        val: TensorData | None = None,
        *,
        mean_weight: float | None = None,
        resume: dict[str, Any] | None = None,
    ) -> Trainer:
        """:meth:`fit` under the chosen number of threads."""
        cfg = self.config
        if len(train) == 0:
            raise ValueError("cannot train on 0 rows")
        net = self.network
        device = train.device
        self._generator = torch.Generator().manual_seed(cfg.seed)
        self._opt = opt = self._optimizer()
        steps = train.n_batches(cfg.batch_size)
        self._sched = sched = self._scheduler(opt, steps)
        self._ema = ema = (
            None
            if cfg.ema_decay is None
            else ExponentialAverage(net.parameters(), decay=cfg.ema_decay)
        )
        if mean_weight is None:
            mean_weight = train.mean_weight()
        if not mean_weight > 0:
            raise ValueError("the sample weights of the training rows sum to zero")
        self._best_score = -math.inf
        self._best_state: dict[str, torch.Tensor] | None = None
        self._since_best = 0
        self._run_start = len(self.history)
        if resume is not None:
            self._load_state(resume)
        ctx = self.dist
        world = 1 if ctx is None else ctx.world_size
        model: nn.Module = net
        if ctx is not None:
            model = nn.parallel.DistributedDataParallel(
                net,
                device_ids=[device.index] if device.type == "cuda" else None,
                broadcast_buffers=False,
            )
        step = StepCompiler(
            self._forward_loss(model, device), cfg.compile, device, fullgraph=ctx is None
        )
        self._step = step
        for cb in self.callbacks:
            cb.on_fit_begin(self)
        net.train()
        try:
            for epoch in range(len(self.history), self._run_start + cfg.max_epochs):
                tic = time.perf_counter()
                total = torch.zeros((), device=device)
                for batch, global_rows in self._batches(train, ctx):
                    if self.transform_batch is not None:
                        batch = self.transform_batch(batch, self._generator)
                    # scaled so that the mean over ranks (DDP averages gradients) is the loss of
                    # the whole global batch; for one process the factor is 1
                    share = world / global_rows
                    loss = self._loss(step, batch, share / mean_weight, len(batch) * share)
                    opt.zero_grad()
                    try:
                        loss.backward()  # type: ignore[no-untyped-call]
                    except Exception as exc:  # a compiled backward failing to compile
                        if not step.give_up(exc):
                            raise
                        opt.zero_grad()
                        loss = self._loss(step, batch, share / mean_weight, len(batch) * share)
                        loss.backward()  # type: ignore[no-untyped-call]
                    if cfg.clip_grad_norm is not None:
                        opt.clip_grad_norm_(cfg.clip_grad_norm)
                    opt.step()
                    if sched is not None:
                        sched.step()
                    if ema is not None:
                        ema.update()
                    total += loss.detach() * (global_rows / world)
                train_loss = float(all_reduce_sum(total, ctx)) / len(train)
                epochs_left = self._run_start + cfg.max_epochs - epoch - 1
                self._compile_epoch_end(step, time.perf_counter() - tic, epochs_left, device)
                flush_statistics(net)  # before buffers are read directly
                average_buffers(net, ctx)
                record: dict[str, float] = {
                    "epoch": float(epoch),
                    "train_loss": train_loss,
                    "learning_rate": opt.lr,
                }
                if not math.isfinite(train_loss):
                    self._restore(self._best_state)
                    raise TrainingError(
                        f"the training loss became non-finite ({train_loss}) in epoch {epoch + 1} "
                        f"(history index {epoch}); "
                        "try a lower learning_rate or check the inputs for extreme values"
                    )
                if ema is not None:  # validate and keep the averaged weights
                    ema.swap()
                if val is not None:
                    record.update(self._validate(val))
                    if ctx is not None:  # every rank takes rank 0's decision
                        pair = [record["val_loss"], record["val_score"]]
                        record["val_loss"], record["val_score"] = broadcast_floats(
                            pair, ctx, device
                        )
                    score = record["val_score"]
                    improved = score > self._best_score + cfg.tol
                else:  # without validation the latest finite epoch is the best one
                    score, improved = -train_loss, True
                if sched is not None and val is not None:
                    sched.epoch_end(improved)
                if improved or self._best_state is None:
                    self._best_score = score if math.isfinite(score) else self._best_score
                    self._best_state = snapshot(net)
                    self.best_iteration = epoch
                    self._since_best = 0
                else:
                    self._since_best += 1
                if ema is not None:  # back to the live weights to train on
                    ema.swap()
                record["seconds"] = time.perf_counter() - tic
                self.history.append(record)
                self._log(record)
                if (
                    cfg.checkpoint_dir is not None
                    and (epoch + 1) % cfg.checkpoint_every == 0
                    and (ctx is None or ctx.is_main)
                ):
                    save_checkpoint(self.checkpoint_state(), cfg.checkpoint_dir)
                for cb in self.callbacks:
                    cb.on_epoch_end(self, record)
                if (
                    val is not None
                    and cfg.n_iter_no_change is not None
                    and self._since_best >= cfg.n_iter_no_change
                ):
                    break
                if broadcast_int(int(self.stop), ctx, device):
                    break
        except KeyboardInterrupt:
            self.interrupted = True
            if self._best_state is None:  # no epoch finished: nothing worth keeping
                raise
            warnings.warn(
                f"training interrupted after {len(self.history)} epochs; keeping the best weights",
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            opt.release()
            net.eval()
            self._restore(self._best_state)
            for cb in self.callbacks:  # also after an error, so callbacks can clean up
                cb.on_fit_end(self)
        return self

    def _forward_loss(
        self, model: nn.Module, device: torch.device
    ) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        """The part of a training step that ``compile`` compiles: the forward pass, the loss
        summed over the batch's rows (weighted) and the sparsity loss."""
        loss_fn, amp = self.loss_fn, self.config.amp

        def forward_loss(
            numeric: torch.Tensor, codes: torch.Tensor, target: Any, weight: torch.Tensor | None
        ) -> tuple[torch.Tensor, torch.Tensor]:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                out = model(numeric, codes, with_masks=False)
                per_row = loss_fn(out.logits.float(), target)
            if weight is not None:
                per_row = per_row * weight
            return per_row.sum(), out.sparsity_loss.float()

        return forward_loss

    def _loss(
        self, step: StepCompiler, batch: TensorData, loss_scale: float, sparsity_scale: float
    ) -> torch.Tensor:
        """The training objective of one batch: the weighted loss summed over its rows times
        ``loss_scale``, plus ``lambda_sparse`` times the sparsity loss times ``sparsity_scale``."""
        summed, sparsity = step(batch.numeric, batch.codes, batch.target, batch.weight)
        loss = summed * loss_scale
        return loss + self.config.lambda_sparse * (sparsity * sparsity_scale)

    def _compile_epoch_end(
        self, step: StepCompiler, seconds: float, epochs_left: int, device: torch.device
    ) -> None:
        """Let ``compile="auto"`` measure the epoch (every rank then follows rank 0)."""
        if step.setting != "auto" or step.state in ("eager", "compiled"):
            return
        state = step.epoch_end(seconds, epochs_left)
        if self.dist is not None:
            step.set_state(state_name(broadcast_int(state_index(state), self.dist, device)))
        if step.decision is not None and step.state in ("eager", "compiled"):
            logger.info('compile="auto" chose %s', step.decision)

    @property
    def compiled(self) -> bool:
        """Whether the last fit's final epochs ran the compiled training step."""
        step = getattr(self, "_step", None)
        return step is not None and step.uses_compiled

    def _batches(
        self, train: TensorData | BatchSource, ctx: DistContext | None
    ) -> Iterator[tuple[TensorData, int]]:
        cfg = self.config
        if isinstance(train, TensorData) and cfg.virtual_batch_size is not None:
            world = 1 if ctx is None else ctx.world_size
            multiple = batch_multiple(len(train), cfg.batch_size, cfg.virtual_batch_size, world)
            return train.iter_batches(cfg.batch_size, self._generator, ctx, multiple)
        return train.iter_batches(cfg.batch_size, self._generator, ctx)

    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue this fit exactly: weights, optimiser, schedule, RNG,
        history and early-stopping state (tensors and plain Python values only)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "meta": self.config.checkpoint_meta,
            "network": self.network.state_dict(),
            "optimizer": self._opt.state_dict(),
            "scheduler": None if self._sched is None else self._sched.state_dict(),
            "ema": None if self._ema is None else self._ema.state_dict(),
            "generator": self._generator.get_state(),
            "history": [dict(r) for r in self.history],
            "run_start": self._run_start,
            "best_state": self._best_state,
            "best_score": self._best_score,
            "best_iteration": self.best_iteration,
            "since_best": self._since_best,
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("not a tabsparse training checkpoint")
        if state.get("meta") != self.config.checkpoint_meta:
            raise ValueError(
                "the checkpoint was written by a different fit (other parameters or data): "
                f"checkpoint {state.get('meta')}, this fit {self.config.checkpoint_meta}"
            )
        self.network.load_state_dict(state["network"])
        self._opt.load_state_dict(state["optimizer"])
        if self._sched is not None and state["scheduler"] is not None:
            self._sched.load_state_dict(state["scheduler"])
        if self._ema is not None and state.get("ema") is not None:
            self._ema.load_state_dict(state["ema"])
        self._generator.set_state(state["generator"])
        self.history[:] = [dict(r) for r in state["history"]]
        self._run_start = int(state["run_start"])
        self._best_state = state["best_state"]
        self._best_score = float(state["best_score"])
        self.best_iteration = state["best_iteration"]
        self._since_best = int(state["since_best"])

    def _restore(self, state: dict[str, torch.Tensor] | None) -> None:
        if state is not None:
            self.network.load_state_dict(state)

    def _validate(self, val: TensorData) -> dict[str, float]:
        if val.rows is not None:
            val = val.take(slice(None))
        out = predict_outputs(self.network, val, batch_size=max(self.config.batch_size, 16384))
        assert val.target is not None
        per_row = self.loss_fn(out.logits, val.target)
        if val.weight is not None:
            val_loss = float((per_row * val.weight).sum() / val.weight.sum().clamp_min(1e-30))
        else:
            val_loss = float(per_row.mean())
        score = -val_loss if self.score_fn is None else float(self.score_fn(out.logits, val))
        return {"val_loss": val_loss, "val_score": score if math.isfinite(score) else -math.inf}

    def _log(self, record: dict[str, Any]) -> None:
        if self.config.verbose < 2 or (self.dist is not None and not self.dist.is_main):
            return
        parts = [f"epoch {int(record['epoch']) + 1:>4}", f"train_loss {record['train_loss']:.5f}"]
        if "val_loss" in record:
            parts += [f"val_loss {record['val_loss']:.5f}", f"val_score {record['val_score']:.5f}"]
        parts.append(f"{record['seconds']:.2f}s")
        logger.info("  ".join(parts))
