"""The fit template every tabsparse estimator shares: parameters, encoding, training, state.

:class:`TabNetBase` is the scikit-learn side of the pure-torch core, as scikit-learn's
``BaseHistGradientBoosting`` is for its tree grower: it validates parameters, encodes tables once
with :class:`tabsparse.data.TableEncoder`, hands tensors to :class:`tabsparse.training.Trainer`
and keeps the fitted state. Its subclasses are siblings: the supervised estimators
(:class:`~tabsparse.estimators._supervised.TabNetSupervised`: classifier and regressor) and the
:class:`~tabsparse.estimators.pretrainer.TabNetPretrainer`.

The fit skeleton, :meth:`TabNetBase._fit`, calls these hooks in this order:

1. ``_check_fit_arguments(y, X_val, y_val)``: checks beyond ``_parameter_constraints``.
2. ``_distributed_context(device)``: the torchrun context, or None (one process).
3. ``_fit_data(..., seed) -> FitData``: validate ``X`` (and ``y``), encode the table, split off
   the validation rows; the training, validation and importance-sample tensors. ``seed`` is
   :meth:`TabNetBase._seed` (a resumed fit's checkpoint is read before this step).
4. ``_build_network(seed)`` and ``_init_network(data)`` (unless warm-starting). The network is
   built from ``architecture_`` (:meth:`TabNetBase._architecture`, kept at fit), never from the
   parameters as they are later: a warm start refuses parameters that describe another network
   (:meth:`TabNetBase._check_warm_start`), and model files store and rebuild ``architecture_``.
5. ``_before_training(trainer, data)``: last changes to the trainer and the data.
6. training, then :meth:`_finish_fit` (``n_iter_``, ``best_iteration_``, importances, ...).

``_loss_fn()`` and ``_score_fn()`` give the trainer its loss and validation score. ``explain``
and the importances of a fit come from the :class:`~tabsparse.estimators._explaining.Explaining`
mixin.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator

from tabsparse._compat import Interval, StrOptions
from tabsparse.data import TableEncoder
from tabsparse.estimators._auto import auto_learning_rate
from tabsparse.estimators._explaining import IMPORTANCE_SAMPLE, Explaining
from tabsparse.estimators._fixed import SUPERVISED, FixedChoices
from tabsparse.estimators._inputs import resolve_device
from tabsparse.estimators._tables import TableHandling
from tabsparse.progress import progress_callbacks
from tabsparse.streaming import StreamingSource
from tabsparse.training import (
    LossFn,
    ScoreFn,
    TensorData,
    TrainConfig,
    Trainer,
    TrainingError,
    auto_batch_size,
    load_checkpoint,
)

__all__ = ["AUTO_EARLY_STOPPING_ROWS", "IMPORTANCE_SAMPLE", "FitData", "TabNetBase"]

logger = logging.getLogger("tabsparse")

#: ``early_stopping="auto"`` holds out ``validation_fraction`` of the rows and stops on them
#: when that is at least this many rows (5,000 rows at the default 10%): on fewer, the
#: validation loss is too noisy to stop on (see "Defaults: what was tried" in
#: benchmarks/HISTORY.md)
AUTO_EARLY_STOPPING_ROWS = 500


@dataclass
class FitData:
    """What ``_fit_data`` prepares for one fit."""

    train: TensorData | StreamingSource
    val: TensorData | None
    sample: TensorData  # training rows for feature_importances_ (see _importance_rows)
    seed: int
    rng: np.random.Generator  # the fit's numpy stream (split, masks, importance sample)
    pretrained: Any = None  # a fitted TabNetPretrainer whose weights start the network


class TabNetBase(Explaining, TableHandling, BaseEstimator):
    """The fit template and the state shared by all tabsparse estimators (see the module
    docstring); use :class:`TabNetClassifier`, :class:`TabNetRegressor` or
    :class:`TabNetPretrainer`."""

    encoder_: TableEncoder
    network_: torch.nn.Module

    #: The settings that are not parameters (:mod:`tabsparse.estimators._fixed`).
    _fixed: FixedChoices = SUPERVISED

    #: The parameters every estimator has; the subclasses add theirs.
    _parameter_constraints: dict[str, list[Any]] = {
        "n_d": [Interval(Integral, 1, None, closed="left")],
        "n_a": [Interval(Integral, 1, None, closed="left")],
        "n_steps": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 1.0, None, closed="left")],
        "n_independent": [Interval(Integral, 0, None, closed="left")],
        "n_shared": [Interval(Integral, 0, None, closed="left")],
        "lambda_sparse": [Interval(Real, 0.0, None, closed="left")],
        "virtual_batch_size": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0.0, None, closed="neither"), StrOptions({"auto"})],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0.0, 1.0, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
        "datetime_features": [StrOptions({"error", "expand"})],
        "grouped_features": [list, None],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "callbacks": [list, None],
        "checkpoint_dir": [str, os.PathLike, None],
    }

    # ---- hooks of the fit template (module docstring) -----------------------------------------
    def _check_fit_arguments(self, y: Any, X_val: Any, y_val: Any) -> None:
        """Raise for arguments the parameter constraints do not cover."""

    def _distributed_context(self, device: torch.device) -> Any:
        return None

    def _fit_data(
        self,
        X: Any,
        y: Any,
        sample_weight: Any,
        X_val: Any,
        y_val: Any,
        sample_weight_val: Any,
        *,
        device: torch.device,
        ctx: Any,
        continuing: bool,
        seed: int,
    ) -> FitData:
        raise NotImplementedError

    def _build_network(self, seed: int) -> torch.nn.Module:
        raise NotImplementedError

    def _init_network(self, data: FitData) -> None:
        """Change the freshly built network before training (e.g. start from other weights)."""

    def _before_training(self, trainer: Trainer, data: FitData) -> None:
        """Last changes to the trainer and the data before training starts."""

    def _loss_fn(self) -> LossFn:
        raise NotImplementedError

    def _score_fn(self) -> ScoreFn | None:
        """The validation score early stopping watches; None: the validation loss."""
        return None

    def _adam_betas(self) -> tuple[float, float]:
        """AdamW's ``(beta1, beta2)`` for the fit."""
        return (0.9, self._fixed.beta_2)

    def _column_edits(self, continuing: bool) -> tuple[int, bool]:
        """Epochs of reviving the shared first mask's columns, and whether to prune them after
        (``TrainConfig.column_revival``, ``TrainConfig.column_pruning``)."""
        return 0, False

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        raise NotImplementedError  # estimators without a target never pass one

    # ---- the fit template ----------------------------------------------------------------------
    def _fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        *,
        X_val: Any = None,
        y_val: Any = None,
        sample_weight_val: Any = None,
        resume_from: Any = None,
    ) -> Any:
        """Validate, encode, split, build the network, train, finish; return self."""
        self._validate_params()
        self._check_fit_arguments(y, X_val, y_val)
        device = resolve_device(self.device)
        ctx = self._distributed_context(device)
        if ctx is not None and device.type == "cuda":
            device = torch.device("cuda", ctx.local_rank)  # one device per local rank
        continuing = self.warm_start and hasattr(self, "network_")
        if continuing:
            self._check_warm_start()
        resume = None if resume_from is None else load_checkpoint(resume_from)
        data = self._fit_data(
            X,
            y,
            sample_weight,
            X_val,
            y_val,
            sample_weight_val,
            device=device,
            ctx=ctx,
            continuing=continuing,
            seed=self._seed(resume),
        )
        if not continuing:
            self.architecture_ = self._architecture()
            self.network_ = self._build_network(data.seed).to(device)
            self.history_: list[dict[str, float]] = []
            self._init_network(data)
        self.network_.to(device)
        self.device_ = device
        trainer = self._trainer(
            data.train,
            data.seed,
            device,
            ctx,
            validating=data.val is not None,
            continuing=continuing,
        )
        importance_rows = self._importance_rows(data)  # before the pretrainer masks data.val
        self._before_training(trainer, data)
        try:
            with _verbose_logging(self.verbose):
                trainer.fit(data.train, data.val, resume=resume)
            if trainer.interrupted:  # the trainer kept the best weights and returned
                raise KeyboardInterrupt
        except (TrainingError, KeyboardInterrupt):
            if trainer.best_iteration is None:  # no epoch finished: stay cleanly unfitted
                for name in (
                    "network_",
                    "architecture_",
                    "n_iter_",
                    "best_iteration_",
                    "feature_importances_",
                    "feature_importances_std_",
                    "background_",
                    "selector_",
                ):
                    self.__dict__.pop(name, None)
            else:  # keep the best weights so far as a usable model, then report (a Ctrl-C
                # inside cross_val_score / GridSearchCV stops the search instead of scoring
                # a partly trained model)
                self._finish_fit(trainer, data, importance_rows, learn_selector=False)
            raise
        self._finish_fit(trainer, data, importance_rows)
        return self

    def _trainer(
        self,
        train: TensorData | StreamingSource,
        seed: int,
        device: torch.device,
        ctx: Any,
        *,
        validating: bool,
        continuing: bool = False,
    ) -> Trainer:
        batch_size = self._training_batch_size(len(train))
        revival, pruning = self._column_edits(continuing)
        return Trainer(
            network=self.network_,
            loss_fn=self._loss_fn(),
            config=TrainConfig(
                max_epochs=self.max_epochs,
                batch_size=batch_size,
                learning_rate=self._learning_rate(batch_size, validating),
                weight_decay=self._fixed.weight_decay,
                adam_betas=self._adam_betas(),
                lr_schedule=self._fixed.lr_schedule,
                ema_decay=self._fixed.ema_decay,
                lambda_sparse=self.lambda_sparse,
                n_iter_no_change=self.n_iter_no_change,
                tol=self._fixed.tol,
                seed=seed,
                verbose=self.verbose,
                amp=device.type == "cuda",
                compile=self._fixed.compile,
                column_revival=revival,
                column_pruning=pruning,
                virtual_batch_size=self.virtual_batch_size,
                checkpoint_dir=self.checkpoint_dir,
                checkpoint_every=self._fixed.checkpoint_every,
                checkpoint_meta=self._checkpoint_meta(len(train), seed),
            ),
            score_fn=self._score_fn(),
            callbacks=[
                *progress_callbacks(self.verbose if ctx is None or ctx.is_main else 0),
                *(self.callbacks or []),
            ],
            history=self.history_,
            dist=ctx,
        )

    def _finish_fit(
        self, trainer: Trainer, data: FitData, sample: TensorData, *, learn_selector: bool = True
    ) -> None:
        """The fitted attributes after training: importances on ``sample``, the background
        rows and (unless the fit was interrupted) the column selector of ``explain``."""
        self.n_iter_ = len(self.history_)
        self.compiled_ = trainer.compiled
        self.best_iteration_ = trainer.best_iteration
        self.feature_importances_, self.feature_importances_std_ = self._importances_on_sample(
            sample, data.rng
        )
        self._keep_background(sample, data.rng)
        if learn_selector:
            self._learn_selector(data.sample, len(data.train), data.rng)
        else:
            self.__dict__.pop("selector_", None)

    def _checkpoint_meta(self, n_train: int, seed: int) -> dict[str, Any]:
        # settings that do not change what is fitted, and
        # max_epochs, which the trainer checks against the checkpoint's epochs itself (a resume
        # may train to a larger max_epochs)
        skip = {"callbacks", "checkpoint_dir", "verbose", "max_epochs"}
        params = {k: repr(v) for k, v in self.get_params().items() if k not in skip}
        return {"estimator": type(self).__name__, "n_train": n_train, "seed": seed, **params}

    # ---- pieces of a fit -----------------------------------------------------------------------
    def _seed(self, resume: dict[str, Any] | None = None) -> int:
        """The fit's seed, from ``random_state``. With ``random_state=None`` a fresh one, except
        when resuming: then the seed the checkpoint's fit drew (in its meta), so that the
        resumed fit continues that fit (its split, shuffles and initial weights)."""
        if self.random_state is None:
            meta = (resume or {}).get("meta")
            if isinstance(meta, dict) and "seed" in meta:
                return int(meta["seed"])
            return int(np.random.default_rng().integers(2**31 - 1))
        if isinstance(self.random_state, np.random.RandomState):
            return int(copy.deepcopy(self.random_state).randint(2**31 - 1))
        return int(self.random_state)

    def _training_batch_size(self, n_train: int) -> int:
        """``batch_size`` with ``"auto"`` resolved for ``n_train`` training rows."""
        if self.batch_size == "auto":
            return auto_batch_size(n_train, self.virtual_batch_size)
        return int(self.batch_size)

    def _learning_rate(self, batch_size: int, validating: bool) -> float:
        """``learning_rate`` with ``"auto"`` resolved
        (:func:`~tabsparse.estimators._auto.auto_learning_rate`)."""
        if self.learning_rate == "auto":
            return auto_learning_rate(batch_size, validating)
        return float(self.learning_rate)

    def _auto_validation_rows(self) -> int:
        """The fewest held-out rows with which ``early_stopping="auto"`` validates."""
        return AUTO_EARLY_STOPPING_ROWS

    def _use_early_stopping(self, n_samples: int) -> bool:
        if self.early_stopping == "auto":  # a validation split of at least that many rows
            return n_samples * self.validation_fraction >= self._auto_validation_rows()
        return bool(self.early_stopping)

    def _split(
        self, n: int, rng: np.random.Generator, strata: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Training and validation row indices (sorted); stratified on ``strata`` if given.

        Not ``sklearn.model_selection.train_test_split(stratify=...)``: it draws other rows (its
        own rounding of each class's share and another use of the random stream), so it would
        change every early-stopped fit."""
        n_val = max(1, int(round(n * self.validation_fraction)))
        if n - n_val < 1:
            raise ValueError(
                f"early stopping needs a validation split, but validation_fraction="
                f"{self.validation_fraction} of {n} rows leaves an empty part; pass X_val/y_val, "
                "use more rows or set early_stopping=False"
            )
        if strata is None:
            perm = rng.permutation(n)
            return np.sort(perm[n_val:]), np.sort(perm[:n_val])
        val_idx = []
        for label in np.unique(strata):
            members = rng.permutation(np.flatnonzero(strata == label))
            take = int(round(len(members) * self.validation_fraction))
            val_idx.append(members[: min(take, len(members) - 1)])
        val = np.sort(np.concatenate(val_idx))
        if len(val) == 0:
            val = np.sort(rng.permutation(n)[:n_val])
        return np.setdiff1d(np.arange(n), val), val

    def _seeded_network(self, seed: int, build: Callable[[], torch.nn.Module]) -> Any:
        """``build()`` under a torch RNG seeded with ``seed`` (the global state is restored)."""
        with torch.random.fork_rng(devices=[]):
            # the CPU generator only: torch.manual_seed also queues seeds for CUDA / XPU, which
            # formats a stack trace each time (about 5 ms per fit) and is not restored here
            torch.default_generator.manual_seed(seed)
            return build()

    #: The parameters the network is built from (the keys of :meth:`_architecture`); a warm
    #: start refuses to change them.
    _architecture_names: tuple[str, ...] = (
        "n_d",
        "n_a",
        "n_steps",
        "gamma",
        "n_independent",
        "n_shared",
        "mask_type",
        "first_mask",
        "virtual_batch_size",
        "momentum",
        "cat_emb_dim",
        "grouped_features",
    )

    def _architecture(self) -> dict[str, Any]:
        """The network's constructor arguments that the parameters decide, from the parameters
        as they are now (``grouped_features`` as feature positions of the fitted encoder).

        A fit keeps this as ``architecture_`` and builds the network from it, so the fitted
        network, its model file and its predictions do not follow a later ``set_params``.
        Subclasses add their own arguments (and resolve "auto" values)."""
        grouped = self.grouped_features
        if grouped is not None:
            grouped = [self._group_indices(group) for group in grouped]
        return {
            "n_d": int(self.n_d),
            "n_a": int(self.n_a),
            "n_steps": int(self.n_steps),
            "gamma": float(self.gamma),
            "n_independent": int(self.n_independent),
            "n_shared": int(self.n_shared),
            "mask_type": self._fixed.mask_type,
            "first_mask": str(self._fixed.first_mask),  # "auto": resolved by the subclass
            "virtual_batch_size": int(self.virtual_batch_size),
            "momentum": self._fixed.momentum,
            "cat_emb_dim": _plain_int(self._fixed.cat_emb_dim),  # "auto": resolved by the subclass
            "grouped_features": grouped,
        }

    def _fitted_architecture(self) -> dict[str, Any]:
        """The architecture the fitted network was built with (``architecture_``); an estimator
        without it (unfitted, or unpickled from before it existed) gets :meth:`_architecture`."""
        fitted = getattr(self, "architecture_", None)
        return dict(fitted) if isinstance(fitted, dict) else self._architecture()

    def _check_warm_start(self) -> None:
        """Refuse a warm start whose parameters describe another network than the fitted one:
        the fit would go on training the fitted network and silently ignore the change."""
        fitted, now = self._fitted_architecture(), self._architecture()
        changed = []
        for name, old in fitted.items():
            new = now.get(name, old)
            if name == "numeric_embedding_dim" and (
                fitted.get("numeric_embedding") is None and now.get("numeric_embedding") is None
            ):
                continue  # no numeric embedding: its width builds nothing
            if new != old:
                changed.append(f"{name}: {old!r} -> {new!r}")
        if changed:
            raise ValueError(
                "warm_start continues the fitted network, but the parameters now describe "
                f"another one ({'; '.join(changed)}): set them back or fit without warm_start"
            )

    def _input_kwargs(self) -> dict[str, Any]:
        """The network's input arguments, from the fitted encoder."""
        enc = self.encoder_
        return {
            "numeric_columns": enc.numeric_columns,
            "categorical_columns": enc.categorical_columns,
            "numeric_mean": [float(v) for v in enc.numeric_mean],
            "numeric_std": [float(v) for v in enc.numeric_std],
            "cardinalities": enc.cardinalities,
        }

    def _network_kwargs(self) -> dict[str, Any]:
        """The network's constructor arguments: the inputs and the fitted architecture."""
        return {**self._input_kwargs(), **self._fitted_architecture()}

    def _group_indices(self, group: list[Any]) -> list[int]:
        """Feature positions of a ``grouped_features`` group; the name of an expanded datetime
        column stands for all its parts."""
        parts = getattr(self.encoder_, "datetime_parts", {})
        out: list[int] = []
        for column in group:
            if isinstance(column, str) and column in parts:
                out.extend(self._column_index(f"{column}__{p}") for p in parts[column])
            else:
                out.append(self._column_index(column))
        return out

    def _column_index(self, column: Any) -> int:
        names = self.encoder_.feature_names
        if isinstance(column, str):
            if column not in names:
                raise ValueError(f"grouped_features names column {column!r}, which is not in X")
            return names.index(column)
        if isinstance(column, Integral) and 0 <= int(column) < len(names):
            return int(column)
        raise ValueError(
            f"grouped_features entry {column!r} is neither a column name nor an index in "
            f"[0, {len(names)})"
        )

    # ---- explanations --------------------------------------------------------------------------
    def _importance_rows(self, data: FitData) -> TensorData:
        """The rows ``feature_importances_`` is computed on: the validation rows (held out from
        training: ``X_val`` or early stopping's split) when there are at least
        :data:`AUTO_EARLY_STOPPING_ROWS` of them, else the training rows ``data.sample``."""
        if data.val is not None and len(data.val) >= AUTO_EARLY_STOPPING_ROWS:
            return data.val
        return data.sample

    # ---- fitted state --------------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "network_")

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the network on the CPU; :meth:`__setstate__` moves it back (to the CPU when
        CUDA is absent)."""
        state = super().__getstate__()
        if "network_" in state:
            state = dict(state)
            state["network_"] = copy.deepcopy(self.network_).cpu()
            state["device_"] = str(self.device_)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "network_" in state:
            state = dict(state)
            wanted = torch.device(state["device_"])
            if wanted.type == "cuda" and not torch.cuda.is_available():
                wanted = torch.device("cpu")
            state["network_"] = state["network_"].to(wanted)
            state["device_"] = wanted
        super().__setstate__(state)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True  # text columns are categories
        tags.input_tags.sparse = True  # scipy sparse: fit, predict, explain batch by batch
        tags.non_deterministic = self.random_state is None
        return tags


def _plain_int(value: Any) -> Any:
    """A Python int for an integer parameter (numpy integers included), other values as they
    are (``"auto"``)."""
    return value if isinstance(value, str) else int(value)


class _verbose_logging:
    """Route tabsparse's INFO messages (one line per epoch) to stderr while a fit with
    ``verbose >= 2`` runs; ``verbose=1`` shows only the progress bar, 0 nothing."""

    def __init__(self, verbose: int) -> None:
        self.verbose = verbose
        self.handler: logging.Handler | None = None

    def __enter__(self) -> None:
        if self.verbose >= 2 and not logger.handlers:
            self.handler = logging.StreamHandler(sys.stderr)
            self.handler.setFormatter(logging.Formatter("[tabsparse] %(message)s"))
            logger.addHandler(self.handler)
            self.old_level = logger.level
            logger.setLevel(logging.INFO)

    def __exit__(self, *exc: object) -> None:
        if self.handler is not None:
            logger.removeHandler(self.handler)
            logger.setLevel(self.old_level)
