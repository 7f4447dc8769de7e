"""TabNetPretrainer: self-supervised pretraining of the TabNet encoder, and fine-tuning from it.

The estimator is a scikit-learn transformer: ``fit(X)`` trains the encoder and a decoder to
reconstruct masked cells (:mod:`tabsparse.pretraining`), ``transform(X)`` returns the encoder's
representation. ``TabNetClassifier(pretrained=pretrainer)`` / ``TabNetRegressor(pretrained=...)``
start from its weights (:mod:`tabsparse.estimators._finetune` does that copy).

It is a sibling of the supervised estimators: :class:`~tabsparse.estimators._base.TabNetBase`
runs the fit; this class fills in its hooks (the data without a target, the pretraining
network, the cell masks, the reconstruction loss).
"""

from __future__ import annotations

import os
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from tabsparse._compat import Interval, _check_feature_names_in
from tabsparse.estimators._base import FitData, TabNetBase
from tabsparse.estimators._fixed import PRETRAINER
from tabsparse.nn.decoder import PretrainingNetwork
from tabsparse.pretraining import CellMasker, ReconstructionLoss, encode_rows, mask_cells
from tabsparse.training import LossFn, TensorData, Trainer, inference_batch_size

__all__ = ["TabNetPretrainer"]


class TabNetPretrainer(TransformerMixin, TabNetBase):
    """Self-supervised TabNet pretraining by masked-cell reconstruction (Arik & Pfister, sec. 3).

    Each training batch gets a fresh Bernoulli mask over its cells (probability
    ``pretraining_ratio``); the masked cells are shown to the encoder as missing values (a
    learned value for numbers, the "missing" embedding for categories, so the encoder can tell
    "masked" from "zero") and a decoder reconstructs them from the encoder's step outputs. Cells
    that are missing in the data are never targets. The loss is normalised per feature::

        numeric j:      l_ij = (r_ij - z_ij)^2,   z_ij = (x_ij - mean_j) / std_j (fit-time stats)
        categorical k:  l_ik = cross-entropy over the vocabulary / log(max(|V_k|, 2))
        L = mean over the features with masked cells of (mean of l over their masked cells)

    so it stays finite for constant and near-constant columns, and 1 is the loss of the trivial
    guess (the column mean, a uniform distribution over the categories). Validation data (a
    split of ``X``, or ``X_val``) is masked once with a mask drawn from the seed, so
    ``val_loss`` is comparable across epochs.

    The other parameters (``n_d``, ``n_a``, ``n_steps``, ``gamma``, ``n_independent``,
    ``n_shared``, ``lambda_sparse``, ``virtual_batch_size``, ``batch_size``, ``max_epochs``,
    ``learning_rate``, ``early_stopping``, ``validation_fraction``, ``n_iter_no_change``,
    ``categorical_features``, ``datetime_features``, ``grouped_features``, ``device``,
    ``random_state``, ``verbose``, ``warm_start``, ``callbacks``, ``checkpoint_dir``) are those
    of :class:`tabsparse.TabNetClassifier`; early stopping watches the validation loss. Four
    defaults differ, because the benchmark that chose the classifier's and regressor's
    (``benchmarks/bench_quality.py``) does not cover pretraining: ``batch_size=1024``,
    ``max_epochs=100``, ``n_iter_no_change=10`` and ``learning_rate=0.02``
    (``batch_size="auto"`` and ``learning_rate="auto"``, the supervised estimators' rules, are
    accepted here too). So do some fixed choices (:mod:`tabsparse.estimators._fixed`): the
    paper's per-row first mask, one channel per categorical column, batch-norm momentum 0.02,
    no weight average and an early-stopping tolerance of 1e-4.

    Parameters
    ----------
    pretraining_ratio : float, default=0.2
        Probability that a cell is masked (the paper's p_s).
    n_shared_decoder, n_indep_decoder : int, default=1
        Shared and step-specific GLU layers of the decoder's feature transformers.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` was a DataFrame with string column names.
    history_ : list of dict
        Per epoch: ``epoch``, ``train_loss``, ``learning_rate``, ``seconds`` and, with
        validation data, ``val_loss`` (and ``val_score = -val_loss``).
    n_iter_ : int
    best_iteration_ : int
    feature_importances_ : ndarray of shape (n_features,)
        Attention importances of the encoder (sum to one): the mean over up to 8,192 of the
        validation rows when ``X_val`` or the split has at least 500 (as given, not the masked
        copy the fit validates on), else over up to 8,192 training rows.
    feature_importances_std_ : ndarray of shape (n_features,)
        Their standard errors, as for :class:`tabsparse.TabNetClassifier`.
    device_ : torch.device
    compiled_ : bool
        Whether the fit's last epochs ran the compiled training step (:mod:`tabsparse.compiling`).
    network_ : tabsparse.nn.decoder.PretrainingNetwork
    encoder_ : tabsparse.data.TableEncoder

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> X, _ = load_diabetes(return_X_y=True, as_frame=True)
    >>> pre = TabNetPretrainer(n_d=8, n_a=8, max_epochs=3, random_state=0).fit(X)
    >>> pre.transform(X.iloc[:4]).shape
    (4, 8)
    >>> from tabsparse import TabNetRegressor
    >>> _, y = load_diabetes(return_X_y=True)
    >>> reg = TabNetRegressor(n_d=8, n_a=8, pretrained=pre, max_epochs=3, random_state=0).fit(X, y)
    """

    network_: PretrainingNetwork  # type: ignore[assignment]

    _fixed = PRETRAINER

    _parameter_constraints = {
        **TabNetBase._parameter_constraints,
        "pretraining_ratio": [Interval(Real, 0.0, 1.0, closed="neither")],
        "n_shared_decoder": [Interval(Integral, 0, None, closed="left")],
        "n_indep_decoder": [Interval(Integral, 0, None, closed="left")],
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
        lambda_sparse: float = 1e-3,
        virtual_batch_size: int = 128,
        batch_size: int = 1024,
        max_epochs: int = 100,
        learning_rate: float = 0.02,
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        pretraining_ratio: float = 0.2,
        n_shared_decoder: int = 1,
        n_indep_decoder: int = 1,
        categorical_features: Any = "from_dtype",
        datetime_features: str = "error",
        grouped_features: list[list[int]] | None = None,
        device: str = "auto",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list[Any] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
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
        self.pretraining_ratio = pretraining_ratio
        self.n_shared_decoder = n_shared_decoder
        self.n_indep_decoder = n_indep_decoder
        self.categorical_features = categorical_features
        self.datetime_features = datetime_features
        self.grouped_features = grouped_features
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.checkpoint_dir = checkpoint_dir

    # ---- fit ----------------------------------------------------------------------------------
    def fit(  # type: ignore[override]  # a transformer's fit: no target, no sample weights
        self,
        X: Any,
        y: Any = None,
        *,
        X_val: Any = None,
        resume_from: str | os.PathLike[str] | None = None,
    ) -> TabNetPretrainer:
        """Pretrain the encoder on ``X`` (no target).

        Parameters
        ----------
        X : DataFrame, array-like or sparse matrix of shape (n_samples, n_features)
            Numeric, categorical, string, boolean and nullable columns; NaN allowed. Tables of
            other libraries (polars, pyarrow, ...) and scipy sparse matrices are taken as by
            :meth:`TabNetClassifier.fit <tabsparse.TabNetClassifier.fit>`.
        y : None
            Ignored (accepted for pipelines).
        X_val : DataFrame or array-like, optional
            Validation rows for early stopping (instead of a split of ``X``).
        resume_from : path, optional
            A checkpoint written with ``checkpoint_dir`` by an earlier fit with the same
            parameters (``max_epochs`` may be larger) on the same data; as for
            :meth:`tabsparse.TabNetClassifier.fit`.

        Returns
        -------
        self
        """
        return self._fit(X, X_val=X_val, resume_from=resume_from)

    # ---- hooks of the fit template -------------------------------------------------------------
    def _check_fit_arguments(self, y: Any, X_val: Any, y_val: Any) -> None:
        if self.n_shared_decoder + self.n_indep_decoder < 1:
            raise ValueError(
                f"n_shared_decoder={self.n_shared_decoder} + n_indep_decoder="
                f"{self.n_indep_decoder} must be >= 1"
            )

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
        """The table encoded once; validation rows (``X_val`` or a split) are masked later, in
        :meth:`_before_training`, once the network's input layer exists."""
        X = self._check_fit_table(X, continuing=continuing)
        rng = np.random.default_rng(seed)
        encoded = self._encode(X) if continuing else self._fit_encoder(X)
        val_table = None
        if X_val is not None:
            val_table = self._encode(X_val, what="X_val")
        elif self._use_early_stopping(len(encoded)):
            train_idx, val_idx = self._split(len(encoded), rng, None)
            encoded, val_table = encoded.take(train_idx), encoded.take(val_idx)
        train = self._tensor_data(encoded, None, None, device)
        val = None if val_table is None else self._tensor_data(val_table, None, None, device)
        return FitData(train, val, train, seed, rng)

    def _before_training(self, trainer: Trainer, data: FitData) -> None:
        trainer.transform_batch = CellMasker(self.pretraining_ratio, self.network_.inputs)
        if data.val is not None:
            data.val = self._masked(data.val, data.rng)

    def _masked(self, data: TensorData, rng: np.random.Generator) -> TensorData:
        """Validation rows with one fixed mask (drawn from the fit's seed)."""
        data = data.take(slice(None))  # dense (the rows of a sparse matrix: these rows only)
        n_columns = data.numeric.shape[1] + data.codes.shape[1]
        mask = torch.from_numpy(rng.random((len(data), n_columns)) < self.pretraining_ratio)
        numeric, codes, target = mask_cells(data.numeric, data.codes, mask, self.network_.inputs)
        return TensorData(numeric, codes, target)

    _architecture_names: tuple[str, ...] = (
        *TabNetBase._architecture_names,
        "n_shared_decoder",
        "n_indep_decoder",
    )

    def _architecture(self) -> dict[str, Any]:
        """The encoder's arguments plus the decoder's layers."""
        return {
            **super()._architecture(),
            "n_shared_decoder": int(self.n_shared_decoder),
            "n_indep_decoder": int(self.n_indep_decoder),
        }

    def _build_network(self, seed: int) -> PretrainingNetwork:
        network_kwargs = self._network_kwargs()
        return self._seeded_network(seed, lambda: PretrainingNetwork(**network_kwargs))

    def _n_outputs(self) -> int:
        """Width of the reconstruction: one value per numeric column, one logit per category."""
        enc = self.encoder_
        return len(enc.numeric_columns) + sum(c - 2 for c in enc.cardinalities)

    def _loss_fn(self) -> LossFn:
        return ReconstructionLoss(
            n_numeric=self.network_.n_numeric, vocab_sizes=self.network_.vocab_sizes
        )

    # ---- public methods after fit -------------------------------------------------------------
    def transform(self, X: Any) -> np.ndarray:
        """The encoder's representation of each row: the sum over decision steps of the ReLU'd
        decision outputs (what a fine-tuned estimator's head reads).

        Returns
        -------
        ndarray of shape (n_samples, n_d), float32
        """
        check_is_fitted(self)
        batch_size = inference_batch_size(self.batch_size)
        parts = [
            encode_rows(
                self.network_,
                self._tensor_data(enc, None, None, self.device_),
                batch_size=batch_size,
            )
            .cpu()
            .numpy()
            for enc in self._encoded_blocks(X)  # a sparse matrix: one block of rows at a time
        ]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``tabnet0 .. tabnet{n_d-1}``: names of the :meth:`transform` columns."""
        check_is_fitted(self)
        _check_feature_names_in(self, input_features)
        return np.asarray([f"tabnet{i}" for i in range(self.network_.encoder.n_d)], dtype=object)

    def export(self, path: Any, format: str = "onnx", *, masks: bool = False) -> Any:
        """Not available: a pretrainer has no prediction head (fine-tune an estimator with
        ``pretrained=`` and export that)."""
        raise TypeError(
            "TabNetPretrainer cannot be exported; fit TabNetClassifier(pretrained=...) or "
            "TabNetRegressor(pretrained=...) and export that"
        )

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        if tags.transformer_tags is not None:
            tags.transformer_tags.preserves_dtype = []  # always float32
        return tags
