"""The training loop: :class:`Trainer` runs the epochs, its callbacks do the rest.

Pure torch (no scikit-learn). One epoch is: shuffled batches of the training rows (see
:mod:`tabsparse.training.batches`), one optimiser step per batch, the batch-norm statistics
flushed (and averaged over the ranks of a distributed fit), the epoch judged on the validation
rows, a record appended to the history. Losses are accumulated on the device and read back once
per epoch (no host synchronisation per batch). Early stopping, the learning-rate schedule, the
weight average, the ``compile="auto"`` trial, logging and checkpoints are callbacks (see
:mod:`tabsparse.training.callbacks`) that the trainer builds from its :class:`TrainConfig`.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from tabsparse.compiling import StepCompiler
from tabsparse.distributed import (
    DistContext,
    all_reduce_sum,
    average_buffers,
    broadcast_floats,
    broadcast_int,
)
from tabsparse.nn.ghost_bn import flush_statistics, fresh_statistics
from tabsparse.optim import SCHEDULES, AdamW
from tabsparse.training.batches import BatchSource, TensorData, batch_multiple
from tabsparse.training.callbacks import (
    Callback,
    Checkpointing,
    ColumnRevival,
    CompileTrial,
    EarlyStopping,
    EpochLog,
    Hooks,
    LRSchedule,
    WeightAveraging,
)
from tabsparse.training.checkpoints import CHECKPOINT_FORMAT, data_fingerprint
from tabsparse.training.predict import predict_outputs
from tabsparse.training.threads import intra_op_threads, training_threads

__all__ = ["LR_SCHEDULES", "LossFn", "ScoreFn", "TrainConfig", "Trainer", "TrainingError"]

LR_SCHEDULES = SCHEDULES

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
ScoreFn = Callable[[torch.Tensor, TensorData], float]


@dataclass
class TrainConfig:
    """Settings of one :meth:`Trainer.fit` (the estimators fill it from their parameters).

    ``max_epochs`` epochs at most of ``batch_size`` rows per optimiser step (AdamW with
    ``learning_rate``, ``adam_betas`` and ``weight_decay``, gradients clipped to norm
    ``clip_grad_norm``), the rate following ``lr_schedule`` (one of :data:`LR_SCHEDULES`); the
    objective adds ``lambda_sparse`` times the network's sparsity loss. With validation data,
    the fit stops after ``n_iter_no_change`` epochs whose score did not beat the best by more
    than ``tol`` (None: never early). ``seed`` seeds the shuffling; ``verbose >= 2`` logs every
    epoch; ``amp`` runs the forward pass in bfloat16 autocast. With ``checkpoint_dir``, a
    checkpoint is written every ``checkpoint_every`` epochs, carrying ``checkpoint_meta`` (a
    resume with other meta is refused).
    """

    max_epochs: int = 100
    batch_size: int = 1024
    learning_rate: float = 0.02
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)  # AdamW's (beta1, beta2)
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
    column_revival: int = 0  # epochs of reviving the shared first mask's columns (ColumnRevival)
    column_pruning: bool = False  # then prune its columns below the uniform share (ColumnRevival)


#: training rows whose forward passes recompute the batch-norm statistics of averaged weights
#: (:meth:`Trainer.recompute_statistics`): 32 virtual batches of 128 rows
STATISTICS_ROWS = 4096


def _meta_changes(old: Any, new: Any) -> list[str]:
    """``"name: old -> new"`` for each entry of two checkpoint metas that differs (values are
    shown as stored: the estimators store their parameters' reprs)."""
    if old == new:
        return []
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [f"settings {old!r} -> {new!r}"]
    out = []
    for name in [*old, *(k for k in new if k not in old)]:
        before, after = old.get(name, "(absent)"), new.get(name, "(absent)")
        if before != after:
            out.append(f"{name}: {before} -> {after}")
    return out


class TrainingError(FloatingPointError):
    """Training produced a non-finite loss; the network keeps the best weights seen before."""


def default_callbacks(config: TrainConfig, dist: DistContext | None = None) -> list[Callback]:
    """The callbacks a fit with ``config`` runs before the user's, in this order: early stopping
    (always: it keeps the best weights), the learning-rate schedule (unless constant), the weight
    average (with ``ema_decay``), the ``compile="auto"`` trial, the revival of the shared first
    mask's columns (with ``column_revival`` or ``column_pruning``), the epoch log (``verbose >= 2``)
    and checkpoints (with ``checkpoint_dir``); the last two on rank 0 only."""
    main = dist is None or dist.is_main
    stopping = EarlyStopping(config.n_iter_no_change, config.tol)
    out: list[Callback] = [stopping]
    if config.lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule={config.lr_schedule!r} must be one of {LR_SCHEDULES}")
    if config.lr_schedule != "constant":
        # plateau: cut the rate after 40% of early stopping's patience without improvement, so
        # that a stalled fit gets two cuts (x0.04) before it stops
        patience = max(1, round(0.4 * (config.n_iter_no_change or 10)))
        out.append(
            LRSchedule(
                config.lr_schedule, max_epochs=config.max_epochs, patience=patience, watch=stopping
            )
        )
    if config.ema_decay is not None:
        out.append(WeightAveraging(config.ema_decay))
    if config.compile == "auto":
        out.append(CompileTrial())
    if config.column_revival > 0 or config.column_pruning:
        out.append(ColumnRevival(config.column_revival, prune=config.column_pruning))
    if config.verbose >= 2 and main:
        out.append(EpochLog())
    if config.checkpoint_dir is not None and main:
        out.append(Checkpointing(config.checkpoint_dir, config.checkpoint_every))
    return out


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
        Run after the trainer's own (see :func:`default_callbacks`).
    dist : DistContext, optional
        Train one model across the ranks of a process group (see :mod:`tabsparse.distributed`).
    transform_batch : callable, optional
        ``(batch, generator) -> batch`` applied to every training batch before the forward pass,
        drawing any randomness from the trainer's generator (so a fit stays reproducible and
        resumable); self-supervised pretraining masks cells and builds its targets here.

    Notes
    -----
    During a fit the trainer also holds ``optimizer``, ``generator`` (the shuffling RNG),
    ``step`` (the training step's forward pass and loss), ``device``, ``steps_per_epoch``,
    ``epoch`` (the current history index), ``end_epoch`` (one past the last epoch this fit may
    run), ``validating`` (whether it has validation rows) and ``fit_callbacks`` (its own
    callbacks followed by ``callbacks``). Each fit starts
    with ``stop`` False and ``best_iteration`` None (a resumed fit takes the checkpoint's).
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
    fit_callbacks: list[Callback] = field(default_factory=list, init=False, repr=False)
    validating: bool = field(default=False, init=False, repr=False)
    _train: TensorData | BatchSource | None = field(default=None, init=False, repr=False)

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
        Refused (ValueError) when it was written by a fit with other settings
        (``config.checkpoint_meta``) or on other in-memory data.

        On the CPU, training uses fewer intra-op threads than PyTorch's setting when the
        batches are small (see :func:`training_threads`).
        """
        if len(train) == 0:
            raise ValueError("cannot train on 0 rows")
        if mean_weight is None:
            mean_weight = train.mean_weight()
        if not mean_weight > 0:
            raise ValueError("the sample weights of the training rows sum to zero")
        threads = torch.get_num_threads()
        if train.device.type == "cpu":
            threads = training_threads(self.config.batch_size, len(train), self.network, self.dist)
        with intra_op_threads(threads):
            self._begin(train, val, resume)
            try:
                return self._run(train, val, mean_weight)
            finally:
                self._train = None  # the trainer outlives the fit: do not hold its rows

    def _run(
        self, train: TensorData | BatchSource, val: TensorData | None, mean_weight: float
    ) -> Trainer:
        """The epochs (the loop itself)."""
        net, dist, hooks = self.network, self.dist, Hooks(self.fit_callbacks)
        world = 1 if dist is None else dist.world_size
        batch_end = hooks["on_batch_end"]
        net.train()
        try:
            for epoch in range(len(self.history), self.end_epoch):
                self.epoch, tic = epoch, time.perf_counter()
                hooks("on_epoch_begin", self)
                total = torch.zeros((), device=self.device)
                for batch, global_rows in self._batches(train):
                    if self.transform_batch is not None:
                        batch = self.transform_batch(batch, self.generator)
                    # scaled so that the mean over ranks (DDP averages gradients) is the loss of
                    # the whole global batch; for one process the factor is 1
                    share = world / global_rows
                    loss = self._train_step(batch, share / mean_weight, len(batch) * share)
                    for hook in batch_end:
                        hook(self)
                    total += loss.detach() * (global_rows / world)
                train_loss = float(all_reduce_sum(total, dist)) / len(train)
                record = {"epoch": float(epoch), "train_loss": train_loss}
                record["learning_rate"] = self.optimizer.lr
                hooks("on_batches_end", self, record)
                flush_statistics(net)  # before buffers are read directly
                average_buffers(net, dist)
                if not math.isfinite(train_loss):
                    raise TrainingError(
                        f"the training loss became non-finite ({train_loss}) in epoch "
                        f"{epoch + 1} (history index {epoch}); "
                        "try a lower learning_rate or check the inputs for extreme values"
                    )
                hooks("on_validation_begin", self)
                if val is not None:
                    record.update(self._validate(val))
                hooks("on_validation_end", self, record)
                record["seconds"] = time.perf_counter() - tic
                self.history.append(record)
                hooks("on_epoch_end", self, record)
                if broadcast_int(int(self.stop), dist, self.device):
                    break
        except KeyboardInterrupt:
            self.interrupted = True
            if self.best_iteration is None:  # no epoch finished: nothing worth keeping
                raise
            warnings.warn(
                f"training interrupted after {len(self.history)} epochs; keeping the best weights",
                RuntimeWarning,
                stacklevel=3,
            )
        finally:
            self.optimizer.release()
            net.eval()
            for cb in self.fit_callbacks:  # also after an error, so callbacks can clean up
                cb.on_fit_end(self)  # early stopping first: the best weights back in place
        return self

    def _begin(
        self, train: TensorData | BatchSource, val: TensorData | None, resume: dict[str, Any] | None
    ) -> None:
        """Everything before the first epoch: optimiser, callbacks, a restored checkpoint, the
        training step; ends with the callbacks' ``on_fit_begin``."""
        cfg = self.config
        self.stop, self.best_iteration = False, None
        self.device = train.device
        self._train, self.validating = train, val is not None
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.optimizer = self._optimizer()
        self.steps_per_epoch = train.n_batches(cfg.batch_size)
        self.fit_callbacks = [*default_callbacks(cfg, self.dist), *self.callbacks]
        self._run_start = len(self.history)
        check_data = cfg.checkpoint_dir is not None or resume is not None
        self._data_fingerprint = data_fingerprint(train, val) if check_data else None
        for cb in self.fit_callbacks:
            cb.on_setup(self)
        self.end_epoch = self._run_start + cfg.max_epochs
        if resume is not None:
            self._load_state(resume)
        self.epoch = len(self.history) - 1  # the last finished epoch (-1: none yet)
        model: nn.Module = self.network
        if self.dist is not None:
            model = nn.parallel.DistributedDataParallel(
                self.network,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                broadcast_buffers=False,
            )
        self.step = StepCompiler(
            self._forward_loss(model), cfg.compile, self.device, fullgraph=self.dist is None
        )
        for cb in self.fit_callbacks:
            cb.on_fit_begin(self)

    def _optimizer(self) -> AdamW:
        # tabsparse.optim, not torch.optim: the first torch optimiser of a process imports
        # torch._dynamo (seconds); the update is PyTorch's fused AdamW kernel all the same.
        # Flat buffers (one clip / zero / update operation each) except under DDP, whose
        # reducer manages the gradients itself
        cfg = self.config
        return AdamW(
            self.network.parameters(),
            lr=cfg.learning_rate,
            betas=cfg.adam_betas,
            weight_decay=cfg.weight_decay,
            flat=self.dist is None,
        )

    def _train_step(
        self, batch: TensorData, loss_scale: float, sparsity_scale: float
    ) -> torch.Tensor:
        """One optimiser step on ``batch``; returns its loss (on the device, not read back)."""
        opt, step = self.optimizer, self.step
        loss = self._loss(batch, loss_scale, sparsity_scale)
        opt.zero_grad()
        try:
            loss.backward()  # type: ignore[no-untyped-call]
        except Exception as exc:  # a compiled backward failing to compile
            if not step.give_up(exc):
                raise
            opt.zero_grad()
            loss = self._loss(batch, loss_scale, sparsity_scale)
            loss.backward()  # type: ignore[no-untyped-call]
        if self.config.clip_grad_norm is not None:
            opt.clip_grad_norm_(self.config.clip_grad_norm)
        opt.step()
        return loss

    def _forward_loss(self, model: nn.Module) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        """The part of a training step that ``compile`` compiles: the forward pass, the loss
        summed over the batch's rows (weighted; an ensemble's is the mean of its members'
        losses) and the sparsity loss."""
        loss_fn, amp, device_type = self.loss_fn, self.config.amp, self.device.type

        def forward_loss(
            numeric: torch.Tensor, codes: torch.Tensor, target: Any, weight: torch.Tensor | None
        ) -> tuple[torch.Tensor, torch.Tensor]:
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=amp):
                out = model(numeric, codes, with_masks=False)
                if out.member_logits is None:
                    per_row = loss_fn(out.logits.float(), target)
                else:  # an ensemble: each member trains on its own loss
                    members = out.member_logits.float()
                    per_row = torch.stack([loss_fn(m, target) for m in members]).mean(dim=0)
            if weight is not None:
                per_row = per_row * weight
            return per_row.sum(), out.sparsity_loss.float()

        return forward_loss

    def _loss(self, batch: TensorData, loss_scale: float, sparsity_scale: float) -> torch.Tensor:
        """The training objective of one batch: the weighted loss summed over its rows times
        ``loss_scale``, plus ``lambda_sparse`` times the sparsity loss times ``sparsity_scale``."""
        summed, sparsity = self.step(batch.numeric, batch.codes, batch.target, batch.weight)
        loss = summed * loss_scale
        return loss + self.config.lambda_sparse * (sparsity * sparsity_scale)

    @property
    def compiled(self) -> bool:
        """Whether the last fit's final epochs ran the compiled training step."""
        step = getattr(self, "step", None)
        return step is not None and step.uses_compiled

    def _batches(
        self, train: TensorData | BatchSource, generator: torch.Generator | None = None
    ) -> Iterator[tuple[TensorData, int]]:
        cfg, ctx = self.config, self.dist
        generator = self.generator if generator is None else generator
        if isinstance(train, TensorData) and cfg.virtual_batch_size is not None:
            world = 1 if ctx is None else ctx.world_size
            multiple = batch_multiple(len(train), cfg.batch_size, cfg.virtual_batch_size, world)
            return train.iter_batches(cfg.batch_size, generator, ctx, multiple)
        return train.iter_batches(cfg.batch_size, generator, ctx)

    @torch.no_grad()
    def recompute_statistics(self, rows: int = STATISTICS_ROWS) -> None:
        """Recompute the network's batch-norm statistics for the weights it holds now
        (:func:`~tabsparse.nn.ghost_bn.fresh_statistics`) from training-mode forward passes,
        without gradients, over at least ``rows`` training rows (all of them on a smaller
        table) in training batches. The rows are drawn afresh for each epoch from a generator
        seeded by the fit's seed and the epoch (the shuffling of the training batches is not
        touched, and a resumed fit draws the same rows); a distributed fit averages the
        statistics over its ranks. Only during a fit (the callbacks' hooks)."""
        train = self._train
        if train is None:
            raise RuntimeError("recompute_statistics() needs the rows of a running fit")
        net, cfg = self.network, self.config
        seed = (cfg.seed * 1_000_003 + self.epoch + 1) % (1 << 63)
        generator = torch.Generator().manual_seed(seed)
        was_training, seen = net.training, 0
        net.train()
        try:
            with (
                fresh_statistics(net),
                torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=cfg.amp),
            ):
                for batch, global_rows in self._batches(train, generator):
                    if self.transform_batch is not None:
                        batch = self.transform_batch(batch, generator)
                    net(batch.numeric, batch.codes, with_masks=False)
                    seen += global_rows
                    if seen >= rows:
                        break
        finally:
            net.train(was_training)
        average_buffers(net, self.dist)

    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue this fit exactly: weights, optimiser, RNG, history and
        the state of the callbacks (schedule, weight average, early stopping), tensors and plain
        Python values only; ``data`` fingerprints the in-memory training and validation rows."""
        state: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "meta": self.config.checkpoint_meta,
            "data": self._data_fingerprint,
            "network": self.network.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None,
            "ema": None,
            "generator": self.generator.get_state(),
            "history": [dict(r) for r in self.history],
            "run_start": self._run_start,
            "best_iteration": self.best_iteration,
            "stopped": bool(self.stop),
        }
        for cb in self.fit_callbacks:
            state.update(cb.state_dict())
        return state

    def _load_state(self, state: dict[str, Any]) -> None:
        """Continue the fit that wrote ``state``: refused (ValueError) when its settings
        (``checkpoint_meta``) or data differ, or when it already ran more epochs than this fit's
        ``max_epochs``. A fit that had finished (all its epochs, or stopped early) runs no
        further epoch, except up to a larger ``max_epochs`` when it was not stopped early."""
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError("not a tabsparse training checkpoint")
        changed = _meta_changes(state.get("meta"), self.config.checkpoint_meta)
        if changed:
            raise ValueError(
                "the checkpoint was written by a different fit (checkpoint -> this fit: "
                f"{'; '.join(changed)}); resume with the settings of that fit or start a new one"
            )
        saved = state.get("data")
        if saved is not None and self._data_fingerprint not in (None, saved):
            raise ValueError(
                "the checkpoint was written by a fit on other data (the training or validation "
                "rows differ in content); resume with the data of that fit or start a new one"
            )
        run_start = int(state["run_start"])
        done = len(state["history"]) - run_start
        if done > self.config.max_epochs:
            raise ValueError(
                f"the checkpoint holds {done} epochs of its fit, more than "
                f"max_epochs={self.config.max_epochs}: resume with max_epochs >= {done}"
            )
        self.network.load_state_dict(state["network"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.history[:] = [dict(r) for r in state["history"]]
        self._run_start = run_start
        self.end_epoch = run_start + self.config.max_epochs
        if state.get("stopped", False):  # stopped early: the fit is over, whatever max_epochs
            self.end_epoch = len(self.history)
        self.best_iteration = state["best_iteration"]
        for cb in self.fit_callbacks:
            cb.load_state_dict(state)

    def _validate(self, val: TensorData) -> dict[str, float]:
        """Validation loss and score of the network's current weights (every rank takes rank
        0's figures in a distributed fit)."""
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
        score = score if math.isfinite(score) else -math.inf
        if self.dist is not None:
            val_loss, score = broadcast_floats([val_loss, score], self.dist, self.device)
        return {"val_loss": val_loss, "val_score": score}
