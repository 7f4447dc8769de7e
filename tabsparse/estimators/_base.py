"""What TabNetClassifier and TabNetRegressor share: parameters, input checks and the fit template.

This is the only place where scikit-learn meets the pure-torch core: it validates parameters and
inputs, encodes tables once with :class:`tabsparse.data.TableEncoder`, hands tensors to
:class:`tabsparse.training.Trainer` and turns network outputs back into arrays.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import sys
import warnings
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_is_fitted

from tabsparse._compat import HasMethods, Interval, StrOptions, _check_sample_weight
from tabsparse.compiling import COMPILE_MODES
from tabsparse.data import EncodedTable, TableEncoder
from tabsparse.distributed import broadcast_int, detect
from tabsparse.estimators._targets import Target, target_of
from tabsparse.explain import Explanation
from tabsparse.nn.network import TabNet
from tabsparse.progress import progress_callbacks
from tabsparse.streaming import DiskRows, ParquetRows, StreamingSource, scan
from tabsparse.training import (
    LR_SCHEDULES,
    LossFn,
    ScoreFn,
    TensorData,
    TrainConfig,
    Trainer,
    TrainingError,
    auto_batch_size,
    inference_batch_size,
    load_checkpoint,
    predict_outputs,
)

logger = logging.getLogger("tabsparse")

#: ``early_stopping="auto"`` holds out ``validation_fraction`` of the rows and stops on them
#: when that is at least this many rows (5,000 rows at the default 10%): on fewer, the
#: validation loss is too noisy to stop on (see "Defaults: what was tried" in
#: benchmarks/README.md)
AUTO_EARLY_STOPPING_ROWS = 500
IMPORTANCE_SAMPLE = 8192  # rows used for feature_importances_ (bounded: never a pass over all rows)


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


def _check_table(X: Any, *, what: str = "X") -> Any:
    """Accept DataFrames as they are; turn anything else into a 2-D array with sklearn's checks."""
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
        dtype=None,
        ensure_all_finite=False,
        ensure_2d=True,
        allow_nd=False,
        input_name=what,
    )


def _parquet_paths(X: Any) -> list[Path] | None:
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


def _open_on_disk(X: Any, y: Any) -> tuple[DiskRows | ParquetRows, Any]:
    """A memmap, or Parquet files (then ``y`` may name the target column)."""
    if isinstance(X, np.memmap):
        return DiskRows(X), y
    paths = _parquet_paths(X)
    if not paths:
        raise ValueError(f"no .parquet files found in {X}")
    if isinstance(y, str):
        columns = [c for c in ParquetRows(paths[:1]).columns if c != y]
        rows = ParquetRows(paths, columns=columns)
        return rows, ParquetRows(paths, columns=[y]).read_column(y)
    return ParquetRows(paths), y


def _to_tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A tensor over ``array`` without copying when it is C-ordered. Read-only arrays (encoded
    views of the caller's data) are shared as well: the library never writes to its inputs."""
    if array.flags.c_contiguous and not array.flags.writeable:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(array).to(device)
    return torch.from_numpy(np.require(array, requirements=["C", "W"])).to(device)


class TabNetBase(BaseEstimator):
    """Shared machinery; use :class:`TabNetClassifier` or :class:`TabNetRegressor`."""

    encoder_: TableEncoder

    _parameter_constraints: dict[str, list[Any]] = {
        "n_d": [Interval(Integral, 1, None, closed="left")],
        "n_a": [Interval(Integral, 1, None, closed="left")],
        "n_steps": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 1.0, None, closed="left")],
        "n_independent": [Interval(Integral, 0, None, closed="left")],
        "n_shared": [Interval(Integral, 0, None, closed="left")],
        "momentum": [Interval(Real, 0.0, 1.0, closed="both")],
        "mask_type": [StrOptions({"sparsemax", "entmax"})],
        "lambda_sparse": [Interval(Real, 0.0, None, closed="left")],
        "virtual_batch_size": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0.0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0.0, None, closed="left")],
        "lr_schedule": [StrOptions(set(LR_SCHEDULES))],
        "ema_decay": [Interval(Real, 0.0, 1.0, closed="neither"), None],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0.0, 1.0, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "scoring": [str, callable, None],
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
        "cat_emb_dim": [Interval(Integral, 1, None, closed="left")],
        "grouped_features": [list, None],
        "device": [str],
        "compile": ["boolean", StrOptions({"auto", *COMPILE_MODES})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "callbacks": [list, None],
        "checkpoint_dir": [str, os.PathLike, None],
        "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
        "distributed": [StrOptions({"auto"}), "boolean"],
        "pretrained": [HasMethods(["fit", "transform"]), None],  # a fitted TabNetPretrainer
    }

    def __init__(
        self,
        *,
        n_d: int = 16,
        n_a: int = 16,
        n_steps: int = 3,
        gamma: float = 1.3,
        n_independent: int = 2,
        n_shared: int = 2,
        momentum: float = 0.1,
        mask_type: str = "sparsemax",
        lambda_sparse: float = 1e-3,
        virtual_batch_size: int = 128,
        batch_size: int | str = "auto",
        max_epochs: int = 200,
        learning_rate: float = 0.02,
        weight_decay: float = 0.0,
        lr_schedule: str = "cosine",
        ema_decay: float | None = None,
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 20,
        tol: float = 1e-7,
        scoring: Any = "loss",
        categorical_features: Any = "from_dtype",
        cat_emb_dim: int = 1,
        grouped_features: list[list[int]] | None = None,
        device: str = "auto",
        compile: bool | str = "auto",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list[Any] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_every: int = 1,
        distributed: str | bool = "auto",
        pretrained: Any = None,
    ) -> None:
        self.n_d = n_d
        self.n_a = n_a
        self.n_steps = n_steps
        self.gamma = gamma
        self.n_independent = n_independent
        self.n_shared = n_shared
        self.momentum = momentum
        self.mask_type = mask_type
        self.lambda_sparse = lambda_sparse
        self.virtual_batch_size = virtual_batch_size
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.lr_schedule = lr_schedule
        self.ema_decay = ema_decay
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.scoring = scoring
        self.categorical_features = categorical_features
        self.cat_emb_dim = cat_emb_dim
        self.grouped_features = grouped_features
        self.device = device
        self.compile = compile
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.distributed = distributed
        self.pretrained = pretrained

    # ---- the target: one object per kind (tabsparse.estimators._targets) ----------------------
    _target_attributes: tuple[str, ...] = ()  # fitted attributes that hold the target's state

    def _target_kind_for(self, y: Any) -> type[Target]:
        """The kind of target a fit's ``y`` is."""
        raise NotImplementedError

    def _target(self) -> Target:
        """The target the last fit learned (read from the fitted attributes)."""
        return target_of(self)

    def _prepare_target(self, y: Any, *, fitting: bool) -> np.ndarray:
        """Encode ``y``; when ``fitting``, learn the target from it first."""
        params = self.get_params(deep=False)
        if not fitting:
            target = self._target()
            type(target).check_params(params)
            return target.encode(y)
        kind = self._target_kind_for(y)
        kind.check_params(params)
        target, encoded = kind.fit(y)
        for name in self._target_attributes:
            self.__dict__.pop(name, None)
        for name, value in target.attributes().items():
            setattr(self, name, value)
        return encoded

    def _n_outputs(self) -> int:
        return self._target().n_network_outputs

    def _loss_fn(self) -> LossFn:
        return self._target().loss()

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        return self._target().tensor(y, device)

    def _outputs_from_logits(self, logits: torch.Tensor) -> dict[str, Any]:
        return self._target().outputs(logits)

    # ---- fit template --------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        *,
        X_val: Any = None,
        y_val: Any = None,
        sample_weight_val: Any = None,
        resume_from: str | os.PathLike[str] | None = None,
    ) -> TabNetBase:
        """Fit the network.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Numeric, categorical, string, boolean and nullable columns; NaN allowed. For data
            larger than memory: a ``numpy.memmap``, or a folder or list of Parquet files, read
            batch by batch (see the distributed and streaming docs).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            With Parquet input, ``y`` may also be the name of the target column.
        sample_weight : array-like of shape (n_samples,), optional
            Weights the loss of each row.
        X_val, y_val, sample_weight_val : optional
            Validation data for early stopping (instead of a split of ``X``).
        resume_from : path, optional
            A training checkpoint (file or ``checkpoint_dir`` folder) written by an earlier fit
            of an estimator with the same parameters on the same data: training continues
            where it stopped and, on CPU with the same ``random_state``, ends with the same
            model as an uninterrupted fit.

        Returns
        -------
        self
        """
        self._validate_params()
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be passed together")
        device = resolve_device(self.device)
        ctx = detect(self.distributed, device_type=device.type)
        if ctx is not None and device.type == "cuda":
            device = torch.device("cuda", ctx.local_rank)  # one device per local rank
        on_disk = isinstance(X, np.memmap) or _parquet_paths(X) is not None
        if on_disk:
            X, y = _open_on_disk(X, y)
        else:
            X = _check_table(X)
        n_rows = len(X) if on_disk else X.shape[0]
        continuing = self.warm_start and hasattr(self, "network_")
        pretrained = None
        if self.pretrained is not None and not continuing:
            from tabsparse.estimators.pretrainer import adopt_pretrained  # import cycle

            pretrained = adopt_pretrained(self, X)  # sets encoder_ to the pretrainer's schema
        reuse_encoder = continuing or pretrained is not None
        y_arr = self._prepare_target(y, fitting=not continuing)
        if len(y_arr) != n_rows:
            raise ValueError(
                f"X has {n_rows} rows but y has {len(y_arr)}; they must have the same length"
            )
        sw = self._check_weight(sample_weight, n_rows, "sample_weight")
        seed = self._seed()
        if ctx is not None:  # every rank must shuffle, split and initialise alike
            seed = broadcast_int(seed, ctx, device)
        rng = np.random.default_rng(seed)
        train: TensorData | StreamingSource
        if on_disk:
            train, val, sample = self._disk_data(
                X, y_arr, sw, rng, device, reuse_encoder, X_val, y_val, sample_weight_val
            )
        else:
            train, val = self._memory_data(
                X, y_arr, sw, rng, device, reuse_encoder, X_val, y_val, sample_weight_val
            )
            sample = train
        if not continuing:
            self.network_ = self._build_network(seed).to(device)
            self.history_: list[dict[str, float]] = []
            if pretrained is not None:
                from tabsparse.estimators.pretrainer import load_pretrained_weights

                load_pretrained_weights(self.network_, pretrained)
        self.network_.to(device)
        self.device_ = device
        trainer = self._trainer(train, seed, device, ctx)
        try:
            with _verbose_logging(self.verbose):
                resume = None if resume_from is None else load_checkpoint(resume_from)
                trainer.fit(train, val, resume=resume)
        except (TrainingError, KeyboardInterrupt):
            if trainer.best_iteration is None:  # no epoch finished: stay cleanly unfitted
                for name in ("network_", "n_iter_", "best_iteration_", "feature_importances_"):
                    self.__dict__.pop(name, None)
            else:  # keep the best weights so far as a usable model, then report
                self._finish_fit(trainer, sample, rng)
            raise
        self._finish_fit(trainer, sample, rng)
        return self

    def _val_table(
        self, X_val: Any, y_val: Any, sample_weight_val: Any
    ) -> tuple[EncodedTable, np.ndarray, np.ndarray | None]:
        X_val = _check_table(X_val, what="X_val")
        y_val_arr = self._prepare_target(y_val, fitting=False)
        if len(y_val_arr) != X_val.shape[0]:
            raise ValueError(
                f"X_val has {X_val.shape[0]} rows but y_val has {len(y_val_arr)}; "
                "they must have the same length"
            )
        sw_val = self._check_weight(sample_weight_val, X_val.shape[0], "sample_weight_val")
        return self._encode(X_val, what="X_val"), y_val_arr, sw_val

    def _disk_data(
        self,
        rows: DiskRows | ParquetRows,
        y_arr: np.ndarray,
        sw: np.ndarray | None,
        rng: np.random.Generator,
        device: torch.device,
        continuing: bool,
        X_val: Any,
        y_val: Any,
        sample_weight_val: Any,
    ) -> tuple[StreamingSource, TensorData | None, TensorData]:
        """Training rows read from disk batch by batch; statistics from one streaming pass."""
        if rows.dtype is not None and rows.dtype.kind not in "biuf":
            raise TypeError(f"an array on disk must be numeric, got dtype {rows.dtype}")
        n = len(rows)
        split = X_val is None and self._use_early_stopping(n)
        n_val = min(max(1, round(n * self.validation_fraction)), 100_000) if split else 0
        encoder: TableEncoder = (
            self.encoder_
            if continuing
            else TableEncoder(categorical_features=self.categorical_features)
        )
        scanned = scan(
            rows,
            encoder,
            n_val=n_val,
            n_sample=IMPORTANCE_SAMPLE,
            rng=rng,
            fit_encoder=not continuing,
        )
        if not continuing:
            self.encoder_ = scanned.encoder
            self._set_feature_attributes()

        def target(ids: np.ndarray) -> torch.Tensor:
            return self._target_tensor(y_arr[ids], device)

        train = StreamingSource(
            rows, self.encoder_, target, weight=sw, exclude=scanned.val_rows, device=device
        )
        val = None
        if X_val is not None:
            val = self._tensor_data(*self._val_table(X_val, y_val, sample_weight_val), device)
        elif scanned.val_table is not None:
            ids = scanned.val_rows
            val = self._tensor_data(
                scanned.val_table, y_arr[ids], None if sw is None else sw[ids], device
            )
        sample_ids = scanned.sample_rows
        sample = self._tensor_data(scanned.sample_table, y_arr[sample_ids], None, device)
        return train, val, sample

    def _memory_data(
        self,
        X: Any,
        y_arr: np.ndarray,
        sw: np.ndarray | None,
        rng: np.random.Generator,
        device: torch.device,
        continuing: bool,
        X_val: Any,
        y_val: Any,
        sample_weight_val: Any,
    ) -> tuple[TensorData, TensorData | None]:
        """The whole table encoded once into tensors on the training device."""
        if continuing:
            encoded = self._encode(X)
        else:
            self.encoder_ = TableEncoder(categorical_features=self.categorical_features)
            encoded = self.encoder_.fit_transform(X)
            self._set_feature_attributes()
        val_parts: tuple[EncodedTable, np.ndarray, np.ndarray | None] | None = None
        train_rows = None
        if X_val is not None:
            val_parts = self._val_table(X_val, y_val, sample_weight_val)
        elif self._use_early_stopping(len(y_arr)):
            strata = self._target().stratify(y_arr)
            train_idx, val_idx = self._split(len(y_arr), rng, strata)
            val_parts = (
                encoded.take(val_idx),
                y_arr[val_idx],
                None if sw is None else sw[val_idx],
            )
            train_rows = torch.from_numpy(train_idx).to(device)  # a view: no copy of the table
        train = self._tensor_data(encoded, y_arr, sw, device)
        if train_rows is not None:
            train = dataclasses.replace(train, rows=train_rows)
        val = None if val_parts is None else self._tensor_data(*val_parts, device)
        return train, val

    def _trainer(
        self, train: TensorData | StreamingSource, seed: int, device: torch.device, ctx: Any
    ) -> Trainer:
        return Trainer(
            network=self.network_,
            loss_fn=self._loss_fn(),
            config=TrainConfig(
                max_epochs=self.max_epochs,
                batch_size=self._training_batch_size(len(train)),
                learning_rate=self.learning_rate,
                weight_decay=self.weight_decay,
                lr_schedule=self.lr_schedule,
                ema_decay=self.ema_decay,
                lambda_sparse=self.lambda_sparse,
                n_iter_no_change=self.n_iter_no_change,
                tol=self.tol,
                seed=seed,
                verbose=self.verbose,
                amp=device.type == "cuda",
                compile=self.compile,
                virtual_batch_size=self.virtual_batch_size,
                checkpoint_dir=self.checkpoint_dir,
                checkpoint_every=self.checkpoint_every,
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

    def _finish_fit(self, trainer: Trainer, train: TensorData, rng: np.random.Generator) -> None:
        self.n_iter_ = len(self.history_)
        self.compiled_ = trainer.compiled
        self.best_iteration_ = trainer.best_iteration
        self.feature_importances_ = self._importances_on_sample(train, rng)

    def _checkpoint_meta(self, n_train: int, seed: int) -> dict[str, Any]:
        # settings that do not change what is fitted (compile: only the rounding)
        skip = {"callbacks", "checkpoint_dir", "checkpoint_every", "verbose", "compile"}
        params = {k: repr(v) for k, v in self.get_params().items() if k not in skip}
        return {"estimator": type(self).__name__, "n_train": n_train, "seed": seed, **params}

    def _seed(self) -> int:
        if self.random_state is None:
            return int(np.random.default_rng().integers(2**31 - 1))
        if isinstance(self.random_state, np.random.RandomState):
            return int(copy.deepcopy(self.random_state).randint(2**31 - 1))
        return int(self.random_state)

    def _training_batch_size(self, n_train: int) -> int:
        """``batch_size`` with ``"auto"`` resolved for ``n_train`` training rows."""
        if self.batch_size == "auto":
            return auto_batch_size(n_train, self.virtual_batch_size)
        return int(self.batch_size)

    def _use_early_stopping(self, n_samples: int) -> bool:
        if self.early_stopping == "auto":  # a validation split of at least 500 rows
            return n_samples * self.validation_fraction >= AUTO_EARLY_STOPPING_ROWS
        return bool(self.early_stopping)

    def _split(
        self, n: int, rng: np.random.Generator, strata: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Training and validation row indices (sorted); stratified on ``strata`` if given.

        Not ``sklearn.model_selection.train_test_split(stratify=...)``: it draws other rows
        (its own rounding per class and a different use of the random stream), so it would
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

    def _check_weight(self, weight: Any, n: int, name: str) -> np.ndarray | None:
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

    def _set_feature_attributes(self) -> None:
        enc = self.encoder_
        self.n_features_in_ = enc.n_features
        if enc.has_feature_names:
            self.feature_names_in_ = np.asarray(enc.feature_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _encode(self, X: Any, *, what: str = "X") -> EncodedTable:
        """Encode a table for a fitted model: sklearn's feature-name rules, then the encoder."""
        name = type(self).__name__
        X = _check_table(X, what=what)
        fitted_names = hasattr(self, "feature_names_in_")
        is_frame = isinstance(X, pd.DataFrame)
        has_names = is_frame and all(isinstance(c, str) for c in X.columns)
        if has_names and not fitted_names:
            warnings.warn(
                f"X has feature names, but {name} was fitted without feature names",
                UserWarning,
                stacklevel=3,
            )
        if fitted_names and not has_names:
            warnings.warn(
                f"X does not have valid feature names, but {name} was fitted with feature names",
                UserWarning,
                stacklevel=3,
            )
        if not (fitted_names and has_names) and X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {name} is expecting "
                f"{self.n_features_in_} features as input."
            )
        return self.encoder_.transform(X)

    def _tensor_data(
        self,
        enc: EncodedTable,
        y: np.ndarray | None,
        weight: np.ndarray | None,
        device: torch.device,
    ) -> TensorData:
        return TensorData(
            numeric=_to_tensor(enc.numeric, device),
            codes=_to_tensor(enc.codes, device),
            target=None if y is None else self._target_tensor(y, device),
            weight=None if weight is None else _to_tensor(weight, device),
        )

    def _build_network(self, seed: int) -> TabNet:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return TabNet(**self._network_kwargs(), n_outputs=self._n_outputs())

    def _network_kwargs(self) -> dict[str, Any]:
        """Inputs and encoder arguments (shared with the pretraining network)."""
        enc = self.encoder_
        grouped = self.grouped_features
        if grouped is not None:
            grouped = [[self._column_index(c) for c in group] for group in grouped]
        return {
            "numeric_columns": enc.numeric_columns,
            "categorical_columns": enc.categorical_columns,
            "numeric_mean": [float(v) for v in enc.numeric_mean],
            "numeric_std": [float(v) for v in enc.numeric_std],
            "cardinalities": enc.cardinalities,
            "cat_emb_dim": self.cat_emb_dim,
            "grouped_features": grouped,
            "n_d": self.n_d,
            "n_a": self.n_a,
            "n_steps": self.n_steps,
            "gamma": self.gamma,
            "n_independent": self.n_independent,
            "n_shared": self.n_shared,
            "mask_type": self.mask_type,
            "virtual_batch_size": self.virtual_batch_size,
            "momentum": self.momentum,
        }

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

    def _score_fn(self) -> ScoreFn | None:
        if self.scoring in (None, "loss"):
            return None
        from sklearn.metrics import get_scorer

        scorer = get_scorer(self.scoring) if isinstance(self.scoring, str) else self.scoring

        def score(logits: torch.Tensor, data: TensorData) -> float:
            assert data.target is not None
            y_true = self._target().true_values(data.target)
            view = _FrozenOutputs(self, self._outputs_from_logits(logits))
            weight = None if data.weight is None else data.weight.cpu().numpy()
            kwargs = {} if weight is None else {"sample_weight": weight}
            return float(scorer(view, np.empty((len(y_true), 0)), y_true, **kwargs))

        return score

    def _importances_on_sample(self, data: TensorData, rng: np.random.Generator) -> np.ndarray:
        n = len(data)
        idx = np.sort(rng.choice(n, size=min(n, IMPORTANCE_SAMPLE), replace=False))
        sample = data.take(torch.from_numpy(idx).to(data.numeric.device))
        imp = self._explain_tensors(sample)[0].mean(axis=0)
        return imp / imp.sum()

    def _explain_tensors(self, data: TensorData) -> tuple[np.ndarray, np.ndarray]:
        net = self.network_
        out = predict_outputs(net, data, with_masks=True)
        with torch.inference_mode():
            importances = net.importances(out.masks, out.step_importance)
            masks = net.column_masks(out.masks)
        return importances.cpu().numpy(), masks.cpu().numpy()

    def __sklearn_clone__(self) -> Any:
        """Clone as scikit-learn does, but pass a ``pretrained`` pretrainer on as it is: a clone
        of it would be unfitted, and fit only reads it."""
        if getattr(self, "pretrained", None) is None:
            return super().__sklearn_clone__()
        from tabsparse.estimators.pretrainer import clone_keeping_pretrained

        return clone_keeping_pretrained(self)

    # ---- public methods after fit --------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "network_")

    def _predict_logits(self, X: Any) -> torch.Tensor:
        check_is_fitted(self)
        data = self._tensor_data(self._encode(X), None, None, self.device_)
        return predict_outputs(
            self.network_, data, batch_size=inference_batch_size(self.batch_size)
        ).logits

    def explain(self, X: Any) -> Explanation:
        """Which columns each decision step selected for each row of ``X``.

        Returns
        -------
        Explanation
            ``importances`` (n_samples, n_features), rows summing to one; ``masks``
            (n_steps, n_samples, n_features); ``feature_names``.
        """
        check_is_fitted(self)
        data = self._tensor_data(self._encode(X), None, None, self.device_)
        importances, masks = self._explain_tensors(data)
        return Explanation(importances, masks, list(self.encoder_.feature_names))

    def export(
        self, path: str | os.PathLike[str], format: str = "onnx", *, masks: bool = False
    ) -> Any:
        """Export the fitted network with its input handling for serving, plus a JSON spec.

        Parameters
        ----------
        path : path
            The model file (``.onnx`` or ``.pt2``); the spec is written to ``<path>.json``.
        format : {"onnx", "torch"}
            ONNX through the dynamo exporter (needs the ``export`` extra), or ``torch.export``.
        masks : bool
            Also return the per-step masks and per-row importances.

        Returns
        -------
        pathlib.Path
            The model file. See ``docs/deployment.md``.
        """
        from tabsparse.export import export_model  # lazy: avoids an import cycle

        return export_model(self, path, format, masks=masks)  # type: ignore[arg-type]

    # ---- pickling: tensors travel on the CPU ---------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
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
        tags.non_deterministic = self.random_state is None
        return tags


class _FrozenOutputs(BaseEstimator):
    """Stands in for the estimator inside a scorer, answering with precomputed outputs."""

    def __init__(self, owner: Any = None, outputs: dict[str, np.ndarray] | None = None) -> None:
        self.owner = owner
        self.outputs = outputs

    def __getattr__(self, name: str) -> Any:
        outputs = self.__dict__.get("outputs") or {}
        if name in outputs:
            value = outputs[name]

            def respond(X: Any) -> np.ndarray:
                return value

            respond.__name__ = name
            return respond
        if name == "classes_" and hasattr(self.__dict__.get("owner"), "classes_"):
            return self.__dict__["owner"].classes_
        raise AttributeError(name)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        return self.owner.__sklearn_tags__()  # type: ignore[union-attr]


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
