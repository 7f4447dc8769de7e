"""What TabNetClassifier and TabNetRegressor share: a target, its data, scoring and prediction.

:class:`TabNetSupervised` fills in the fit template of :class:`~tabsparse.estimators._base.
TabNetBase` for estimators with a target: the target object (:mod:`tabsparse.estimators._targets`,
one per kind of ``y``) gives the network's head, the loss, the output transform and the scores;
data in memory is encoded once into tensors on the training device, data on disk is read batch by
batch; training can start from a pretrainer's weights (``pretrained=``), and can run across the
ranks of a torchrun launch.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import warnings
from numbers import Integral
from typing import Any

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from tabsparse._compat import HasMethods, Interval, StrOptions
from tabsparse.data import EncodedTable, TableEncoder
from tabsparse.data.sparse import CSRRows
from tabsparse.distributed import broadcast_int, detect
from tabsparse.estimators._auto import AUTO, network_architecture, resolve_architecture
from tabsparse.estimators._base import (
    IMPORTANCE_SAMPLE,
    FitData,
    TabNetBase,
)
from tabsparse.estimators._finetune import (
    adopt_pretrained,
    clone_keeping_pretrained,
    load_pretrained_weights,
)
from tabsparse.estimators._inputs import (
    check_table,
    check_weight,
    is_on_disk,
    open_on_disk,
)
from tabsparse.estimators._scoring import ValidationScore
from tabsparse.estimators._targets import Target, target_of
from tabsparse.nn.network import TabNet
from tabsparse.nn.numeric_embedding import NUMERIC_EMBEDDINGS
from tabsparse.streaming import DiskRows, ParquetRows, StreamingSource, scan
from tabsparse.training import LossFn, ScoreFn, TensorData, inference_batch_size, predict_outputs

__all__ = ["TabNetSupervised"]


class TabNetSupervised(TabNetBase):
    """The supervised estimators' parameters and fit; use :class:`TabNetClassifier` or
    :class:`TabNetRegressor` (the parameters are documented there)."""

    _parameter_constraints: dict[str, list[Any]] = {
        **TabNetBase._parameter_constraints,
        "scoring": [str, callable, None],
        "pretrained": [HasMethods(["fit", "transform"]), None],  # a fitted TabNetPretrainer
        "numeric_embedding": [StrOptions({*NUMERIC_EMBEDDINGS, AUTO}), None],
        "n_members": [Interval(Integral, 1, None, closed="left"), StrOptions({AUTO})],
    }
    #: The fitted attributes that hold the target's state (``Target.attributes``).
    _target_attributes: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        n_d: int = 16,
        n_a: int = 16,
        n_steps: int = 3,
        gamma: float = 1.3,
        n_independent: int = 2,
        n_shared: int = 2,
        lambda_sparse: float = 1e-3,
        virtual_batch_size: int = 128,
        batch_size: int | str = "auto",
        max_epochs: int = 200,
        learning_rate: float | str = "auto",
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 20,
        scoring: Any = "loss",
        categorical_features: Any = "from_dtype",
        datetime_features: str = "error",
        grouped_features: list[list[int]] | None = None,
        numeric_embedding: str | None = "auto",
        n_members: int | str = "auto",
        device: str = "auto",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list[Any] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        pretrained: Any = None,
    ) -> None:
        self.n_d = n_d
        self.n_a = n_a
        self.n_steps = n_steps
        self.gamma = gamma
        self.n_independent = n_independent
        self.n_shared = n_shared
        self.lambda_sparse = lambda_sparse
        self.virtual_batch_size = virtual_batch_size
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.learning_rate = learning_rate
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.scoring = scoring
        self.categorical_features = categorical_features
        self.datetime_features = datetime_features
        self.grouped_features = grouped_features
        self.numeric_embedding = numeric_embedding
        self.n_members = n_members
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.checkpoint_dir = checkpoint_dir
        self.pretrained = pretrained

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
    ) -> Any:
        """Fit the network.

        Parameters
        ----------
        X : DataFrame, array-like or sparse matrix of shape (n_samples, n_features)
            Numeric, categorical, string, boolean and nullable columns; NaN allowed. A pandas,
            polars (eager) or pyarrow table, or anything with the Arrow or
            dataframe-interchange protocol, keeps its column names and dtypes. A scipy sparse
            matrix (any format) has numeric columns and is never densified whole: ``fit``
            densifies one training batch at a time, prediction and ``explain`` one block.
            For data larger than memory: a ``numpy.memmap``, or a folder or list of Parquet
            files, read batch by batch (see the distributed and streaming docs).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            With Parquet input, ``y`` may also be the name of the target column.
        sample_weight : array-like of shape (n_samples,), optional
            Weights the loss of each row.
        X_val, y_val, sample_weight_val : optional
            Validation data for early stopping (instead of a split of ``X``).
        resume_from : path, optional
            A training checkpoint (file or ``checkpoint_dir`` folder) written by an earlier fit
            of an estimator with the same parameters on the same data (``max_epochs`` may be
            larger): training continues where it stopped and, on CPU with the same
            ``random_state``, ends with the same model as an uninterrupted fit; a finished fit
            resumes to the finished model. A larger ``max_epochs`` continues up to it, equal
            to the longer fit where the schedule does not span ``max_epochs`` (see "What a
            model file, a resume and a warm start promise" in ``docs/model_files.md``).

        Returns
        -------
        self
        """
        return self._fit(
            X,
            y,
            sample_weight,
            X_val=X_val,
            y_val=y_val,
            sample_weight_val=sample_weight_val,
            resume_from=resume_from,
        )

    # ---- the target ----------------------------------------------------------------------------
    def _target_kind_for(self, y: Any) -> type[Target]:
        """The kind of target a fit's ``y`` is."""
        raise NotImplementedError

    def _target(self) -> Target:
        """The target the last fit learned (read from the fitted attributes); export takes it
        from here (duck typing) for the served output and the spec."""
        return target_of(self)

    def _prepare_target(self, y: Any, *, fitting: bool) -> np.ndarray:
        """Encode ``y``; when ``fitting``, learn the target from it first and publish what was
        learned as fitted attributes."""
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

    def _loss_fn(self) -> LossFn:
        return self._target().loss()

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        return self._target().tensor(y, device)

    def _outputs_from_logits(self, logits: torch.Tensor) -> dict[str, Any]:
        return self._target().outputs(logits)

    def _column_edits(self, continuing: bool) -> tuple[int, bool]:
        # a continued fit (warm_start) goes on from a judged network: nothing to revive or prune
        if continuing:
            return 0, False
        return self._fixed.column_revival, self._fixed.column_pruning

    def _score_fn(self) -> ScoreFn | None:
        if self.scoring in (None, "loss"):
            return None
        from sklearn.metrics import get_scorer

        scorer = get_scorer(self.scoring) if isinstance(self.scoring, str) else self.scoring
        name = self.scoring if isinstance(self.scoring, str) else "val_score"
        return ValidationScore(self, scorer, name)

    # ---- hooks of the fit template -------------------------------------------------------------
    def _check_fit_arguments(self, y: Any, X_val: Any, y_val: Any) -> None:
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be passed together")
        if self.pretrained is not None and getattr(self, "numeric_embedding", None) not in (
            None,
            AUTO,  # resolved to None with a pretrainer
        ):
            raise ValueError(
                f"numeric_embedding={self.numeric_embedding!r} cannot be used with pretrained= "
                "(a TabNetPretrainer's network has no numeric embedding); set "
                "numeric_embedding=None"
            )

    def _distributed_context(self, device: torch.device) -> Any:
        return detect(self._fixed.distributed, device_type=device.type)

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
        on_disk = is_on_disk(X)
        if on_disk:
            X, y = open_on_disk(X, y)
        else:
            X = self._check_fit_table(X, continuing=continuing)
        n_rows = len(X) if on_disk else X.shape[0]
        pretrained = None
        if self.pretrained is not None and not continuing:
            pretrained = adopt_pretrained(self, X)  # sets encoder_ to the pretrainer's schema
        reuse_encoder = continuing or pretrained is not None
        y_arr = self._prepare_target(y, fitting=not continuing)
        if len(y_arr) != n_rows:
            raise ValueError(
                f"X has {n_rows} rows but y has {len(y_arr)}; they must have the same length"
            )
        sw = check_weight(sample_weight, n_rows, "sample_weight")
        if not continuing:
            resolve_architecture(
                self,
                n_rows,
                members_suit=self._members_suit(),
                periodic_suits=self._periodic_suits(),
                wide_categories_suit=self._wide_categories_suit(),
                pretrained=pretrained,
            )
        if ctx is not None:  # every rank must shuffle, split and initialise alike
            seed = broadcast_int(seed, ctx, device)
        rng = np.random.default_rng(seed)
        val_parts = (X_val, y_val, sample_weight_val)
        if on_disk:
            train, val, sample = self._disk_data(
                X, y_arr, sw, rng, device, reuse_encoder, val_parts
            )
            self._warn_unused_scoring(val, n_rows)
            return FitData(train, val, sample, seed, rng, pretrained)
        train_t, val = self._memory_data(X, y_arr, sw, rng, device, reuse_encoder, val_parts)
        self._warn_unused_scoring(val, n_rows)
        return FitData(train_t, val, train_t, seed, rng, pretrained)

    def _warn_unused_scoring(self, val: TensorData | None, n_rows: int) -> None:
        """A UserWarning when ``scoring`` is set but the fit has no validation rows to score
        (saying why and how to get them)."""
        if val is not None or self.scoring in (None, "loss"):
            return
        what = f"scoring={self.scoring!r}" if isinstance(self.scoring, str) else "scoring"
        if self.early_stopping == "auto":
            minimum = self._auto_validation_rows()
            needed = math.ceil(minimum / self.validation_fraction)
            reason = (
                f"early_stopping='auto' holds out a validation split only from {needed} rows "
                f"(validation_fraction={self.validation_fraction} of them >= "
                f"{minimum}), and X has {n_rows}"
            )
        else:
            reason = "early_stopping=False and no X_val was given"
        warnings.warn(
            f"{what} is not used: this fit has no validation rows ({reason}). Pass X_val and "
            "y_val, or set early_stopping=True to validate on a held-out split of X.",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )

    def _periodic_suits(self) -> bool:
        """Whether ``numeric_embedding="auto"`` picks the periodic embedding for this target."""
        return False

    def _members_suit(self) -> bool:
        """Whether ``n_members="auto"`` may train several members for this target."""
        return False

    def _wide_categories_suit(self) -> bool:
        """Whether the categorical embedding's width rule gives categorical columns as many
        channels as the numeric embedding gives numeric ones, for this target."""
        return False

    _architecture_names: tuple[str, ...] = (
        *TabNetBase._architecture_names,
        "numeric_embedding",
        "numeric_embedding_dim",
        "n_members",
    )

    def _architecture(self) -> dict[str, Any]:
        """The base's arguments plus the numeric embedding and the members; a parameter left at
        "auto" takes the fit's resolved value (``n_members_``, ``numeric_embedding_``,
        ``first_mask_``, ``cat_emb_dim_``), so a warm start keeps what "auto" chose."""
        resolved = dict(
            zip(
                ("n_members", "numeric_embedding", "first_mask", "cat_emb_dim"),
                network_architecture(self),
                strict=True,
            )
        )
        chosen: dict[str, Any] = {}
        for name, value in resolved.items():
            asked = getattr(self, name, getattr(self._fixed, name, AUTO))
            chosen[name] = value if isinstance(asked, str) and asked == AUTO else asked
        return {
            **super()._architecture(),
            "first_mask": str(chosen["first_mask"]),
            "cat_emb_dim": int(chosen["cat_emb_dim"]),
            "numeric_embedding": chosen["numeric_embedding"],
            "numeric_embedding_dim": self._fixed.numeric_embedding_dim,
            "n_members": int(chosen["n_members"]),
        }

    def _build_network(self, seed: int) -> TabNet:
        target = self._target()
        network_kwargs = self._network_kwargs()
        return self._seeded_network(
            seed,
            lambda: TabNet(
                **network_kwargs,
                n_outputs=target.n_network_outputs,
                output_groups=target.output_groups,
            ),
        )

    def _init_network(self, data: FitData) -> None:
        if data.pretrained is not None:
            load_pretrained_weights(self.network_, data.pretrained)

    # ---- training data -------------------------------------------------------------------------
    def _val_table(
        self, X_val: Any, y_val: Any, sample_weight_val: Any
    ) -> tuple[EncodedTable | CSRRows, np.ndarray, np.ndarray | None]:
        X_val = check_table(X_val, what="X_val")
        try:
            y_val_arr = self._prepare_target(y_val, fitting=False)
        except ValueError as exc:  # the target's messages speak of "y"
            message = str(exc)
            if message.startswith("y "):
                raise ValueError("y_val " + message[2:]) from None
            if " of y " in message:
                raise ValueError(message.replace(" of y ", " of y_val ", 1)) from None
            raise
        if len(y_val_arr) != X_val.shape[0]:
            raise ValueError(
                f"X_val has {X_val.shape[0]} rows but y_val has {len(y_val_arr)}; "
                "they must have the same length"
            )
        sw_val = check_weight(sample_weight_val, X_val.shape[0], "sample_weight_val")
        return self._encode(X_val, what="X_val"), y_val_arr, sw_val

    def _disk_data(
        self,
        rows: DiskRows | ParquetRows,
        y_arr: np.ndarray,
        sw: np.ndarray | None,
        rng: np.random.Generator,
        device: torch.device,
        continuing: bool,
        val_parts: tuple[Any, Any, Any],
    ) -> tuple[StreamingSource, TensorData | None, TensorData]:
        """Training rows read from disk batch by batch; statistics from one streaming pass."""
        if rows.dtype is not None and rows.dtype.kind not in "biuf":
            raise TypeError(f"an array on disk must be numeric, got dtype {rows.dtype}")
        n = len(rows)
        X_val = val_parts[0]
        split = X_val is None and self._use_early_stopping(n)
        n_val = min(max(1, round(n * self.validation_fraction)), 100_000) if split else 0
        encoder: TableEncoder = self.encoder_ if continuing else self._new_encoder()
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
        target = self._target()

        def target_rows(ids: np.ndarray) -> torch.Tensor:
            return target.tensor(y_arr[ids], device)

        train = StreamingSource(
            rows, self.encoder_, target_rows, weight=sw, exclude=scanned.val_rows, device=device
        )
        val = None
        if X_val is not None:
            val = self._tensor_data(*self._val_table(*val_parts), device)
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
        val_parts: tuple[Any, Any, Any],
    ) -> tuple[TensorData, TensorData | None]:
        """The whole table encoded once into tensors on the training device; the validation
        rows of a split are an index into it (no copy of the table)."""
        encoded = self._encode(X) if continuing else self._fit_encoder(X)
        val_data: tuple[EncodedTable | CSRRows, np.ndarray, np.ndarray | None] | None = None
        train_rows = None
        if val_parts[0] is not None:
            val_data = self._val_table(*val_parts)
        elif self._use_early_stopping(len(y_arr)):
            strata = self._target().stratify(y_arr)
            train_idx, val_idx = self._split(len(y_arr), rng, strata)
            val_data = (
                encoded.take(val_idx),
                y_arr[val_idx],
                None if sw is None else sw[val_idx],
            )
            train_rows = torch.from_numpy(train_idx).to(device)
        train = self._tensor_data(encoded, y_arr, sw, device)
        if train_rows is not None:
            train = dataclasses.replace(train, rows=train_rows)
        val = None if val_data is None else self._tensor_data(*val_data, device)
        return train, val

    # ---- after fit -----------------------------------------------------------------------------
    def _predict_logits(self, X: Any) -> torch.Tensor:
        check_is_fitted(self)
        batch_size = inference_batch_size(self.batch_size)
        logits = [
            predict_outputs(
                self.network_,
                self._tensor_data(enc, None, None, self.device_),
                batch_size=batch_size,
            ).logits
            for enc in self._encoded_blocks(X)
        ]
        return logits[0] if len(logits) == 1 else torch.cat(logits)

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
        from tabsparse.export import export_model  # serving: imported only when used

        return export_model(self, path, format, masks=masks)  # type: ignore[arg-type]

    def __sklearn_clone__(self) -> Any:
        """Clone as scikit-learn does, but pass a ``pretrained`` pretrainer on as it is: a clone
        of it would be unfitted, and fit only reads it."""
        if getattr(self, "pretrained", None) is None:
            return super().__sklearn_clone__()
        return clone_keeping_pretrained(self)


def _user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` in the calling function that points at the first
    frame outside tabsparse (the user's ``fit`` line, however many estimator layers are between)."""
    level, frame = 1, sys._getframe(1)
    while str(frame.f_globals.get("__name__", "")).startswith("tabsparse."):
        if frame.f_back is None:
            break
        level, frame = level + 1, frame.f_back
    return level
