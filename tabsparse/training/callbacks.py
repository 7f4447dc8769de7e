"""Training events and the callbacks that do the trainer's jobs between optimiser steps.

The :class:`~tabsparse.training.Trainer` calls these hooks of every callback, in list order:

===========================  =====================================================================
``on_setup(t)``              once per fit, before a checkpoint is restored: make per-fit state
``on_fit_begin(t)``          once, after any checkpoint was restored, before the first epoch
``on_epoch_begin(t)``        before each epoch's first batch
``on_batch_end(t)``          after each optimiser step
``on_batches_end(t, r)``     after the epoch's last step (``r``: epoch, train_loss, learning_rate)
``on_validation_begin(t)``   before the epoch's weights are judged (validated, kept if best)
``on_validation_end(t, r)``  after validation (``r`` has val_loss and val_score with val data)
``on_epoch_end(t, r)``       after the epoch's complete record was appended to the history
``on_fit_end(t)``            once after training ends, also after an error or an interruption
===========================  =====================================================================

Only the hooks a callback overrides are called, and the list of them is made once per fit, so
a callback without ``on_batch_end`` costs nothing per batch. Setting ``trainer.stop = True``
ends the fit after the current epoch.

The trainer builds its own callbacks from its :class:`~tabsparse.training.TrainConfig` and runs
them before the user's (see :func:`default_callbacks`): :class:`EarlyStopping` (best weights
and early stopping), :class:`LRSchedule`, :class:`WeightAveraging`, :class:`CompileTrial`,
:class:`ColumnRevival`, :class:`EpochLog` and :class:`Checkpointing`. Those that must survive a
resume return their state from :meth:`Callback.state_dict`; it becomes part of the training
checkpoint.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tabsparse.averaging import ExponentialAverage
from tabsparse.compiling import state_index, state_name
from tabsparse.distributed import broadcast_int
from tabsparse.nn import shared_mask
from tabsparse.nn.ghost_bn import statistics_state
from tabsparse.optim import SCHEDULES, Schedule
from tabsparse.training.checkpoints import save_checkpoint, snapshot

if TYPE_CHECKING:
    from tabsparse.training.loop import Trainer

__all__ = [
    "EVENTS",
    "Callback",
    "Checkpointing",
    "ColumnRevival",
    "CompileTrial",
    "EarlyStopping",
    "EpochLog",
    "Hooks",
    "LRSchedule",
    "WeightAveraging",
]

logger = logging.getLogger("tabsparse")

Record = dict[str, float]


class Callback:
    """Base class for training callbacks; override any hook. Set ``trainer.stop = True`` to stop.

    See the module docstring for when each hook is called.
    """

    def on_setup(self, trainer: Trainer) -> None:
        """Called once per fit before a checkpoint is restored: create the fit's state."""

    def on_fit_begin(self, trainer: Trainer) -> None:
        """Called once before the first epoch."""

    def on_epoch_begin(self, trainer: Trainer) -> None:
        """Called before each epoch's first batch (``trainer.epoch`` is its history index)."""

    def on_batch_end(self, trainer: Trainer) -> None:
        """Called after each optimiser step."""

    def on_batches_end(self, trainer: Trainer, record: Record) -> None:
        """Called after the epoch's last optimiser step, before validation."""

    def on_validation_begin(self, trainer: Trainer) -> None:
        """Called before the epoch's weights are validated and compared with the best."""

    def on_validation_end(self, trainer: Trainer, record: Record) -> None:
        """Called after validation, with the record so far."""

    def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
        """Called after every epoch with that epoch's history record."""

    def on_fit_end(self, trainer: Trainer) -> None:
        """Called once after training ends (also after an interruption)."""

    def state_dict(self) -> dict[str, Any]:
        """Entries this callback adds to the training checkpoint (none by default)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from a whole training checkpoint (the entries :meth:`state_dict` wrote)."""


#: The hooks of :class:`Callback` that report events, in the order of a fit.
EVENTS = (
    "on_setup",
    "on_fit_begin",
    "on_epoch_begin",
    "on_batch_end",
    "on_batches_end",
    "on_validation_begin",
    "on_validation_end",
    "on_epoch_end",
    "on_fit_end",
)


class Hooks:
    """For each event, the bound hooks of those callbacks that override it (found once)."""

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        self.hooks: dict[str, list[Callable[..., None]]] = {
            event: [
                getattr(cb, event)
                for cb in callbacks
                if getattr(type(cb), event, None) is not getattr(Callback, event)
            ]
            for event in EVENTS
        }

    def __getitem__(self, event: str) -> list[Callable[..., None]]:
        return self.hooks[event]

    def __call__(self, event: str, *args: Any) -> None:
        for hook in self.hooks[event]:
            hook(*args)


class EarlyStopping(Callback):
    """Keeps the weights of the best epoch and stops after ``patience`` epochs without
    improvement.

    With validation data an epoch improves when its ``val_score`` beats the best by more than
    ``tol``; without, every finite epoch does (the latest weights are kept, and the fit never
    stops early). ``patience=None`` keeps the best weights without stopping. The kept weights
    are loaded into the network when the fit ends, also after an error or an interruption.
    ``improved`` says whether the latest epoch improved (read by :class:`LRSchedule`).
    """

    def __init__(self, patience: int | None, tol: float) -> None:
        self.patience = patience
        self.tol = tol

    def on_setup(self, trainer: Trainer) -> None:
        self.best_score = -math.inf
        self.best_state: dict[str, torch.Tensor] | None = None
        self.since_best = 0
        self.improved = False

    def on_validation_end(self, trainer: Trainer, record: Record) -> None:
        validated = "val_score" in record
        if validated:
            score = record["val_score"]
            self.improved = score > self.best_score + self.tol
        else:
            score, self.improved = -record["train_loss"], True
        if self.improved or self.best_state is None:
            self.best_score = score if math.isfinite(score) else self.best_score
            self.best_state = snapshot(trainer.network)
            trainer.best_iteration = int(record["epoch"])
            self.since_best = 0
        else:
            self.since_best += 1
        if validated and self.patience is not None and self.since_best >= self.patience:
            trainer.stop = True

    def on_fit_end(self, trainer: Trainer) -> None:
        if self.best_state is not None:
            trainer.network.load_state_dict(self.best_state)

    def state_dict(self) -> dict[str, Any]:
        return {
            "best_state": self.best_state,
            "best_score": self.best_score,
            "since_best": self.since_best,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_state = state["best_state"]
        self.best_score = float(state["best_score"])
        self.since_best = int(state["since_best"])


class LRSchedule(Callback):
    """Sets the learning rate (and one-cycle's ``beta1``) after every step with a
    :class:`tabsparse.optim.Schedule` over ``max_epochs`` epochs; ``"plateau"`` cuts the rate
    after ``patience`` validated epochs that ``watch`` did not count as improving."""

    def __init__(self, kind: str, *, max_epochs: int, patience: int, watch: EarlyStopping) -> None:
        if kind not in SCHEDULES:
            raise ValueError(f"lr_schedule={kind!r} must be one of {SCHEDULES}")
        self.kind = kind
        self.max_epochs = max_epochs
        self.patience = patience
        self.watch = watch

    def on_setup(self, trainer: Trainer) -> None:
        steps = trainer.steps_per_epoch
        self.schedule = Schedule(
            trainer.optimizer,
            self.kind,
            total=max(1, self.max_epochs * steps),
            gamma=0.95 ** (1.0 / max(1, steps)),  # exponential: x0.95 per epoch
            patience=self.patience,
        )

    def on_batch_end(self, trainer: Trainer) -> None:
        self.schedule.step()

    def on_validation_end(self, trainer: Trainer, record: Record) -> None:
        if "val_score" in record:
            self.schedule.epoch_end(self.watch.improved)

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.schedule.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("scheduler") is not None:
            self.schedule.load_state_dict(state["scheduler"])


class WeightAveraging(Callback):
    """Keeps an exponential moving average of the weights (:mod:`tabsparse.averaging`), updated
    after every step; each epoch is judged (validated, kept if best) with the averaged weights,
    and training goes on from the live ones.

    The averaged weights are judged with batch-norm statistics recomputed for them
    (:meth:`~tabsparse.training.Trainer.recompute_statistics`, a few thousand training rows
    forward): the statistics gathered during training describe the activations of the live
    weights, and the average evaluated with them predicts on a shifted scale. The live
    statistics are put back for training. A fit without validation rows keeps its last epoch's
    average; its statistics are recomputed once, when the fit ends.
    """

    def __init__(self, decay: float) -> None:
        self.decay = decay

    def on_setup(self, trainer: Trainer) -> None:
        self.average = ExponentialAverage(trainer.network.parameters(), decay=self.decay)
        self._live: dict[str, torch.Tensor] = {}

    def on_batch_end(self, trainer: Trainer) -> None:
        self.average.update()

    def on_validation_begin(self, trainer: Trainer) -> None:
        self.average.swap()  # the averaged weights into the network
        if trainer.validating:
            self._live = statistics_state(trainer.network)
            trainer.recompute_statistics()

    def on_validation_end(self, trainer: Trainer, record: Record) -> None:
        self.average.swap()  # back to the live weights to train on
        if self._live:
            trainer.network.load_state_dict(self._live, strict=False)
            self._live = {}

    def on_fit_end(self, trainer: Trainer) -> None:
        # without validation the kept weights are the last epoch's average (EarlyStopping,
        # which runs first, has just loaded them)
        if not trainer.validating and trainer.best_iteration is not None:
            trainer.recompute_statistics()

    def state_dict(self) -> dict[str, Any]:
        return {"ema": self.average.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("ema") is not None:
            self.average.load_state_dict(state["ema"])


class CompileTrial(Callback):
    """Lets ``compile="auto"`` time each epoch's training pass and decide between the eager and
    the compiled step (:class:`tabsparse.compiling.StepCompiler`); under DDP every rank then
    follows rank 0. The decision is logged."""

    def on_epoch_begin(self, trainer: Trainer) -> None:
        self._tic = time.perf_counter()

    def on_batches_end(self, trainer: Trainer, record: Record) -> None:
        step = trainer.step
        if step.setting != "auto" or step.state in ("eager", "compiled"):
            return
        epochs_left = trainer.end_epoch - int(record["epoch"]) - 1
        state = step.epoch_end(time.perf_counter() - self._tic, epochs_left)
        if trainer.dist is not None:
            index = broadcast_int(state_index(state), trainer.dist, trainer.device)
            step.set_state(state_name(index))
        if step.decision is not None and step.state in ("eager", "compiled"):
            logger.info('compile="auto" chose %s', step.decision)


class ColumnRevival(Callback):
    """Gives every column a fair trial in the shared first mask (:mod:`tabsparse.nn.shared_mask`).

    After each of the fit's first ``epochs`` epochs, the columns outside the network's shared
    first mask are put back in (:func:`~tabsparse.nn.shared_mask.revive`). With ``prune``,
    after the next epoch (epoch ``epochs + 1``), those whose weight stayed below the uniform
    share are taken out (:func:`~tabsparse.nn.shared_mask.prune`). The optimiser's momentum of
    the edited biases is reset. No edit is made after the fit's last epoch or once it stopped
    early (no later epoch would judge it). Early stopping keeps the best epoch wherever it is (a
    table whose validation score peaks within the first epochs keeps that epoch). A network
    without a shared sparsemax first mask is left alone. Every rank makes the same edit of the
    same weights, so distributed fits stay in step.
    """

    def __init__(self, epochs: int, prune: bool = False) -> None:
        if epochs < 0 or (epochs == 0 and not prune):
            raise ValueError(f"epochs={epochs!r} must be >= 1, or >= 0 with prune=True")
        self.epochs = epochs
        self.prune = prune

    def on_setup(self, trainer: Trainer) -> None:
        self.first = len(trainer.history)  # this fit's first epoch (a resume restores later)

    def on_epoch_end(self, trainer: Trainer, record: Record) -> None:
        done = int(record["epoch"]) - self.first + 1  # epochs of this fit so far
        last = trainer.stop or int(record["epoch"]) + 1 >= trainer.end_epoch
        if last or done > self.epochs + int(self.prune):  # no edit the fit cannot judge
            return
        encoder = getattr(trainer.network, "encoder", None)
        if not isinstance(encoder, torch.nn.Module):
            return
        bias = shared_mask.editable_bias(encoder)
        if bias is None:
            return
        edit = shared_mask.revive if done <= self.epochs else shared_mask.prune
        changed = edit(encoder)
        if bool(changed.any()):
            trainer.optimizer.reset_momentum(bias, changed)


class EpochLog(Callback):
    """Logs one line per epoch to the ``tabsparse`` logger: the training loss, with validation
    data the validation loss and, when the trainer has a score function, the score early
    stopping watches under its ``name`` and with its sign (``roc_auc 0.91234``,
    ``neg_log_loss -0.31234``; a function without a name shows as ``val_score``), then the
    epoch's seconds. Without a score function the watched score is the negated validation loss,
    already shown as ``val_loss``, so it is not repeated."""

    def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
        parts = [f"epoch {int(record['epoch']) + 1:>4}", f"train_loss {record['train_loss']:.5f}"]
        if "val_loss" in record:
            parts.append(f"val_loss {record['val_loss']:.5f}")
        if "val_score" in record and trainer.score_fn is not None:
            name = str(getattr(trainer.score_fn, "name", "val_score"))
            parts.append(f"{name} {record['val_score']:.5f}")
        parts.append(f"{record['seconds']:.2f}s")
        logger.info("  ".join(parts))


class Checkpointing(Callback):
    """Writes :meth:`Trainer.checkpoint_state` to ``folder`` after every ``every``-th epoch
    (counted over the whole history), replacing the previous checkpoint atomically."""

    def __init__(self, folder: str | os.PathLike[str], every: int = 1) -> None:
        self.folder = folder
        self.every = every

    def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
        if (int(record["epoch"]) + 1) % self.every == 0:
            save_checkpoint(trainer.checkpoint_state(), self.folder)
